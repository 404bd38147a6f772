"""Differentiation of ensemble solves by continuous forward sensitivities.

``solve_ensemble`` is a ``jax.custom_jvp`` function with ``symbolic_zeros=True``: a plain call runs
the plain kernel and nothing else. A JVP with few differentiated entries (at most
``UNIT_COLUMNS``: y0's n, each own or shared parameter entry whose tangent is not a symbolic
zero) integrates the joint system [y, S] with a column per entry (y0: starting from I,
parameters: from 0) and returns ``dy = S · dθ``, a linear contraction that JAX transposes for
reverse mode: one joint solve serves jvp, jacfwd and grad alike. With more entries (a table),
the JVP is the plain solve plus ``_directional.directional``: a primitive linear in the
tangents, which forward mode evaluates with one column per tangent DIRECTION and reverse mode
transposes into columns per entry (in chunks). A shared parameter's tangent is the same for every
trajectory, so its cotangent sums the ensemble.

Both paths also carry the times' tangents (``_times``: a start time's enters as a tangent of y0,
a save time's is added to its save) and, for a model with an event, the event's (``_events``:
the implicit-function rule on the joint solve's state at the event). ``tstops`` are not
differentiable; error weights, first steps and the progress slot only select steps or count.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero

from shoal.ode import _adjoint, _codegen, _mass, _primitive, _times
from shoal.ode._build import ModelBuild
from shoal.ode._directional import directional, unit_fits, unit_sensitivities, widths_of
from shoal.ode._events import event_tangents
from shoal.ode._kernel_source import Variant
from shoal.ode._options import SolveOptions
from shoal.ode._user_functions import UserFunctions


@dataclass(frozen=True)
class EnsembleProblem:
    """The static half of one solve: the generated model and the options (hashable: it keys
    jit caches). ``options.sparsity`` is resolved (None or a SparsityPattern)."""

    model: _codegen.GeneratedModel
    options: SolveOptions
    functions: UserFunctions | None = None  # f & co. in JAX, for the rules that need them

    @property
    def n_vars(self) -> int:
        return self.model.n_vars

    @property
    def n_params(self) -> int:
        return self.model.n_params

    def run(self, y0, params, shared, t_span, weights, tstops, first_step, sens=None,
            directions=0, error_components=0, progress=None, atol=None):
        """One kernel call. ``atol``: each component's absolute tolerance, (N, n) like y0
        (default: the options' atol everywhere; a joint solve's sensitivity rows pass theirs)."""
        o = self.options
        # lanes=0 is resolved at lowering (_build.for_ensemble), where the ensemble's size is known.
        variant = Variant.of(o.method, o.lu_precision, o.sparsity, o.ordering, sens, directions,
                             o.lanes, o.mass)
        if atol is None:
            atol = jnp.full(y0.shape, o.atol, y0.dtype)
        return _primitive.ensemble_solve(y0, params, shared, t_span, weights, atol, tstops,
                                         first_step, progress,
                                         build=ModelBuild(self.model, variant), options=o,
                                         error_components=error_components)

    def parameter_columns(self, with_own: bool, with_shared: bool):
        """A unit-column sensitivity's parameter columns: p = [own, shared], so any choice is a
        range (True: all of them, False: none)."""
        n_own, n_params = self.model.n_own, self.n_params
        begin = 0 if with_own else n_own
        end = n_params if with_shared else n_own
        if begin == end:
            return False
        return True if (begin, end) == (0, n_params) else (begin, end)


def _solve_ensemble(problem: EnsembleProblem, y0, params, shared, t_span, weights, tstops,
                    first_step, progress):
    return problem.run(y0, params, shared, t_span, weights, tstops, first_step,
                       progress=progress)


solve_ensemble = jax.custom_jvp(_solve_ensemble, nondiff_argnums=(0,))

# Up to this many differentiated entries, one joint solve with a column per entry serves every
# JVP (its tangent is a contraction); beyond, a column per tangent direction.
UNIT_COLUMNS = 64


def _solve_ensemble_jvp(problem: EnsembleProblem, primals, tangents):
    # The progress slot (_progress.py) only counts the solve that computes the primal values.
    *primals, progress = primals
    y0, params, shared, t_span, weights, tstops, first_step = primals
    # Error weights and first steps only select steps.
    dy0, dparams, dshared, dt_span, _, dtstops, _, _ = tangents
    if not isinstance(dtstops, SymbolicZero):
        raise NotImplementedError(
            "differentiating shoal.ode.solve with respect to tstops is not supported: the "
            "solution's derivative with respect to the time of a discontinuity (a dose or a "
            "switch) is not computed, and a jnp.where on t inside f contributes none either. "
            "Only if the stops do not depend on what you differentiate, pass them through "
            "jax.lax.stop_gradient")
    n_traj = y0.shape[0]
    timed = not isinstance(dt_span, SymbolicZero)
    if problem.options.mass is not None and timed and problem.model.saved_shape is not None:
        raise NotImplementedError(
            "differentiating shoal.ode.solve with a mass matrix and a save_fn with respect to "
            "t_span is not supported (the saves' rates would need dy/dt of the DAE inside the "
            "kernel); pass t_span through jax.lax.stop_gradient, or save the state and apply "
            "the save function in JAX")
    def rate():  # dy/dt along the solution, for the rules of times and events (traced on use)
        return _mass.rate_function(problem.functions.pure("rhs"), problem.options.mass)

    if timed:
        rhs = rate()
        p_full = _times.parameters(params, shared, n_traj)
        shift = _times.start_tangent(rhs, y0, t_span, p_full, dt_span)
        dy0 = shift if isinstance(dy0, SymbolicZero) else dy0 + shift
    given = [not isinstance(d, SymbolicZero) for d in (dy0, dparams, dshared)]
    widths = widths_of(given, y0, params, shared[None])
    if not any(widths):
        out = problem.run(*primals, progress=progress)
        return out, _zero_tangents(out)
    # Where reverse mode is to run the adjoint (_adjoint.py), the tangent is the directional
    # primitive, whose transpose is then the adjoint rather than a column per entry.
    adjoint = _adjoint.chosen(problem, sum(widths), n_traj)
    if not adjoint and sum(widths) <= UNIT_COLUMNS and unit_fits(problem, y0, widths):
        ys, S, stats, event_time, event_state = unit_sensitivities(problem, primals, widths,
                                                                   progress)
        per_trajectory = [dy0, dparams, dshared if not widths[2] else
                          jnp.broadcast_to(dshared, (n_traj, shared.shape[-1]))]
        dtheta = jnp.concatenate([d.astype(y0.dtype) for d, w in zip(per_trajectory, widths,
                                                                     strict=True) if w], axis=1)
        n = y0.shape[1]
        out = (ys, *stats, event_time, event_state[:, :n * event_time.shape[1]])
        tangents = list(_zero_tangents(out))
        tangents[0] = jnp.einsum("nsci,nc->nsi", S, dtheta)
        if problem.model.has_event:
            S_event = event_state[:, n:].reshape(n_traj, -1, n)
            tangents[4:] = event_tangents(
                problem.functions, event_time, out[5], jnp.einsum("nci,nc->ni", S_event, dtheta),
                _times.parameters(params, shared, n_traj),
                _parameter_tangents(dparams, dshared, params, shared, n_traj), rate())
    else:
        # The adjoint's own solve makes the value and records it to sweep back from.
        recorded = _adjoint.record(problem, primals, progress) if adjoint else None
        if recorded is None:
            out = problem.run(*primals, progress=progress)
            recording = np.zeros((n_traj, 0), np.uint8)
        else:
            out, recording = recorded

        def one_direction(d, like):  # a symbolic zero becomes zeros, not a column to integrate
            return (d.astype(like.dtype) if not isinstance(d, SymbolicZero)
                    else jnp.zeros_like(like))[None]

        flat = directional(problem, given, (y0, params, shared[None], *primals[3:], recording),
                           one_direction(dy0, y0), one_direction(dparams, params),
                           one_direction(dshared, shared)[:, None])[0]
        ys = out[0]
        saves = ys.shape[1] * ys.shape[2]
        tangents = [flat[:, :saves].reshape(ys.shape), *_zero_tangents(out)[1:]]
        if problem.model.has_event:
            tangents[4:] = event_tangents(
                problem.functions, out[4], out[5], flat[:, saves:],
                _times.parameters(params, shared, n_traj),
                _parameter_tangents(dparams, dshared, params, shared, n_traj), rate())
    if timed and problem.model.saved_shape is None:
        tangents[0] = tangents[0] + _times.save_tangent(
            rate(), out[0], t_span,
            _times.parameters(params, shared, n_traj), dt_span)
    elif timed:  # the saves record save_fn: its rate along the solution, from one more solve
        tangents[0] = tangents[0] + _times.save_rates(problem, primals) * _times.rows(
            dt_span, n_traj)[:, :, None].astype(out[0].dtype)
    return out, tuple(tangents)


def _parameter_tangents(dparams, dshared, params, shared, n_traj):
    """(N, n_params): the tangent of every trajectory's full p (symbolic zeros as zeros)."""
    own = jnp.zeros_like(params) if isinstance(dparams, SymbolicZero) else dparams
    common = jnp.zeros_like(shared) if isinstance(dshared, SymbolicZero) else dshared
    return _times.parameters(own.astype(params.dtype), common.astype(shared.dtype), n_traj)


def _zero_tangents(out):
    ys, accepted, rejected, status, event_time, event_state = out
    # Symbolic zeros for the integer outputs: they carry the primal's type (its varying manual
    # axes under shard_map), as a float0 array built here would not.
    ints = jax.custom_derivatives.zero_from_primal((accepted, rejected, status),
                                                   symbolic_zeros=True)
    return (jnp.zeros_like(ys), *ints, jnp.zeros_like(event_time), jnp.zeros_like(event_state))


solve_ensemble.defjvp(_solve_ensemble_jvp, symbolic_zeros=True)
