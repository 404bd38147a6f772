"""Reverse mode by the discrete adjoint: the transpose of a solve's tangent map in one backward
sweep per cotangent, whatever the number of differentiated entries (``adjoint=True``).

``adjoint_p`` takes the primal operands of an ensemble solve and ``ys_bar`` (N, K), the
cotangent of its saves (and, with an event, of the event's state), and returns ``y0_bar``
(N, n) and ``p_bar`` (N, n_params): the cotangents of every trajectory's y0 and whole p (own
parameters, then shared ones). Its kernel (``adjoint.hpp``) solves each trajectory forward
again, recording its steps, and transposes them backwards with f's vector-Jacobian products
(``_codegen/vjp.py``). A trajectory whose solve fails gets NaN cotangents.

A gradient solves forward once: ``record_p`` is the value's solve by the adjoint's library,
which also writes each trajectory's recording to a row of bytes (``recording_row_bytes``); the
adjoint sweeps back from it, and solves forward again only where a row was too small for it
(or belongs to another trajectory: each row carries a hash of what it was recorded from).

``adjoint_cotangents`` is what ``_directional``'s transpose calls instead of integrating a
sensitivity column per entry (``chosen`` says when).
"""

from __future__ import annotations

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from shoal._manual_axes import result_aval, varying_axes
from shoal.ode import _build, _memory, _primitive
from shoal.ode._options import SolveOptions

TARGET_CPU = "shoal_ode_adjoint_cpu"
TARGET_RECORD_CPU = "shoal_ode_record_cpu"

adjoint_p = Primitive("shoal_ode_adjoint")
adjoint_p.multiple_results = True
adjoint_p.def_impl(functools.partial(_primitive._apply_primitive, adjoint_p))

record_p = Primitive("shoal_ode_record")
record_p.multiple_results = True
record_p.def_impl(functools.partial(_primitive._apply_primitive, record_p))

# The value's recordings of one gradient take at most this many bytes in all, and a trajectory
# at most RECORDING_ROW_MAX: a trajectory whose recording is longer is solved forward again by
# the adjoint, as all were before. XLA allocates the rows whole, but the system gives pages only
# where a recording is written (they are large allocations, mapped on first touch), so the
# budget is an upper bound on memory used, not a cost paid.
RECORDING_BYTES = 512 << 20
RECORDING_ROW_MAX = 8 << 20
# Below this a row holds too few steps to be worth writing.
RECORDING_ROW_MIN = 4 << 10


# adjoint="auto" takes the adjoint beyond this many differentiated entries, per method family
# and by what of the backward sweeps runs side by side in the SIMD lanes (backward_lanes): below
# it, forward sensitivities (one joint solve with a column per entry, in the lanes) measured
# cheaper (benchmarks/adjoint_gradients.py, 2026-12-04, with the adjoint's forward solve in the
# lanes). Explicit methods, --cases crossover: forward/adjoint 0.65 at 16 entries, 1.57 at 32,
# 2.5 at 64 with the sweeps one trajectory at a time, so about 1 at 22-24; with f's products on
# lanes (adjoint_backward_lanes.hpp) 0.82 at 4, 1.01 at 8, 1.60 at 16, 3.6 at 32. Rosenbrock
# methods, the 20-species network of --cases stiff: one at a time 1.37 at 10, 3.9 at 25 (kept
# at 10, where forward mode's columns, part of the step control, are the safer choice at about
# the same cost); with the steps evaluated again on lanes 0.64 at 4, 0.92 at 6, 1.20 at 8, 1.51
# at 10; with f's products on lanes too 0.67 at 2, 0.96 at 4, 1.49 at 6, 1.91 at 8, 2.30 at 10.
AUTO_ENTRIES = {("explicit", None): 24, ("explicit", "products"): 8,
                ("rosenbrock", None): 10, ("rosenbrock", "steps"): 8,
                ("rosenbrock", "steps and products"): 5}


def chosen(problem, entries: int, n_traj: int) -> bool:
    """Whether reverse mode over ``entries`` differentiated entries of an ensemble of
    ``n_traj`` trajectories runs the adjoint."""
    o = problem.options
    if o.adjoint is True:
        return True
    family = ("explicit" if o.method.explicit else "rosenbrock", backward_lanes(problem, n_traj))
    return (o.adjoint == "auto" and entries > AUTO_ENTRIES[family] and problem.model.has_vjp
            and jax.default_backend() == "cpu")


def _build_of(problem) -> _build.ModelBuild:
    """The adjoint's build: the primal's own solver, the sparse one included (its transposed
    solves run against the same factors), so the forward solve takes the primal's steps bit for
    bit. lanes=0 is resolved at lowering (_build.for_ensemble)."""
    from shoal.ode._kernel_source import Variant

    o = problem.options
    variant = Variant.of(o.method, o.lu_precision, o.sparsity, o.ordering, lanes=o.lanes,
                         mass=o.mass)
    return _build.ModelBuild(problem.model, dataclasses.replace(variant, adjoint=True))


def backward_lanes(problem, n_traj: int) -> str | None:
    """What of the adjoint's backward sweeps runs side by side in the SIMD lanes
    (include/shoal/ode/adjoint_backward_lanes.hpp), where its forward solve runs there: a
    Rosenbrock method's "steps" (evaluated again), and f's "products" where they are lane
    arithmetic (for a Rosenbrock method its second-order product too); None: one trajectory at
    a time."""
    model = problem.model
    if _build.for_ensemble(_build_of(problem), n_traj).variant.lanes == 1:
        return None
    explicit = problem.options.method.explicit
    products = model.vjp_in_lanes and (explicit or model.jvp_vjp_in_lanes)
    if explicit:
        return "products" if products else None
    return "steps and products" if products else "steps"


def recording_row_bytes(n_traj: int, available: int | None = None) -> int:
    """The bytes of each trajectory's row of recordings for an ensemble of ``n_traj`` (0: none;
    a multiple of 64): the budget shared out, within the memory available now."""
    available = _memory.available_bytes() if available is None else available
    budget = RECORDING_BYTES if available is None else min(RECORDING_BYTES, available // 4)
    row = min(RECORDING_ROW_MAX, budget // max(n_traj, 1)) // 64 * 64
    return row if row >= RECORDING_ROW_MIN else 0


def record(problem, primals, progress):
    """The solve's outputs (as ``problem.run``'s, the same bits) and each trajectory's recording
    for the adjoint: (outputs, recording (N, row bytes) uint8); None where no row would be big
    enough to be worth it (then solve plainly)."""
    y0, params, shared, t_span, weights, tstops, first_step = primals
    row_bytes = recording_row_bytes(y0.shape[0])
    if row_bytes == 0:
        return None
    if progress is None:
        progress = np.full((1,), -1, np.int32)
    atol = jnp.full(y0.shape, problem.options.atol, y0.dtype)
    *out, recording = record_p.bind(y0, params, shared, t_span, weights, atol, tstops,
                                    first_step, progress, build=_build_of(problem),
                                    options=problem.options, row_bytes=row_bytes)
    return tuple(out), recording


@record_p.def_abstract_eval
def _record_abstract_eval(y0, params, shared, t_span, weights, atol, tstops, first_step,
                          progress, *, build, options, row_bytes):
    solve = _primitive._abstract_eval(y0, params, shared, t_span, weights, atol, tstops,
                                      first_step, progress, build=build)
    varying = varying_axes((y0, params, shared, t_span, weights, atol, tstops, first_step,
                            progress))
    lead = y0.shape[:-1]
    return [*solve, result_aval(y0, lead + (row_bytes,), np.uint8, varying, len(lead))]


def _record_batch(args, dims, *, row_bytes, **static):
    """vmap: as the solve's (every operand gets the batch axis in front)."""
    size = next(x.shape[d] for x, d in zip(args, dims, strict=True) if d is not None)
    moved = [jnp.broadcast_to(x, (size, *x.shape)) if d is None else jnp.moveaxis(x, d, 0)
             for x, d in zip(args, dims, strict=True)]
    # The budget is for the whole ensemble, the batch folded in.
    row_bytes = min(row_bytes, recording_row_bytes(math.prod(moved[0].shape[:-1])))
    return record_p.bind(*moved, row_bytes=row_bytes, **static), [0] * 7


batching.primitive_batchers[record_p] = _record_batch
ad.primitive_jvps[record_p] = _primitive.second_order_jvp


def _lower_record_cpu(ctx, *args, build: _build.ModelBuild, options: SolveOptions,
                      row_bytes: int):
    # Before compiling anything; the rows are within the budget (recording_row_bytes) and only
    # touched where written.
    _memory.check_outputs_fit(ctx.avals_out[:-1], joint=False)
    build = _build.for_ensemble(build, math.prod(ctx.avals_in[0].shape[:-1]))
    return jax.ffi.ffi_lowering(TARGET_RECORD_CPU)(
        ctx, *args, model=_build.host_library(build), entry=build.variant.entry + "_record",
        options=options.kernel_attributes())


@adjoint_p.def_abstract_eval
def _abstract_eval(y0, params, shared, t_span, weights, atol, tstops, first_step, progress,
                   ys_bar, recording, *, build, options):
    lead = y0.shape[:-1]
    model = build.model
    varying = varying_axes((y0, params, shared, t_span, weights, atol, tstops, first_step,
                            progress, ys_bar, recording))
    # The kernel writes the forward solve's outputs too (the solve handler's results), then the
    # cotangents: y0's, each trajectory's own parameters', and the shared rows' (summed over the
    # trajectories reading each, in the kernel: src/ode/ode_ffi_cpu.cc).
    event = 1 if model.has_event else 0
    shapes = [(lead + (t_span.shape[-1], model.n_saved), y0.dtype), (lead, np.int32),
              (lead, np.int32), (lead, np.int32), (lead + (event,), y0.dtype),
              (lead + (model.n_vars * event,), y0.dtype), (y0.shape, y0.dtype),
              (lead + (model.n_own,), y0.dtype)]
    return [*(result_aval(y0, shape, dtype, varying, len(lead)) for shape, dtype in shapes),
            result_aval(shared, shared.shape, y0.dtype, varying, shared.ndim - 1)]


def _batch(args, dims, **static):
    """vmap: every operand gets the batch axis in front; the handler folds it into the
    ensemble."""
    size = next(x.shape[d] for x, d in zip(args, dims, strict=True) if d is not None)
    moved = [jnp.broadcast_to(x, (size, *x.shape)) if d is None else jnp.moveaxis(x, d, 0)
             for x, d in zip(args[:-1], dims[:-1], strict=True)]
    # One recording for a batch of cotangents (jacrev) would be copied for each: they solve
    # forward again instead.
    recording = (np.zeros(moved[0].shape[:-1] + (0,), np.uint8) if dims[-1] is None else
                 jnp.moveaxis(args[-1], dims[-1], 0))
    return adjoint_p.bind(*moved, recording, **static), [0] * 9


batching.primitive_batchers[adjoint_p] = _batch


def _lower_cpu(ctx, *args, build: _build.ModelBuild, options: SolveOptions):
    n_traj = math.prod(ctx.avals_in[0].shape[:-1])
    params, shared = ctx.avals_in[1], ctx.avals_in[2]
    _memory.check_adjoint_fits(ctx.avals_out, n_traj=n_traj,  # before compiling anything
                               n_params=params.shape[-1] + shared.shape[-1],
                               adjoint=options.adjoint)
    build = _build.for_ensemble(build, n_traj)
    return jax.ffi.ffi_lowering(TARGET_CPU)(
        ctx, *args, model=_build.host_library(build), entry=build.variant.entry,
        options=options.kernel_attributes())


def _lower_gpu(ctx, *args, options: SolveOptions, **static):
    # "auto" decides when the tangent is traced, by JAX's default backend; a computation placed
    # on a GPU while that is the CPU reaches here.
    why = ("" if options.adjoint is True else
           " (adjoint='auto' chose it because JAX's default backend is the CPU)")
    raise NotImplementedError(
        f"shoal.ode.solve's adjoint runs on the CPU only{why}; on a GPU differentiate with "
        "adjoint=False (forward sensitivities)")


mlir.register_lowering(adjoint_p, _lower_cpu, platform="cpu")
mlir.register_lowering(adjoint_p, _lower_gpu, platform="cuda")
mlir.register_lowering(record_p, _lower_record_cpu, platform="cpu")
mlir.register_lowering(record_p, _lower_gpu, platform="cuda")


def adjoint_cotangents(problem, primals, ct, recording):
    """(y0_bar (D, N, n), params_bar (D, N, n_own), shared_bar (D, R, n_shared)) for D
    cotangents ct (D, N, K) of the tangents the directional primitive has (_directional.py:
    the saves, then for a model with an event its state at the event's time held fixed) of
    the solve ``primals`` describes. ``recording`` (N, row bytes): what the value's solve
    recorded (``record``; possibly no bytes), swept back for one cotangent; several (jacrev)
    solve forward again rather than copy the rows D times."""
    y0, params, shared, t_span, weights, tstops, first_step = primals
    d = ct.shape[0]
    n_traj, n = y0.shape
    o = problem.options
    # D cotangents are D copies of the ensemble in one call (rows keep serving consecutive
    # trajectories when tiled).
    tiled = [jnp.tile(x, (d,) + (1,) * (x.ndim - 1))
             for x in (y0, params, shared, t_span, weights, tstops, first_step)]
    atol = jnp.full(tiled[0].shape, o.atol, y0.dtype)
    # The forward solve in the SIMD lanes where the plain solve would run there
    # (adjoint_lanes.hpp), and the backward sweeps too where they can (backward_lanes).
    build = _build_of(problem)
    progress = np.full((1,), -1, np.int32)
    if d > 1:
        recording = np.zeros((d * n_traj, 0), np.uint8)
    out = adjoint_p.bind(*tiled[:5], atol, *tiled[5:], progress,
                         ct.reshape(d * n_traj, -1).astype(y0.dtype), recording, build=build,
                         options=o)
    y0_bar = out[6].reshape(d, n_traj, n)
    params_bar = out[7].reshape(d, n_traj, -1)
    shared_bar = out[8].reshape(d, shared.shape[0], -1)
    return y0_bar, params_bar, shared_bar



