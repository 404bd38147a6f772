"""The ensemble-solve primitive: compiled model + ``jax.ffi.ffi_call``.

Model libraries are built per (model source, dtype, variant) through the host JIT cache and loaded
before lowering; the FFI call names the library and entry point in its attributes, so the single
registered target serves every model. ``vmap_method="broadcast_all"`` makes a vmapped solve one
ensemble call: batch dimensions are prepended to every operand, and the handler flattens leading
dimensions into the ensemble axis (t_span rows are shared by consecutive trajectories).
"""

from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from shoal import _jit
from shoal.ode import _codegen, _ode_ext, _sparse

TARGET = "shoal_ode_solve_cpu"
METHODS = ("tsit5", "rodas5p")
LU_PRECISIONS = ("fp64", "fp32")
ORDERINGS = ("amd", "natural")

for _name, _capsule in _ode_ext.registrations().items():
    jax.ffi.register_ffi_target(_name, _capsule, platform="cpu")

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


def library_source(model: _codegen.GeneratedModel, variant: Variant) -> str:
    """The complete translation unit for one (model, dtype, variant)."""
    ctype = "double" if model.dtype == np.float64 else "float"
    bits = 64 if model.dtype == np.float64 else 32
    lines = [model.source, '#include "shoal/ode/ensemble.hpp"']
    model_type = "shoal_generated::Model"
    if variant.sens is not None:
        flags = ", ".join("true" if x else "false" for x in variant.sens)
        model_type = f"shoal::ode::Sensitivity<shoal_generated::Model, {flags}>"
        lines.append('#include "shoal/ode/sensitivity.hpp"')
    if variant.stepper == "tsit5":
        lines.append('#include "shoal/ode/tsit5.hpp"')
        stepper_type = "shoal::ode::Tsit5"
    else:
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
            stepper_type = f"shoal::ode::Rodas5PSensitivityUsing<{matrix}>::Stepper"
        else:
            lines.append('#include "shoal/ode/rodas5p.hpp"')
            stepper_type = f"shoal::ode::Rodas5PUsing<{matrix}>::Stepper"
    return "\n".join([
        *lines,
        "",
        '#define SHOAL_EXPORT extern "C" __attribute__((visibility("default"), used))',
        f"using ShoalSolvedModel = {model_type};",
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


@functools.lru_cache(maxsize=512)
def _build(source: str, entry: str) -> str:
    path = str(_jit.compile_library(source))
    _ode_ext.load_model(path, entry)
    return path


# f -> {(n_vars, n_params, dtype, variant): path}. Like jax.jit, a function is traced once per
# signature: it is keyed by identity, so rebinding a global it reads is not seen afterwards.
_traced: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def compiled_model(f, n_vars: int, n_params: int, dtype, variant: Variant) -> str:
    """Path of the loaded library solving ``f`` in ``dtype`` as ``variant`` says."""
    signature = (n_vars, n_params, np.dtype(dtype).name, variant)
    try:
        per_f = _traced.setdefault(f, {})
    except TypeError:  # not weak-referenceable: trace every time
        per_f = {}
    if signature not in per_f:
        model = _codegen.generate_model(f, n_vars, n_params, dtype)
        per_f[signature] = _build(library_source(model, variant), variant.entry)
    return per_f[signature]


def ensemble_solve(y0, params, t_span, weights, *, path: str, entry: str, rtol, atol, first_step,
                   pcoeff, icoeff, dcoeff, max_steps, n_error=0):
    """One FFI call: ys (N, n_save, n) and int32 accepted/rejected/status (N,).

    y0 and weights are (N, n), params (N, n_params), t_span (n_save,); under vmap every operand
    gains the same leading batch dimensions and the handler folds them into the ensemble.
    """
    n_traj, n = y0.shape
    n_save = t_span.shape[-1]
    out_types = (
        jax.ShapeDtypeStruct((n_traj, n_save, n), y0.dtype),
        jax.ShapeDtypeStruct((n_traj,), jnp.int32),
        jax.ShapeDtypeStruct((n_traj,), jnp.int32),
        jax.ShapeDtypeStruct((n_traj,), jnp.int32),
    )
    call = jax.ffi.ffi_call(TARGET, out_types, vmap_method="broadcast_all")
    return call(y0, params, t_span, weights, model_path=path, entry=entry,
                rtol=np.float64(rtol), atol=np.float64(atol), first_step=np.float64(first_step),
                pcoeff=np.float64(pcoeff), icoeff=np.float64(icoeff),
                dcoeff=np.float64(dcoeff), max_steps=np.int64(max_steps),
                n_error=np.int64(n_error))
