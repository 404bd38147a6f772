"""Differentiable times: the tangents of a solve with respect to ``t_span``.

Used by the solve's JVP rule (``_differentiation``) when t_span's tangent is not a symbolic zero:

- a save time moves its save along the solution: ``d ys_i += f(ys_i, t_i, p) dt_i``
  (:func:`save_tangent`);
- the start time moves the whole solution: starting at ``t_0 + dt_0`` from ``y_0`` is starting at
  ``t_0`` from ``y_0 − f(y_0, t_0, p) dt_0``, so ``dy_0 += −f(y_0, t_0, p) dt_0``
  (:func:`start_tangent`) and the sensitivities carry it to every save and to an event. The first
  save gets ``−f dt_0`` from there and ``+f dt_0`` from its own save time: 0, as
  ``ys[:, 0] == y0`` says.

f is evaluated in JAX through ``_user_functions`` (closure-free, as the kernel reads it). With a
``save_fn`` h the saves record h, whose rate along the solution, ``h_y f + h_t``, needs the
state the kernel did not keep: :func:`save_rates` compiles that rate as the save function of a
second model (the same f, jump and event) and solves the same trajectories once more.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def parameters(own, shared, n_traj):
    """(N, n_params): each trajectory's full p (own, then shared)."""
    own = jnp.broadcast_to(own, (n_traj, own.shape[-1]))
    return jnp.concatenate([own, jnp.broadcast_to(shared, (n_traj, shared.shape[-1]))], axis=1)


def rows(x, n_traj):
    """(R, k) rows serving consecutive trajectories -> (N, k)."""
    return jnp.repeat(x, n_traj // x.shape[0], axis=0)


def start_tangent(rhs, y0, t_span, p, dt_span):
    """−f(y0, t_0, p) dt_0, (N, n): y0 (N, n), t_span (R_t, n_save), p (N, n_params)."""
    n_traj = y0.shape[0]
    f0 = jax.vmap(rhs)(y0, rows(t_span, n_traj)[:, 0], p)
    return -f0 * rows(dt_span, n_traj)[:, :1].astype(y0.dtype)


def save_rates(problem, primals):
    """(N, n_save, n_saved): d/dt h(y(t), t, p) at every save, from a plain solve of the same
    trajectories whose save function is that rate (problem's model has a save)."""
    # Imported here: _differentiation imports this module.
    from shoal.ode._codegen import ModelFunction, generate
    from shoal.ode._differentiation import EnsembleProblem
    from shoal.ode._params import ParamLayout

    y0, params, shared, t_span, weights, tstops, first_step = primals
    functions = problem.functions
    rhs, save = functions.pure("rhs"), functions.pure("save")

    def rate(y, t, p):
        return jax.jvp(lambda y, t: save(y, t, p), (y, t), (rhs(y, t, p), jnp.ones_like(t)))[1]

    # Every function on the model's full p, so the second model needs no closure of its own.
    extras = tuple(ModelFunction(e.kind, rate if e.kind == "save" else functions.pure(e.kind))
                   for e in functions.extras)
    n_params = problem.model.n_params
    model, closure = generate(rhs, problem.n_vars, ParamLayout.flat(n_params, y0.dtype),
                              y0.dtype, extras)
    assert not closure, "the rate model reads everything from p"
    n_traj = y0.shape[0]
    rates = EnsembleProblem(model, problem.options).run(
        y0, parameters(params, shared, n_traj), jnp.zeros((0,), y0.dtype), t_span, weights,
        tstops, first_step)[0]
    return jnp.where(jnp.isnan(rates), 0.0, rates)  # saves never reached: 0, as elsewhere


def save_tangent(rhs, ys, t_span, p, dt_span):
    """f(ys_i, t_i, p) dt_i, (N, n_save, n); 0 for a save never reached (NaN), as its other
    tangents (``_directional._reached``)."""
    n_traj = ys.shape[0]
    reached = ~jnp.isnan(ys)
    f_at_saves = jax.vmap(jax.vmap(rhs, in_axes=(0, 0, None)))(
        jnp.where(reached, ys, 0.0), rows(t_span, n_traj), p)
    f_at_saves = jnp.where(reached, f_at_saves, 0.0)
    return f_at_saves * rows(dt_span, n_traj)[:, :, None].astype(ys.dtype)
