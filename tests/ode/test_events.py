"""Events: zero crossings of g(y, t, p) located on the dense output, and their derivatives."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shoal.ode import Event, Status, solve

jax.config.update("jax_enable_x64", True)

METHODS = ["tsit5", "rodas5p"]
TIGHT = dict(rtol=1e-11, atol=1e-13)


def decay(y, t, p):
    return -p[0] * y


def below_level(y, t, p):
    return y[0] - p[1]


@pytest.mark.parametrize("method", METHODS)
def test_first_time_a_decay_crosses_a_level(method):
    k = np.array([0.5, 1.0, 2.0])
    level = np.array([0.5, 0.2, 0.9])
    p = jnp.asarray(np.stack([k, level], axis=1))
    t = jnp.linspace(0.0, 10.0, 11)
    ys, st = solve(decay, jnp.ones((3, 1)), t, p, event=Event(below_level), method=method,
                   return_stats=True, **TIGHT)
    t_star = np.log(1.0 / level) / k
    np.testing.assert_allclose(np.asarray(st["event_time"]), t_star, rtol=1e-9)
    np.testing.assert_allclose(np.asarray(st["event_state"][:, 0]), level, rtol=1e-9)
    assert st["status"].tolist() == [Status.EVENT] * 3
    after = np.asarray(t)[None, :] > t_star[:, None]
    assert np.all(np.isnan(np.asarray(ys[..., 0])[after]))
    assert np.all(np.isfinite(np.asarray(ys[..., 0])[~after]))


@pytest.mark.parametrize("method", METHODS)
def test_the_event_time_and_state_are_differentiable(method):
    def event_of(k, y0):
        _, st = solve(decay, jnp.stack([y0])[None], jnp.array([0.0, 10.0]),
                      jnp.stack([k, 0.3]), event=Event(below_level), method=method,
                      return_stats=True, **TIGHT)
        return st["event_time"][0], st["event_state"][0, 0]

    k, y0 = 0.7, 1.5
    (dt_dk, dt_dy0), (dy_dk, dy_dy0) = jax.jacfwd(event_of, argnums=(0, 1))(k, y0)
    log_ratio = np.log(y0 / 0.3)
    assert float(dt_dk) == pytest.approx(-log_ratio / k**2, rel=1e-7)
    assert float(dt_dy0) == pytest.approx(1.0 / (k * y0), rel=1e-7)
    # The state at the event is the level whatever k and y0: its derivatives vanish.
    assert abs(float(dy_dk)) < 1e-8 and abs(float(dy_dy0)) < 1e-8
    grad = jax.grad(lambda k: event_of(k, y0)[0])(k)
    assert float(grad) == pytest.approx(float(dt_dk), rel=1e-10)


def falling(y, t, p):
    return jnp.stack([y[1], -p[0] - p[1] * y[1]])  # height, velocity; gravity and drag


def ground(y, t, p):
    return y[0]


@pytest.mark.parametrize("method", METHODS)
def test_a_falling_body_hits_the_ground_when_and_how_fast_the_closed_form_says(method):
    g, h0 = 9.81, np.array([1.0, 5.0, 20.0])
    y0 = jnp.asarray(np.stack([h0, np.zeros(3)], axis=1))
    _, st = solve(falling, y0, jnp.array([0.0, 5.0]), [g, 0.0], event=Event(ground, direction=-1),
                  method=method, return_stats=True, **TIGHT)
    np.testing.assert_allclose(np.asarray(st["event_time"]), np.sqrt(2 * h0 / g), rtol=1e-9)
    np.testing.assert_allclose(np.asarray(st["event_state"][:, 1]), -np.sqrt(2 * g * h0),
                               rtol=1e-9)


@pytest.mark.parametrize("method", METHODS)
def test_impact_time_gradient_with_drag_matches_finite_differences(method):
    def impact(theta):
        h0, drag = theta[0], theta[1]
        _, st = solve(falling, jnp.stack([h0, 0.0])[None], jnp.array([0.0, 10.0]),
                      jnp.stack([9.81, drag]), event=Event(ground), method=method,
                      return_stats=True, **TIGHT)
        return jnp.stack([st["event_time"][0], st["event_state"][0, 1]])

    theta = np.array([3.0, 0.4])
    jac = np.asarray(jax.jacfwd(impact)(jnp.asarray(theta)))
    eps = 1e-5
    fd = np.stack([(np.asarray(impact(jnp.asarray(theta + e))) -
                    np.asarray(impact(jnp.asarray(theta - e)))) / (2 * eps)
                   for e in np.eye(2) * eps], axis=1)
    np.testing.assert_allclose(jac, fd, rtol=1e-5)
    rev = np.asarray(jax.jacrev(impact)(jnp.asarray(theta)))
    np.testing.assert_allclose(rev, jac, rtol=1e-10)


def oscillator(y, t, p):
    return jnp.stack([y[1], -y[0]])


@pytest.mark.parametrize("direction, expected", [(-1, np.pi / 2), (1, 3 * np.pi / 2),
                                                  (0, np.pi / 2)])
def test_direction_selects_rising_or_falling_crossings(direction, expected):
    _, st = solve(oscillator, jnp.array([[1.0, 0.0]]), jnp.array([0.0, 10.0]),
                  event=Event(lambda y, t, p: y[0], direction=direction), return_stats=True,
                  **TIGHT)
    assert float(st["event_time"][0]) == pytest.approx(expected, rel=1e-9)


def test_a_non_terminal_event_is_recorded_and_the_solve_goes_on():
    t = jnp.linspace(0.0, 10.0, 6)
    ys, st = solve(oscillator, jnp.array([[1.0, 0.0]]), t, return_stats=True,
                   event=Event(lambda y, t, p: y[0], terminal=False), **TIGHT)
    assert float(st["event_time"][0]) == pytest.approx(np.pi / 2, rel=1e-9)
    assert int(st["status"][0]) == Status.SUCCESS
    np.testing.assert_allclose(np.asarray(ys[0, :, 0]), np.cos(np.asarray(t)), atol=1e-9)


def test_members_without_an_event_report_nan_and_succeed():
    p = jnp.array([[1.0, 0.5], [1.0, -1.0]])  # the second never reaches a negative level
    ys, st = solve(decay, jnp.ones((2, 1)), jnp.array([0.0, 3.0]), p, event=Event(below_level),
                   return_stats=True, **TIGHT)
    assert st["status"].tolist() == [Status.EVENT, Status.SUCCESS]
    assert np.isnan(float(st["event_time"][1])) and np.isnan(float(st["event_state"][1, 0]))
    assert float(ys[1, -1, 0]) == pytest.approx(np.exp(-3.0), rel=1e-9)


def test_events_compose_with_tstops_jumps_and_jit():
    # A dose at t = 1 lifts the decay back above the level it then crosses again later.
    run = jax.jit(lambda k: solve(decay, jnp.ones((1, 1)), jnp.array([0.0, 10.0]),
                                  jnp.stack([k, 0.8, 1.0]), tstops=jnp.array([1.0]),
                                  jump_fn=lambda y, t, p: y + p[2],
                                  event=Event(lambda y, t, p: y[0] - 1.2), return_stats=True,
                                  **TIGHT)[1]["event_time"][0])
    k = 0.5
    # y(1+) = e^{-k} + 1; crossing 1.2 at 1 + log((e^{-k} + 1) / 1.2) / k
    expected = 1.0 + np.log((np.exp(-k) + 1.0) / 1.2) / k
    assert float(run(k)) == pytest.approx(expected, rel=1e-9)


def test_a_bad_event_function_is_named():
    with pytest.raises(ValueError, match=r"event.fn\(y, t, p\) must return shape \(\)"):
        solve(decay, jnp.ones((1, 1)), [0.0, 1.0], [1.0, 0.5], event=Event(lambda y, t, p: y))
    with pytest.raises(TypeError, match="Event.fn must be callable"):
        Event(3.0)
    with pytest.raises(ValueError, match="direction"):
        Event(below_level, direction=2)


@pytest.mark.parametrize("method", METHODS)
def test_event_derivatives_through_a_table_of_many_entries(method):
    # 100 differentiated entries: beyond the unit-column path, the directional one (and its
    # transpose for grad). Reference: dt*/dtable · d = −z(t*) / y'(t*), with z' = interp(t, d) − k z
    # the direction's own linear ODE, solved plainly.
    grid = jnp.linspace(0.0, 5.0, 100)

    def forced(y, t, p):
        return jnp.stack([jnp.interp(t, grid, p["table"]) - p["k"] * y[0]])

    level = 0.8

    def event_of(table):
        _, st = solve(forced, jnp.zeros((1, 1)), jnp.array([0.0, 5.0]),
                      {"table": table, "k": jnp.array([0.5])},
                      event=Event(lambda y, t, p: y[0] - level), method=method,
                      return_stats=True, **TIGHT)
        return st["event_time"][0], st["event_state"][0, 0]

    table = 1.0 + 0.5 * jnp.sin(grid)
    d = jax.random.normal(jax.random.PRNGKey(3), table.shape)
    t_star = float(event_of(table)[0])
    z = solve(forced, jnp.zeros((1, 1)), jnp.array([0.0, t_star]),
              {"table": d, "k": jnp.array([0.5])}, method=method, **TIGHT)[0, -1, 0]
    slope = float(jnp.interp(t_star, grid, table)) - 0.5 * level
    expected = -float(z) / slope
    (dt, dy) = jax.jvp(event_of, (table,), (d,))[1]
    assert float(dt) == pytest.approx(expected, rel=1e-6)
    assert abs(float(dy)) < 1e-8  # the state at the event is the level
    grad = jax.grad(lambda tb: event_of(tb)[0])(table)
    assert float(grad @ d) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("method", METHODS)
def test_a_loss_on_the_saves_before_a_terminal_event_and_its_time_has_a_finite_gradient(method):
    # The saves after the event are NaN; masked out (before any arithmetic, as JAX needs for a
    # finite gradient), their tangents count as 0, so the gradient (also with respect to the
    # save times) is finite and right.
    t = jnp.linspace(0.0, 4.0, 9)

    def loss(theta):
        k, t_end = theta[0], theta[1]
        ys, st = solve(decay, jnp.ones((1, 1)), t.at[-1].set(t_end), jnp.stack([k, 0.3]),
                       event=Event(below_level), method=method, return_stats=True, **TIGHT)
        return jnp.sum(jnp.where(jnp.isnan(ys), 0.0, ys) ** 2) + st["event_time"][0]

    theta = jnp.array([0.6, 4.0])
    grad = np.asarray(jax.grad(loss)(theta))
    assert np.all(np.isfinite(grad))
    eps = 1e-6
    fd = [(float(loss(theta + e)) - float(loss(theta - e))) / (2 * eps)
          for e in np.eye(2) * eps]
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-8)
