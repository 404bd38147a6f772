"""The Rosenbrock engine's other tableaus: Rodas4 (method="rodas4", Hairer's 6-stage order 4(3),
include/shoal/ode/rodas4.hpp) and Rosenbrock23 (method="rosenbrock23", Shampine's ode23s, 3
stages, order 2(3), include/shoal/ode/rosenbrock23.hpp; not stiffly accurate, so it takes the
engine's other way to y_new and the error). Their order conditions and fixed-step orders are C++
tests.

Here, through ``solve``, for each: the adaptive loop against SciPy's Radau on stiff problems, its
dense output (saves between steps, an event's time) against closed forms, the same bits in the
SIMD lanes and on the scalar path, the sparse solver against the dense one, and its forward
sensitivities (``jax.grad``) against Rodas5P's. Tolerances follow each method's order: the same
accuracy costs Rosenbrock23 many more steps, so it is asked for less.
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
METHODS = ("rodas4", "rosenbrock23")
# Per method: Robertson's two tolerances; Van der Pol's (solve, comparison); the dense output's
# (solve, comparison); the event's (solve, comparison); the gradients' (solve, comparison).
# Rosenbrock23 is order 2 with error-per-step control: its global error grows like rtol^(2/3)
# (~40x rtol at 1e-5 on y' = −y), so it is compared less tightly.
CASES = {
    "rodas4": dict(robertson=(1e-5, 1e-9), vdp=(1e-9, 1e-6), dense=(1e-7, 5e-7),
                   event=(1e-10, 1e-8), grad=(1e-11, 1e-6)),
    "rosenbrock23": dict(robertson=(1e-4, 1e-7), vdp=(1e-8, 1e-5), dense=(1e-5, 1e-3),
                         event=(1e-9, 1e-6), grad=(1e-9, 1e-5)),
}


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


@pytest.mark.parametrize("which", [0, 1])
@pytest.mark.parametrize("method", METHODS)
def test_robertson_matches_radau_and_tightens_with_rtol(method, which):
    rtol = CASES[method]["robertson"][which]
    ts = np.array([0.0, 1e-3, 1.0, 100.0, 1e4, 1e5])
    y0 = np.array([1.0, 0.0, 0.0])
    ref = _radau(_robertson_np, _robertson_jac, y0, ts)
    ys, stats = solve(robertson, y0[None], ts, ROBERTSON_K[None], method=method, rtol=rtol,
                      atol=1e-6 * rtol, return_stats=True)
    assert int(stats["status"][0]) == 0
    err = np.max(np.abs(np.asarray(ys[0]) - ref) / (np.abs(ref) + 1e-20))
    assert err < 300 * rtol, err
    np.testing.assert_allclose(np.sum(np.asarray(ys[0]), axis=-1), 1.0, atol=50 * rtol)


@pytest.mark.parametrize("method", METHODS)
def test_van_der_pol_stiff_matches_radau(method):
    rtol, agree = CASES[method]["vdp"]
    ts = np.linspace(0.0, 2.0, 9)
    y0 = np.array([2.0, 0.0])
    mu = np.array([1000.0])
    ref = _radau(lambda t, y: np.array([y[1], mu[0] * (1 - y[0] ** 2) * y[1] - y[0]]),
                 lambda t, y: np.array([[0.0, 1.0],
                                        [-2 * mu[0] * y[0] * y[1] - 1, mu[0] * (1 - y[0] ** 2)]]),
                 y0, ts)
    ys = solve(van_der_pol, y0[None], ts, mu[None], method=method, rtol=rtol, atol=1e-2 * rtol)
    np.testing.assert_allclose(np.asarray(ys[0]), ref, rtol=agree, atol=1e-2 * agree)


@pytest.mark.parametrize("method", METHODS)
def test_dense_output_and_event_time_match_closed_forms(method):
    # y' = −λ y: saves at many points inside the steps come from the interpolant (order 3 and 2),
    # and a terminal event at y = 1/2 is located on it (t = ln 2 / λ).
    (rtol, agree), (event_rtol, event_agree) = CASES[method]["dense"], CASES[method]["event"]
    lam = np.array([[1.0], [3.0]])
    ts = np.linspace(0.0, 1.0, 41)
    ys, stats = solve(lambda y, t, p: -p[0] * y, np.ones((2, 1)), ts, lam, method=method,
                      rtol=rtol, atol=1e-3 * rtol, return_stats=True)
    np.testing.assert_allclose(np.asarray(ys)[..., 0], np.exp(-lam * ts), rtol=agree,
                               atol=1e-2 * agree)
    assert int(stats["accepted"][0]) < 30  # most saves fall between steps
    _, stats = solve(lambda y, t, p: -p[0] * y, np.ones((2, 1)), ts, lam, method=method,
                     rtol=event_rtol, atol=1e-2 * event_rtol,
                     event=Event(lambda y, t, p: y[0] - 0.5), return_stats=True)
    np.testing.assert_allclose(np.asarray(stats["event_time"]), np.log(2.0) / lam[:, 0],
                               rtol=event_agree)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("method", METHODS)
def test_lanes_and_scalar_path_give_the_same_bits(method, dtype):
    # 13 members: a full vector of lanes and a remainder (float64 W = 8 or 4; float32 up to 16:
    # then all of them share one vector).
    n = 13
    k = (ROBERTSON_K[None] * np.linspace(0.5, 2.0, n)[:, None]).astype(dtype)
    y0 = np.tile(np.array([1.0, 0.0, 0.0], dtype), (n, 1))
    ts = np.array([0.0, 0.1, 10.0, 1e3], dtype)
    tol = dict(rtol=1e-6, atol=1e-10) if dtype == np.float64 else dict(rtol=1e-4, atol=1e-8)

    def run(lanes):
        return np.asarray(solve(robertson, y0, ts, k, method=method, lanes=lanes, **tol))

    scalar = run(1)
    assert np.all(np.isfinite(scalar))
    for lanes in (0, 4):
        assert run(lanes).tobytes() == scalar.tobytes()


@pytest.mark.parametrize("method", METHODS)
def test_sparse_solver_agrees_with_the_dense_one(method):
    n = 24
    y0 = np.cos(np.arange(n))[None] * np.ones((3, 1))
    p = np.array([[1.0, 5.0], [1.5, 20.0], [0.5, 50.0]])
    ts = np.linspace(0.0, 2.0, 5)
    dense, sd = solve(moment_hierarchy, y0, ts, p, method=method, rtol=1e-9, atol=1e-12,
                      sparsity="dense", return_stats=True)
    sparse, ss = solve(moment_hierarchy, y0, ts, p, method=method, rtol=1e-9, atol=1e-12,
                       sparsity="auto", return_stats=True)
    assert bool(np.all(np.asarray(ss["sparse"]))) and not bool(np.any(np.asarray(sd["sparse"])))
    np.testing.assert_allclose(np.asarray(sparse), np.asarray(dense), rtol=1e-8, atol=1e-11)


@pytest.mark.parametrize("method", METHODS)
def test_gradients_agree_with_rodas5p(method):
    # Forward sensitivities through the method's joint system against Rodas5P's, both at tight
    # tolerance: two different methods, one derivative.
    rtol, agree = CASES[method]["grad"]
    ts = jnp.linspace(0.0, 3.0, 7)
    y0 = jnp.array([[2.0, 0.0], [1.0, 1.0]])

    def loss(mu, y0, method, rtol):
        ys = solve(van_der_pol, y0, ts, mu, method=method, rtol=rtol, atol=0.1 * rtol)
        return jnp.sum(jnp.sin(ys))

    mu = jnp.array([[5.0], [20.0]])
    ours = jax.grad(loss, argnums=(0, 1))(mu, y0, method, rtol)
    theirs = jax.grad(loss, argnums=(0, 1))(mu, y0, "rodas5p", 1e-11)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=agree, atol=1e-2 * agree)
