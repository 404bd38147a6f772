"""save_fn: saving a function of the state, compiled into the kernel, instead of the state."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shoal.ode import solve

jax.config.update("jax_enable_x64", True)

METHODS = ["tsit5", "rodas5p"]


def lorenz(y, t, p):
    s, r, b = p[0], p[1], p[2]
    return jnp.stack([s * (y[1] - y[0]), y[0] * (r - y[2]) - y[1], y[0] * y[1] - b * y[2]])


def observables(y, t, p):  # a (2, 2) observable of the state, the time and a parameter
    return jnp.array([[y[0] * y[1], jnp.sin(t)], [p[0] * y[2], jnp.sqrt(y @ y)]])


P = jnp.array([[10.0, 28.0, 8.0 / 3.0], [10.0, 20.0, 2.0]])
Y0 = jnp.array([[1.0, 1.0, 1.0], [0.5, -1.0, 2.0]])
T = jnp.linspace(0.0, 1.0, 7)


@pytest.mark.parametrize("method", METHODS)
def test_save_fn_equals_h_applied_to_the_full_saves(method):
    full = solve(lorenz, Y0, T, P, method=method, rtol=1e-9, atol=1e-11)
    saved = solve(lorenz, Y0, T, P, method=method, rtol=1e-9, atol=1e-11, save_fn=observables)
    assert saved.shape == (2, 7, 2, 2)
    expected = jax.vmap(jax.vmap(observables, in_axes=(0, 0, None)), in_axes=(0, None, 0))(
        full, T, P)
    np.testing.assert_allclose(np.asarray(saved), np.asarray(expected), rtol=1e-13, atol=1e-13)


def test_a_scalar_save_fn_gives_n_traj_by_n_save():
    ys = solve(lorenz, Y0, T, P, method="tsit5", save_fn=lambda y, t, p: y[0])
    assert ys.shape == (2, 7)


@pytest.mark.parametrize("method", METHODS)
def test_save_fn_is_differentiable_like_the_state(method):
    def via_save_fn(p):
        return solve(lorenz, Y0, T, p, method=method, rtol=1e-10, atol=1e-12,
                     save_fn=observables)

    def via_state(p):
        full = solve(lorenz, Y0, T, p, method=method, rtol=1e-10, atol=1e-12)
        return jax.vmap(jax.vmap(observables, in_axes=(0, 0, None)), in_axes=(0, None, 0))(
            full, T, p)

    np.testing.assert_allclose(np.asarray(jax.jacfwd(via_save_fn)(P)),
                               np.asarray(jax.jacfwd(via_state)(P)), rtol=1e-6, atol=1e-6)
    grad = jax.grad(lambda y0: jnp.sum(solve(lorenz, y0, T, P, method=method,
                                             save_fn=lambda y, t, p: y[2] ** 2)))(Y0)
    grad_state = jax.grad(lambda y0: jnp.sum(solve(lorenz, y0, T, P, method=method)[..., 2]
                                             ** 2))(Y0)
    np.testing.assert_allclose(np.asarray(grad), np.asarray(grad_state), rtol=1e-6)


def test_a_large_ensemble_with_a_scalar_save_fn_allocates_only_the_small_output():
    n, n_traj, n_save = 50, 20_000, 100

    def chain(y, t, p):  # a linear decay chain of 50 species
        return jnp.concatenate([-p[0] * y[:1], p[0] * y[:-1] - p[0] * y[1:]])

    y0 = jnp.zeros((n_traj, n)).at[:, 0].set(1.0)
    t = jnp.linspace(0.0, 1.0, n_save)

    def run(y0):
        return solve(chain, y0, t, jnp.array([1.0]), method="tsit5",
                     save_fn=lambda y, t, p: y[-1])

    memory = jax.jit(run).lower(y0).compile().memory_analysis()
    full_history = n_traj * n_save * n * 8  # 800 MB of float64
    if memory is None:
        pytest.skip("this XLA reports no memory analysis")
    assert memory.output_size_in_bytes == n_traj * n_save * 8
    assert memory.temp_size_in_bytes + memory.output_size_in_bytes < full_history / 20


def test_a_bad_save_fn_is_named():
    with pytest.raises(ValueError, match=r"save_fn\(y, t, p\) must return dtype float64"):
        solve(lorenz, Y0, T, P, save_fn=lambda y, t, p: (y > 0).astype(jnp.int32))
