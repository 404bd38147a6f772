"""The tangent of a solve along given directions: a primitive linear in its tangent operands.

``directional_p`` maps tangents (dy0, dparams, dshared), each with a leading axis of M
directions, to the tangents of the solution (M, N, n_save, n). Forward mode (jvp, jacfwd)
evaluates it as ONE joint solve with M sensitivity columns (``directional_sensitivity.hpp``):
column k starts from dy0[k] and is forced by J_p · dθ_k, so a table of 3 000 entries built from
3 scalars costs 3 columns. Under ``vmap`` over the directions (what jacfwd does) the batch
becomes more columns of the same solve.

Reverse mode (grad, vjp, jacrev) transposes it: the transpose integrates one column per entry
of the inputs being differentiated (S = ∂y/∂θ, ``sensitivity.hpp``) and contracts S with the
cotangent; its cost grows with the number of differentiated entries, not of directions. Where
``_adjoint.chosen`` says so (``adjoint=True``, or ``"auto"`` beyond the measured crossover) it
runs the adjoint instead, from the recording the value's solve made where there is one (the
``recording`` operand).

Operands (per call, leading batch dimensions folded in by the batching rule):
  y0 (N, n), params (N, n_own), shared (R, n_shared), t_span (R_t, n_save), weights (N, n),
  tstops (R_s, k), first_step (N, 1), recording (N, row bytes) uint8, dy0 (M, N, n),
  dparams (M, N, n_own), dshared (M, R, n_shared);
R, R_t and R_s divide N: rows of shared parameters, save times and stops serve consecutive
trajectories. The result is (M, N, K): each trajectory's K = n_save · n_saved tangents of what
its saves record (the state, or the model's save), flattened, followed for a model with an event
by the n tangents of the state at the event time held fixed (``_events`` adds the time's own
part).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

from shoal._manual_axes import result_aval, varying_axes
from shoal.ode import _adjoint, _partitioning
from shoal.ode._build import JOINT_STACK_BUDGET
from shoal.ode._primitive import second_order_jvp
from shoal.ode._status import Status

directional_p = Primitive("shoal_ode_directional")


# The primal operands: (y0, params, shared, t_span, weights, tstops, first_step, recording);
# recording (uint8, a row per trajectory, possibly empty) is what the value's solve recorded for
# the adjoint to sweep back (_adjoint.record), only read by the transpose.
N_PRIMALS = 8


def directional(problem, given, primals, dy0, dparams, dshared):
    """dys (M, N, n_save, n_saved): the solution's tangent along each of the M directions.
    ``given`` says which of (dy0, dparams, dshared) are tangents at all (the others are
    zeros)."""
    return directional_p.bind(*primals, dy0, dparams, dshared, problem=problem,
                              given=tuple(given))


def tangent_size(problem, n_save: int) -> int:
    """K: the tangents per trajectory and direction (see the module docstring)."""
    model = problem.model
    return n_save * model.n_saved + (model.n_vars if model.has_event else 0)


@directional_p.def_abstract_eval
def _abstract_eval(y0, params, shared, t_span, weights, tstops, first_step, recording, dy0,
                   dparams, dshared, *, problem, given):
    varying = varying_axes(
        (y0, params, shared, t_span, weights, tstops, first_step, recording, dy0, dparams,
         dshared))
    # (M, N, K): the directions in front of the ensemble (no explicit sharding kept).
    shape = (dy0.shape[0], y0.shape[0], tangent_size(problem, t_span.shape[-1]))
    return result_aval(y0, shape, y0.dtype, varying, 0)


def _error_components(problem, n: int) -> int:
    # Without sensitivity error control the norm covers the state alone, so a joint solve takes
    # the plain solve's steps.
    return 0 if problem.options.sens_error_control else n


def _joint_weights(weights, m: int):
    """A sensitivity component is weighted like its state component (0 still drops it)."""
    return jnp.tile(weights, (1, 1 + m))


# Sensitivity tolerances, as CVODES scales them: column k of S = ∂y/∂θ_k gets the absolute
# tolerance atol / p̄_k with p̄_k = |θ_k| (1 where θ_k is 0 or not finite), so p̄_k S_k, the change
# of y for a relative change of θ_k, is held to y's own atol. Unscaled, a y0 entry of 5e-13 (a
# trace abundance) had its column held to atol = 1e-16 while it is of order 1: every step was
# rejected. A tangent direction d (a JVP) is the column of the entry it moves most in relative
# terms: atol · max_j |d_j| / p̄_j.


def _magnitudes(theta):
    """p̄: |θ|, with 1 where θ is 0 or not finite."""
    size = jnp.abs(theta)
    return jnp.where((size > 0) & jnp.isfinite(size), size, jnp.ones((), size.dtype))


def _joint_atol(problem, n: int, column_atol):
    """(N, n (1 + m)) absolute tolerances of a joint state: the options' atol for y, then
    column_atol (N, m) for every component of each column (or the sens_atol option)."""
    o = problem.options
    n_traj, m = column_atol.shape
    if o.sens_atol is not None:
        column_atol = jnp.full_like(column_atol, o.sens_atol)
    state = jnp.full((n_traj, n), o.atol, column_atol.dtype)
    columns = jnp.broadcast_to(column_atol[:, :, None], (n_traj, m, n)).reshape(n_traj, m * n)
    return jnp.concatenate([state, columns], axis=1)


def _rows(x, n_traj: int):
    """(R, k) or (k,) rows serving consecutive trajectories -> (N, k)."""
    if x.shape[-1] == 0:
        return jnp.zeros((n_traj, 0), x.dtype)
    x = x.reshape(-1, x.shape[-1])
    return jnp.repeat(x, n_traj // x.shape[0], axis=0)


def _entries(primals, widths):
    """(N, m): each trajectory's differentiated entries θ of y0, own and shared parameters."""
    y0, params, shared = primals[:3]
    blocks = (y0, params, _rows(shared, y0.shape[0]))
    return jnp.concatenate([x.astype(y0.dtype) for x, w in zip(blocks, widths, strict=True) if w],
                           axis=1)


def _columns(x):
    """(M, rows, k) -> (rows, M k): direction-major, as the joint state and parameters are."""
    m, rows, k = x.shape
    return jnp.moveaxis(x, 0, 1).reshape(rows, m * k)


# A joint solve holds, per trajectory, its parameters with their dual numbers (about 4 numbers
# per parameter and column with the Rosenbrock engine's nested duals) and some 24 joint states
# on the stack; more columns than this budget allows are integrated in chunks (and in the SIMD
# lanes only while W trajectories fit it: _build.for_ensemble).
STACK_BUDGET = JOINT_STACK_BUDGET


def _max_columns(n: int, n_params: int, itemsize: int) -> int:
    return max(1, STACK_BUDGET // (itemsize * (4 * n_params + 24 * n)) - 1)


def widths_of(wanted, y0, params, shared) -> list[int]:
    """Columns a unit-column sensitivity has for y0, the own and the shared parameters."""
    sizes = (y0.shape[-1], params.shape[-1], shared.shape[-1])
    return [size if w else 0 for w, size in zip(wanted, sizes, strict=True)]


def unit_sensitivities(problem, primals, widths, progress=None):
    """(ys, S (N, n_save, m, n_saved) = ∂ys/∂θ, stats, event_time, event_state (N, n (1 + m))):
    one joint solve with a column per entry (sensitivity.hpp) of y0, the own and the shared
    parameters, as ``widths`` says; event_state holds the event's y and its sensitivities."""
    y0, params, shared, t_span, weights, tstops, first_step = primals
    n_traj, n = y0.shape
    n_out = problem.model.n_saved
    m = sum(widths)
    blocks = [y0]
    if widths[0]:
        blocks.append(jnp.broadcast_to(jnp.eye(n, dtype=y0.dtype).reshape(1, n * n),
                                       (n_traj, n * n)))
    if m - widths[0]:
        blocks.append(jnp.zeros((n_traj, n * (m - widths[0])), y0.dtype))
    sens = (bool(widths[0]), problem.parameter_columns(bool(widths[1]), bool(widths[2])))
    column_atol = problem.options.atol / _magnitudes(_entries(primals, widths))
    ys_joint, *stats, event_time, event_state = problem.run(
        jnp.concatenate(blocks, axis=1), params, shared, t_span, _joint_weights(weights, m),
        tstops, first_step, sens=sens, error_components=_error_components(problem, n),
        progress=progress, atol=_joint_atol(problem, n, column_atol))
    S = _reached(ys_joint[..., n_out:].reshape(n_traj, ys_joint.shape[1], m, n_out), stats[2])
    return ys_joint[..., :n_out], S, stats, event_time, event_state


def _reached(tangents, status):
    """Tangents (N, ...) with those of saves after a terminal event (NaN, never reached) set to
    0, so a cotangent of 0 there contributes 0, not NaN, to a gradient; the values of those
    saves stay NaN. A failed trajectory's stay NaN: its gradient is NaN, never silently
    partial, and its status says why."""
    ended = (status == Status.EVENT).reshape(-1, *(1,) * (tangents.ndim - 1))
    return jnp.where(ended & jnp.isnan(tangents), jnp.zeros((), tangents.dtype), tangents)


def _flat_unit_sensitivities(problem, primals, widths):
    """(N, m, K): unit_sensitivities' columns as the flattened tangents of every trajectory."""
    _, S, _, _, event_state = unit_sensitivities(problem, primals, widths)
    n_traj, n_save, m, n_out = S.shape
    parts = [jnp.moveaxis(S, 2, 1).reshape(n_traj, m, n_save * n_out)]
    if problem.model.has_event:
        parts.append(event_state[:, problem.n_vars:].reshape(n_traj, m, problem.n_vars))
    return jnp.concatenate(parts, axis=2)


def unit_fits(problem, y0, widths) -> bool:
    """Whether one joint solve can integrate a column per entry within the stack budget."""
    return sum(widths) <= _max_columns(y0.shape[-1], problem.n_params, y0.dtype.itemsize)


def _one_directional_solve(problem, y0, params, shared, t_span, weights, tstops, first_step,
                           dy0, dparams, dshared):
    """(M, N, K): one joint solve along M directions (directional_sensitivity.hpp)."""
    m, n_traj, n = dy0.shape
    n_out = problem.model.n_saved
    z0 = jnp.concatenate([y0, _columns(dy0)], axis=1)
    own = jnp.concatenate([params, _columns(dparams)], axis=1)
    joint_shared = jnp.concatenate([shared, _columns(dshared)], axis=1)
    # Each direction's relative size, max_j |d_j| / p̄_j over the entries it moves: (N, M).
    relative = [jnp.abs(d) / _magnitudes(x)[None] for d, x in
                ((dy0, y0), (dparams, params), (_per_trajectory(dshared, n_traj),
                                                 _rows(shared, n_traj))) if d.shape[-1]]
    size = jnp.max(jnp.concatenate(relative, axis=2), axis=2).T
    size = jnp.where((size > 0) & jnp.isfinite(size), size, jnp.ones((), size.dtype))
    out = problem.run(z0, own, joint_shared, t_span, _joint_weights(weights, m), tstops,
                      first_step, directions=m, error_components=_error_components(problem, n),
                      atol=_joint_atol(problem, n, problem.options.atol * size.astype(y0.dtype)))
    ys_joint, status, event_state = out[0], out[3], out[5]
    n_save = ys_joint.shape[1]
    dys = jnp.moveaxis(_reached(ys_joint[..., n_out:].reshape(n_traj, n_save, m, n_out), status),
                       2, 0)
    parts = [dys.reshape(m, n_traj, n_save * n_out)]
    if problem.model.has_event:
        parts.append(jnp.moveaxis(event_state[:, n:].reshape(n_traj, m, n), 1, 0))
    return jnp.concatenate(parts, axis=2)


def _chunked(problem, y0, m: int, directions_of, consume):
    """consume(j, solution's tangents along directions [j c, (j + 1) c)) for every chunk of at
    most c directions that fits the stack (the last one zero-padded, so one compiled kernel
    serves all), stacked over chunks. directions_of(j, c) -> (dy0, dparams, dshared)."""
    c = min(m, _max_columns(y0.shape[-1], problem.n_params, y0.dtype.itemsize))
    n_chunks = -(-m // c)

    def chunk(j):
        return consume(j, c, _one_directional_solve(problem, *directions_of(j, c)))

    if n_chunks == 1:
        return chunk(0)[None]
    return jax.lax.map(chunk, jnp.arange(n_chunks))


def _per_trajectory(dshared, n_traj: int):
    """(M, R, k) shared-row tangents -> (M, N, k): row r serves N/R consecutive trajectories."""
    return jnp.repeat(dshared, n_traj // dshared.shape[1], axis=1)


def _evaluate(y0, params, shared, t_span, weights, tstops, first_step, recording, dy0, dparams,
              dshared, *, problem, given):
    m, n_traj, n = dy0.shape
    primals = (y0, params, shared, t_span, weights, tstops, first_step)
    widths = widths_of(given, y0, params, shared)
    entries = sum(widths)
    if entries == 0:  # the only tangents are of empty inputs
        return jnp.zeros((m, n_traj, tangent_size(problem, t_span.shape[-1])), y0.dtype)
    if m >= entries and unit_fits(problem, y0, widths):
        # As many directions as differentiated entries (jacfwd of a small problem): a column
        # per entry, contracted with every direction, is the cheaper joint solve.
        S = _flat_unit_sensitivities(problem, primals, widths)
        tangents = [dy0, dparams, _per_trajectory(dshared, n_traj)]
        theta = jnp.concatenate([d for d, w in zip(tangents, widths, strict=True) if w], axis=2)
        return jnp.einsum("nck,dnc->dnk", S, theta.astype(y0.dtype))
    pad = -m % min(m, _max_columns(n, problem.n_params, y0.dtype.itemsize))
    padded = [jnp.concatenate([d, jnp.zeros((pad, *d.shape[1:]), d.dtype)]) for d in
              (dy0, dparams, dshared)]

    def directions_of(j, c):
        return (*primals, *(jax.lax.dynamic_slice_in_dim(d, j * c, c) for d in padded))

    out = _chunked(problem, y0, m, directions_of, lambda j, c, dys: dys)
    return out.reshape(-1, *out.shape[2:])[:m]


directional_p.def_impl(_evaluate)
mlir.register_lowering(directional_p, mlir.lower_fun(_evaluate, multiple_results=False))
# Its lowering holds ensemble solves, partitioned at lowering time (_partitioning.py).
_partitioning.require_devices_when_lowering(directional_p)


def _batch(args, dims, *, problem, given):
    """Batched directions become more columns of the same solve; a batch of the primal inputs
    becomes more trajectories (with their own rows of shared parameters and save times)."""
    size = next(x.shape[d] for x, d in zip(args, dims, strict=True) if d is not None)

    def front(x, d):
        return jnp.broadcast_to(x, (size, *x.shape)) if d is None else jnp.moveaxis(x, d, 0)

    if dims[N_PRIMALS - 1] is None and any(d is not None for d in dims[:N_PRIMALS]):
        # One recording for a batch of problems would be copied for each: none instead (the
        # transpose solves forward again).
        args, dims = list(args), list(dims)
        args[N_PRIMALS - 1] = np.zeros((size, args[N_PRIMALS - 1].shape[0], 0), np.uint8)
        dims[N_PRIMALS - 1] = 0
    primals, tangents = args[:N_PRIMALS], args[N_PRIMALS:]
    if all(d is None for d in dims[:N_PRIMALS]):
        moved = [front(x, d) for x, d in zip(tangents, dims[N_PRIMALS:], strict=True)]
        merged = [x.reshape(size * x.shape[1], *x.shape[2:]) for x in moved]
        out = directional(problem, given, primals, *merged)
        return out.reshape(size, -1, *out.shape[1:]), 0
    moved = [front(x, d) for x, d in zip(args, dims, strict=True)]
    # primals (B, rows, k) -> (B rows, k); tangents (B, M, rows, k) -> (M, B rows, k)
    flat_primals = [x.reshape(size * x.shape[1], x.shape[2]) for x in moved[:N_PRIMALS]]
    flat_tangents = [jnp.moveaxis(x, 0, 1).reshape(x.shape[1], size * x.shape[2], x.shape[3])
                     for x in moved[N_PRIMALS:]]
    out = directional(problem, given, flat_primals, *flat_tangents)  # (M, B N, K)
    m, _, k = out.shape
    return out.reshape(m, size, -1, k), 1


batching.primitive_batchers[directional_p] = _batch


def _transpose(ct, y0, params, shared, t_span, weights, tstops, first_step, recording, dy0,
               dparams, dshared, *, problem, given):
    """Cotangents of the directions: S^T ct, with S integrated for the differentiated inputs,
    or by the adjoint (from the value's recording where there is one)."""
    primals = (y0, params, shared, t_span, weights, tstops, first_step)
    for x in (*primals, recording):
        if ad.is_undefined_primal(x):
            raise NotImplementedError("shoal.ode.solve: the tangent map is linear in the "
                                      "tangents only")
    wanted = [ad.is_undefined_primal(x) for x in (dy0, dparams, dshared)]
    avals = [x.aval if ad.is_undefined_primal(x) else x for x in (dy0, dparams, dshared)]
    if type(ct) is ad.Zero:
        return [None] * N_PRIMALS + [jnp.zeros(a.shape, a.dtype) if w else None
                                     for a, w in zip(avals, wanted, strict=True)]
    n_traj = y0.shape[0]
    widths = widths_of(wanted, y0, params, shared)
    entries = sum(widths)
    if entries == 0:
        return [None] * N_PRIMALS + [jnp.zeros(a.shape, a.dtype) if w else None
                                     for a, w in zip(avals, wanted, strict=True)]
    if _adjoint.chosen(problem, entries, n_traj):
        cotangents = _adjoint.adjoint_cotangents(problem, primals, ct, recording)
        return [None] * N_PRIMALS + [c.astype(a.dtype) if w else None
                                     for c, a, w in zip(cotangents, avals, wanted, strict=True)]
    if unit_fits(problem, y0, widths):
        S = _flat_unit_sensitivities(problem, primals, widths)
        cts = jnp.einsum("nck,dnk->dnc", S, ct)  # (D, N, entries)
    else:
        # Too many entries for one joint solve: the same columns as directions e_k, in chunks.
        cts = _basis_cotangents(problem, primals, widths, ct)
    starts = [0, widths[0], widths[0] + widths[1]]
    out = []
    for w, aval, start, width in zip(wanted, avals, starts, widths, strict=True):
        if not w:
            out.append(None)
        elif width == 0:
            out.append(jnp.zeros(aval.shape, aval.dtype))
        else:
            out.append(cts[..., start:start + width].astype(aval.dtype))
    if widths[2]:  # a shared entry's cotangent sums the trajectories its row serves
        rows = shared.shape[0]
        out[2] = out[2].reshape(out[2].shape[0], rows, n_traj // rows, -1).sum(axis=2)
    return [None] * N_PRIMALS + out


def _basis_cotangents(problem, primals, widths, ct):
    """(D, N, entries): ct (D cotangents) contracted with the tangents along θ_e for every
    wanted entry e, the columns integrated as directional solves along the unit directions,
    chunk by chunk."""
    y0, params, shared = primals[:3]
    n_traj = y0.shape[0]
    entries = sum(widths)
    offsets = np.cumsum([0, *widths])[:3]

    def directions_of(j, c):
        k = j * c + jnp.arange(c)  # the entries this chunk integrates
        blocks = []
        for x, offset, width, rows in zip((y0, params, shared), offsets, widths,
                                          (n_traj, n_traj, shared.shape[0]), strict=True):
            # An input that is not differentiated has no entries: its tangent is 0 in every
            # direction (a unit block here would add its cotangent to the first entries).
            unit = (k[:, None] == offset + jnp.arange(x.shape[-1])[None, :]) & (width > 0)
            blocks.append(jnp.broadcast_to(unit.astype(y0.dtype)[:, None, :],
                                           (c, rows, x.shape[-1])))
        return (*primals, *blocks)

    def consume(j, c, dys):  # dys (c, N, K) -> (D, N, c)
        return jnp.einsum("cnk,dnk->dnc", dys, ct)

    per_chunk = _chunked(problem, y0, entries, directions_of, consume)  # (chunks, D, N, c)
    cts = jnp.moveaxis(per_chunk, 0, 2)
    return cts.reshape(*cts.shape[:2], -1)[..., :entries]


ad.primitive_transposes[directional_p] = _transpose


ad.primitive_jvps[directional_p] = second_order_jvp
