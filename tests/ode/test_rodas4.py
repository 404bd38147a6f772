"""Rodas4 (method="rodas4"): the Rosenbrock engine with Hairer's 6-stage order-4 tableau
(include/shoal/ode/rodas4.hpp; its order conditions and fixed-step order are C++ tests).

Here, through ``solve``: the adaptive loop against SciPy's Radau on stiff problems, its dense
output (saves between steps, an event's time) against closed forms, the same bits in the SIMD
lanes and on the scalar path, the sparse solver against the dense one, and its forward
sensitivities (``jax.grad``) against Rodas5P's.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

from shoal.ode import Event, solve

from stiff_problems import moment_hierarchy, robertson, van_der_pol

jax.config.update("jax_enable_x64", True)

ROBERTSON_K = np.array([0.04, 3e7, 1e4])


def _radau(f, jac, y0, ts):
    """SciPy's Radau at rtol 1e-12 on NumPy f and Jacobian (jnp calls cost a minute here)."""
    return solve_ivp(f, (ts[0], ts[-1]), y0, method="Radau", t_eval=ts, jac=jac, rtol=1e-12,
                     atol=1e-16).y.T


def _robertson_np(t, y):
    k1, k2, k3 = ROBERTSON_K
    d1 = -k1 * y[0] + k3 * y[1] * y[2]
    d3 = k2 * y[1] ** 2
    return np.array([d1, -d1 - d3, d3])


def _robertson_jac(t, y):
    k1, k2, k3 = ROBERTSON_K
    return np.array([[-k1, k3 * y[2], k3 * y[1]],
                     [k1, -k3 * y[2] - 2 * k2 * y[1], -k3 * y[1]],
                     [0.0, 2 * k2 * y[1], 0.0]])


@pytest.mark.parametrize("rtol", [1e-5, 1e-9])
def test_robertson_matches_radau_and_tightens_with_rtol(rtol):
    ts = np.array([0.0, 1e-3, 1.0, 100.0, 1e4, 1e5])
    y0 = np.array([1.0, 0.0, 0.0])
    ref = _radau(_robertson_np, _robertson_jac, y0, ts)
    ys, stats = solve(robertson, y0[None], ts, ROBERTSON_K[None], method="rodas4", rtol=rtol,
                      atol=1e-6 * rtol, return_stats=True)
    assert int(stats["status"][0]) == 0
    err = np.max(np.abs(np.asarray(ys[0]) - ref) / (np.abs(ref) + 1e-20))
    assert err < 300 * rtol, err
    np.testing.assert_allclose(np.sum(np.asarray(ys[0]), axis=-1), 1.0, atol=50 * rtol)


def test_van_der_pol_stiff_matches_radau():
    ts = np.linspace(0.0, 2.0, 9)
    y0 = np.array([2.0, 0.0])
    mu = np.array([1000.0])
    ref = _radau(lambda t, y: np.array([y[1], mu[0] * (1 - y[0] ** 2) * y[1] - y[0]]),
                 lambda t, y: np.array([[0.0, 1.0],
                                        [-2 * mu[0] * y[0] * y[1] - 1, mu[0] * (1 - y[0] ** 2)]]),
                 y0, ts)
    ys = solve(van_der_pol, y0[None], ts, mu[None], method="rodas4", rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(np.asarray(ys[0]), ref, rtol=1e-6, atol=1e-8)


def test_dense_output_and_event_time_match_closed_forms():
    # y' = −λ y: saves at many points inside the steps come from the order-3 interpolant, and a
    # terminal event at y = 1/2 is located on it (t = ln 2 / λ).
    lam = np.array([[1.0], [3.0]])
    ts = np.linspace(0.0, 1.0, 41)
    ys, stats = solve(lambda y, t, p: -p[0] * y, np.ones((2, 1)), ts, lam, method="rodas4",
                      rtol=1e-7, atol=1e-10, return_stats=True)
    np.testing.assert_allclose(np.asarray(ys)[..., 0], np.exp(-lam * ts), rtol=5e-7, atol=1e-9)
    assert int(stats["accepted"][0]) < 30  # most saves fall between steps
    _, stats = solve(lambda y, t, p: -p[0] * y, np.ones((2, 1)), ts, lam, method="rodas4",
                     rtol=1e-10, atol=1e-12, event=Event(lambda y, t, p: y[0] - 0.5),
                     return_stats=True)
    np.testing.assert_allclose(np.asarray(stats["event_time"]), np.log(2.0) / lam[:, 0],
                               rtol=1e-8)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_lanes_and_scalar_path_give_the_same_bits(dtype):
    # 13 members: a full vector of lanes and a remainder (float64 W = 8 or 4; float32 up to 16:
    # then all of them share one vector).
    n = 13
    k = (ROBERTSON_K[None] * np.linspace(0.5, 2.0, n)[:, None]).astype(dtype)
    y0 = np.tile(np.array([1.0, 0.0, 0.0], dtype), (n, 1))
    ts = np.array([0.0, 0.1, 10.0, 1e3], dtype)
    tol = dict(rtol=1e-6, atol=1e-10) if dtype == np.float64 else dict(rtol=1e-4, atol=1e-8)

    def run(lanes):
        return np.asarray(solve(robertson, y0, ts, k, method="rodas4", lanes=lanes, **tol))

    scalar = run(1)
    assert np.all(np.isfinite(scalar))
    for lanes in (0, 4):
        assert run(lanes).tobytes() == scalar.tobytes()


def test_sparse_solver_agrees_with_the_dense_one():
    n = 24
    y0 = np.cos(np.arange(n))[None] * np.ones((3, 1))
    p = np.array([[1.0, 5.0], [1.5, 20.0], [0.5, 50.0]])
    ts = np.linspace(0.0, 2.0, 5)
    dense, sd = solve(moment_hierarchy, y0, ts, p, method="rodas4", rtol=1e-9, atol=1e-12,
                      sparsity="dense", return_stats=True)
    sparse, ss = solve(moment_hierarchy, y0, ts, p, method="rodas4", rtol=1e-9, atol=1e-12,
                       sparsity="auto", return_stats=True)
    assert bool(np.all(np.asarray(ss["sparse"]))) and not bool(np.any(np.asarray(sd["sparse"])))
    np.testing.assert_allclose(np.asarray(sparse), np.asarray(dense), rtol=1e-8, atol=1e-11)


def test_gradients_agree_with_rodas5p():
    # Forward sensitivities through Rodas4's joint system against Rodas5P's, both at tight
    # tolerance: two different methods, one derivative.
    ts = jnp.linspace(0.0, 3.0, 7)
    y0 = jnp.array([[2.0, 0.0], [1.0, 1.0]])

    def loss(mu, y0, method):
        ys = solve(van_der_pol, y0, ts, mu, method=method, rtol=1e-11, atol=1e-12)
        return jnp.sum(jnp.sin(ys))

    mu = jnp.array([[5.0], [20.0]])
    ours = jax.grad(loss, argnums=(0, 1))(mu, y0, "rodas4")
    theirs = jax.grad(loss, argnums=(0, 1))(mu, y0, "rodas5p")
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-8)
