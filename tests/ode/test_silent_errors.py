"""Inputs that used to give silently wrong answers now raise or warn (issue 14, item 7)."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shoal.ode import _solve as solve_module
from shoal.ode import solve

jax.config.update("jax_enable_x64", True)

T = jnp.linspace(0.0, 1.0, 3)


def lorenz(y, t, p):
    return jnp.stack([p[0] * (y[1] - y[0]), y[0] * (p[1] - y[2]) - y[1],
                      y[0] * y[1] - p[2] * y[2]])


def test_params_shorter_than_what_f_reads_is_an_error():
    # JAX clamps p[2] of a 2-entry array to p[1]: Lorenz ran with beta = rho.
    with pytest.raises(ValueError, match=r"reads index 2 of an array of 2 entries from params"):
        solve(lorenz, jnp.ones(3), T, [10.0, 28.0])
    with pytest.raises(ValueError, match=r"reads index 2 .* from params"):
        solve(lambda y, t, p: lorenz(y, t, p["rates"]), jnp.ones(3), T,
              {"rates": jnp.array([10.0, 28.0])})
    with pytest.raises(ValueError, match=r"reads index 3 .* from params"):
        solve(lambda y, t, p: -p[jnp.array([0, 3])] * y, jnp.ones(2), T, [1.0, 2.0])
    ys = solve(lorenz, jnp.ones(3), T, [10.0, 28.0, 8.0 / 3.0])
    assert np.all(np.isfinite(np.asarray(ys)))


def test_y_shorter_than_what_f_reads_is_an_error():
    with pytest.raises(ValueError, match=r"reads index 2 of an array of 2 entries from y .* y0"):
        solve(lambda y, t, p: jnp.stack([-y[0], -y[2]]), jnp.ones(2), T)


def test_clamping_a_constant_table_is_left_to_jax():
    table = jnp.array([1.0, 2.0])
    ys = solve(lambda y, t, p: -jax.lax.dynamic_slice(table, (3,), (1,)) * y, jnp.ones(1), T)
    np.testing.assert_allclose(np.asarray(ys[0, :, 0]), np.exp(-2.0 * np.asarray(T)),
                               rtol=1e-7)


def test_a_tolerance_the_dtype_cannot_reach_warns_once(monkeypatch):
    monkeypatch.setattr(solve_module, "_warned_precisions", set())
    y0 = jnp.ones(1, jnp.float32)
    with pytest.warns(RuntimeWarning, match=r"rtol=1e-10 is below what float32 resolves.*"
                                            r"jax_enable_x64"):
        solve(lambda y, t, p: -y, y0, T.astype(jnp.float32), rtol=1e-10, atol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        solve(lambda y, t, p: -y, y0, T.astype(jnp.float32), rtol=1e-10, atol=1e-6)  # once
        solve(lambda y, t, p: -y, y0, T.astype(jnp.float32), rtol=1e-5, atol=1e-6)
        solve(lambda y, t, p: -y, jnp.ones(1), T, rtol=1e-12)
    with pytest.warns(RuntimeWarning, match="below what float64 resolves"):
        solve(lambda y, t, p: -y, jnp.ones(1), T, rtol=1e-16)
