"""Stiff right-hand sides for the Rodas5P tests (``f(y, t, p)`` in ``jax.numpy``)."""

import jax.numpy as jnp


def robertson(y, t, p):
    """Robertson's chemical kinetics; p = (k1, k2, k3). Conserves y1 + y2 + y3."""
    k1, k2, k3 = p[0], p[1], p[2]
    d1 = -k1 * y[0] + k3 * y[1] * y[2]
    d3 = k2 * y[1] ** 2
    return jnp.stack([d1, -d1 - d3, d3])


def kaps(y, t, p):
    """Kaps' singularly perturbed problem; p = (eps,). From y(0) = (1, 1) the solution is
    y1 = exp(-2t), y2 = exp(-t) for every eps."""
    eps = p[0]
    return jnp.stack([-(2.0 + 1.0 / eps) * y[0] + y[1] ** 2 / eps, y[0] - y[1] - y[1] ** 2])


def bateman(y, t, p):
    """Linear decay chain y_i' = λ_{i-1} y_{i-1} − λ_i y_i; p = (λ_0, …, λ_{n-1}); the last
    species may be stable (λ = 0)."""
    n = y.shape[0]
    loss = p[:n] * y
    gain = jnp.concatenate([jnp.zeros((1,), y.dtype), loss[:-1]])
    return gain - loss


def forced_decay(y, t, p):
    """y' = −λ y + F t, p = (λ, F): non-autonomous, so a solver without ∂f/∂t loses order."""
    return -p[0] * y + p[1] * t


def van_der_pol(y, t, p):
    """Van der Pol y1'' = μ (1 − y1²) y1' − y1 as a first-order system; p = (μ,)."""
    mu = p[0]
    return jnp.stack([y[1], mu * (1.0 - y[0] ** 2) * y[1] - y[0]])


def robertson_expiring(y, t, p):
    """Robertson with k1 scaled by sqrt(1 − t/t_fail), p = (k1, k2, k3, t_fail): NaN once t passes
    t_fail. With t_fail = 1e30 the factor is exactly 1 in float64 for t ≤ 1e5 (plain Robertson)."""
    k1 = p[0] * jnp.sqrt(p[3] - t) / jnp.sqrt(p[3])
    d1 = -k1 * y[0] + p[2] * y[1] * y[2]
    d3 = p[1] * y[1] ** 2
    return jnp.stack([d1, -d1 - d3, d3])



def forced_bateman(y, t, p):
    """The Bateman chain with a source F·t feeding its first species; p = (λ_0, …, λ_{n-1}, F)."""
    n = y.shape[0]
    source = jnp.concatenate([(p[n] * t)[None], jnp.zeros((n - 1,), y.dtype)])
    return bateman(y, t, p) + source


def moment_hierarchy(y, t, p):
    """A Boltzmann-like moment hierarchy of any length n, p = (a, b):
    y_l' = a (l y_{l-1} − (l+1) y_{l+1}) / (2l+1) − b l² / n · y_l (y_{-1} = y_n = 0); tridiagonal
    Jacobian, damping rising to b n at the top (stiff for large n b)."""
    n = y.shape[0]
    ell = jnp.arange(n, dtype=y.dtype)
    zero = jnp.zeros((1,), y.dtype)
    below = jnp.concatenate([zero, y[:-1]])
    above = jnp.concatenate([y[1:], zero])
    return p[0] * (ell * below - (ell + 1) * above) / (2 * ell + 1) - p[1] * ell * ell / n * y
