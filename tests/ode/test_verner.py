"""Verner's explicit pairs, method="vern7" (order 7(6)) and method="vern9" (9(8)): tableaus of
the explicit Runge-Kutta engine (include/shoal/ode/explicit_rk.hpp) beside Tsit5. Their order
conditions, fixed-step orders and interpolants' orders are C++ tests
(tests/cpp/test_explicit_rk_tableaus.cc, test_explicit_rk_convergence.cc).

Here, through ``solve``: the adaptive loop against SciPy's DOP853 at 1e-13 and closed forms,
saves between steps from the interpolant at the method's accuracy (its extra stages evaluated
only for steps that serve a save), events and stops with jumps, ``save_fn``, the same bits in
the SIMD lanes and on the scalar path (float64 and float32), and gradients (forward
sensitivities through the joint system) against closed forms.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

from shoal.ode import Event, Status, solve

jax.config.update("jax_enable_x64", True)

METHODS = ("vern7", "vern9")


def lorenz(y, t, p):
    return jnp.array([p[0] * (y[1] - y[0]), y[0] * (p[1] - y[2]) - y[1],
                      y[0] * y[1] - p[2] * y[2]])


def _lorenz_np(t, y, p):
    return [p[0] * (y[1] - y[0]), y[0] * (p[1] - y[2]) - y[1], y[0] * y[1] - p[2] * y[2]]


def decay(y, t, p):
    return -p[0] * y


@pytest.mark.parametrize("method", METHODS)
def test_lorenz_matches_dop853_and_takes_fewer_steps_than_tsit5(method):
    p = np.array([[10.0, 28.0, 8 / 3], [10.0, 21.0, 8 / 3], [12.0, 35.0, 2.0]])
    y0 = np.array([[1.0, 1.0, 1.0], [-3.0, 2.0, 20.0], [0.5, 0.0, 5.0]])
    ts = np.linspace(0.0, 2.0, 9)
    ref = np.stack([solve_ivp(_lorenz_np, (0.0, 2.0), y0[i], method="DOP853", t_eval=ts,
                              args=(p[i],), rtol=1e-13, atol=1e-13).y.T for i in range(3)])
    steps = {}
    for rtol in (1e-7, 1e-11):
        ys, st = solve(lorenz, y0, ts, p, method=method, rtol=rtol, atol=rtol,
                       return_stats=True)
        assert np.all(np.asarray(st["status"]) == Status.SUCCESS)
        err = np.max(np.abs(np.asarray(ys) - ref) / (1.0 + np.abs(ref)))
        assert err < 100 * rtol, (rtol, err)
        steps[rtol] = int(np.sum(st["accepted"]))
    _, tsit5 = solve(lorenz, y0, ts, p, method="tsit5", rtol=1e-11, atol=1e-11,
                     return_stats=True)
    assert 2 * steps[1e-11] < int(np.sum(tsit5["accepted"])), (steps, tsit5["accepted"])


@pytest.mark.parametrize("method", METHODS)
def test_saves_between_steps_are_as_accurate_as_the_steps(method):
    # y' = cos(t) y, y = exp(sin t): 801 saves over [0, 20], over twice the steps, so most
    # saves come from the interpolant (Vern7's of order 6-7, Vern9's of order 9).
    ts = np.linspace(0.0, 20.0, 801)
    ys, st = solve(lambda y, t, p: jnp.cos(t) * y * p[0], np.ones((2, 1)), ts,
                   np.array([[1.0], [0.5]]), method=method, rtol=1e-12, atol=1e-14,
                   return_stats=True)
    assert 2 * int(np.max(st["accepted"])) < len(ts)
    exact = np.exp(np.array([[1.0], [0.5]]) * np.sin(ts))
    np.testing.assert_allclose(np.asarray(ys)[..., 0], exact, rtol=2e-11)


@pytest.mark.parametrize("method", METHODS)
def test_the_error_is_proportional_to_the_tolerance(method):
    # Adaptively, over six decades of rtol (1e-5 … 1e-11): the global error of y' = cos(t) y
    # stays within a small multiple of rtol and falls with it at slope ~1 (tolerance
    # proportionality: what makes a requested accuracy mean something).
    ts = np.linspace(0.0, 20.0, 41)
    scale = np.array([[1.0], [0.5]])
    rtols = np.array([1e-5, 1e-7, 1e-9, 1e-11])
    errors = []
    for rtol in rtols:
        ys = solve(lambda y, t, p: jnp.cos(t) * y * p[0], np.ones((2, 1)), ts, scale,
                   method=method, rtol=rtol, atol=1e-2 * rtol)
        errors.append(np.max(np.abs(np.asarray(ys)[..., 0] - np.exp(scale * np.sin(ts)))))
    errors = np.array(errors)
    assert np.all(errors < 10 * rtols * np.e), errors
    slope = np.log10(errors[0] / errors[-1]) / np.log10(rtols[0] / rtols[-1])
    assert 0.85 < slope < 1.15, (slope, errors)


@pytest.mark.parametrize("method", METHODS)
def test_an_event_on_the_interpolant_and_doses_at_stops(method):
    # A decay crossing a level: t* = ln(1/level) / k. Then doses by jump_fn at stops.
    k = np.array([0.5, 2.0])
    p = np.stack([k, [0.3, 0.9]], axis=1)
    ts = np.linspace(0.0, 10.0, 3)
    _, st = solve(decay, np.ones((2, 1)), ts, p, method=method, rtol=1e-11, atol=1e-13,
                  event=Event(lambda y, t, p: y[0] - p[1]), return_stats=True)
    np.testing.assert_allclose(np.asarray(st["event_time"]), np.log(1.0 / p[:, 1]) / k,
                               rtol=1e-10)
    assert st["status"].tolist() == [Status.EVENT] * 2

    times = [1.0, 2.5]
    t = np.array([0.0, 1.0, 2.0, 3.0])
    ys = solve(decay, np.ones((1, 1)), t, [0.3, 2.0], tstops=times, method=method,
               jump_fn=lambda y, t, p: y + p[1], rtol=1e-11, atol=1e-13)
    expected = np.exp(-0.3 * t) + sum(2.0 * np.exp(-0.3 * (t - s)) * (t > s) for s in times)
    np.testing.assert_allclose(np.asarray(ys[0, :, 0]), expected, rtol=1e-10)


@pytest.mark.parametrize("method", METHODS)
def test_save_fn_records_observables_of_the_interpolated_state(method):
    ts = np.linspace(0.0, 1.0, 7)
    y0 = np.array([[1.0, 1.0, 1.0]])
    p = np.array([[10.0, 28.0, 8 / 3]])
    ys = solve(lorenz, y0, ts, p, method=method, rtol=1e-10, atol=1e-12)
    saved = solve(lorenz, y0, ts, p, method=method, rtol=1e-10, atol=1e-12,
                  save_fn=lambda y, t, p: jnp.array([y[0] * y[1], t]))
    np.testing.assert_array_equal(np.asarray(saved[0, :, 0]),
                                  np.asarray(ys[0, :, 0] * ys[0, :, 1]))
    np.testing.assert_array_equal(np.asarray(saved[0, :, 1]), ts)


@pytest.mark.parametrize("method", METHODS)
def test_a_failing_member_is_reported_and_the_others_are_untouched(method):
    # y' = y² blows up at t = 1/y0: y0 = 1 fails before t = 2 (its later saves NaN, a failure
    # status); the members beside it in the lanes match the closed form and their solve alone.
    y0 = np.array([[0.1], [1.0], [0.2], [0.3], [0.25]])
    ts = np.array([0.0, 0.5, 2.0])
    ys, st = solve(lambda y, t, p: y * y, y0, ts, method=method, rtol=1e-10, atol=1e-12,
                   return_stats=True)
    ys, status = np.asarray(ys), np.asarray(st["status"])
    assert status[1] in (Status.STEP_SIZE_UNDERFLOW, Status.NON_FINITE,
                         Status.MAX_STEPS_REACHED), status
    assert np.isnan(float(ys[1, 2, 0]))
    np.testing.assert_allclose(float(ys[1, 1, 0]), 2.0, rtol=1e-8)
    healthy = np.array([0, 2, 3, 4])
    assert np.all(status[healthy] == Status.SUCCESS)
    np.testing.assert_allclose(np.asarray(ys[healthy, 2, 0]),
                               1.0 / (1.0 / y0[healthy, 0] - 2.0), rtol=1e-8)
    alone = solve(lambda y, t, p: y * y, y0[healthy], ts, method=method, rtol=1e-10,
                  atol=1e-12)
    np.testing.assert_array_equal(np.asarray(ys[healthy]), np.asarray(alone))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("method", METHODS)
def test_lanes_and_scalar_path_give_the_same_bits(method, dtype):
    # 13 members: a full vector of lanes and a remainder; saves between steps read each lane's
    # interpolant, whose extra stages the scalar stepper computes.
    n = 13
    p = np.stack([np.full(n, 10.0), np.linspace(20.0, 30.0, n), np.full(n, 8 / 3)], 1)
    y0 = np.tile(np.array([1.0, 1.0, 1.0]), (n, 1))
    ts = np.linspace(0.0, 3.0, 31).astype(dtype)
    tol = dict(rtol=1e-9, atol=1e-9) if dtype == np.float64 else dict(rtol=1e-5, atol=1e-5)

    def run(lanes):
        return np.asarray(solve(lorenz, y0.astype(dtype), ts, p.astype(dtype), method=method,
                                lanes=lanes, **tol))

    scalar = run(1)
    assert np.all(np.isfinite(scalar))
    for lanes in (0, 4):
        assert run(lanes).tobytes() == scalar.tobytes()


@pytest.mark.parametrize("method", METHODS)
def test_gradients_match_closed_forms(method):
    # y' = −k y, y(T) = y0 exp(−k T): d/dk = −T y(T), d/dy0 = exp(−k T), per member and for a
    # shared rate; grad (the transpose) equals jacfwd.
    ts = jnp.linspace(0.0, 2.0, 5)
    k = jnp.array([[0.5], [1.5]])
    y0 = jnp.array([[1.0], [2.0]])

    def final(k, y0):
        return solve(decay, y0, ts, k, method=method, rtol=1e-12, atol=1e-14)[:, -1, 0]

    d_k, d_y0 = jax.grad(lambda k, y0: jnp.sum(final(k, y0)), argnums=(0, 1))(k, y0)
    y_end = np.asarray(y0[:, 0] * jnp.exp(-2.0 * k[:, 0]))
    np.testing.assert_allclose(np.asarray(d_k[:, 0]), -2.0 * y_end, rtol=1e-9)
    np.testing.assert_allclose(np.asarray(d_y0[:, 0]), np.exp(-2.0 * np.asarray(k[:, 0])),
                               rtol=1e-9)
    jac = np.asarray(jax.jacfwd(final)(k, y0))  # (2, 2, 1)
    np.testing.assert_allclose(np.einsum("iij->ij", jac), np.asarray(d_k), rtol=1e-12)

    def shared(rate):
        return jnp.sum(solve(lambda y, t, p: -rate * y, y0, ts, method=method, rtol=1e-12,
                             atol=1e-14)[:, -1, 0])

    np.testing.assert_allclose(float(jax.grad(shared)(0.7)),
                               float(-2.0 * jnp.sum(y0[:, 0]) * jnp.exp(-1.4)), rtol=1e-9)
