"""Right-hand sides shared by the ODE tests."""

import jax.numpy as jnp


def decay(y, t, p):
    return -p[0] * y


def oscillator(y, t, p):
    return jnp.stack([y[1], -p[0] ** 2 * y[0]])


def lorenz(y, t, p):
    sigma, rho, beta = p[0], p[1], p[2]
    return jnp.stack([sigma * (y[1] - y[0]), y[0] * (rho - y[2]) - y[1], y[0] * y[1] - beta * y[2]])


def blow_up(y, t, p):
    return y**2


def sqrt_domain(y, t, p):
    # Leaves its domain when y crosses zero at t = 1: the trial steps turn NaN.
    return jnp.stack([-jnp.ones_like(y[0]), jnp.sqrt(y[0])])
