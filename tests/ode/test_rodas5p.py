"""Rodas5P (method="rodas5p"): stiff problems against closed forms and SciPy Radau, the fp32
factorisation, float32 solves, ensembles, failures, bad input and JAX transformations."""

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.linalg import expm

import shoal.ode.rodas5p
from shoal.ode import Status, solve

from stiff_problems import (
    bateman,
    forced_bateman,
    forced_decay,
    kaps,
    robertson,
    robertson_expiring,
    van_der_pol,
)

ROBERTSON_P = np.array([0.04, 3e7, 1e4])
ROBERTSON_Y0 = np.array([1.0, 0.0, 0.0])
# t = 0 and 23 log-spaced saves 1e-6 … 1e5: all but t = 1e5 come from the dense output.
ROBERTSON_T = np.concatenate([[0.0], np.logspace(-6, 5, 23)])


def _robertson_np(t, y, p=ROBERTSON_P):
    k1, k2, k3 = p
    d1 = -k1 * y[0] + k3 * y[1] * y[2]
    d3 = k2 * y[1] ** 2
    return np.array([d1, -d1 - d3, d3])


def _robertson_jac(t, y, p=ROBERTSON_P):
    k1, k2, k3 = p
    return np.array([[-k1, k3 * y[2], k3 * y[1]],
                     [k1, -k3 * y[2] - 2 * k2 * y[1], -k3 * y[1]],
                     [0.0, 2 * k2 * y[1], 0.0]])


@functools.cache
def _robertson_radau():
    """SciPy Radau at rtol 1e-12 (analytic Jacobian) at ROBERTSON_T, shape (n_save, 3)."""
    ref = solve_ivp(_robertson_np, (0.0, ROBERTSON_T[-1]), ROBERTSON_Y0, method="Radau",
                    rtol=1e-12, atol=1e-20, jac=_robertson_jac, t_eval=ROBERTSON_T)
    assert ref.status == 0
    return ref.y.T


def _assert_close(ys, ref, rel, floor):
    """|ys − ref| ≤ rel·|ref| + floor componentwise (floor covers components that are ~0)."""
    ys, ref = np.asarray(ys, np.float64), np.asarray(ref, np.float64)
    excess = np.abs(ys - ref) - (rel * np.abs(ref) + floor)
    worst = np.unravel_index(np.argmax(excess), excess.shape)
    assert np.all(excess <= 0), (
        f"worst at {worst}: got {ys[worst]!r}, expected {ref[worst]!r} (rel {rel}, floor {floor})")


def _work(stats, m=0):
    """Step attempts (accepted + rejected) of trajectory m."""
    return int(stats["accepted"][m]) + int(stats["rejected"][m])


# ---------------------------------------------------------------------------------------------
# Accuracy


def test_robertson_conserves_mass_and_matches_radau():
    ys, stats = solve(robertson, ROBERTSON_Y0, ROBERTSON_T, ROBERTSON_P, method="rodas5p",
                      rtol=1e-10, atol=1e-14, return_stats=True)
    assert int(stats["status"][0]) == Status.SUCCESS
    ys = np.asarray(ys)[0]
    np.testing.assert_array_equal(ys[0], ROBERTSON_Y0)
    # A Rosenbrock method with the exact Jacobian keeps the linear invariant y1 + y2 + y3 up to
    # rounding, at every save including the interpolated ones.
    assert np.max(np.abs(ys.sum(axis=1) - 1.0)) < 1e-9
    # Every component, y2 ~ 1e-8 … 4e-5 included, to relative 1e-6 of Radau (rtol 1e-12); the
    # floor only matters for y3 < 1e-7 (t < 1e-4), where atol governs.
    _assert_close(ys, _robertson_radau(), rel=1e-6, floor=1e-13)


def test_kaps_ensemble_over_epsilon_matches_closed_form():
    eps = np.logspace(-1, -6, 6)[:, None]  # one trajectory per ε, stiffness ratio up to 1e6
    t = np.linspace(0.0, 2.0, 11)
    ys, stats = solve(kaps, np.array([1.0, 1.0]), t, eps, method="rodas5p", rtol=1e-10,
                      atol=1e-10, return_stats=True)
    assert np.all(np.asarray(stats["status"]) == Status.SUCCESS)
    exact = np.stack([np.exp(-2.0 * t), np.exp(-t)], axis=-1)
    err = np.max(np.abs(np.asarray(ys) - exact[None]), axis=(1, 2))
    assert np.all(err < 1e-8), err


def test_bateman_chain_matches_matrix_exponential():
    # 1e4 → 1e2 → 1 → 1e-2 → stable: five species, decay rates spanning six decades.
    lam = np.array([1e4, 1e2, 1.0, 1e-2, 0.0])
    t = np.concatenate([[0.0], np.logspace(-5, 3, 17)])
    y0 = np.array([1.0, 0.0, 0.0, 0.0, 0.0])
    A = np.diag(-lam) + np.diag(lam[:-1], -1)
    exact = np.stack([expm(A * tt) @ y0 for tt in t])
    ys, stats = solve(bateman, y0, t, lam, method="rodas5p", rtol=1e-10, atol=1e-12,
                      return_stats=True)
    assert int(stats["status"][0]) == Status.SUCCESS
    ys = np.asarray(ys)[0]
    assert np.max(np.abs(ys - exact)) < 1e-9
    assert np.max(np.abs(ys.sum(axis=1) - 1.0)) < 1e-12  # linear invariant


def test_forced_decay_matches_closed_form():
    lam, F = 10.0, 5.0
    t = np.linspace(0.0, 3.0, 13)
    y0 = np.array([[1.0], [0.0], [-2.0]])
    ys, stats = solve(forced_decay, y0, t, np.array([lam, F]), method="rodas5p", rtol=1e-10,
                      atol=1e-10, return_stats=True)
    assert np.all(np.asarray(stats["status"]) == Status.SUCCESS)
    exact = (y0 + F / lam**2) * np.exp(-lam * t[None, :]) + F * t[None, :] / lam - F / lam**2
    assert np.max(np.abs(np.asarray(ys)[:, :, 0] - exact)) < 1e-9


@pytest.mark.parametrize("h", [0.05, 0.1, 0.3])
def test_forced_decay_step_equals_autonomised_step(h):
    """A Rosenbrock step on y' = f(y, t) must equal the step on the autonomised system
    (y, s)' = (f(y, s), 1): that is what the h·d_i·∂f/∂t stage terms are for. Without ∂f/∂t the
    two differ at O(h²)."""
    def autonomised(y, t, p):
        return jnp.stack([-p[0] * y[0] + p[1] * y[1], jnp.ones_like(y[1])])

    p = np.array([10.0, 5.0])
    one_step = {"method": "rodas5p", "rtol": 1e3, "atol": 1e3, "first_step": h, "max_steps": 1,
                "return_stats": True}
    a, sa = solve(forced_decay, np.array([1.0]), np.array([0.0, h]), p, **one_step)
    b, sb = solve(autonomised, np.array([1.0, 0.0]), np.array([0.0, h]), p, **one_step)
    assert int(sa["accepted"][0]) == int(sb["accepted"][0]) == 1
    assert abs(float(b[0, 1, 1]) - h) < 1e-14  # s' = 1 is integrated exactly
    assert abs(float(a[0, 1, 0]) - float(b[0, 1, 0])) < 1e-14
    exact = (1.0 + 5.0 / 100.0) * np.exp(-10.0 * h) + 0.5 * h - 0.05
    assert abs(float(a[0, 1, 0]) - exact) < 1e-3  # one step only, λh up to 3


def test_jacobian_spanning_several_dual_chunks():
    """The Jacobian is seeded 16 directions at a time (the n state directions, then t). A
    17-species chain fed by a source F·t needs two sweeps, the second carrying ∂f/∂y_16 and ∂f/∂t.
    Exact solution: the chain augmented with (s, 1), s' = 1, is linear, so expm gives it."""
    n, F = 17, 50.0
    lam = np.concatenate([np.logspace(4, -2, n - 1), [0.0]])
    B = np.zeros((n + 2, n + 2))
    B[:n, :n] = np.diag(-lam) + np.diag(lam[:-1], -1)
    B[0, n] = F  # y_0' += F s
    B[n, n + 1] = 1.0  # s' = 1
    t = np.concatenate([[0.0], np.logspace(-5, 2, 8)])
    z0 = np.zeros(n + 2)
    z0[0] = z0[n + 1] = 1.0
    exact = np.stack([expm(B * tt) @ z0 for tt in t])[:, :n]
    ys, stats = solve(forced_bateman, z0[:n], t, np.append(lam, F), method="rodas5p", rtol=1e-10,
                      atol=1e-10, return_stats=True)
    assert int(stats["status"][0]) == Status.SUCCESS
    _assert_close(ys[0], exact, rel=1e-8, floor=1e-10)


def test_van_der_pol_stiff_matches_radau():
    """μ = 1e3 in the unscaled form y1' = y2, y2' = μ(1 − y1²)y2 − y1 from (2, 0) on [0, 3000]
    (relaxation period ≈ 807 per half cycle). Saves on the slow manifold are compared tightly;
    two saves sit inside the fast jumps (y1 crossing 0 at t ≈ 807.08474 and 2421.48587, where
    |y2| ≈ 500 and the jump lasts a few 1/μ): there a phase difference δt between the two
    solvers (observed ~1e-7 after two jumps, i.e. 4e-11 of t) shows up as |y1'|·δt ≈ 500 δt in
    y1 and |y2'|·δt ≈ 2e5 δt in y2, so the comparison is loosened to 1e-3 absolute on y1 and
    1e-3 relative on y2 (observed ≈ 2e-5 and 5e-5)."""
    mu = 1e3

    def f_np(t, y):
        return np.array([y[1], mu * (1.0 - y[0] ** 2) * y[1] - y[0]])

    def jac_np(t, y):
        return np.array([[0.0, 1.0], [-2.0 * mu * y[0] * y[1] - 1.0, mu * (1.0 - y[0] ** 2)]])

    slow = np.array([0.0, 100.0, 500.0, 800.0, 1000.0, 1600.0, 2500.0, 3000.0])
    jumps = np.array([807.0845, 2421.4855])
    t = np.sort(np.concatenate([slow, jumps]))
    in_jump = np.isin(t, jumps)
    y0 = np.array([2.0, 0.0])
    ref = solve_ivp(f_np, (0.0, 3000.0), y0, method="Radau", rtol=1e-10, atol=1e-12,
                    jac=jac_np, t_eval=t).y.T
    ys, stats = solve(van_der_pol, y0, t, np.array([mu]), method="rodas5p", rtol=1e-10,
                      atol=1e-12, return_stats=True)
    assert int(stats["status"][0]) == Status.SUCCESS
    ys = np.asarray(ys)[0]
    assert np.all(np.abs(ref[in_jump, 1]) > 100.0)  # the jump saves really are mid-jump
    _assert_close(ys[~in_jump], ref[~in_jump], rel=1e-7, floor=1e-9)
    _assert_close(ys[in_jump, 0], ref[in_jump, 0], rel=0.0, floor=1e-3)
    _assert_close(ys[in_jump, 1], ref[in_jump, 1], rel=1e-3, floor=0.0)


# ---------------------------------------------------------------------------------------------
# Precision


def test_fp32_factorisation_is_accurate_to_a_looser_tolerance():
    """lu_precision="fp32": a W-method keeps its order with an approximate factorisation, so at
    rtol 1e-8 the states still match Radau to relative 1e-6 (observed 2e-8, as with fp64). What
    loosens is the linear invariant: it holds only to the factorisation's rounding, 1e-8 here
    instead of 1e-9 (observed 2e-10, against 2e-15 with fp64)."""
    kwargs = {"method": "rodas5p", "rtol": 1e-8, "atol": 1e-14, "return_stats": True}
    y64, s64 = solve(robertson, ROBERTSON_Y0, ROBERTSON_T, ROBERTSON_P, **kwargs)
    y32, s32 = solve(robertson, ROBERTSON_Y0, ROBERTSON_T, ROBERTSON_P, lu_precision="fp32",
                     **kwargs)
    assert int(s32["status"][0]) == Status.SUCCESS
    y32 = np.asarray(y32)[0]
    assert y32.dtype == np.float64  # the state stays in the solve's precision
    assert not np.array_equal(y32, np.asarray(y64)[0])  # a different factorisation ran
    _assert_close(y32, _robertson_radau(), rel=1e-6, floor=1e-12)
    assert np.max(np.abs(y32.sum(axis=1) - 1.0)) < 1e-8
    # Not dramatically more work than fp64 on this well-scaled problem.
    assert _work(s32) < 2 * _work(s64)


@pytest.mark.parametrize("lu_precision", ["fp64", "fp32"])
def test_float32_solve(lu_precision):
    f32 = np.float32
    ys, stats = solve(robertson, ROBERTSON_Y0.astype(f32), ROBERTSON_T.astype(f32),
                      ROBERTSON_P.astype(f32), method="rodas5p", rtol=1e-4, atol=1e-8,
                      lu_precision=lu_precision, return_stats=True)
    assert ys.dtype == jnp.float32
    assert int(stats["status"][0]) == Status.SUCCESS
    ys = np.asarray(ys, np.float64)[0]
    # rtol 1e-4 in float32: components to relative 1e-3 (floor 1e-7 for the tiny early y3).
    _assert_close(ys, _robertson_radau(), rel=1e-3, floor=1e-7)
    assert np.max(np.abs(ys.sum(axis=1) - 1.0)) < 1e-5  # ~100 float32 ulps


# ---------------------------------------------------------------------------------------------
# Ensembles and failures


def test_ensemble_of_mixed_stiffness_equals_each_lone_solve_bit_for_bit():
    # k2 from 3e1 (mildly stiff) to 3e7 (the classical, very stiff case).
    k2 = 3.0 * 10.0 ** np.arange(1, 8)
    P = np.stack([np.full(7, 0.04), k2, np.full(7, 1e4)], axis=1)
    t = np.concatenate([[0.0], np.logspace(-6, 5, 12)])
    kwargs = {"method": "rodas5p", "rtol": 1e-8, "atol": 1e-12, "return_stats": True}
    ens, stats = solve(robertson, ROBERTSON_Y0, t, P, **kwargs)
    assert np.all(np.asarray(stats["status"]) == Status.SUCCESS)
    assert len(set(np.asarray(stats["accepted"]).tolist())) > 1  # they really differ
    for m in range(len(k2)):
        one, s1 = solve(robertson, ROBERTSON_Y0, t, P[m], **kwargs)
        np.testing.assert_array_equal(np.asarray(ens[m]), np.asarray(one[0]))
        for key in ("accepted", "rejected", "status"):
            assert int(stats[key][m]) == int(s1[key][0])


def test_non_finite_trajectory_fails_alone():
    # Member 1's k1 is multiplied by sqrt(1 − t/5): NaN after t = 5. The others use t_fail =
    # 1e30, where the factor is exactly 1, i.e. plain Robertson.
    t = np.concatenate([[0.0], np.logspace(-6, 5, 12)])  # …, 0.1, 1, 10, …
    P = np.array([[0.04, 3e7, 1e4, 1e30], [0.04, 3e7, 1e4, 5.0], [0.04, 3e5, 1e4, 1e30]])
    kwargs = {"method": "rodas5p", "rtol": 1e-8, "atol": 1e-12}
    ys, stats = solve(robertson_expiring, ROBERTSON_Y0, t, P, return_stats=True, **kwargs)
    status = np.asarray(stats["status"])
    assert list(status) == [Status.SUCCESS, Status.NON_FINITE, Status.SUCCESS]
    ys = np.asarray(ys)
    reached = t <= 1.0
    assert np.all(np.isfinite(ys[1, reached]))
    assert np.all(np.isnan(ys[1, ~reached]))
    # The failure leaves the others bit-identical to solving them without it.
    alone = np.asarray(solve(robertson_expiring, ROBERTSON_Y0, t, P[[0, 2]], **kwargs))
    np.testing.assert_array_equal(ys[[0, 2]], alone)


def test_far_fewer_steps_than_tsit5_on_robertson():
    kwargs = {"rtol": 1e-6, "atol": 1e-10, "max_steps": 20_000, "return_stats": True}
    _, explicit = solve(robertson, ROBERTSON_Y0, ROBERTSON_T, ROBERTSON_P, method="tsit5",
                        **kwargs)
    _, stiff = solve(robertson, ROBERTSON_Y0, ROBERTSON_T, ROBERTSON_P, method="rodas5p",
                     **kwargs)
    assert int(stiff["status"][0]) == Status.SUCCESS
    rodas_work = _work(stiff)
    assert rodas_work < 500
    # Tsit5 either exhausts the budget (stability-limited steps ~ 1/(k3·y3 + k2·y2) on
    # [0, 1e5]) or needs at least 20× the attempts.
    tsit5_work = _work(explicit)
    assert (int(explicit["status"][0]) == Status.MAX_STEPS_REACHED
            or tsit5_work > 20 * rodas_work)


def test_step_budget_is_respected():
    P = np.stack([0.04 * np.linspace(0.95, 1.05, 8), np.full(8, 3e7), np.full(8, 1e4)], 1)
    # About 320 attempts are needed at rtol 1e-8: 7 and 50 run out, 400 suffices.
    for max_steps, expected in ((7, Status.MAX_STEPS_REACHED), (50, Status.MAX_STEPS_REACHED),
                                (400, Status.SUCCESS)):
        ys, stats = solve(robertson, ROBERTSON_Y0, ROBERTSON_T, P, method="rodas5p",
                          rtol=1e-8, atol=1e-12, max_steps=max_steps, return_stats=True)
        total = np.asarray(stats["accepted"]) + np.asarray(stats["rejected"])
        assert np.all(total <= max_steps)
        assert np.all(np.asarray(stats["status"]) == expected)
        assert np.all(np.isnan(np.asarray(ys)[:, -1])) == (expected == Status.MAX_STEPS_REACHED)


# ---------------------------------------------------------------------------------------------
# API


def test_module_path_is_the_same_solver():
    kwargs = {"rtol": 1e-8, "atol": 1e-12, "return_stats": True}
    a, sa = shoal.ode.rodas5p.solve(robertson, ROBERTSON_Y0, ROBERTSON_T, ROBERTSON_P, **kwargs)
    b, sb = solve(robertson, ROBERTSON_Y0, ROBERTSON_T, ROBERTSON_P, method="rodas5p", **kwargs)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert int(sa["accepted"][0]) == int(sb["accepted"][0])
    c = shoal.ode.rodas5p.solve(robertson, ROBERTSON_Y0, ROBERTSON_T, ROBERTSON_P,
                                lu_precision="fp32", **kwargs)[0]
    d = solve(robertson, ROBERTSON_Y0, ROBERTSON_T, ROBERTSON_P, method="rodas5p",
              lu_precision="fp32", **kwargs)[0]
    np.testing.assert_array_equal(np.asarray(c), np.asarray(d))


T_SHORT = jnp.asarray(np.concatenate([[0.0], np.logspace(-4, 2, 7)]))
P_K1 = jnp.stack([0.04 * jnp.linspace(0.95, 1.05, 6), jnp.full(6, 3e7), jnp.full(6, 1e4)], 1)


def test_vmap_is_one_call_and_equals_ensemble():
    def single(p):
        return solve(robertson, ROBERTSON_Y0, T_SHORT, p, method="rodas5p", rtol=1e-8,
                     atol=1e-12)

    ens = solve(robertson, ROBERTSON_Y0, T_SHORT, P_K1, method="rodas5p", rtol=1e-8, atol=1e-12)
    vm = jax.vmap(single)(P_K1)
    assert vm.shape == (6, 1, len(T_SHORT), 3)
    np.testing.assert_array_equal(np.asarray(vm[:, 0]), np.asarray(ens))
    hlo = jax.jit(jax.vmap(single)).lower(P_K1).as_text()
    # One shoal FFI call, whichever platform the default device is (cpu, or cuda on a GPU).
    assert len(re.findall(r"custom_call @shoal_ode_solve_(?:cpu|cuda)", hlo)) == 1
    assert "shoal_ode_rodas5p_lu64" in hlo  # the Rodas5P entry point, not Tsit5's


def test_jit_equals_eager():
    def run(p, y0):
        return solve(robertson, y0, T_SHORT, p, method="rodas5p", rtol=1e-8, atol=1e-12,
                     lu_precision="fp32", return_stats=True)

    eager, s_eager = run(P_K1, jnp.asarray(ROBERTSON_Y0))
    jitted, s_jit = jax.jit(run)(P_K1, jnp.asarray(ROBERTSON_Y0))
    np.testing.assert_array_equal(np.asarray(eager), np.asarray(jitted))
    for key in ("accepted", "rejected", "status"):
        np.testing.assert_array_equal(np.asarray(s_eager[key]), np.asarray(s_jit[key]))
