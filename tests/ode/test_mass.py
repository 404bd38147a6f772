"""Mass matrices: M y' = f(y, t, p) with the Rosenbrock methods, M singular (index-1 DAEs) or not.

References: closed forms (a linear system behind an invertible, non-diagonal M), SciPy's Radau on
the ODE form of the same problem (Robertson, whose third equation becomes the conservation law
y1 + y2 + y3 = 1; the pendulum, whose index-1 form carries the multiplier as a variable), finite
differences for the forward sensitivities, and the ODE form's own gradient.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

from shoal import ode

jax.config.update("jax_enable_x64", True)

ROSENBROCK = ["rodas5p", "rodas4", "rosenbrock23"]
K = jnp.array([0.04, 3e7, 1e4])
DAE_MASS = np.diag([1.0, 1.0, 0.0])


def robertson_ode(y, t, k):
    return jnp.stack([-k[0] * y[0] + k[2] * y[1] * y[2],
                      k[0] * y[0] - k[1] * y[1] ** 2 - k[2] * y[1] * y[2],
                      k[1] * y[1] ** 2])


def robertson_dae(y, t, k):
    return jnp.stack([-k[0] * y[0] + k[2] * y[1] * y[2],
                      k[0] * y[0] - k[1] * y[1] ** 2 - k[2] * y[1] * y[2],
                      y[0] + y[1] + y[2] - 1.0])


ROBERTSON_TS = np.array([0.0, 1e-3, 0.4, 4.0, 40.0, 400.0, 4e3, 4e4])


@functools.lru_cache(maxsize=1)
def _robertson_radau():
    """The ODE form by SciPy's Radau (rtol 1e-12) at ROBERTSON_TS, in NumPy with its Jacobian."""
    k1, k2, k3 = np.asarray(K)

    def f(t, y):
        return [-k1 * y[0] + k3 * y[1] * y[2], k1 * y[0] - k2 * y[1] ** 2 - k3 * y[1] * y[2],
                k2 * y[1] ** 2]

    def jac(t, y):
        return [[-k1, k3 * y[2], k3 * y[1]],
                [k1, -2 * k2 * y[1] - k3 * y[2], -k3 * y[1]],
                [0.0, 2 * k2 * y[1], 0.0]]

    sol = solve_ivp(f, (0.0, ROBERTSON_TS[-1]), [1.0, 0.0, 0.0], method="Radau", jac=jac,
                    t_eval=ROBERTSON_TS, rtol=1e-12, atol=1e-16)
    assert sol.success
    return sol.y.T


@pytest.mark.parametrize("method", ROSENBROCK)
def test_robertson_dae_matches_radau_on_the_ode_form(method):
    ts = jnp.asarray(ROBERTSON_TS)
    y0 = jnp.array([1.0, 0.0, 0.0])
    rtol = 1e-10 if method != "rosenbrock23" else 1e-8
    ys, stats = ode.solve(robertson_dae, y0, ts, K, mass=DAE_MASS, method=method, rtol=rtol,
                          atol=1e-14, return_stats=True)
    assert int(stats["status"][0]) == ode.Status.SUCCESS
    ref = _robertson_radau()
    scale = np.array([1.0, 4e-5, 1.0])  # y2 peaks near 3.6e-5
    err = np.max(np.abs(np.asarray(ys[0]) - ref) / scale)
    assert err < (1e-8 if method != "rosenbrock23" else 1e-5), err
    # The algebraic equation holds at every save.
    np.testing.assert_allclose(np.sum(ys[0], axis=1), 1.0, atol=1e-13)
    # About the ODE form's cost: the same order of accepted steps.
    _, ode_stats = ode.solve(robertson_ode, y0, ts, K, method=method, rtol=rtol, atol=1e-14,
                             return_stats=True)
    assert 0.5 < int(stats["accepted"][0]) / int(ode_stats["accepted"][0]) < 2


@pytest.mark.parametrize("sparsity", ["dense", "auto"])
def test_a_non_diagonal_invertible_mass_gives_the_closed_form(sparsity):
    # M y' = M A y has y = exp(A t) y0 whatever the invertible M; A is diagonal, so f's Jacobian
    # pattern is M's and a sparse pattern needs M's entries outside the diagonal.
    rng = np.random.default_rng(3)
    n = 5
    mass = np.eye(n) + 0.3 * np.triu(rng.standard_normal((n, n)), 1)
    rates = jnp.array([-1.0, -0.5, 0.3, -2.0, 0.1])
    m_const = jnp.asarray(mass)

    def f(y, t, p):
        return m_const @ (rates * y)

    y0 = jnp.arange(1.0, n + 1)
    ts = jnp.linspace(0.0, 2.0, 5)
    ys = ode.solve(f, y0, ts, mass=mass, sparsity=sparsity, rtol=1e-11, atol=1e-13)
    exact = np.exp(np.outer(ts, rates)) * np.asarray(y0)
    np.testing.assert_allclose(ys[0], exact, rtol=2e-9)


def test_a_transformed_dae_with_a_full_singular_mass_matches_the_diagonal_one():
    # L M y' = L f for an invertible L: the same solution, but M = L diag(1, 1, 0) is full and its
    # left null space is no longer a unit vector.
    L = np.array([[2.0, 0.5, 1.0], [-1.0, 1.0, 0.5], [0.3, -0.2, 1.5]])
    l_const = jnp.asarray(L)
    ts = jnp.array([0.0, 1.0, 100.0, 1e4])
    y0 = jnp.array([1.0, 0.0, 0.0])
    base = ode.solve(robertson_dae, y0, ts, K, mass=DAE_MASS, rtol=1e-10, atol=1e-14)
    moved = ode.solve(lambda y, t, k: l_const @ robertson_dae(y, t, k), y0, ts, K,
                      mass=L @ DAE_MASS, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(moved, base, rtol=1e-7, atol=1e-13)


G = 9.81


def pendulum_index1(y, t, p):
    # (x, y, u, v, λ): x'' = −λ x, y'' = −λ y − g, with the constraint x² + y² = ℓ² differentiated
    # twice: 0 = u² + v² − λ (x² + y²) − g y.
    x, yy, u, v, lam = y
    g = p[0]
    constraint = u * u + v * v - lam * (x * x + yy * yy) - g * yy
    return jnp.stack([u, v, -lam * x, -lam * yy - g, constraint])


PENDULUM_MASS = np.diag([1.0, 1.0, 1.0, 1.0, 0.0])


def test_pendulum_in_index1_form_follows_the_angle_equation():
    theta0, length = 0.7, 1.0
    x0, y0_ = length * np.sin(theta0), -length * np.cos(theta0)
    lam0 = -G * y0_ / length**2  # at rest: u = v = 0
    start = jnp.array([x0, y0_, 0.0, 0.0, lam0])
    ts = jnp.linspace(0.0, 5.0, 11)
    ys = ode.solve(pendulum_index1, start, ts, jnp.array([G]), mass=PENDULUM_MASS, rtol=1e-10,
                   atol=1e-12)
    angle = solve_ivp(lambda t, s: [s[1], -G / length * np.sin(s[0])], (0.0, 5.0),
                      [theta0, 0.0], t_eval=np.asarray(ts), rtol=1e-12, atol=1e-14, method="DOP853")
    np.testing.assert_allclose(ys[0, :, 0], length * np.sin(angle.y[0]), atol=1e-7)
    np.testing.assert_allclose(ys[0, :, 1], -length * np.cos(angle.y[0]), atol=1e-7)


def test_dae_init_solve_finds_the_multiplier_and_differentiates_it():
    # At rest at angle θ, λ0 = −g y0 / ℓ² = g cos θ: 'solve' finds it from a wrong guess, and its
    # derivative with respect to g is cos θ (the implicit-function rule).
    theta0 = 0.7
    start = jnp.array([np.sin(theta0), -np.cos(theta0), 0.0, 0.0, 123.0])
    ts = jnp.array([0.0, 0.5])

    def multiplier(g):
        return ode.solve(pendulum_index1, start, ts, jnp.stack([g]), mass=PENDULUM_MASS,
                         dae_init="solve", rtol=1e-10, atol=1e-12)[0, 0, 4]

    np.testing.assert_allclose(multiplier(G), G * np.cos(theta0), rtol=1e-12)
    np.testing.assert_allclose(jax.grad(multiplier)(G), np.cos(theta0), rtol=1e-9)
    # The differential components are held; an algebraic guess's tangent vanishes.
    ys = ode.solve(pendulum_index1, start, ts, jnp.array([G]), mass=PENDULUM_MASS,
                   dae_init="solve")
    np.testing.assert_array_equal(ys[0, 0, :4], start[:4])
    d_guess = jax.grad(lambda s: ode.solve(pendulum_index1, s, ts, jnp.array([G]),
                                           mass=PENDULUM_MASS, dae_init="solve")[0, -1, 0])(start)
    assert d_guess[4] == 0.0 and d_guess[0] != 0.0


def test_an_inconsistent_y0_is_refused_eagerly_and_reported_under_jit():
    ts = jnp.array([0.0, 1.0])
    y0 = jnp.array([[1.0, 0.0, 0.0], [1.0, 0.0, 0.3], [0.5, 0.0, 0.5]])
    with pytest.raises(ValueError, match=r"member\(s\) 1 .*dae_init='solve'"):
        ode.solve(robertson_dae, y0, ts, K, mass=DAE_MASS)

    @jax.jit
    def run(y0):
        return ode.solve(robertson_dae, y0, ts, K, mass=DAE_MASS, return_stats=True)

    ys, stats = run(y0)
    assert list(np.asarray(stats["status"])) == [0, ode.Status.INVALID_INPUT, 0]
    assert np.all(np.isnan(ys[1])) and not np.any(np.isnan(ys[np.array([0, 2])]))
    alone = ode.solve(robertson_dae, y0[2], ts, K, mass=DAE_MASS)
    np.testing.assert_array_equal(ys[2], alone[0])
    # 'solve' moves only the algebraic component: y3 = 1 − y1 − y2.
    fixed = ode.solve(robertson_dae, y0, ts, K, mass=DAE_MASS, dae_init="solve")
    np.testing.assert_allclose(fixed[:, 0], [[1.0, 0.0, 0.0]] * 2 + [[0.5, 0.0, 0.5]],
                               atol=1e-15)


def test_an_index2_system_is_refused():
    # y1' = y2, 0 = y1 − sin t: the algebraic equation does not involve y2, so N^T J Z = 0.
    def f(y, t, p):
        return jnp.stack([y[1], y[0] - jnp.sin(t)])

    with pytest.raises(ValueError, match="not index 1"):
        ode.solve(f, jnp.array([0.0, 1.0]), jnp.array([0.0, 1.0]), mass=np.diag([1.0, 0.0]))


@pytest.mark.parametrize("method", ["rodas5p", "rosenbrock23"])
def test_forward_sensitivities_match_finite_differences_and_the_ode_form(method):
    ts = jnp.array([0.0, 1.0, 40.0])
    y0 = jnp.array([1.0, 0.0, 0.0])
    rtol = 1e-10 if method == "rodas5p" else 1e-7

    def final(f, mass):
        return lambda k: ode.solve(f, y0, ts, k, mass=mass, method=method, rtol=rtol,
                                   atol=1e-14)[0, -1, np.array([0, 2])]

    dae = final(robertson_dae, DAE_MASS)
    jac = jax.jacfwd(dae)(K)
    jac_rev = jax.jacrev(dae)(K)
    np.testing.assert_allclose(jac_rev, jac, rtol=1e-12)
    ode_jac = jax.jacfwd(final(robertson_ode, None))(K)
    np.testing.assert_allclose(jac, ode_jac, rtol=1e-5 if method == "rodas5p" else 1e-3)
    if method == "rodas5p":
        for i in range(3):
            step = 1e-5 * K[i]
            fd = (dae(K.at[i].add(step)) - dae(K.at[i].add(-step))) / (2 * step)
            np.testing.assert_allclose(jac[:, i], fd, rtol=1e-5)


def test_lanes_and_the_scalar_path_give_the_same_bits_and_sparse_agrees():
    rng = np.random.default_rng(0)
    y0 = jnp.asarray(np.tile([1.0, 0.0, 0.0], (19, 1)))
    k = jnp.asarray(np.asarray(K) * rng.uniform(0.5, 2.0, (19, 3)))
    ts = jnp.array([0.0, 1.0, 100.0])

    def run(**kw):
        return ode.solve(robertson_dae, y0, ts, k, mass=DAE_MASS, rtol=1e-9, atol=1e-13, **kw)

    scalar = run(lanes=1)
    np.testing.assert_array_equal(run(lanes=8), scalar)
    np.testing.assert_allclose(run(sparsity="auto"), scalar, rtol=1e-7, atol=1e-14)
    def loss(k, lanes):
        return ode.solve(robertson_dae, y0, ts, k, mass=DAE_MASS, lanes=lanes)[:, -1, 2].sum()

    np.testing.assert_array_equal(jax.grad(loss)(k, 8), jax.grad(loss)(k, 1))


def test_bad_mass_arguments_are_refused_clearly():
    ts = jnp.array([0.0, 1.0])
    y0 = jnp.array([1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match=r"mass must have shape \(3, 3\)"):
        ode.solve(robertson_dae, y0, ts, K, mass=np.eye(2))
    with pytest.raises(ValueError, match="square"):
        ode.solve(robertson_dae, y0, ts, K, mass=np.ones((3, 2)))
    with pytest.raises(ValueError, match="finite"):
        ode.solve(robertson_dae, y0, ts, K, mass=np.diag([1.0, np.nan, 0.0]))
    with pytest.raises(ValueError, match="explicit and cannot solve .* singular"):
        ode.solve(robertson_dae, y0, ts, K, mass=DAE_MASS, method="tsit5")
    with pytest.raises(ValueError, match="jnp.linalg.solve"):
        ode.solve(robertson_ode, y0, ts, K, mass=2 * np.eye(3), method="vern7")
    with pytest.raises(ValueError, match="dae_init must be"):
        ode.solve(robertson_dae, y0, ts, K, mass=DAE_MASS, dae_init="fix")
    with pytest.raises(ValueError, match="dae_init must be"):
        ode.solve(robertson_dae, y0, ts, K, mass=DAE_MASS, dae_init=np.array(["check", "solve"]))
    with pytest.raises(NotImplementedError, match="t_span"):
        jax.grad(lambda t: ode.solve(robertson_dae, y0, jnp.stack([0.0, t]), K, mass=DAE_MASS,
                                     save_fn=lambda y, t, k: y * 2.0)[0, -1, 0])(1.0)
    with pytest.raises(TypeError, match="constant matrix"):
        jax.jit(lambda m: ode.solve(robertson_dae, y0, ts, K, mass=m))(jnp.asarray(DAE_MASS))


@pytest.mark.parametrize(("method", "sparsity"), [("rodas5p", "dense"), ("rosenbrock23", "dense"),
                                                  ("rodas5p", "auto")])
def test_the_adjoint_matches_forward_sensitivities_on_the_same_steps(method, sparsity):
    # A full singular M (L diag(1, 1, 0)), so Mᵀ differs from M in the transposed couplings;
    # with the sparse solver, its transposed solves over a pattern holding M's entries.
    L = np.array([[2.0, 0.5, 1.0], [-1.0, 1.0, 0.5], [0.3, -0.2, 1.5]])
    l_const = jnp.asarray(L)
    ts = jnp.array([0.0, 1.0, 40.0])
    y0 = jnp.array([[1.0, 0.0, 0.0], [0.9, 0.05, 0.05]])

    def loss(k, y0, adjoint):
        ys = ode.solve(lambda y, t, k: l_const @ robertson_dae(y, t, k), y0, ts, k,
                       mass=L @ DAE_MASS, method=method, rtol=1e-8, atol=1e-12,
                       sparsity=sparsity, adjoint=adjoint, sens_error_control=False,
                       first_step=1e-6)
        return jnp.sum(ys[:, 1:, 0] * 2.0 + ys[:, 1:, 2])

    forward = jax.grad(loss, argnums=(0, 1))(K, y0, False)
    adjoint = jax.grad(loss, argnums=(0, 1))(K, y0, True)
    for a, f in zip(adjoint, forward, strict=True):
        np.testing.assert_allclose(a, f, rtol=1e-9, atol=1e-14)


def test_events_doses_and_save_fn_work_on_a_dae_as_on_the_ode_form():
    # A terminal event (y1 falls to 0.6), a dose of y1 at a stop (a jump that keeps the
    # conservation law: the amount moves from y3 to y1) and a save function.
    ts = jnp.array([0.0, 1.0, 5.0, 1e3])

    def dose(y, t, k):
        return y + jnp.array([0.2, 0.0, -0.2])

    common = dict(tstops=jnp.array([2.0]), jump_fn=dose, rtol=1e-10, atol=1e-14,
                  event=ode.Event(lambda y, t, k: y[0] - 0.6, terminal=True),
                  save_fn=lambda y, t, k: jnp.stack([y[0], y[0] + y[1] + y[2]]),
                  return_stats=True)
    y0 = jnp.array([1.0, 0.0, 0.0])
    dae, dae_stats = ode.solve(robertson_dae, y0, ts, K, mass=DAE_MASS, **common)
    ref, ref_stats = ode.solve(robertson_ode, y0, ts, K, **common)
    assert int(dae_stats["status"][0]) == int(ref_stats["status"][0]) == ode.Status.EVENT
    np.testing.assert_allclose(dae_stats["event_time"], ref_stats["event_time"], rtol=1e-8)
    np.testing.assert_allclose(dae, ref, rtol=1e-8, equal_nan=True)
    np.testing.assert_allclose(dae[0, :3, 1], 1.0, atol=1e-13)


def test_steady_state_of_a_dae_and_its_derivative():
    # A + B <-> C with A + C = 1 as the algebraic equation and B fed towards 1: at steady state
    # B = 1, A = k2 / (k1 + k2), so dA/dk1 = −k2 / (k1 + k2)².
    def f(y, t, p):
        a, b, c = y
        r = p[0] * a * b - p[1] * c
        return jnp.stack([-r, -r + p[2] * (1.0 - b), a + c - 1.0])

    y0, p = jnp.array([1.0, 0.5, 0.0]), jnp.array([2.0, 1.0, 0.5])
    ys = ode.steady_state(f, y0, p, mass=DAE_MASS)
    np.testing.assert_allclose(ys[0], [1.0 / 3.0, 1.0, 2.0 / 3.0], rtol=1e-9)
    jac = jax.jacfwd(lambda p: ode.steady_state(f, y0, p, mass=DAE_MASS)[0, 0])(p)
    np.testing.assert_allclose(jac[:2], [-1.0 / 9.0, 2.0 / 9.0], rtol=1e-7)
    assert abs(float(jac[2])) < 1e-12


def test_error_weights_can_leave_the_algebraic_component_out_of_step_control():
    ts = jnp.asarray(ROBERTSON_TS)
    y0 = jnp.array([1.0, 0.0, 0.0])
    common = dict(mass=DAE_MASS, rtol=1e-10, atol=1e-14, return_stats=True)
    ys, stats = ode.solve(robertson_dae, y0, ts, K, error_weights=jnp.array([1.0, 1.0, 0.0]),
                          **common)
    _, all_stats = ode.solve(robertson_dae, y0, ts, K, **common)
    assert int(stats["accepted"][0]) != int(all_stats["accepted"][0])  # the weight acted
    scale = np.array([1.0, 4e-5, 1.0])
    assert np.max(np.abs(np.asarray(ys[0]) - _robertson_radau()) / scale) < 1e-8


def test_the_akzo_nobel_problem_matches_the_published_reference():
    # The chemical Akzo Nobel problem of the IVP test set (Mazzia & Magherini, Bari): six
    # species, the sixth algebraic (0 = Ks y1 y4 − y6), t in [0, 180]; its reference y(180).
    k1, k2, k3, k4, kk, kla, ks, pco2, henry = 18.7, 0.58, 0.09, 0.42, 34.4, 3.3, 115.83, 0.9, 737.0

    def f(y, t, p):
        r1 = k1 * y[0] ** 4 * jnp.sqrt(y[1])
        r2 = k2 * y[2] * y[3]
        r3 = k2 / kk * y[0] * y[4]
        r4 = k3 * y[0] * y[3] ** 2
        r5 = k4 * y[5] ** 2 * jnp.sqrt(y[1])
        fin = kla * (pco2 / henry - y[1])
        return jnp.stack([-2 * r1 + r2 - r3 - r4, -0.5 * r1 - r4 - 0.5 * r5 + fin,
                          r1 - r2 + r3, -r2 + r3 - 2 * r4, r2 - r3 + r5, ks * y[0] * y[3] - y[5]])

    y0 = jnp.array([0.444, 0.00123, 0.0, 0.007, 0.0, ks * 0.444 * 0.007])
    reference = np.array([0.1150794920661702, 0.1203831471567715e-2, 0.1611562887407974,
                          0.3656156421249283e-3, 0.1708010885264404e-1, 0.4873531310307455e-2])
    ys = ode.solve(f, y0, jnp.array([0.0, 180.0]), mass=np.diag([1.0, 1, 1, 1, 1, 0]),
                   rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(ys[0, -1], reference, rtol=1e-10)


def test_save_and_start_times_and_event_times_differentiate_as_on_the_ode_form():
    # dy/dt of the DAE (_mass.rate_function): the differential rows from M y' = f, the algebraic
    # ones from the algebraic equation differentiated along the solution.
    y0 = jnp.array([1.0, 0.0, 0.0])
    common = dict(rtol=1e-10, atol=1e-14)

    def saves(f, mass):
        return lambda ts: ode.solve(f, y0, ts, K, mass=mass, **common)[0]

    ts = jnp.array([0.5, 3.0, 40.0])
    dae = jax.jacfwd(saves(robertson_dae, DAE_MASS))(ts)
    ref = jax.jacfwd(saves(robertson_ode, None))(ts)
    # (y2's rate is a difference of terms 1e5 times larger: the two solutions' 1e-10 differences
    # show at ~1e-11 absolute there.)
    np.testing.assert_allclose(dae, ref, rtol=1e-6, atol=1e-10)
    # A time where y3 is still moving fast: its rate comes from y1 + y2 + y3 = 1 differentiated.
    assert abs(float(dae[1, 2, 1])) > 1e-4

    event = ode.Event(lambda y, t, k: y[0] - 0.8)  # near t = 15

    def event_time(f, mass):
        return lambda k: ode.solve(f, y0, jnp.array([0.0, 50.0]), k, mass=mass, event=event,
                                   return_stats=True, **common)[1]["event_time"][0]

    assert 10.0 < float(event_time(robertson_dae, DAE_MASS)(K)) < 20.0
    got = jax.jacfwd(event_time(robertson_dae, DAE_MASS))(K)
    want = jax.jacfwd(event_time(robertson_ode, None))(K)
    assert float(got[0]) < 0.0  # a faster first reaction reaches 0.8 sooner
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-14)
    np.testing.assert_allclose(jax.grad(event_time(robertson_dae, DAE_MASS))(K), got, rtol=1e-9)


def test_float32_and_a_dae_init_solve_without_a_root():
    ts = jnp.asarray(ROBERTSON_TS[:5], jnp.float32)
    ys = ode.solve(robertson_dae, jnp.array([1.0, 0.0, 0.0], jnp.float32), ts,
                   K.astype(jnp.float32), mass=DAE_MASS, rtol=1e-5, atol=1e-9)
    assert ys.dtype == jnp.float32
    scale = np.array([1.0, 4e-5, 1.0])
    assert np.max(np.abs(np.asarray(ys[0], np.float64) - _robertson_radau()[:5]) / scale) < 1e-3

    def no_root(y, t, p):  # 0 = y2² + 1 has no real solution
        return jnp.stack([-y[0], y[1] ** 2 + 1.0])

    with pytest.raises(ValueError, match="did not converge"):
        ode.solve(no_root, jnp.array([1.0, 0.0]), jnp.array([0.0, 1.0]),
                  mass=np.diag([1.0, 0.0]), dae_init="solve")
