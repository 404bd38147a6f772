"""The ensemble-solve primitive: one JAX primitive, lowered per platform to one FFI target.

``solve`` generates a model's C++ source when it traces ``f``; the source travels in the
primitive's parameters (a :class:`ModelBuild`) and is compiled only when the call is lowered, for
the platform it is lowered for: a host shared library on CPU (the host JIT, ``shoal._jit``), a
cubin per device architecture on CUDA (NVRTC, ``shoal._nvrtc``). The FFI call names the artefact
and its entry point in its attributes, so one registered target per platform serves every model.
A vmapped solve is one ensemble call: batch dimensions are moved to the front of every operand,
and the handler folds leading dimensions into the ensemble axis (t_span rows are shared by
consecutive trajectories).
"""

from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass

import jax
import numpy as np
from jax.extend.core import Primitive
from jax.interpreters import batching, mlir

from shoal import _jit
from shoal.ode import _codegen, _ode_ext, _sparse

try:  # the usual eager implementation of a primitive: compile it alone, cached by parameters
    from jax._src.dispatch import apply_primitive as _apply_primitive
except ImportError:  # pragma: no cover - JAX moved it: jit per call works, uncached
    def _apply_primitive(prim, *args, **params):
        return jax.jit(functools.partial(prim.bind, **params))(*args)

ShapedArray = getattr(jax.core, "ShapedArray", None)
if ShapedArray is None:  # pragma: no cover - depends on the JAX version
    from jax._src.core import ShapedArray

TARGET_CPU = "shoal_ode_solve_cpu"
TARGET_CUDA = "shoal_ode_solve_cuda"
METHODS = ("tsit5", "rodas5p")
LU_PRECISIONS = ("fp64", "fp32")
ORDERINGS = ("amd", "natural")

# The CUDA handler is registered even where JAX has no GPU backend: XLA keeps registrations for
# platforms it has not loaded, and nothing runs until a call is lowered for CUDA.
_PLATFORM_OF = {TARGET_CPU: "cpu", TARGET_CUDA: "CUDA"}
for _name, _capsule in _ode_ext.registrations().items():
    jax.ffi.register_ffi_target(_name, _capsule, platform=_PLATFORM_OF[_name])


def stepper_variant(method: str, lu_precision: str) -> str:
    """The compiled stepper for a method and its options."""
    if method == "rodas5p":
        return f"rodas5p_lu{lu_precision[2:]}"
    return method


@dataclass(frozen=True)
class Variant:
    """What one compiled entry point integrates: stepper, sensitivity columns, sparse solver.

    sens = (with_y0, with_params) selects the joint system [y, S] with those columns; sparse =
    (ordering, n, pattern bytes) replaces Rodas5P's dense LU by the sparse direct solver.
    """

    stepper: str
    sens: tuple[bool, bool] | None = None
    sparse: tuple[str, int, bytes] | None = None

    @property
    def entry(self) -> str:
        name = f"shoal_ode_{self.stepper}"
        if self.sens is not None:
            name += f"_sens{'_y0' if self.sens[0] else ''}{'_p' if self.sens[1] else ''}"
        if self.sparse is not None and self.stepper != "tsit5":
            name += "_sparse"
        return name


@functools.lru_cache(maxsize=64)
def sparse_structure(sparse: tuple[str, int, bytes]) -> _sparse.SparseStructure:
    ordering, n, raw = sparse
    pattern = np.frombuffer(raw, dtype=bool).reshape(n, n)
    return _sparse.analyze(pattern, ordering)


def _stepper_source(variant: Variant) -> tuple[list[str], str, str]:
    """(includes and helper definitions, stepper type, model type) for a variant."""
    lines = ['#include "shoal/ode/ensemble.hpp"']
    model_type = "shoal_generated::Model"
    if variant.sens is not None:
        flags = ", ".join("true" if x else "false" for x in variant.sens)
        model_type = f"shoal::ode::Sensitivity<shoal_generated::Model, {flags}>"
        lines.append('#include "shoal/ode/sensitivity.hpp"')
    if variant.stepper == "tsit5":
        lines.append('#include "shoal/ode/tsit5.hpp"')
        return lines, "shoal::ode::Tsit5", model_type
    lu = "double" if variant.stepper.endswith("64") else "float"
    matrix = f"shoal::ode::DenseMatrixOf<{lu}>::Type"
    if variant.sparse is not None:
        lines += [
            '#include "shoal/ode/sparse_iteration_matrix.hpp"',
            sparse_structure(variant.sparse).emit_cpp("ShoalSparseStructure"),
            "template <class M>",
            "using ShoalSparseMatrix = "
            f"shoal::ode::SparseIterationMatrix<M, ShoalSparseStructure, {lu}>;",
        ]
        matrix = "ShoalSparseMatrix"
    if variant.sens is not None:
        lines.append('#include "shoal/ode/rodas5p_sensitivity.hpp"')
        return lines, f"shoal::ode::Rodas5PSensitivityUsing<{matrix}>::Stepper", model_type
    lines.append('#include "shoal/ode/rodas5p.hpp"')
    return lines, f"shoal::ode::Rodas5PUsing<{matrix}>::Stepper", model_type


def library_source(model: _codegen.GeneratedModel, variant: Variant,
                   platform: str = "cpu") -> str:
    """The complete translation unit for one (model, dtype, variant) on ``platform``.

    cpu: a shared library exporting ``entry(args, begin, end)`` over a range of trajectories.
    cuda: a cubin whose ``__global__`` kernel ``entry(args)`` solves one trajectory per thread,
    with ``shoal_model_info`` = {ABI version, n_vars, n_params, bits} for the handler to check.
    """
    ctype = "double" if model.dtype == np.float64 else "float"
    bits = 64 if model.dtype == np.float64 else 32
    includes, stepper_type, model_type = _stepper_source(variant)
    lines = [model.source, *includes, "", f"using ShoalSolvedModel = {model_type};"]
    if platform == "cuda":
        return "\n".join([
            *lines,
            'extern "C" __device__ const char shoal_cache_key[] = SHOAL_CACHE_KEY;',
            'extern "C" __device__ const int32_t shoal_model_info[4] = {',
            "    SHOAL_ODE_ABI_VERSION, ShoalSolvedModel::n_vars, ShoalSolvedModel::n_params, "
            f"{bits}}};",
            f'extern "C" __global__ void {variant.entry}(ShoalEnsembleArgs a) {{',
            "  const int64_t m = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;",
            "  if (m >= a.n_traj) return;",
            f"  const auto opt = shoal::ode::options_from<{ctype}>(a);",
            f"  shoal::ode::solve_one<{stepper_type}, ShoalSolvedModel, {ctype}>(a, opt, m);",
            "}",
            "",
        ])
    if platform != "cpu":
        raise ValueError(f"no shoal ODE backend for platform {platform!r}")
    return "\n".join([
        *lines,
        '#define SHOAL_EXPORT extern "C" __attribute__((visibility("default"), used))',
        "SHOAL_EXPORT const char shoal_cache_key[] = SHOAL_CACHE_KEY;",
        "SHOAL_EXPORT int32_t shoal_abi_version() { return SHOAL_ODE_ABI_VERSION; }",
        "SHOAL_EXPORT void shoal_model_info(int32_t* n_vars, int32_t* n_params, int32_t* bits) {",
        "  *n_vars = ShoalSolvedModel::n_vars;",
        "  *n_params = ShoalSolvedModel::n_params;",
        f"  *bits = {bits};",
        "}",
        f"SHOAL_EXPORT void {variant.entry}(const ShoalEnsembleArgs* a, int64_t begin, "
        "int64_t end) {",
        f"  shoal::ode::solve_range<{stepper_type}, ShoalSolvedModel, {ctype}>(*a, begin, end);",
        "}",
        "",
    ])


@dataclass(frozen=True, eq=True)
class ModelBuild:
    """What to compile for one solve: a generated model and the variant solving it.

    A primitive parameter: hashable, compared by value, and printed briefly in jaxprs.
    """

    model: _codegen.GeneratedModel
    variant: Variant

    def __repr__(self) -> str:
        return (f"ModelBuild({self.variant.entry}, n_vars={self.model.n_vars}, "
                f"n_params={self.model.n_params}, {self.model.dtype.name})")


# f -> {(n_vars, n_params, dtype): GeneratedModel}. Like jax.jit, a function is traced once per
# signature: it is keyed by identity, so rebinding a global it reads is not seen afterwards.
_traced: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def generated_model(f, n_vars: int, n_params: int, dtype) -> _codegen.GeneratedModel:
    """The C++ model generated from ``f`` for these sizes and dtype (traced once per signature)."""
    signature = (n_vars, n_params, np.dtype(dtype).name)
    try:
        per_f = _traced.setdefault(f, {})
    except TypeError:  # not weak-referenceable: trace every time
        per_f = {}
    if signature not in per_f:
        per_f[signature] = _codegen.generate_model(f, n_vars, n_params, dtype)
    return per_f[signature]


@functools.lru_cache(maxsize=512)
def host_library(build: ModelBuild) -> str:
    """Path of the loaded host library for ``build`` (compiled through the disk cache)."""
    path = str(_jit.compile_library(library_source(build.model, build.variant, "cpu")))
    _ode_ext.load_model(path, build.variant.entry)
    return path


@functools.lru_cache(maxsize=512)
def device_cubins(build: ModelBuild, archs: tuple[str, ...]) -> str:
    """``"sm_90=/path;..."``: the cached cubin of ``build`` for each architecture."""
    from shoal import _nvrtc

    source = library_source(build.model, build.variant, "cuda")
    return ";".join(f"{arch}={_nvrtc.compile_cubin(source, arch)}" for arch in archs)


def cuda_architectures() -> tuple[str, ...]:
    """The architectures (``sm_XY``) to compile cubins for: ``$SHOAL_CUDA_ARCHS`` if set (a comma
    list, e.g. to export for CUDA from a machine without a GPU), else those of the local CUDA
    devices."""
    import os

    from shoal import _nvrtc

    if os.environ.get("SHOAL_CUDA_ARCHS"):
        return tuple(sorted({a.strip() for a in os.environ["SHOAL_CUDA_ARCHS"].split(",")
                             if a.strip()}))
    try:
        devices = jax.devices("cuda")
    except RuntimeError as exc:
        raise RuntimeError(
            "shoal.ode.solve was lowered for CUDA, but JAX sees no CUDA device to compile for "
            f"({exc}); set SHOAL_CUDA_ARCHS=sm_90 (say) to compile without one") from exc
    archs = set()
    for device in devices:
        capability = getattr(device, "compute_capability", None)
        if capability is None:  # ask the driver instead
            archs.update(a for a in _ode_ext.cuda_device_architectures().split(",") if a)
            break
        archs.add(_nvrtc.arch_name(capability))
    if not archs:
        raise RuntimeError("shoal cannot read the compute capability of the CUDA devices "
                           f"{devices}; set SHOAL_CUDA_ARCHS=sm_90 (say)")
    return tuple(sorted(archs))


ensemble_p = Primitive("shoal_ode_ensemble")
ensemble_p.multiple_results = True
ensemble_p.def_impl(functools.partial(_apply_primitive, ensemble_p))


@ensemble_p.def_abstract_eval
def _abstract_eval(y0, params, t_span, weights, *, build, **options):
    lead = y0.shape[:-1]
    shape = lead + (t_span.shape[-1], y0.shape[-1])
    stat = ShapedArray(lead, np.int32)
    return [ShapedArray(shape, y0.dtype), stat, stat, stat]


def _batch(args, dims, **params):
    """vmap: every operand gets the batch axis in front (broadcast where unbatched)."""
    size = next(x.shape[d] for x, d in zip(args, dims, strict=True) if d is not None)
    moved = [jax.numpy.broadcast_to(x, (size, *x.shape)) if d is None
             else jax.numpy.moveaxis(x, d, 0) for x, d in zip(args, dims, strict=True)]
    return ensemble_p.bind(*moved, **params), [0, 0, 0, 0]


batching.primitive_batchers[ensemble_p] = _batch


def _lower_cpu(ctx, *args, build: ModelBuild, **options):
    return jax.ffi.ffi_lowering(TARGET_CPU)(
        ctx, *args, model_path=host_library(build), entry=build.variant.entry, **options)


def _lower_cuda(ctx, *args, build: ModelBuild, **options):
    cubins = device_cubins(build, cuda_architectures())
    return jax.ffi.ffi_lowering(TARGET_CUDA)(
        ctx, *args, cubins=cubins, entry=build.variant.entry, **options)


mlir.register_lowering(ensemble_p, _lower_cpu, platform="cpu")
mlir.register_lowering(ensemble_p, _lower_cuda, platform="cuda")


def ensemble_solve(y0, params, t_span, weights, *, build: ModelBuild, rtol, atol, first_step,
                   pcoeff, icoeff, dcoeff, max_steps, n_error=0):
    """One ensemble call: ys (N, n_save, n) and int32 accepted/rejected/status (N,).

    y0 and weights are (N, n), params (N, n_params), t_span (n_save,); under vmap every operand
    gains the same leading batch dimensions and the handler folds them into the ensemble.
    """
    return tuple(ensemble_p.bind(
        y0, params, t_span, weights, build=build, rtol=np.float64(rtol), atol=np.float64(atol),
        first_step=np.float64(first_step), pcoeff=np.float64(pcoeff),
        icoeff=np.float64(icoeff), dcoeff=np.float64(dcoeff), max_steps=np.int64(max_steps),
        n_error=np.int64(n_error)))
