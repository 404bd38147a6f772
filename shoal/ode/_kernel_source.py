"""The C++ translation units shoal compiles: a model plus the stepper that solves it.

A :class:`Variant` says what one compiled entry point integrates (method, LU precision, the
sensitivity columns of a joint solve, the sparse solver); :func:`library_source` assembles the
translation unit of (model, variant) for a platform, and :func:`sparsity_tracer_source` the one
that reads a model's structural Jacobian pattern.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from shoal import _jit
from shoal.ode import _codegen, _sparse
from shoal.ode._mass import MassMatrix
from shoal.ode._options import LuPrecision, Method, Ordering, SparsityPattern


@dataclass(frozen=True)
class Variant:
    """What one compiled entry point integrates.

    sens = (with_y0, params) selects the joint system [y, S] with columns for y0 (if with_y0)
    and for the parameters: all of them (True), none (False), or the range (begin, end) of the
    model's p (its own ones, or its shared ones). directions = M > 0 selects instead the joint
    system along M given tangent directions (a JVP; directional_sensitivity.hpp). A sparsity
    pattern replaces Rodas5P's dense LU by the sparse direct solver compiled for it. lanes: on
    the CPU, the SIMD lanes per worker (lanes_ensemble.hpp; 0: the host's vector width, 1: the
    scalar path); the GPU ignores it. adjoint: the entry is the discrete adjoint of the solve
    (adjoint.hpp; host only, a model with its vjps; a sparse pattern's transposed solves are
    the sparse solver's own; with lanes its forward solve runs in them, adjoint_lanes.hpp);
    its library exports ``{entry}_record`` too, the value's solve saving each trajectory's
    recording for the adjoint entry to sweep back (adjoint.hpp: RecordingRows).
    mass: a Rosenbrock method's constant mass matrix (M y' = f; mass.hpp).
    """

    method: Method
    lu_precision: LuPrecision = LuPrecision.FP64
    sens: tuple[bool, bool | tuple[int, int]] | None = None
    sparsity: SparsityPattern | None = None
    ordering: Ordering = Ordering.AMD
    directions: int = 0
    lanes: int = 1
    adjoint: bool = False
    mass: MassMatrix | None = None

    @classmethod
    def of(cls, method: Method, lu_precision: LuPrecision, sparsity: SparsityPattern | None,
           ordering: Ordering, sens: tuple[bool, bool] | None = None,
           directions: int = 0, lanes: int = 1, mass: MassMatrix | None = None) -> Variant:
        """The variant for these options, with what the method ignores left out (an explicit
        method has no LU), so equal kernels are one compiled library."""
        if method.explicit:
            return cls(method, sens=sens, directions=directions, lanes=lanes)
        if sparsity is None:
            return cls(method, lu_precision, sens, directions=directions, lanes=lanes, mass=mass)
        return cls(method, lu_precision, sens, sparsity, ordering, directions, lanes, mass=mass)

    @property
    def joint(self) -> bool:
        """Whether this integrates a joint system [y, S]."""
        return self.sens is not None or self.directions > 0

    @property
    def sparse(self) -> bool:
        return self.sparsity is not None

    @property
    def entry(self) -> str:
        name = f"shoal_ode_{self.method.value}"
        if self.method.rosenbrock:
            name += f"_lu{self.lu_precision.value[2:]}"
        if self.sens is not None:
            with_y0, params = self.sens
            name += f"_sens{'_y0' if with_y0 else ''}"
            if isinstance(params, tuple):
                name += f"_p{params[0]}to{params[1]}"
            elif params:
                name += "_p"
        if self.directions:
            name += f"_dir{self.directions}"
        if self.sparse:
            name += "_sparse"
        if self.lanes != 1:
            name += f"_lanes{self.lanes or 'native'}"
        if self.adjoint:
            name += "_adjoint"
        if self.mass is not None:
            name += "_mass"
        return name


@functools.lru_cache(maxsize=64)
def sparse_structure(pattern: SparsityPattern, ordering: Ordering) -> _sparse.SparseStructure:
    """The sparse solver's analysis of a pattern (ordering, symbolic factorisation, colouring)."""
    return _sparse.analyze(pattern.mask, ordering.value)


def _stepper_source(variant: Variant, lanes: str = "") -> tuple[list[str], str, str]:
    """(includes and helper definitions, stepper type, model type) for a variant; with
    ``lanes`` (a C++ lane count), the stepper over SIMD lanes of that width instead."""
    lines = ['#include "shoal/ode/ensemble.hpp"']
    model_type = base = "shoal_generated::Model"
    if variant.mass is not None:
        if variant.method.explicit:
            raise ValueError(f"{variant.method.value} is explicit: no mass matrix")
        if not lanes:  # the lanes' lines follow the scalar ones in one translation unit
            lines += ['#include "shoal/ode/mass.hpp"', variant.mass.emit_cpp("ShoalMass"),
                      "using ShoalMassModel = shoal::ode::WithMass<shoal_generated::Model, "
                      "ShoalMass>;"]
        model_type = base = "ShoalMassModel"
    if variant.sens is not None:
        with_y0, params = variant.sens
        if isinstance(params, tuple):
            columns = f"{params[0]}, {params[1]}"
        else:
            columns = "0, shoal_generated::Model::n_params" if params else "0, 0"
        model_type = (f"shoal::ode::Sensitivity<{base}, "
                      f"{'true' if with_y0 else 'false'}, {columns}>")
        lines.append('#include "shoal/ode/sensitivity.hpp"')
    if variant.directions:
        model_type = (f"shoal::ode::DirectionalSensitivity<{base}, "
                      f"{variant.directions}>")
        lines.append('#include "shoal/ode/directional_sensitivity.hpp"')
    if variant.method.explicit:
        header, stepper = variant.method.explicit
        lines.append(f'#include "{header}"')
        return lines, stepper, model_type
    lu = variant.lu_precision.ctype
    if lanes:
        lu = f"shoal::simd::Lanes<{lu}, {lanes}>"
    matrix = f"shoal::ode::DenseMatrixOf<{lu}>::Type"
    if variant.sparse:
        structure = sparse_structure(variant.sparsity, variant.ordering)
        name = "ShoalSparseMatrixLanes" if lanes else "ShoalSparseMatrix"
        if not lanes:
            lines += ['#include "shoal/ode/sparse_iteration_matrix.hpp"',
                      structure.emit_cpp("ShoalSparseStructure", transposed=variant.adjoint)]
        lines += [
            "template <class M>",
            f"using {name} = shoal::ode::SparseIterationMatrix<M, ShoalSparseStructure, {lu}>;",
        ]
        matrix = name
    header, method = variant.method.rosenbrock
    lines.append(f'#include "{header}"')
    stepper = "JointStepper" if variant.joint else "Stepper"
    return lines, f"{method}<{matrix}>::{stepper}", model_type


def library_source(model: _codegen.GeneratedModel, variant: Variant,
                   platform: str = "cpu", evaluations_apart: bool = False) -> str:
    """The complete translation unit for one (model, dtype, variant) on ``platform``.

    cpu: a shared library exporting ``entry(args, begin, end)`` over a range of trajectories.
    cuda: a cubin whose ``__global__`` kernel ``entry(args)`` solves one trajectory per thread,
    with ``shoal_model_info`` = {ABI version, n_vars, n_params, n_shared, bits, n_saved,
    has_event} for the handler to check.
    evaluations_apart (cpu): the model's dual-number evaluations go to further translation units
    compiled from the same source (shoal/ad/evaluations_apart.hpp; shoal/_jit.py builds them).
    """
    ctype = "double" if model.dtype == np.float64 else "float"
    bits = 64 if model.dtype == np.float64 else 32
    includes, stepper_type, model_type = _stepper_source(variant)
    apart = []
    if evaluations_apart:
        if platform != "cpu":
            raise ValueError(f"evaluations compiled apart are a host build's, not {platform!r}'s")
        apart = _EVALUATIONS_APART
    lines = [model.source, *apart, *includes, "", f"using ShoalSolvedModel = {model_type};"]
    if platform == "cuda":
        return "\n".join([
            *lines,
            'extern "C" __device__ const char shoal_cache_key[] = SHOAL_CACHE_KEY;',
            'extern "C" __device__ const int32_t shoal_model_info[7] = {',
            "    SHOAL_ODE_ABI_VERSION, ShoalSolvedModel::n_vars, ShoalSolvedModel::n_params, "
            f"shoal::ode::n_shared_params<ShoalSolvedModel>(), {bits}, "
            "shoal::ode::n_saved<ShoalSolvedModel>(), shoal::ode::has_event<ShoalSolvedModel>()};",
            f'extern "C" __global__ void {variant.entry}(ShoalEnsembleArgs a) {{',
            "  const int64_t m = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;",
            "  if (m >= a.n_traj) return;",
            f"  const auto opt = shoal::ode::IntegrateOptions<{ctype}>::from(a.options);",
            f"  shoal::ode::solve_one<{stepper_type}, ShoalSolvedModel, {ctype}>(a, opt, m);",
            "}",
            "",
        ])
    if platform != "cpu":
        raise ValueError(f"no shoal ODE backend for platform {platform!r}")
    solver = f"shoal::ode::solve_range<{stepper_type}, ShoalSolvedModel, {ctype}>"
    extra_exports = []
    lanes_stepper = None
    if variant.lanes != 1:
        width = str(variant.lanes) if variant.lanes else f"shoal::simd::native_lanes<{ctype}>()"
        lane_lines, lanes_stepper, _ = _stepper_source(variant, "ShoalLanes")
        lines += ['#include "shoal/ode/lanes_ensemble.hpp"',
                  f"constexpr int ShoalLanes = {width};",
                  *(line for line in lane_lines
                    if not (line.startswith("#include") and line in lines))]
        solver = (f"shoal::ode::solve_range_lanes<{stepper_type}, {lanes_stepper}, "
                  f"ShoalSolvedModel, {ctype}, ShoalLanes>")
    if variant.adjoint:
        if variant.joint:
            raise ValueError(f"no adjoint entry for {variant}")
        header, step = (("explicit_rk_adjoint.hpp", "ExplicitStepAdjoint")
                        if variant.method.explicit else
                        ("rosenbrock_adjoint.hpp", "RosenbrockStepAdjoint"))
        lines.append(f'#include "shoal/ode/{header}"')
        drivers = f"<{stepper_type}, shoal::ode::{step}, ShoalSolvedModel, {ctype}>"
        suffix = ""
        if lanes_stepper is not None:  # the forward solve in the lanes (adjoint_lanes.hpp)
            lines.append('#include "shoal/ode/adjoint_lanes.hpp"')
            drivers = (f"<{stepper_type}, {lanes_stepper}, shoal::ode::{step}, "
                       f"ShoalSolvedModel, {ctype}, ShoalLanes>")
            suffix = "_lanes"
        solver = f"shoal::ode::adjoint_range{suffix}{drivers}"
        # A gradient solves forward once: the value's solve (the _record entry) saves each
        # trajectory's recording to its row of a.recording, the adjoint entry sweeps it back.
        extra_exports = [
            f"SHOAL_EXPORT void {variant.entry}_record(const ShoalEnsembleArgs* a, "
            f"int64_t begin, int64_t end) {{\n"
            f"  shoal::ode::record_range{suffix}{drivers}(*a, begin, end);\n}}"]
    elif lanes_stepper is not None:
        extra_exports = [
            "// {lanes, vector step attempts, lane step attempts} so far (lanes_ensemble.hpp).",
            "SHOAL_EXPORT void shoal_lane_counts(int64_t* out) {",
            "  out[0] = ShoalLanes;",
            "  const auto& counts = shoal::ode::lane_counts();",
            "  out[1] = __atomic_load_n(&counts.vector_steps, __ATOMIC_RELAXED);",
            "  out[2] = __atomic_load_n(&counts.lane_steps, __ATOMIC_RELAXED);",
            "}",
        ]
    # The core through its precompiled header, first (shoal/_jit.py); then every later include
    # of a core header is already satisfied.
    prelude = [_jit.PRELUDE_INCLUDE] if _jit.uses_precompiled_prelude() else []
    return "\n".join([
        *prelude,
        *lines,
        *(["#ifndef SHOAL_EXPORT", _HOST_EXPORT, "#endif"] if evaluations_apart
          else [_HOST_EXPORT]),
        *extra_exports,
        "SHOAL_EXPORT const char shoal_cache_key[] = SHOAL_CACHE_KEY;",
        "SHOAL_EXPORT int32_t shoal_abi_version() { return SHOAL_ODE_ABI_VERSION; }",
        "SHOAL_EXPORT void shoal_model_info(int32_t* n_vars, int32_t* n_params, int32_t* n_shared,",
        "                                   int32_t* bits, int32_t* n_saved, int32_t* has_event) {",
        "  *n_vars = ShoalSolvedModel::n_vars;",
        "  *n_params = ShoalSolvedModel::n_params;",
        "  *n_shared = shoal::ode::n_shared_params<ShoalSolvedModel>();",
        f"  *bits = {bits};",
        "  *n_saved = shoal::ode::n_saved<ShoalSolvedModel>();",
        "  *has_event = shoal::ode::has_event<ShoalSolvedModel>();",
        "}",
        f"SHOAL_EXPORT void {variant.entry}(const ShoalEnsembleArgs* a, int64_t begin, "
        "int64_t end) {",
        f"  {solver}(*a, begin, end);",
        "}",
        "",
    ])


_HOST_EXPORT = '#define SHOAL_EXPORT extern "C" __attribute__((visibility("default"), used))'
# Where a library's dual-number evaluations are compiled apart: the model's flag for
# param_reads.hpp, and in the evaluations' unit their definitions, with the entry points made
# unused static functions (instantiated, so their evaluations are; never compiled themselves).
_EVALUATIONS_APART = [
    "namespace shoal_generated {",
    "constexpr bool shoal_evaluated_apart(const Model*) { return true; }",
    "}  // namespace shoal_generated",
    "#if defined(SHOAL_EVALUATIONS_PART)",
    '#include "shoal/ad/evaluations_apart.hpp"',
    "#define SHOAL_EXPORT [[maybe_unused]] static",
    "#endif",
]


def sparsity_tracer_source(model: _codegen.GeneratedModel) -> str:
    """A host library exporting ``shoal_sparsity_pattern(out)``: out[i*n + j] = f_i depends on
    y_j, from the model run on dependency tracers."""
    return "\n".join([
        model.source,
        '#include "shoal/ad/sparsity_tracer.hpp"',
        _HOST_EXPORT,
        "SHOAL_EXPORT const char shoal_cache_key[] = SHOAL_CACHE_KEY;",
        "SHOAL_EXPORT void shoal_sparsity_pattern(unsigned char* out) {",
        "  using M = shoal_generated::Model;",
        "  constexpr int n = M::n_vars;",
        "  using Tr = shoal::ad::Tracer<(n + 63) / 64>;",
        "  Tr y[n], dy[n], p[M::n_params > 0 ? M::n_params : 1];",
        "  for (int j = 0; j < n; ++j) y[j] = Tr::variable(j);",
        "  M::rhs<Tr>(y, Tr(), p, dy);",
        "  for (int i = 0; i < n; ++i)",
        "    for (int j = 0; j < n; ++j) out[i * n + j] = dy[i].depends_on(j) ? 1 : 0;",
        "}",
        "",
    ])
