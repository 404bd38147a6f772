"""Discontinuities: tstops, jump_fn at each stop, and max_step."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shoal.ode import solve

jax.config.update("jax_enable_x64", True)

METHODS = ["tsit5", "rodas5p"]
TIGHT = dict(rtol=1e-10, atol=1e-12)
WINDOW = (3.0, 3.05)  # a short pulse: an adaptive step on a smooth decay strides over it


def pulse_open(y, t, p):  # switches on at t > a, off at t >= b: `<` and `<=` both ways
    a, b = WINDOW
    on = jnp.where((t > a) & (t < b), p[1], 0.0)
    return jnp.stack([on - p[0] * y[0]])


def pulse_closed(y, t, p):
    a, b = WINDOW
    on = jnp.where((t >= a) & (t <= b), p[1], 0.0)
    return jnp.stack([on - p[0] * y[0]])


def pulse_exact(t, k, rate):
    """y(0) = 1, y' = rate 1[a, b] - k y."""
    a, b = WINDOW
    y = np.exp(-k * t)
    inside = np.clip(t, a, b)
    return y + rate / k * (np.exp(-k * (t - inside)) - np.exp(-k * (t - a))) * (t > a)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("f", [pulse_open, pulse_closed])
def test_a_pulse_with_tstops_matches_the_closed_form_whichever_side_f_switches(method, f):
    k, rate = 0.5, 40.0
    t = np.array([0.0, 2.0, 3.02, 3.05, 4.0, 10.0])
    ys, st = solve(f, jnp.ones((1, 1)), t, [k, rate], tstops=list(WINDOW), method=method,
                   return_stats=True, **TIGHT)
    assert int(st["status"][0]) == 0
    np.testing.assert_allclose(np.asarray(ys[0, :, 0]), pulse_exact(t, k, rate), rtol=1e-8)


@pytest.mark.parametrize("method", METHODS)
def test_without_tstops_the_pulse_is_stepped_over(method):
    # Why tstops exist: nothing in a smooth decay tells the controller that f switches on for
    # 0.05 time units at t = 3, so steps of order 1 stride over the pulse and every trajectory
    # still reports success.
    k, rate = 0.5, 40.0
    t = np.array([0.0, 10.0])
    ys, st = solve(pulse_open, jnp.ones((1, 1)), t, [k, rate], method=method,
                   return_stats=True, rtol=1e-6, atol=1e-9)
    assert int(st["status"][0]) == 0
    exact = pulse_exact(t, k, rate)[-1]
    assert abs(float(ys[0, -1, 0]) - exact) / exact > 0.5


@pytest.mark.parametrize("method", METHODS)
def test_max_step_below_the_pulse_width_also_catches_it(method):
    k, rate = 0.5, 40.0
    t = np.array([0.0, 10.0])
    ys, st = solve(pulse_open, jnp.ones((1, 1)), t, [k, rate], method=method, max_step=0.02,
                   return_stats=True, rtol=1e-8, atol=1e-10)
    assert int(st["accepted"][0]) >= 10.0 / 0.02
    np.testing.assert_allclose(float(ys[0, -1, 0]), pulse_exact(t, k, rate)[-1], rtol=1e-3)


def decay(y, t, p):
    return -p[0] * y


def bolus(y, t, p):
    return y + p[1]


def doses_exact(t, k, dose, times, y0=1.0):
    y = y0 * np.exp(-k * t)
    for s in times:
        y = y + dose * np.exp(-k * (t - s)) * (t > s)
    return y


@pytest.mark.parametrize("method", METHODS)
def test_bolus_doses_by_jump_fn_and_a_save_at_a_stop_records_the_state_before(method):
    k, dose, times = 0.3, 2.0, [1.0, 2.5, 4.0]
    t = np.array([0.0, 1.0, 2.0, 2.5, 3.0, 6.0])
    ys = solve(decay, jnp.ones((1, 1)), t, [k, dose], tstops=times[::-1] + [-1.0, 9.0],
               jump_fn=bolus, method=method, **TIGHT)
    np.testing.assert_allclose(np.asarray(ys[0, :, 0]), doses_exact(t, k, dose, times),
                               rtol=1e-8)


@pytest.mark.parametrize("method", METHODS)
def test_per_trajectory_stops_and_the_gradient_through_the_doses(method):
    k = jnp.array([[0.3, 2.0], [0.7, 1.0], [0.5, 3.0]])
    stops = jnp.array([[1.0, 2.0, 3.0], [0.5, 0.5, 4.0], [2.0, 20.0, -3.0]])  # dups, outside
    t = np.linspace(0.0, 5.0, 6)

    def final(p):
        return solve(decay, jnp.ones((3, 1)), t, p, tstops=stops, jump_fn=bolus,
                     method=method, **TIGHT)[:, -1, 0]

    per_member_times = [[1.0, 2.0, 3.0], [0.5, 4.0], [2.0]]
    expected = [doses_exact(5.0, float(k[i, 0]), float(k[i, 1]), per_member_times[i])
                for i in range(3)]
    np.testing.assert_allclose(np.asarray(final(k)), expected, rtol=1e-8)
    jac = np.asarray(jax.jacfwd(final)(k))  # (3, 3, 2)
    for i, times in enumerate(per_member_times):
        kk, dose = float(k[i, 0]), float(k[i, 1])
        d_dose = sum(np.exp(-kk * (5.0 - s)) for s in times)
        d_k = -5.0 * np.exp(-kk * 5.0) - dose * sum((5.0 - s) * np.exp(-kk * (5.0 - s))
                                                    for s in times)
        np.testing.assert_allclose(jac[i, i], [d_k, d_dose], rtol=1e-6)
    grad = np.asarray(jax.grad(lambda p: jnp.sum(final(p)))(k))
    np.testing.assert_allclose(grad, np.einsum("iij->ij", jac), rtol=1e-10)


def test_jump_fn_sees_the_stop_time_and_returns_the_checked_shape():
    def stamp(y, t, p):  # a jump that depends on when it happens
        return y + t

    ys = solve(decay, jnp.ones((1, 1)), [0.0, 2.0], [0.0], tstops=[0.5, 1.5], jump_fn=stamp,
               **TIGHT)
    np.testing.assert_allclose(float(ys[0, -1, 0]), 3.0, rtol=1e-10)
    with pytest.raises(ValueError, match=r"jump_fn\(y, t, p\) must return shape \(1,\)"):
        solve(decay, jnp.ones((1, 1)), [0.0, 1.0], [1.0], tstops=[0.5],
              jump_fn=lambda y, t, p: jnp.concatenate([y, y]))


def test_bad_stops_and_max_step_are_errors():
    with pytest.raises(ValueError, match="tstops must be finite"):
        solve(decay, jnp.ones((1, 1)), [0.0, 1.0], [1.0], tstops=[0.5, np.nan])
    with pytest.raises(ValueError, match="tstops must have shape"):
        solve(decay, jnp.ones((2, 1)), [0.0, 1.0], [1.0], tstops=np.zeros((3, 2)))
    with pytest.raises(ValueError, match="max_step must be a finite number > 0"):
        solve(decay, jnp.ones((1, 1)), [0.0, 1.0], [1.0], max_step=-1.0)


def test_stops_compose_with_windows_vmap_and_jit():
    t = jnp.array([[0.0, 1.0, 3.0], [2.0, 2.5, 6.0]])
    run = jax.jit(jax.vmap(lambda dose: solve(decay, jnp.ones((2, 1)), t, jnp.array([0.4, dose]),
                                              tstops=jnp.array([1.5, 5.0]), jump_fn=bolus,
                                              **TIGHT)))
    ys = np.asarray(run(jnp.array([1.0, 2.0])))
    for b, dose in enumerate([1.0, 2.0]):
        np.testing.assert_allclose(ys[b, 0, :, 0], doses_exact(np.array([0.0, 1.0, 3.0]), 0.4,
                                                               dose, [1.5]), rtol=1e-8)
        np.testing.assert_allclose(ys[b, 1, :, 0],
                                   doses_exact(np.array([0.0, 0.5, 4.0]), 0.4, dose, [3.0]),
                                   rtol=1e-8)
