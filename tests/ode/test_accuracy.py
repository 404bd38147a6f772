"""Tsit5 solutions against closed forms and a tight SciPy reference."""

import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

from shoal.ode import Status
from shoal.ode.tsit5 import solve

from ode_problems import decay, lorenz, oscillator


def test_exponential_decay_matches_closed_form():
    t = np.linspace(0.0, 5.0, 11)
    k = np.array([[0.5], [1.0], [3.0]])
    ys, stats = solve(decay, jnp.array([2.0]), t, k, rtol=1e-10, atol=1e-12, return_stats=True)
    exact = 2.0 * np.exp(-k[:, None, :] * t[None, :, None])
    assert np.max(np.abs(np.asarray(ys) - exact)) < 1e-8
    assert np.all(np.asarray(stats["status"]) == Status.SUCCESS)


def test_harmonic_oscillator_matches_closed_form_and_energy():
    t = np.linspace(0.0, 10.0, 41)
    w = 2.5
    ys = np.asarray(solve(oscillator, jnp.array([1.0, 0.0]), t, jnp.array([w]), rtol=1e-10,
                          atol=1e-12))[0]
    assert np.max(np.abs(ys[:, 0] - np.cos(w * t))) < 1e-8
    assert np.max(np.abs(ys[:, 1] + w * np.sin(w * t))) < 1e-8 * w
    energy = ys[:, 1] ** 2 + w**2 * ys[:, 0] ** 2
    assert np.max(np.abs(energy - w**2)) < 1e-8 * w**2


def test_lorenz_matches_dop853():
    p = np.array([10.0, 28.0, 8.0 / 3.0])
    t = np.linspace(0.0, 1.0, 11)
    ys = np.asarray(solve(lorenz, jnp.array([1.0, 0.0, 0.0]), t, p, rtol=1e-12, atol=1e-12))[0]
    ref = solve_ivp(lambda tt, y: np.asarray(lorenz(y, tt, p)), (0.0, 1.0), [1.0, 0.0, 0.0],
                    method="DOP853", rtol=1e-13, atol=1e-13, t_eval=t).y.T
    # Interpolated saves and end point alike; the reference is ~1e-12 accurate.
    assert np.max(np.abs(ys - ref)) < 1e-8


def test_error_decreases_with_tolerance():
    p = np.array([10.0, 28.0, 8.0 / 3.0])
    ref = solve_ivp(lambda tt, y: np.asarray(lorenz(y, tt, p)), (0.0, 1.0), [1.0, 0.0, 0.0],
                    method="DOP853", rtol=1e-13, atol=1e-13).y[:, -1]
    errors = []
    for tol in (1e-5, 1e-7, 1e-9, 1e-11):
        ys = solve(lorenz, jnp.array([1.0, 0.0, 0.0]), jnp.array([0.0, 1.0]), p, rtol=tol,
                   atol=tol)
        errors.append(np.max(np.abs(np.asarray(ys)[0, -1] - ref)))
    assert all(b < a for a, b in zip(errors, errors[1:], strict=False)), errors
    assert errors[-1] < 1e-8


def test_float32_is_computed_in_float32():
    t = jnp.linspace(0.0, 2.0, 5, dtype=jnp.float32)
    ys = solve(decay, jnp.array([1.0], jnp.float32), t, jnp.array([0.7], jnp.float32), rtol=1e-5,
               atol=1e-7)
    assert ys.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(ys)[0, :, 0], np.exp(-0.7 * np.asarray(t)), rtol=2e-5)


def test_first_step_and_pid_gains_are_used():
    p = np.array([10.0, 28.0, 8.0 / 3.0])
    y0 = jnp.array([1.0, 0.0, 0.0])
    t = jnp.array([0.0, 1.0])
    _, base = solve(lorenz, y0, t, p, return_stats=True)
    _, pid = solve(lorenz, y0, t, p, pcoeff=0.4, icoeff=0.3, dcoeff=0.0, return_stats=True)
    assert int(pid["accepted"][0]) != int(base["accepted"][0])
    # On a smooth decay the default 1e-6 first step grows without rejections, while a first
    # step of 0.5 at rtol 1e-10 must be rejected.
    k = jnp.array([1.0])
    _, small = solve(decay, jnp.array([1.0]), t, k, rtol=1e-10, return_stats=True)
    _, big = solve(decay, jnp.array([1.0]), t, k, rtol=1e-10, first_step=0.5, return_stats=True)
    assert int(small["rejected"][0]) == 0
    assert int(big["rejected"][0]) >= 1


@pytest.mark.parametrize("weights", [np.array([1.0, 0.0]), np.array([[1.0, 0.0]])])
def test_zero_error_weight_drops_component(weights):
    def fast_second(y, t, p):
        return jnp.stack([-y[0], jnp.sin(40.0 * y[0]) * jnp.cos(30.0 * y[1])])

    t = jnp.array([0.0, 3.0])
    y0 = jnp.array([1.0, 1.0])
    _, full = solve(fast_second, y0, t, rtol=1e-9, atol=1e-9, return_stats=True)
    ys, dropped = solve(fast_second, y0, t, rtol=1e-9, atol=1e-9, error_weights=weights,
                        return_stats=True)
    assert int(dropped["accepted"][0]) < int(full["accepted"][0])
    assert abs(float(ys[0, -1, 0]) - np.exp(-3.0)) < 1e-8
