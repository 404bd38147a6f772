"""Ensembles, vmap, jit: the same numbers however the solve is batched or staged."""

import re

import jax
import jax.numpy as jnp
import numpy as np

from shoal.ode.tsit5 import solve

from ode_problems import lorenz

T = jnp.linspace(0.0, 1.0, 6)
Y0 = jnp.array([1.0, 0.0, 0.0])
P = jnp.stack([jnp.full(8, 10.0), jnp.linspace(0.0, 21.0, 8), jnp.full(8, 8.0 / 3.0)], axis=1)


def test_result_shape_and_initial_save():
    ys = solve(lorenz, Y0, T, P)
    assert ys.shape == (8, 6, 3)
    np.testing.assert_array_equal(np.asarray(ys[:, 0]), np.broadcast_to(np.asarray(Y0), (8, 3)))
    assert solve(lorenz, Y0, T, P[0]).shape == (1, 6, 3)


def test_ensemble_equals_each_trajectory_alone_bit_for_bit():
    y0s = Y0 + 0.01 * jnp.arange(8.0)[:, None]
    ens, stats = solve(lorenz, y0s, T, P, return_stats=True)
    for m in range(8):
        one, s1 = solve(lorenz, y0s[m], T, P[m], return_stats=True)
        np.testing.assert_array_equal(np.asarray(ens[m]), np.asarray(one[0]))
        assert int(stats["accepted"][m]) == int(s1["accepted"][0])


def test_y0_and_params_broadcast_against_each_other():
    y0s = jnp.stack([Y0, Y0 * 2.0])
    a = solve(lorenz, y0s, T, P[3])
    b = solve(lorenz, y0s, T, jnp.stack([P[3], P[3]]))
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_vmap_equals_native_ensemble_and_is_one_call():
    def single(p):
        return solve(lorenz, Y0, T, p)

    ens = solve(lorenz, Y0, T, P)
    vm = jax.vmap(single)(P)
    assert vm.shape == (8, 1, 6, 3)
    np.testing.assert_array_equal(np.asarray(vm[:, 0]), np.asarray(ens))
    hlo = jax.jit(jax.vmap(single)).lower(P).as_text()
    # One shoal FFI call, whichever platform the default device is (cpu, or cuda on a GPU).
    assert len(re.findall(r"custom_call @shoal_ode_solve_(?:cpu|cuda)", hlo)) == 1


def test_nested_vmap_over_params_and_t_span():
    grid = P.reshape(2, 4, 3)
    nested = jax.vmap(jax.vmap(lambda p: solve(lorenz, Y0, T, p)))(grid)
    np.testing.assert_array_equal(np.asarray(nested).reshape(8, 6, 3),
                                  np.asarray(solve(lorenz, Y0, T, P)))
    spans = jnp.stack([T, 0.5 * T])
    per_span = jax.vmap(lambda t: solve(lorenz, Y0, t, P))(spans)
    np.testing.assert_array_equal(np.asarray(per_span[1]),
                                  np.asarray(solve(lorenz, Y0, 0.5 * T, P)))


def test_jit_equals_eager():
    eager, s_eager = solve(lorenz, Y0, T, P, return_stats=True)
    jitted, s_jit = jax.jit(lambda p, y0: solve(lorenz, y0, T, p, return_stats=True))(P, Y0)
    np.testing.assert_array_equal(np.asarray(eager), np.asarray(jitted))
    for key in ("accepted", "rejected", "status"):
        np.testing.assert_array_equal(np.asarray(s_eager[key]), np.asarray(s_jit[key]))


def test_vmap_of_jit_and_params_closed_over_by_value():
    scale = np.array([1.0, 1.0, 1.0])  # a closed-over constant array becomes a static table

    def f(y, t, p):
        return lorenz(y, t, p) * scale

    a = jax.vmap(jax.jit(lambda p: solve(f, Y0, T, p)))(P)
    np.testing.assert_array_equal(np.asarray(a[:, 0]), np.asarray(solve(lorenz, Y0, T, P)))
