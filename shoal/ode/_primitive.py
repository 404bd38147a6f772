"""The ensemble-solve primitive: abstract evaluation, batching, and one lowering per platform.

``ensemble_p`` takes (y0, params, shared, t_span, weights, atol, tstops, first_step) and returns
(ys, accepted, rejected, status, event_time, event_state); the static ``build`` (what to
compile, ``_build.ModelBuild``), ``options`` (the record, ``_options.SolveOptions``) and
``error_components``. Each platform's lowering compiles the build for itself and emits one call of
the platform's FFI target, whose attributes name the compiled model and its entry point and carry
the options as ONE dictionary attribute. A vmapped solve is one ensemble call: batch dimensions
are moved to the front of every operand, and the handler folds leading dimensions into the
ensemble axis (t_span rows and shared-parameter rows serve consecutive trajectories).
A last operand, ``progress``, is an int32 ``(1,)`` slot of the live-progress table
(``_progress.py``), -1 when off.
"""

from __future__ import annotations

import functools
import math

import jax
import numpy as np
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from shoal._manual_axes import result_aval, varying_axes
from shoal.ode import _build, _memory, _ode_ext, _partitioning
from shoal.ode._options import SolveOptions

try:  # the usual eager implementation of a primitive: compile it alone, cached by parameters
    from jax._src.dispatch import apply_primitive as _apply_primitive
except ImportError:  # pragma: no cover - JAX moved it: jit per call works, uncached
    def _apply_primitive(prim, *args, **params):
        return jax.jit(functools.partial(prim.bind, **params))(*args)

TARGET_CPU = "shoal_ode_solve_cpu"
TARGET_CUDA = "shoal_ode_solve_cuda"

# The CUDA handler is registered even where JAX has no GPU backend: XLA keeps registrations for
# platforms it has not loaded, and nothing runs until a call is lowered for CUDA.
_PLATFORM_OF = {TARGET_CPU: "cpu", TARGET_CUDA: "CUDA", "shoal_ode_adjoint_cpu": "cpu",
                "shoal_ode_record_cpu": "cpu"}
for _name, _capsule in _ode_ext.registrations().items():
    jax.ffi.register_ffi_target(_name, _capsule, platform=_PLATFORM_OF[_name])

ensemble_p = Primitive("shoal_ode_ensemble")
ensemble_p.multiple_results = True
ensemble_p.def_impl(functools.partial(_apply_primitive, ensemble_p))


@ensemble_p.def_abstract_eval
def _abstract_eval(y0, params, shared, t_span, weights, atol, tstops, first_step, progress, *,
                   build, **static):
    lead = y0.shape[:-1]
    model = build.model
    n_saved = model.n_saved * (y0.shape[-1] // model.n_vars)  # a joint state saves its columns
    # Without an event the event outputs are empty (trailing size 0).
    event = 1 if model.has_event else 0
    shapes = [(lead + (t_span.shape[-1], n_saved), y0.dtype), (lead, np.int32),
              (lead, np.int32), (lead, np.int32), (lead + (event,), y0.dtype),
              (lead + (y0.shape[-1] * event,), y0.dtype)]
    varying = varying_axes((y0, params, shared, t_span, weights, atol, tstops, first_step,
                            progress))
    return [result_aval(y0, shape, dtype, varying, len(lead)) for shape, dtype in shapes]


def _batch(args, dims, **static):
    """vmap: every operand gets the batch axis in front (broadcast where unbatched)."""
    size = next(x.shape[d] for x, d in zip(args, dims, strict=True) if d is not None)
    moved = [jax.numpy.broadcast_to(x, (size, *x.shape)) if d is None
             else jax.numpy.moveaxis(x, d, 0) for x, d in zip(args, dims, strict=True)]
    return ensemble_p.bind(*moved, **static), [0] * 6


batching.primitive_batchers[ensemble_p] = _batch


def second_order_jvp(primals, tangents, **static):
    """The JVP of a solve's own derivative (the JVP rules call the kernels directly): second
    order, not implemented, said plainly instead of JAX's missing-rule error."""
    raise NotImplementedError(
        "shoal.ode.solve supports first-order derivatives (jvp, grad, jacfwd, jacrev); "
        "second-order ones (jax.hessian, or differentiating a gradient) are not implemented")


ad.primitive_jvps[ensemble_p] = second_order_jvp


def _lowering(target: str, compiled_model):
    def lower(ctx, *args, build: _build.ModelBuild, options: SolveOptions,
              error_components: int):
        if target == TARGET_CPU:  # before compiling anything (_memory.py)
            _memory.check_outputs_fit(ctx.avals_out, joint=build.variant.joint)
            # Here, not at tracing: only the lowering sees the whole ensemble (vmap folded in).
            build = _build.for_ensemble(build, math.prod(ctx.avals_in[0].shape[:-1]))
        return jax.ffi.ffi_lowering(target)(
            ctx, *args, model=compiled_model(build), entry=build.variant.entry,
            options=options.kernel_attributes(error_components, build.variant.joint))

    return lower


def _aligned(avals_in):
    """How many leading dimensions of each operand line up with the results' (the ensemble and
    vmap dimensions): all but its last."""
    return [a.ndim - 1 for a in avals_in]


def _register(platform, target, compiled_model):
    rule = _partitioning.partitioned(_lowering(target, compiled_model), ensemble_p.bind, _aligned)
    mlir.register_lowering(ensemble_p, rule, platform=platform)


_register("cpu", TARGET_CPU, _build.host_library)
_register("cuda", TARGET_CUDA,
          lambda build: _build.device_cubins(build, _build.cuda_architectures()))
_partitioning.require_devices_when_lowering(ensemble_p)


def ensemble_solve(y0, params, shared, t_span, weights, atol, tstops, first_step, progress=None,
                   *, build: _build.ModelBuild, options: SolveOptions, error_components: int = 0):
    """One ensemble call: ys (N, n_save, n_saved), int32 accepted/rejected/status (N,), and the
    event's time (N, 1) and state (N, n) (trailing size 0 without an event).

    y0, weights and atol (each component's absolute tolerance) are (N, n), params (N, n_own)
    the per-trajectory parameters, shared
    (R, n_shared) the ensemble's, t_span (R_t, n_save), tstops (R_s, k) ascending rows, first_step
    (N,); the rows R, R_t, R_s divide N and serve consecutive trajectories. Under vmap every
    operand gains the same leading batch dimensions and the handler folds them into the ensemble.
    progress: the slot that counts finished trajectories (None: off).
    """
    if progress is None:
        progress = np.full((1,), -1, np.int32)
    return tuple(ensemble_p.bind(y0, params, shared, t_span, weights, atol, tstops, first_step,
                                 progress, build=build, options=options,
                                 error_components=int(error_components)))
