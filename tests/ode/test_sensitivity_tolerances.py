"""Sensitivity error control that does not starve the step size (issue 14).

A 5-species nucleosynthesis network starting on the deuterium's fast equilibrium: its y0 column
for the deuterium abundance Y_d (5e-13) decays at 1.6e16 /s at t_0 = 1, faster than the spacing
of float64 times there. Held to the state's atol = 1e-16, that column rejected every step and
grad was NaN; scaled as CVODES does (atol / |θ_k|) and with the first step chosen for the joint
system, it succeeds and the derivative matches finite differences of plain solves.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shoal.ode import Status, solve

jax.config.update("jax_enable_x64", True)

QNP, BD, MN = 1.293, 2.224, 939.0


def bbn(y, t, p):
    eta10, tau_n = p[0], p[1]
    Yn, Yp, Yd, Y3 = y[0], y[1], y[2], y[3]
    T = 1.0 / jnp.sqrt(t)
    rho = eta10 / 6.0 * T**3
    lnp = (1.0 / tau_n) * (1.0 + 100.0 * (T / 0.511) ** 4)
    lpn = lnp * jnp.exp(-QNP / T)
    k2 = 5.0e4 * rho
    lgam = 5.0e4 * T**3 / 6.0 / (16.3e-10 * (T / MN) ** 1.5) * jnp.exp(-BD / T)
    T13 = jnp.cbrt(T)
    k3 = 1.0e7 * rho * jnp.exp(-1.0 / T13)
    k4 = 5.0 * rho * jnp.exp(-0.5 / T13)
    k5 = 1.0e7 * rho * jnp.exp(-1.5 / T13)
    r1 = lnp * Yn - lpn * Yp
    r2 = k2 * Yn * Yp - lgam * Yd
    r3 = 0.5 * k3 * Yd**2
    r4 = k4 * Yd * Yp
    r5 = k5 * Y3 * Yd
    return jnp.stack([-r1 - r2 + r3, r1 - r2 - r4 + r5, r2 - 2 * r3 - r4 - r5, r3 + r4 - r5, r5])


def y0_of(p):
    Yn = 1.0 / (1.0 + jnp.exp(QNP))
    Yp = 1.0 - Yn
    Yd = Yn * Yp * 16.3e-10 * p[0] * (1.0 / MN) ** 1.5 * jnp.exp(BD)
    return jnp.stack([Yn, Yp, Yd, 0.0 * Yd, 0.0 * Yd])


TS = jnp.concatenate([jnp.ones(1), jnp.logspace(0.2, 4, 30)])
P = jnp.array([5.8, 900.0])
Y0 = y0_of(P)


def _solve(y0, p=P, **options):
    return solve(bbn, y0, TS, p, **{"rtol": 1e-8, "atol": 1e-16, "return_stats": True,
                                    **options})


def tangent_system(z, t, p):
    """[y, s]' = [f, J_y s]: the tangent along s as a plain ODE, written with jax.jvp."""
    f, df = jax.jvp(lambda y: bbn(y, t, p), (z[:5],), (z[5:],))
    return jnp.concatenate([f, df])


@pytest.fixture(scope="module")
def reference_dY4_dYd0():
    """∂Y4(t_end)/∂Y_d(0) from a plain solve of the tangent system, independent of shoal's
    sensitivities. Finite differences cannot resolve it: Y_d(0) = 5e-13, so a perturbation
    that stays linear moves Y4 by less than a tight solve's error. The tangent starts as
    Y_d(0) e_d, so that atol suits it, and the first step is small."""
    z0 = jnp.concatenate([Y0, Y0[2] * jnp.eye(5)[2]])
    ys, st = solve(tangent_system, z0, TS, P, rtol=1e-11, atol=1e-18, first_step=1e-10,
                   return_stats=True)
    assert int(st["status"][0]) == Status.SUCCESS
    return float(ys[0, -1, 9] / Y0[2])


def test_the_y0_column_of_a_trace_abundance_is_differentiable(reference_dY4_dYd0):
    (ys, st), (dys, _) = jax.jvp(_solve, (Y0,), (jnp.eye(5)[2],))
    assert int(st["status"][0]) == Status.SUCCESS and int(st["accepted"][0]) > 0
    assert np.all(np.isfinite(np.asarray(dys)))
    np.testing.assert_allclose(float(dys[0, -1, 4]), reference_dY4_dYd0, rtol=1e-6)
    plain, _ = _solve(Y0)
    np.testing.assert_allclose(np.asarray(ys), np.asarray(plain), rtol=1e-6, atol=1e-13)


def test_without_sensitivity_error_control_the_first_step_does_not_skip_the_transient(
        reference_dY4_dYd0):
    # The default first step, 1e-6 of the span, stepped over the column's transient: 1.7e-3
    # wrong whatever rtol. The joint system's own estimate bounds it now.
    _, (dys, _) = jax.jvp(lambda y: _solve(y, sens_error_control=False), (Y0,),
                          (jnp.eye(5)[2],))
    np.testing.assert_allclose(float(dys[0, -1, 4]), reference_dY4_dYd0, rtol=1e-6)


def test_grad_through_y0_computed_from_the_parameters():
    def final_Y4(p):
        ys, st = _solve(y0_of(p), p)
        return ys[0, -1, 4], st

    (value, st), g = jax.value_and_grad(final_Y4, has_aux=True)(P)
    assert int(st["status"][0]) == Status.SUCCESS
    d = 1e-4 * P[0]
    fd = (final_Y4(P.at[0].add(d))[0] - final_Y4(P.at[0].add(-d))[0]) / (2 * d)
    np.testing.assert_allclose(float(g[0]), float(fd), rtol=1e-5)
    assert np.isfinite(float(g[1]))


def decay(y, t, p):
    return -p[0] * y


def test_sens_atol_overrides_the_scaled_tolerance():
    t = jnp.linspace(0.0, 4.0, 5)

    def stats(**options):
        def run(k):
            return solve(decay, jnp.ones(1), t, k, rtol=1e-4, atol=1e-10, return_stats=True,
                         **options)
        (_, st), (dys, _) = jax.jvp(run, (jnp.array([1.0]),), (jnp.array([1.0]),))
        np.testing.assert_allclose(np.asarray(dys[0, :, 0]), -np.asarray(t) * np.exp(-t),
                                   atol=1e-3)
        return int(st["accepted"][0])

    assert stats(sens_atol=1e-14) > stats(sens_atol=1e-2)
    with pytest.raises(ValueError, match="sens_atol"):
        solve(decay, jnp.ones(1), t, [1.0], sens_atol=-1.0)


def sqrt_rate(y, t, p):
    # The value ignores p at 0, its derivative there is 0 · ∞ = NaN.
    return -y + 0.0 * jnp.sqrt(p[0])


def test_a_joint_solve_failing_on_its_sensitivities_has_its_own_status():
    t = jnp.linspace(0.0, 1.0, 3)
    _, st = solve(sqrt_rate, jnp.ones(1), t, [0.0], return_stats=True)
    assert int(st["status"][0]) == Status.SUCCESS

    def run(p):
        return solve(sqrt_rate, jnp.ones(1), t, p, return_stats=True)

    for method in ("rodas5p", "tsit5"):
        (_, st), (dys, _) = jax.jvp(
            lambda p, m=method: solve(sqrt_rate, jnp.ones(1), t, p, method=m,
                                      return_stats=True), (jnp.array([0.0]),),
            (jnp.array([1.0]),))
        assert int(st["status"][0]) == Status.SENSITIVITY_FAILURE
        assert np.isnan(np.asarray(dys[0, -1, 0]))
    # Under grad the status rides along as aux, and the gradient is NaN, not a silent 0.
    g, st = jax.grad(lambda p: (jnp.nansum(run(p)[0]), run(p)[1]), has_aux=True)(
        jnp.array([0.0]))
    assert int(st["status"][0]) == Status.SENSITIVITY_FAILURE
    assert np.isnan(float(g[0]))


def test_a_failed_member_has_a_nan_gradient_and_its_neighbours_do_not():
    t = jnp.linspace(0.0, 1.0, 4)
    k = jnp.array([[1.0], [1e5], [2.0]])  # the stiff member exhausts Tsit5's step budget

    def loss(k):
        ys, st = solve(decay, jnp.ones((3, 1)), t, k, method="tsit5", max_steps=2000,
                       return_stats=True)
        return jnp.sum(jnp.where(jnp.isnan(ys), 0.0, ys)), st

    g, st = jax.grad(loss, has_aux=True)(k)
    assert list(np.asarray(st["status"])) == [Status.SUCCESS, Status.MAX_STEPS_REACHED,
                                              Status.SUCCESS]
    g = np.asarray(g)[:, 0]
    assert np.isnan(g[1])
    np.testing.assert_allclose(g[[0, 2]], [-(t * np.exp(-kk * t)).sum() for kk in (1.0, 2.0)],
                               rtol=1e-6)


@pytest.mark.parametrize("transform", ["jit", "vmap", "jvp", "grad", "jacfwd", "jacrev"])
def test_return_stats_works_under_every_transform(transform):
    t = jnp.linspace(0.0, 1.0, 3)
    k = jnp.array([1.0])

    def run(k):
        return solve(decay, jnp.ones(1), t, k, return_stats=True)

    def final(k):
        ys, st = run(k)
        return ys[0, -1, 0], st

    if transform == "jit":
        _, st = jax.jit(run)(k)
    elif transform == "vmap":
        _, st = jax.vmap(run)(jnp.stack([k, 2 * k]))
        assert st["status"].shape == (2, 1)
    elif transform == "jvp":
        (_, st), _ = jax.jvp(run, (k,), (jnp.ones(1),))
    elif transform == "grad":
        _, st = jax.grad(final, has_aux=True)(k)
    elif transform == "jacfwd":
        _, st = jax.jacfwd(final, has_aux=True)(k)
    else:
        _, st = jax.jacrev(final, has_aux=True)(k)
    assert np.all(np.asarray(st["status"]) == Status.SUCCESS)
    assert np.all(np.asarray(st["accepted"]) > 0)
