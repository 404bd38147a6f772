"""Compiling what one solve runs, for the platform a call is lowered for.

A :class:`ModelBuild` (generated model + variant) travels in the primitive's parameters; it is
compiled only at lowering: a host shared library on CPU (``shoal._jit``, loaded into the
extension at once), one cubin per device architecture on CUDA (``shoal._nvrtc``). Both go through
the disk cache, and each is built once per process.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from dataclasses import dataclass

import jax
import numpy as np

from shoal import _jit
from shoal.ode import _codegen, _ode_ext
from shoal.ode._kernel_source import Variant, library_source


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


def for_ensemble(build: ModelBuild, n_traj: int) -> ModelBuild:
    """The build a CPU call over ``n_traj`` trajectories (all of them, vmapped dimensions
    included; one shard's under sharding) runs: with ``lanes=0`` an ensemble that cannot fill one
    vector of the host's W lanes is solved on the scalar path instead, and so is a model whose
    right-hand side runs one lane at a time (``lane_arithmetic`` false): its dual-number Jacobian
    sweeps then cost more in lanes than alone (1.75x on a Rodas5P model with exp).

    The empty lanes are not free: they step a placeholder trajectory with every operation W wide,
    so a lone trajectory costs W times the arithmetic and memory of the scalar path (a dense
    Rodas5P solve of 400 variables, N = 1: 73 s in 8 lanes, 6.9 s scalar; 100 variables, N = 4:
    1.07 against 0.45 s). Results are the same bits either way (lanes only change speed); an
    explicit width is always honoured.

    A joint (sensitivity) solve whose W lanes would hold more than the per-trajectory stack
    budget of its columns (``_directional.STACK_BUDGET``, sized for one trajectory) also runs
    on the scalar path: 66 columns of a 20-species network in 8 lanes (nested dual numbers of
    8 × 67 doubles each) overflowed a worker thread's stack.
    """
    variant = build.variant
    if variant.lanes != 0:
        return build
    width = _jit.native_vector_bytes() // np.dtype(build.model.dtype).itemsize
    if (n_traj >= width and build.model.lane_arithmetic
            and width * joint_stack_bytes(build) <= JOINT_STACK_BUDGET):
        return build
    return ModelBuild(build.model, dataclasses.replace(variant, lanes=1))


# What one trajectory of a joint solve may hold on a worker's stack (as _directional sizes its
# chunks of columns), and its estimate: about 4 numbers per parameter and column with the
# Rosenbrock engine's nested duals, and some 24 joint states.
JOINT_STACK_BUDGET = 2 * 2**20  # bytes


def joint_stack_bytes(build: ModelBuild) -> int:
    """The stack one trajectory of ``build`` needs (0 for a plain solve)."""
    variant, model = build.variant, build.model
    if variant.sens is not None:
        with_y0, params = variant.sens
        columns = (model.n_vars if with_y0 else 0) + (
            params[1] - params[0] if isinstance(params, tuple)
            else model.n_params if params else 0)
    else:
        columns = variant.directions
    if not columns:
        return 0
    itemsize = np.dtype(model.dtype).itemsize
    return itemsize * (4 * model.n_params + 24 * model.n_vars) * (columns + 1)


def host_library(build: ModelBuild) -> str:
    """Path of the loaded host library for ``build`` at the configured optimisation level
    (compiled through the disk cache; rebuilt once if the extension cannot load the cached
    one)."""
    return _host_library(build, _jit.optimization_level())


@functools.lru_cache(maxsize=512)
def _host_library(build: ModelBuild, optimization: str) -> str:
    def load(path):
        _ode_ext.load_model(str(path), build.variant.entry)
        return str(path)

    units = evaluation_units(build)
    return _jit.load_library(library_source(build.model, build.variant, "cpu", bool(units)),
                             load, optimization, evaluation_units=units)


# Lines of model source (its statements; tables' #define lines not counted) from which a
# library's dual-number evaluations are compiled apart, beside the rest, when two CPUs can run
# the compiles at once. Each further unit costs 0.1-0.2 s of CPU (reading the precompiled header,
# instantiating the steppers) and the link a few hundredths. Measured on 2 idle cores
# (benchmarks/compile_latency.py --split 0,1): Lorenz Rodas5P (3 variables, 49 lines) 0.69 s
# whole, 0.72 s split; petab_like's 8-species network (93 lines) 1.00 -> 0.79 s; 25 species
# (132 lines) 1.37 -> 0.82 s. Below about 100 lines the gain is a tenth or two of a second, while
# `make test`, whose two workers already keep both cores busy, would pay the extra CPU on its
# hundreds of small models.
EVALUATIONS_APART_MIN_LINES = 100


def evaluation_units(build: ModelBuild) -> tuple[int, ...]:
    """The translation units (shoal/ad/evaluations_apart.hpp) that compile the model's
    dual-number evaluations for the host library of ``build``, at the same time as the rest:
    1 the Jacobian sweeps of a Rosenbrock method, 2 a joint Rosenbrock system's second-order
    sweeps, 3 a joint solve's sensitivity columns; () for one translation unit. The results are
    the same bits either way: only the compile's wall time changes.

    ``$SHOAL_SPLIT_COMPILE``: ``auto`` (default: models of ``EVALUATIONS_APART_MIN_LINES`` lines
    or more, where this process may use two CPUs or more), ``1`` (every library that has such
    evaluations), ``0`` (never).
    """
    setting = os.environ.get("SHOAL_SPLIT_COMPILE", "auto").strip().lower() or "auto"
    if setting not in ("auto", "0", "1"):
        raise ValueError(f"SHOAL_SPLIT_COMPILE must be auto, 1 or 0, got {setting!r}")
    variant = build.variant
    units = []
    if variant.method.rosenbrock:
        units.append(1)
    if variant.joint:
        units += [2, 3] if variant.method.rosenbrock else [3]
    if setting == "0" or not units:
        return ()
    if setting == "auto" and (model_lines(build.model) < EVALUATIONS_APART_MIN_LINES
                              or usable_cpus() < 2):
        return ()
    return tuple(units)


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def model_lines(model: _codegen.GeneratedModel) -> int:
    """Lines of the model's C++ source, preprocessor lines (its tables) left out."""
    return sum(1 for line in model.source.splitlines() if not line.lstrip().startswith("#"))


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
