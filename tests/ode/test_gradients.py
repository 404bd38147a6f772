"""Gradients of shoal.ode.solve by continuous forward sensitivities (issue 4).

Closed-form sensitivities (linear cascade, forced decay, a bilinear two-species problem, the
harmonic oscillator), finite differences on stiff Robertson, jax.test_util.check_grads,
sens_error_control, convergence in rtol, ensembles and every JAX transformation. Models are module
level so each (model, method, sensitivity columns) compiles its C++ once per session.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from shoal.ode import solve

METHODS = ("rodas5p", "tsit5")


# --------------------------------------------------------------------------------------------
# Models and their closed forms
# --------------------------------------------------------------------------------------------

def cascade(y, t, p):
    """y0' = −a y0, y1' = a y0 − b y1; p = (a, b)."""
    return jnp.stack([-p[0] * y[0], p[0] * y[0] - p[1] * y[1]])


CASCADE_P = np.array([0.7, 1.3])
CASCADE_Y0 = np.array([2.0, 0.5])
CASCADE_T = np.linspace(0.0, 2.0, 5)


def cascade_exact(y0, p, t):
    a, b = p[0], p[1]
    ea, eb = jnp.exp(-a * t), jnp.exp(-b * t)
    return jnp.stack([y0[0] * ea, y0[1] * eb + a * y0[0] * (ea - eb) / (b - a)], axis=-1)


def cascade_sensitivities(y0=CASCADE_Y0, p=CASCADE_P, t=CASCADE_T):
    """Hand-derived ∂y/∂p (n_save, 2, 2) and ∂y/∂y0 (n_save, 2, 2), [save, species, input].

    y0(t) = Y0 e^{−at};  y1(t) = Y1 e^{−bt} + a Y0 (e^{−at} − e^{−bt}) / (b − a).
    """
    (a, b), (Y0, Y1) = p, y0
    ea, eb = np.exp(-a * t), np.exp(-b * t)
    d = b - a
    dp = np.zeros((t.size, 2, 2))
    dp[:, 0, 0] = -t * Y0 * ea
    dp[:, 1, 0] = Y0 * (b * (ea - eb) / d**2 - a * t * ea / d)
    dp[:, 1, 1] = -t * Y1 * eb + a * Y0 * (t * eb / d - (ea - eb) / d**2)
    dy0 = np.zeros((t.size, 2, 2))
    dy0[:, 0, 0] = ea
    dy0[:, 1, 0] = a * (ea - eb) / d
    dy0[:, 1, 1] = eb
    return dp, dy0


def forced(y, t, p):
    """y' = −λ y + F t; p = (λ, F). Its sensitivity rows depend on t explicitly (∂/∂F: + t)."""
    return -p[0] * y + p[1] * t


FORCED_P = np.array([10.0, 5.0])
FORCED_Y0 = np.array([1.0])
FORCED_T = np.linspace(0.0, 1.0, 6)


def forced_sensitivities(y0=FORCED_Y0[0], p=FORCED_P, t=FORCED_T):
    """∂y/∂(λ, F, y0), shape (n_save, 3), of y = y0 e^{−λt} + F (t/λ − (1 − e^{−λt})/λ²)."""
    lam, F = p
    e = np.exp(-lam * t)
    d_lam = -t * y0 * e + F * (-t / lam**2 + 2.0 * (1.0 - e) / lam**3 - t * e / lam**2)
    d_F = t / lam - (1.0 - e) / lam**2
    return np.stack([d_lam, d_F, e], axis=-1)


def bilinear(y, t, p):
    """y0' = −p0 y0 y1, y1' = −p1 y1: bilinear in state and parameters, with a closed form."""
    return jnp.stack([-p[0] * y[0] * y[1], -p[1] * y[1]])


BILINEAR_P = np.array([2.0, 20.0])
BILINEAR_Y0 = np.array([1.0, 3.0])
BILINEAR_T = np.linspace(0.0, 1.0, 6)


def bilinear_exact(y0, p, t):
    """y1 = Y1 e^{−p1 t}, y0 = Y0 exp(−p0 Y1 (1 − e^{−p1 t}) / p1)."""
    decay = jnp.exp(-p[1] * t)
    return jnp.stack([y0[0] * jnp.exp(-p[0] * y0[1] * (1.0 - decay) / p[1]), y0[1] * decay],
                     axis=-1)


def robertson(y, t, p):
    k1, k2, k3 = p[0], p[1], p[2]
    d1 = -k1 * y[0] + k3 * y[1] * y[2]
    d3 = k2 * y[1] ** 2
    return jnp.stack([d1, -d1 - d3, d3])


ROBERTSON_K = np.array([0.04, 3e7, 1e4])
ROBERTSON_Y0 = np.array([1.0, 0.0, 0.0])
ROBERTSON_T = np.array([0.0, 1e-3, 0.1, 1.0, 10.0, 100.0])
ROBERTSON_KW = dict(method="rodas5p", rtol=1e-10, atol=1e-16)


def pendulum(y, t, p):
    """Damped pendulum; p = (g/l, damping)."""
    return jnp.stack([y[1], -p[0] * jnp.sin(y[0]) - p[1] * y[1]])


PENDULUM_T = np.linspace(0.0, 2.0, 5)
PENDULUM_Y0S = np.array([[1.0, 0.0], [0.5, 0.3], [-0.8, 1.0], [2.0, -0.5]])
PENDULUM_PS = np.array([[4.0, 0.1], [9.0, 0.5], [1.0, 0.0], [2.5, 1.5]])
# Fixed weights for scalar losses: every save and component contributes.
PENDULUM_W = np.array([[0.3, -1.1], [0.7, 0.2], [-0.4, 0.9], [1.3, 0.5], [-0.6, -0.8]])


def pendulum_loss(ys):
    """Scalar loss of (…, n_save, 2) solutions: non-linear, so its cotangent depends on ys."""
    return jnp.sum(jnp.sin(ys) * PENDULUM_W)


def oscillator(y, t, p):
    """y0' = y1, y1' = −y0; no parameters. ∂y(t)/∂y0 is the rotation by −t."""
    return jnp.stack([y[1], -y[0]])


def _jac_p_y0(f, y0, t, p, **kw):
    """jacfwd of a lone solve with respect to params and y0: (n_save, n, n_params), (…, n)."""
    jp, jy = jax.jacfwd(lambda y, q: solve(f, y, t, q, **kw)[0], argnums=(1, 0))(
        jnp.asarray(y0), jnp.asarray(p))
    return np.asarray(jp), np.asarray(jy)


# --------------------------------------------------------------------------------------------
# Closed forms
# --------------------------------------------------------------------------------------------

def test_cascade_hand_derivation_matches_autodiff_of_closed_form():
    """Guards the reference itself: the hand-derived sensitivities are those of the solution."""
    dp, dy0 = cascade_sensitivities()
    jp, jy = jax.jacfwd(lambda y, q: cascade_exact(y, q, CASCADE_T), argnums=(1, 0))(
        CASCADE_Y0, CASCADE_P)
    np.testing.assert_allclose(dp, jp, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(dy0, jy, rtol=1e-13, atol=1e-15)
    fs = forced_sensitivities()
    jf = jax.jacfwd(lambda q: 1.0 * q[2] * jnp.exp(-q[0] * FORCED_T)
                    + q[1] * (FORCED_T / q[0] - (1 - jnp.exp(-q[0] * FORCED_T)) / q[0] ** 2))(
        jnp.array([*FORCED_P, FORCED_Y0[0]]))
    np.testing.assert_allclose(fs, jf, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("method", METHODS)
def test_cascade_jacfwd_matches_closed_form_sensitivities(method):
    jp, jy = _jac_p_y0(cascade, CASCADE_Y0, CASCADE_T, CASCADE_P, method=method)
    assert jp.shape == (CASCADE_T.size, 2, 2) and jy.shape == (CASCADE_T.size, 2, 2)
    dp, dy0 = cascade_sensitivities()
    np.testing.assert_allclose(jp, dp, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(jy, dy0, rtol=1e-6, atol=1e-12)
    # y0' does not depend on b: that column stays an exact zero, as does every column at t0.
    assert np.all(jp[:, 0, 1] == 0.0)
    np.testing.assert_array_equal(jp[0], 0.0)
    np.testing.assert_array_equal(jy[0], np.eye(2))


@pytest.mark.parametrize("method", METHODS)
def test_forced_sensitivities_match_closed_form(method):
    """Non-autonomous sensitivity rows: a wrong ∂F/∂t for them costs Rodas5P its order."""
    jp, jy = _jac_p_y0(forced, FORCED_Y0, FORCED_T, FORCED_P, method=method, rtol=1e-10,
                       atol=1e-14)
    got = np.concatenate([jp[:, 0, :], jy[:, 0, :]], axis=1)  # (n_save, [λ, F, y0])
    want = forced_sensitivities()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-13)
    # At rtol 1e-10 the measured error is ~1e-12 (both methods); a defect in the sensitivity
    # rows' time derivative would not get near this. Without sensitivity error control the
    # steps are the state's alone, so the controller cannot hide such a defect behind more steps.
    assert np.max(np.abs(got - want)) < 2e-11
    jp, jy = _jac_p_y0(forced, FORCED_Y0, FORCED_T, FORCED_P, method=method, rtol=1e-10,
                       atol=1e-14, sens_error_control=False)
    got = np.concatenate([jp[:, 0, :], jy[:, 0, :]], axis=1)
    assert np.max(np.abs(got - want)) < 2e-11


@pytest.mark.parametrize("method", METHODS)
def test_oscillator_grad_wrt_y0_without_params(method):
    """params=None (n_params = 0): the y0 columns alone; ∂y(t)/∂y0 = [[cos, sin], [−sin, cos]]."""
    t = np.linspace(0.0, 3.0, 4)
    y0 = jnp.array([1.0, 0.5])
    jy = np.asarray(jax.jacfwd(lambda y: solve(oscillator, y, t, method=method)[0])(y0))
    c, s = np.cos(t), np.sin(t)
    want = np.stack([np.stack([c, s], -1), np.stack([-s, c], -1)], axis=1)
    np.testing.assert_allclose(jy, want, rtol=1e-6, atol=1e-7)
    g = jax.grad(lambda y: jnp.sum(solve(oscillator, y, t, method=method)[0, -1]))(y0)
    np.testing.assert_allclose(np.asarray(g), want[-1].sum(axis=0), rtol=1e-6)


# --------------------------------------------------------------------------------------------
# Stiff Robertson against finite differences
# --------------------------------------------------------------------------------------------

def _robertson(y0, k):
    return np.asarray(solve(robertson, jnp.asarray(y0), ROBERTSON_T, jnp.asarray(k),
                            **ROBERTSON_KW)[0])


# A fixed, species-scaled weighting for the scalar loss (y2 is ~1e-5 of the others).
ROBERTSON_W = (np.random.default_rng(4).uniform(0.5, 1.5, (ROBERTSON_T.size, 3))
               * np.array([1.0, 1e4, 1.0]))


def _robertson_loss(ys):
    return jnp.sum(ys * ROBERTSON_W)


@pytest.fixture(scope="module")
def robertson_fd():
    """Central differences of rtol-1e-10 solves: (∂y/∂k, ∂y/∂y0), each (n_save, 3, 3).

    Steps: 1e-4 relative for the rate constants; 1e-7 absolute for the initial state. y0[1]
    starts at 0 where y2's quasi-steady state is ~3e-5 and its dynamics strongly non-linear: the
    central difference's O(h²) error at t = 1e-3 is 1.8e-2, 1.6e-3, 1.7e-4, 1.6e-5, 1.7e-6
    (relative) for h = 1e-5 … 1e-7, converging onto jacfwd.
    """
    dk, dy = [], []
    for j in range(3):
        h = 1e-4 * ROBERTSON_K[j]
        e = np.eye(3)[j] * h
        dk.append((_robertson(ROBERTSON_Y0, ROBERTSON_K + e)
                   - _robertson(ROBERTSON_Y0, ROBERTSON_K - e)) / (2 * h))
        h = 1e-7
        e = np.eye(3)[j] * h
        dy.append((_robertson(ROBERTSON_Y0 + e, ROBERTSON_K)
                   - _robertson(ROBERTSON_Y0 - e, ROBERTSON_K)) / (2 * h))
    return np.stack(dk, axis=-1), np.stack(dy, axis=-1)


def _assert_close_per_column(got, want, rtol):
    """Each (species, input) column over the saves: max |got − want| ≤ rtol · max |want|.

    Elementwise relative error is meaningless for entries that are ~1e-17 at one save and
    ~1e-9 at another (y1's dependence on k2 early on)."""
    err = np.max(np.abs(got - want), axis=0)
    scale = np.max(np.abs(want), axis=0)
    assert np.all(scale > 0)
    assert np.all(err <= rtol * scale), (err / scale)


def test_robertson_jacfwd_matches_finite_differences(robertson_fd):
    fd_k, fd_y0 = robertson_fd
    jk, jy = _jac_p_y0(robertson, ROBERTSON_Y0, ROBERTSON_T, ROBERTSON_K, **ROBERTSON_KW)
    _assert_close_per_column(jk, fd_k, 1e-4)
    _assert_close_per_column(jy, fd_y0, 1e-4)
    # The dominant entries agree elementwise too (log-sensitivities of y1 and y3 to k1).
    np.testing.assert_allclose(jk[1:, [0, 2], 0], fd_k[1:, [0, 2], 0], rtol=1e-4)
    # Mass conservation carries over: Σ_i ∂y_i/∂θ = 0 (params) and = 1 (y0).
    np.testing.assert_allclose(jk.sum(axis=1), 0.0, atol=1e-9 * np.abs(jk).max())
    np.testing.assert_allclose(jy.sum(axis=1), 1.0, atol=1e-8)


def test_robertson_grad_matches_finite_differences(robertson_fd):
    fd_k, fd_y0 = robertson_fd
    fd_gk = np.einsum("si,sij->j", ROBERTSON_W, fd_k)
    fd_gy = np.einsum("si,sij->j", ROBERTSON_W, fd_y0)
    gk, gy = jax.grad(
        lambda k, y: _robertson_loss(solve(robertson, y, ROBERTSON_T, k, **ROBERTSON_KW)[0]),
        argnums=(0, 1))(jnp.asarray(ROBERTSON_K), jnp.asarray(ROBERTSON_Y0))
    # Relative to the size of each gradient's contributions (the weighted sum cancels in part).
    gk_scale = np.einsum("si,sij->j", np.abs(ROBERTSON_W), np.abs(fd_k))
    gy_scale = np.einsum("si,sij->j", np.abs(ROBERTSON_W), np.abs(fd_y0))
    assert np.all(np.abs(np.asarray(gk) - fd_gk) <= 1e-4 * gk_scale)
    assert np.all(np.abs(np.asarray(gy) - fd_gy) <= 1e-4 * gy_scale)


# --------------------------------------------------------------------------------------------
# check_grads
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("method", METHODS)
def test_check_grads_nonlinear_per_trajectory_params(method):
    """jax.test_util.check_grads (fwd and rev, order 1) on an ensemble of damped pendulums, each
    with its own y0 and params. The solve is tight (rtol 1e-12) so the central differences
    (eps 1e-5: truncation ~1e-10, solver noise ~1e-7) see a smooth function."""
    def fn(y0s, ps):
        return solve(pendulum, y0s, PENDULUM_T, ps, method=method, rtol=1e-12, atol=1e-12)

    check_grads(fn, (jnp.asarray(PENDULUM_Y0S[:3]), jnp.asarray(PENDULUM_PS[:3])), order=1,
                modes=("fwd", "rev"), eps=1e-5, atol=1e-5, rtol=1e-5)


# --------------------------------------------------------------------------------------------
# sens_error_control
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("rtol", [1e-4, 1e-8])
def test_sens_error_control_off_reproduces_the_plain_solve(method, rtol):
    kw = dict(method=method, rtol=rtol, atol=1e-3 * rtol, return_stats=True)
    y0, p = jnp.asarray(CASCADE_Y0), jnp.asarray(CASCADE_P)
    plain, plain_stats = solve(cascade, y0, CASCADE_T, p, **kw)

    def joint(y, q, control):
        return solve(cascade, y, CASCADE_T, q, sens_error_control=control, **kw)

    (ys, stats), _ = jax.jvp(lambda y, q: joint(y, q, False), (y0, p), (y0, p))
    np.testing.assert_array_equal(np.asarray(ys), np.asarray(plain))  # bit for bit
    for key in ("accepted", "rejected", "status"):
        np.testing.assert_array_equal(np.asarray(stats[key]), np.asarray(plain_stats[key]))
    # With the sensitivities in the (RMS) norm the steps differ, but the value stays within
    # tolerance of the plain one.
    (ys_on, stats_on), _ = jax.jvp(lambda y, q: joint(y, q, True), (y0, p), (y0, p))
    assert int(stats_on["accepted"][0]) > 0
    np.testing.assert_allclose(np.asarray(ys_on), np.asarray(plain), rtol=100 * rtol,
                               atol=100 * rtol)


@pytest.mark.parametrize("method", METHODS)
def test_sens_error_control_gradient_error_at_least_as_small(method):
    """Measured on the cascade: with control the error is 0.2–0.65× the uncontrolled one over
    rtol 1e-4 … 1e-10 (both methods). Not a theorem: more, different steps need not mean a
    smaller error, e.g. forced decay at rtol 1e-4, atol 1e-12 with Rodas5P gives 1.25e-6 with
    control against 8.2e-7 without."""
    dp, dy0 = cascade_sensitivities()
    for rtol in (1e-4, 1e-6, 1e-8):
        errs = {}
        for control in (True, False):
            jp, jy = _jac_p_y0(cascade, CASCADE_Y0, CASCADE_T, CASCADE_P, method=method,
                               rtol=rtol, atol=1e-3 * rtol, sens_error_control=control)
            errs[control] = max(np.abs(jp - dp).max(), np.abs(jy - dy0).max())
        assert errs[True] <= errs[False], (rtol, errs)


# --------------------------------------------------------------------------------------------
# Convergence in rtol
# --------------------------------------------------------------------------------------------

CONVERGENCE_RTOLS = (1e-4, 1e-6, 1e-8, 1e-10)
CONVERGENCE_PROBLEMS = {
    # name: (f, y0, t_span, params, exact ∂y/∂params, exact ∂y/∂y0), [save, species, input]
    "bilinear": (bilinear, BILINEAR_Y0, BILINEAR_T, BILINEAR_P,
                 *(np.asarray(j) for j in jax.jacfwd(
                     lambda y, q: bilinear_exact(y, q, BILINEAR_T), argnums=(1, 0))(
                     BILINEAR_Y0, BILINEAR_P))),
    "forced": (forced, FORCED_Y0, FORCED_T, FORCED_P, forced_sensitivities()[:, None, :2],
               forced_sensitivities()[:, None, 2:]),
}


def _gradient_errors(problem, method, control):
    """Max error of ∂y/∂(params, y0) and the joint/plain accepted-step ratio, per rtol."""
    f, y0, t, p, exact_p, exact_y0 = CONVERGENCE_PROBLEMS[problem]
    errs, step_ratios = [], []
    for rtol in CONVERGENCE_RTOLS:
        kw = dict(method=method, rtol=rtol, atol=1e-2 * rtol, return_stats=True)

        def ys_and_stats(q, y, kw=kw):
            ys, stats = solve(f, y, t, q, sens_error_control=control, **kw)
            return ys[0], stats

        (jp, jy), stats = jax.jacfwd(ys_and_stats, argnums=(0, 1), has_aux=True)(
            jnp.asarray(p), jnp.asarray(y0))
        errs.append(max(np.abs(jp - exact_p).max(), np.abs(jy - exact_y0).max()))
        _, plain = solve(f, y0, t, p, **kw)
        step_ratios.append(int(stats["accepted"][0]) / int(plain["accepted"][0]))
    return np.array(errs), np.array(step_ratios)


@pytest.mark.parametrize("control", [True, False], ids=["sens_control", "state_control"])
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("problem", sorted(CONVERGENCE_PROBLEMS))
def test_gradient_error_converges_with_rtol(problem, method, control):
    """The error of ∂y/∂(params, y0) against the exact derivative is tolerance-proportional: it
    falls steadily (≥ 20× per two decades of rtol; measured 45–200×), stays below rtol and
    reaches a small absolute level.

    This is what an exact method on the sensitivities buys. Measured on copies of the Rodas5P
    joint stepper with (a) the coupling L_k k_y dropped (block-diagonal W approximation) and
    (b) the sensitivity rows' ∂F/∂t dropped: with the steps chosen by the state alone
    (sens_error_control=False) their error falls only ~3–5× per two decades (bilinear 1.7e-4 →
    1.3e-6, forced 3.4e-4 → 4.7e-6 for (a)); with sensitivity error control the controller hides
    the defect in the error but needs 10–1000× the plain solve's steps (measured here: ≤ 1.3×;
    the bound is 1.5×)."""
    errs, step_ratios = _gradient_errors(problem, method, control)
    assert np.all(errs < np.array(CONVERGENCE_RTOLS)), errs
    assert np.all(errs[1:] * 20 <= errs[:-1]), errs
    slope = np.polyfit(np.log10(CONVERGENCE_RTOLS), np.log10(errs), 1)[0]
    assert slope > 0.75, (slope, errs)
    assert errs[-1] < (5e-11 if control else 2e-10), errs
    if control:
        assert np.all(step_ratios <= 1.5), step_ratios
    else:
        np.testing.assert_array_equal(step_ratios, 1.0)


# --------------------------------------------------------------------------------------------
# Ensembles and JAX transformations
# --------------------------------------------------------------------------------------------

def _ensemble_loss(y0s, ps, method, **kw):
    return pendulum_loss(solve(pendulum, y0s, PENDULUM_T, ps, method=method, **kw))


def _lone_loss(y0, p, method, **kw):
    return pendulum_loss(solve(pendulum, y0, PENDULUM_T, p, method=method, **kw)[0])


def _assert_same_contraction(actual, desired):
    """Bit for bit on the CPU: each trajectory steps alone, and the contraction of its cotangent
    with its sensitivity columns is per trajectory. On a GPU that contraction is XLA's dot, whose
    summation order may change with the ensemble's size (measured on an H200: 1–3 ulp between 4
    members and 1); the columns themselves stay bit-identical (the jacfwd check below)."""
    actual, desired = np.asarray(actual), np.asarray(desired)
    if jnp.zeros(()).devices().pop().platform == "cpu":
        np.testing.assert_array_equal(actual, desired)
    else:
        np.testing.assert_allclose(actual, desired, rtol=0,
                                   atol=8 * np.finfo(desired.dtype).eps * np.abs(desired).max())


@pytest.mark.parametrize("method", METHODS)
def test_ensemble_gradients_equal_lone_solves(method):
    y0s, ps = jnp.asarray(PENDULUM_Y0S), jnp.asarray(PENDULUM_PS)
    gy, gp = jax.grad(_ensemble_loss, argnums=(0, 1))(y0s, ps, method)
    jp_ens = np.asarray(jax.jacfwd(
        lambda q: solve(pendulum, y0s, PENDULUM_T, q, method=method))(ps))
    for m in range(len(ps)):
        gy1, gp1 = jax.grad(_lone_loss, argnums=(0, 1))(y0s[m], ps[m], method)
        _assert_same_contraction(gy[m], gy1)
        _assert_same_contraction(gp[m], gp1)
        jp1 = np.asarray(jax.jacfwd(
            lambda q, y=y0s[m]: solve(pendulum, y, PENDULUM_T, q, method=method))(ps[m]))
        np.testing.assert_array_equal(jp_ens[m, :, :, m, :], jp1[0])
        # ... and trajectory m does not depend on the others' params.
        others = np.delete(jp_ens[m], m, axis=2)
        np.testing.assert_array_equal(others, 0.0)


@pytest.mark.parametrize("method", METHODS)
def test_grad_through_vmap_equals_grad_of_native_ensemble(method):
    y0s, ps = jnp.asarray(PENDULUM_Y0S), jnp.asarray(PENDULUM_PS)

    def vmapped(y0s, ps):
        ys = jax.vmap(lambda y, p: solve(pendulum, y, PENDULUM_T, p, method=method))(y0s, ps)
        return pendulum_loss(ys[:, 0])

    native = jax.grad(_ensemble_loss, argnums=(0, 1))(y0s, ps, method)
    through = jax.grad(vmapped, argnums=(0, 1))(y0s, ps)
    jitted = jax.jit(jax.grad(vmapped, argnums=(0, 1)))(y0s, ps)
    for a, b, c in zip(native, through, jitted, strict=True):  # bit for bit
        np.testing.assert_array_equal(np.asarray(b), np.asarray(a))
        np.testing.assert_array_equal(np.asarray(c), np.asarray(a))


@pytest.mark.parametrize("method", METHODS)
def test_vmap_of_grad_and_jit(method):
    y0s, ps = jnp.asarray(PENDULUM_Y0S), jnp.asarray(PENDULUM_PS)
    native = jax.grad(_ensemble_loss, argnums=(0, 1))(y0s, ps, method)
    per = jax.vmap(jax.grad(lambda y, p: _lone_loss(y, p, method), argnums=(0, 1)))(y0s, ps)
    per_jit = jax.jit(jax.vmap(jax.grad(lambda y, p: _lone_loss(y, p, method),
                                        argnums=(0, 1))))(y0s, ps)
    native_jit = jax.jit(jax.grad(lambda y, p: _ensemble_loss(y, p, method),
                                  argnums=(0, 1)))(y0s, ps)
    for a, b, c, d in zip(native, per, per_jit, native_jit, strict=True):  # bit for bit
        np.testing.assert_array_equal(np.asarray(b), np.asarray(a))
        np.testing.assert_array_equal(np.asarray(c), np.asarray(a))
        np.testing.assert_array_equal(np.asarray(d), np.asarray(a))


@pytest.mark.parametrize("method", METHODS)
def test_jvp_jacrev_value_and_grad_agree(method):
    y0s, ps = jnp.asarray(PENDULUM_Y0S), jnp.asarray(PENDULUM_PS)

    def ys_of(q):
        return solve(pendulum, y0s, PENDULUM_T, q, method=method)

    plain = ys_of(ps)
    jf = jax.jacfwd(ys_of)(ps)
    jr = jax.jacrev(ys_of)(ps)
    np.testing.assert_allclose(np.asarray(jr), np.asarray(jf), rtol=1e-13, atol=1e-15)
    dp = jnp.asarray(np.random.default_rng(0).normal(size=ps.shape))
    out, tan = jax.jvp(ys_of, (ps,), (dp,))
    np.testing.assert_allclose(np.asarray(out), np.asarray(plain), rtol=1e-6, atol=1e-8)
    # Few parameters: one joint solve with a column per parameter serves jvp and jacfwd alike.
    np.testing.assert_allclose(np.asarray(tan), np.einsum("abcde,de->abc", jf, dp),
                               rtol=1e-12, atol=1e-14)
    value, grad = jax.value_and_grad(lambda q: pendulum_loss(ys_of(q)))(ps)
    np.testing.assert_allclose(float(value), float(pendulum_loss(plain)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(grad), np.asarray(jax.grad(
        lambda q: pendulum_loss(ys_of(q)))(ps)), rtol=1e-15, atol=0)


@pytest.mark.parametrize("method", METHODS)
def test_return_stats_under_differentiation(method):
    y0s, ps = jnp.asarray(PENDULUM_Y0S), jnp.asarray(PENDULUM_PS)

    def with_stats(q):
        return solve(pendulum, y0s, PENDULUM_T, q, method=method, return_stats=True)

    _, plain_stats = with_stats(ps)
    (ys, stats), (dys, dstats) = jax.jvp(with_stats, (ps,), (jnp.ones_like(ps),))
    assert ys.shape == dys.shape == (4, PENDULUM_T.size, 2)
    assert set(stats) == {"accepted", "rejected", "status", "sparse"}
    for key in ("accepted", "rejected", "status"):
        assert stats[key].shape == (4,) and stats[key].dtype == jnp.int32
    assert stats["sparse"].shape == (4,) and stats["sparse"].dtype == jnp.bool_
    np.testing.assert_array_equal(np.asarray(stats["status"]), 0)
    # The joint solve's own counts: it controls the sensitivities' error too, so they differ
    # from the plain solve's, but not by much.
    ratio = np.asarray(stats["accepted"]) / np.asarray(plain_stats["accepted"])
    assert np.all((ratio >= 0.5) & (ratio <= 1.5)), ratio
    # grad with the stats as auxiliary output, also under jit: they are the joint solve's
    # (the same params columns as the jvp above, so the same steps).
    def loss_and_stats(q):
        ys, st = with_stats(q)
        return pendulum_loss(ys), st

    for fn in (jax.grad, lambda f, **kw: jax.jit(jax.grad(f, **kw))):
        g, aux = fn(loss_and_stats, has_aux=True)(ps)
        assert g.shape == ps.shape and np.all(np.isfinite(np.asarray(g)))
        for key in stats:
            np.testing.assert_array_equal(np.asarray(aux[key]), np.asarray(stats[key]))


def _entries(jaxpr_text):
    """The compiled joint-solve entry points a program calls (the ensemble primitive's
    ModelBuild), without their SIMD lanes suffix; a gradient also runs the plain solve."""
    return sorted(e.split("_lanes")[0]
                  for e in set(re.findall(r"ModelBuild\((shoal_ode_\w+)", jaxpr_text))
                  if "_sens" in e)


@pytest.mark.parametrize("method", METHODS)
def test_only_perturbed_inputs_columns_are_integrated(method):
    y0, p = jnp.asarray(CASCADE_Y0), jnp.asarray(CASCADE_P)

    def loss(y, q):
        return jnp.sum(solve(cascade, y, CASCADE_T, q, method=method) ** 2)

    def entries(fn, *args):
        return _entries(str(jax.make_jaxpr(fn)(*args)))

    assert entries(loss, y0, p) == []
    assert [e.split("_sens")[1] for e in entries(jax.grad(loss, argnums=1), y0, p)] == ["_p"]
    assert [e.split("_sens")[1] for e in entries(jax.grad(loss, argnums=0), y0, p)] == ["_y0"]
    assert [e.split("_sens")[1]
            for e in entries(jax.grad(loss, argnums=(0, 1)), y0, p)] == ["_y0_p"]
    # A params-only gradient equals the matching columns of the joint (y0, params) one.
    gp = jax.grad(loss, argnums=1)(y0, p)
    np.testing.assert_allclose(np.asarray(gp), np.asarray(jax.grad(loss, argnums=(0, 1))(y0, p)[1]),
                               rtol=1e-6)


def test_hessian_raises_not_implemented():
    y0 = jnp.asarray(CASCADE_Y0)

    def loss(q):
        return jnp.sum(solve(cascade, y0, CASCADE_T, q) ** 2)

    with pytest.raises(NotImplementedError, match="second-order"):
        jax.hessian(loss)(jnp.asarray(CASCADE_P))


@pytest.mark.parametrize("method", METHODS)
def test_float32_gradients(method):
    y0 = jnp.asarray(CASCADE_Y0, jnp.float32)
    p = jnp.asarray(CASCADE_P, jnp.float32)
    kw = dict(method=method, rtol=1e-6, atol=1e-8)
    jp, jy = jax.jacfwd(lambda y, q: solve(cascade, y, CASCADE_T, q, **kw)[0],
                        argnums=(1, 0))(y0, p)
    assert jp.dtype == jy.dtype == jnp.float32
    dp, dy0 = cascade_sensitivities()
    np.testing.assert_allclose(np.asarray(jp), dp, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(jy), dy0, rtol=1e-4, atol=1e-5)
    w = np.linspace(0.5, 1.5, CASCADE_T.size * 2).reshape(CASCADE_T.size, 2)
    g = jax.grad(lambda q: jnp.sum(solve(cascade, y0, CASCADE_T, q, **kw)[0] * w))(p)
    assert g.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(g), np.einsum("si,sij->j", w, dp), rtol=1e-4)
