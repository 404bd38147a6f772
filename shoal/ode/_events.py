"""The derivatives of an event's time and state: the implicit-function rule.

At the event, g(y(t*), t*, p) = 0. Along a tangent (dy0, dp) of the inputs, with S dθ the
state's tangent at the fixed time t* (the joint solve's event state carries S at t*):
  g_y (S dθ + f dt*) + g_t dt* + g_p dp = 0
  ⇒ dt* = −(g_y S dθ + g_p dp) / (g_y f + g_t),   dy* = S dθ + f dt*,
with f and g at (y*, t*, p). Both are linear in the tangents, so reverse mode transposes them.
A member without an event has NaN time and state; their tangents are 0 (evaluated at a safe
point, so no NaN reaches a cotangent through a jnp.where).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def event_tangents(functions, event_time, y_star, dy_fixed, p, dp, rate=None):
    """(dt* (N, 1), dy* (N, n)) from event_time (N, 1), y* (N, n), S dθ at t* (N, n), the
    trajectories' full parameters p (N, n_params) and their tangents dp. ``rate``: dy/dt(y, t,
    p), where it is not f (a mass matrix: _mass.rate_function)."""
    f, g = rate or functions.pure("rhs"), functions.pure("event")
    t = event_time[:, 0]
    found = jnp.isfinite(t)
    t = jnp.where(found, t, 0.0)
    y = jnp.where(found[:, None], y_star, 0.0)

    def one(y, t, p, dy, dp):
        _, along_inputs = jax.jvp(lambda y, p: g(y, t, p), (y, p), (dy, dp))
        fy = f(y, t, p)
        _, along_time = jax.jvp(lambda y, t: g(y, t, p), (y, t), (fy, jnp.ones_like(t)))
        dt = -along_inputs / along_time
        return dt, dy + fy * dt

    dt, dy = jax.vmap(one)(y, t, p, dy_fixed, dp)
    return (jnp.where(found, dt, 0.0)[:, None], jnp.where(found[:, None], dy, 0.0))
