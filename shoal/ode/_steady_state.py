"""``shoal.ode.steady_state``: run each member to where ``f`` vanishes, differentiated by the
implicit-function theorem.

Systems-biology fits pre-equilibrate (PEtab): each condition starts from the steady state of the
model under other inputs. Here each member is integrated from y0 (``solve`` with ``t_span``
ending at inf) until a terminal event finds it steady — the weighted RMS of f falls below
``atol + rtol · RMS(y)``, diffrax's criterion — then polished by Newton's method on f(y*) = 0,
so y* is the root to rounding rather than to the event's tolerance. Its derivative is not taken
through the trajectory: at a root, f(y*(θ), θ) = 0 gives

    dy*/dθ = −J_y⁻¹ ∂f/∂θ,

one small linear solve per member, exact at the root and independent of y0 (which only selects
the basin). J_y must be nonsingular there: a model with conservation laws has a singular J_y
(its steady state depends on y0 through the conserved totals) and gets NaN from this rule —
differentiate ``solve`` with ``t_span`` ending at inf and the steady-state event instead, which
follows the trajectory.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from shoal.ode._options import Event
from shoal.ode._solve import solve, split_params
from shoal.ode._status import Status

NEWTON_STEPS = 4  # from within the event's tolerance, Newton converges to rounding in 2-3


def steady_state(f, y0, params=None, *, t0=0.0, params_axes=None, return_stats=False,
                 **options):
    """The steady state of ``dy/dt = f(y, t, p)`` reached from ``y0``, for every member.

    Parameters
    ----------
    f, y0, params, params_axes
        As for :func:`shoal.ode.solve` (f may depend on t only if it has a steady state).
    t0 : float
        The start time.
    return_stats : bool
        Also return ``{"accepted", "rejected", "status", "time"}``: the steps taken, the
        status (``Status.EVENT`` where a steady state was reached), and the time at which the
        criterion held (``inf`` where y0 was already steady).
    **options
        :func:`shoal.ode.solve`'s options; ``rtol``/``atol`` also set the steady-state
        criterion ``RMS(f) ≤ atol + rtol · RMS(y)``. ``event`` is taken by the criterion. Keep
        the default ``method="rodas5p"``: an explicit method near a steady state steps at its
        stability limit, where its error-sized wobble in y keeps RMS(f) above the criterion
        (Tsit5 on the tests' model: 100 000 steps, never steady).

    Returns
    -------
    y_star : array ``(N, n)``
        The steady states, NaN for a member that did not reach one (its status says why).
        Differentiable with respect to ``params`` by the implicit-function theorem (its
        derivative with respect to ``y0`` is 0).
    """
    if "event" in options:
        raise TypeError("steady_state() sets its own event (the steady-state criterion); "
                        "use solve(..., t_span ending at inf, event=...) for another one")
    rtol, atol = options.get("rtol", 1e-8), options.get("atol", 1e-10)

    def criterion(y, t, p):  # crosses 0 downwards when RMS(f) falls to atol + rtol RMS(y)
        return jnp.log(_rms(f(y, t, p))) - jnp.log(atol + rtol * _rms(y))

    y0 = jnp.asarray(y0)
    frozen_y0 = jax.lax.stop_gradient(y0)
    frozen_params = jax.lax.stop_gradient(params)
    t_span = jnp.asarray([t0, np.inf], dtype=jnp.result_type(frozen_y0, float))
    ys, stats = solve(f, frozen_y0, t_span, frozen_params, params_axes=params_axes,
                      event=Event(criterion, terminal=True, direction=-1), return_stats=True,
                      **options)
    found = jnp.isfinite(stats["event_time"])
    # Never crossed: steady from the start (f = 0 at y0), or failed (the status says so).
    approach = jnp.where(found[:, None], stats["event_state"], ys[:, -1])
    dtype = approach.dtype
    split = split_params(f, y0.astype(dtype), params, params_axes, dtype)  # as solve read it
    own = jnp.broadcast_to(split.own, (approach.shape[0], split.own.shape[-1]))
    y_star = _polished(f, split.layout, float(t0), approach, own, split.shared)
    rhs = _member_rhs(f, split.layout, float(t0))
    residual = jax.vmap(rhs, in_axes=(0, 0, None))(y_star, own, split.shared)
    steady = _rms(residual, axis=-1) <= atol + rtol * _rms(y_star, axis=-1)
    y_star = jnp.where(steady[:, None], y_star, jnp.nan)
    if not return_stats:
        return y_star
    # Not steady after a solve that ended well: Newton left the root (a singular J_y).
    ended_well = (stats["status"] == Status.EVENT) | (stats["status"] == Status.SUCCESS)
    status = jnp.where(steady, jnp.int32(Status.EVENT),
                       jnp.where(ended_well, jnp.int32(Status.NON_FINITE), stats["status"]))
    return y_star, {"accepted": stats["accepted"], "rejected": stats["rejected"],
                    "status": status, "time": jnp.where(found, stats["event_time"], jnp.inf)}


def _rms(x, axis=None):
    return jnp.sqrt(jnp.mean(x * x, axis=axis))


def _member_rhs(f, layout, t0):
    """f(y, t0, p) of one member, p its row of own parameters then the shared ones."""
    def rhs(y, own, shared):
        return f(y, t0, layout.unflatten(jnp.concatenate([own, shared])))

    return rhs


def _polished(f, layout, t0, approach, own, shared):
    rhs = _member_rhs(f, layout, t0)

    @jax.custom_jvp
    def root(own, shared):
        def newton(y, o):
            for _ in range(NEWTON_STEPS):
                step = jnp.linalg.solve(jax.jacfwd(rhs)(y, o, shared), rhs(y, o, shared))
                y = jnp.where(jnp.all(jnp.isfinite(step)), y - step, y)
            return y

        return jax.vmap(newton)(jax.lax.stop_gradient(approach), own)

    @root.defjvp
    def root_jvp(primals, tangents):
        own, shared = primals
        d_own, d_shared = tangents
        y_star = root(own, shared)

        def one(y, o, do):
            _, df = jax.jvp(lambda o, s: rhs(y, o, s), (o, shared), (do, d_shared))
            return -jnp.linalg.solve(jax.jacfwd(rhs)(y, o, shared), df)

        return y_star, jax.vmap(one)(y_star, own, d_own)

    return root(own, shared)
