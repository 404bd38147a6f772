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
the basin). A model with conservation laws (c·f ≡ 0: total enzyme, mass balance; PEtab models
have them) has a singular J_y, and its steady state depends on y0 through the conserved totals
C y* = C y0: the laws are J_y's left null vectors (found by an SVD at the root), and both the
Newton polish and the derivative solve the stacked system [J_y; C] dy* = [−∂f/∂θ dθ; C dy0].
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
        Differentiable with respect to ``params`` and ``y0`` by the implicit-function theorem
        (with respect to ``y0`` only through conserved totals: 0 without conservation laws).
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
    y0_rows = jnp.broadcast_to(y0.reshape(-1, y0.shape[-1]).astype(dtype), approach.shape)
    y_star = _polished(f, split.layout, float(t0), y0_rows, approach, own, split.shared)
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


def _conservation_laws(jacobian):
    """(n, n): rows spanning the left null space of J (zero rows elsewhere). A model with
    conservation laws (c·f ≡ 0: total enzyme, mass balance) has them as exact null vectors, so a
    singular value within rounding of 0 (64 n eps of the largest) marks one; a stiff but regular
    J stays far above that."""
    u, sigma, _ = jnp.linalg.svd(jacobian)
    n = jacobian.shape[0]
    null = sigma <= 64 * n * jnp.finfo(jacobian.dtype).eps * sigma[0]
    return jnp.where(null[:, None], u.T, 0.0)


def _constrained_solve(jacobian, laws, rhs, conserved):
    """x with J x = rhs and laws x = conserved (least squares on the stacked system, exact when
    the laws complete J's rank; plain J⁻¹ rhs without laws)."""
    stacked = jnp.concatenate([jacobian, laws])
    return jnp.linalg.lstsq(stacked, jnp.concatenate([rhs, conserved]))[0]


def _polished(f, layout, t0, y0, approach, own, shared):
    rhs = _member_rhs(f, layout, t0)
    jacobian = jax.jacfwd(rhs)

    @jax.custom_jvp
    def root(y0, own, shared):
        def newton(y0, y, o):
            laws = _conservation_laws(jacobian(y, o, shared))
            for _ in range(NEWTON_STEPS):
                # Newton on f(y) = 0 and laws (y - y0) = 0: the conserved totals stay y0's.
                step = _constrained_solve(jacobian(y, o, shared), laws, rhs(y, o, shared),
                                          laws @ (y - y0))
                y = jnp.where(jnp.all(jnp.isfinite(step)), y - step, y)
            return y

        return jax.vmap(newton)(y0, jax.lax.stop_gradient(approach), own)

    @root.defjvp
    def root_jvp(primals, tangents):
        y0, own, shared = primals
        d_y0, d_own, d_shared = tangents
        y_star = root(y0, own, shared)

        def one(y, o, dy0, do):
            _, df = jax.jvp(lambda o, s: rhs(y, o, s), (o, shared), (do, d_shared))
            j = jacobian(y, o, shared)
            laws = _conservation_laws(j)
            return _constrained_solve(j, laws, -df, laws @ dy0)

        return y_star, jax.vmap(one)(y_star, own, d_y0, d_own)

    return root(y0, own, shared)
