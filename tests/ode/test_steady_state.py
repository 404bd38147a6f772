"""Running to a steady state (issue 24): t_span ending at inf with a terminal event, and
shoal.ode.steady_state with its implicit-function gradient, against closed forms."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shoal.ode import Event, Status, solve, steady_state


def production(y, t, p):
    """a -> y0, y0 -> y1 at rate b, y1 + y1 -> y0 at rate c, y1 -> 0 at rate d: at the steady
    state y1* = a/d and y0* = (a + c a²/d²)/b."""
    return jnp.stack([p["a"] - p["b"] * y[0] + p["c"] * y[1] ** 2,
                      p["b"] * y[0] - (p["c"] * y[1] + p["d"]) * y[1]])


PARAMS = {"a": jnp.array([1.0, 2.0]), "b": jnp.asarray(2.0), "c": jnp.asarray(0.5),
          "d": jnp.asarray(0.3)}


def exact(p):
    a, b, c, d = (np.asarray(p[k]) for k in "abcd")
    y1 = a / d
    return np.stack([(a + c * y1**2) / b, y1], axis=-1)


def test_steady_state_matches_the_closed_form_and_reports_its_time():
    y_star, stats = steady_state(production, jnp.ones((2, 2)), PARAMS, return_stats=True)
    np.testing.assert_allclose(np.asarray(y_star), exact(PARAMS), rtol=1e-12)
    np.testing.assert_array_equal(np.asarray(stats["status"]), [Status.EVENT] * 2)
    assert np.all(np.isfinite(np.asarray(stats["time"]))) and np.all(stats["time"] > 10.0)


def test_steady_state_gradient_is_the_implicit_function_rule():
    def loss(p):
        return jnp.sum(steady_state(production, jnp.ones((2, 2)), p) ** 2)

    grad = jax.jit(jax.grad(loss))(PARAMS)
    a, b, c, d = (np.asarray(PARAMS[k], dtype=float) for k in "abcd")
    y0, y1 = exact(PARAMS).T
    # d/dθ of y0* = (a + c y1²)/b and y1* = a/d, by hand.
    dy1 = {"a": 1 / d, "b": 0.0 * a, "c": 0.0 * a, "d": -a / d**2}
    dy0 = {k: ((k == "a") + (k == "c") * y1**2 + 2 * c * y1 * dy1[k]) / b for k in "acd"}
    dy0["b"] = -y0 / b
    for k in "abcd":
        want = 2 * (y0 * dy0[k] + y1 * dy1[k])
        want = want if k == "a" else want.sum()
        np.testing.assert_allclose(np.asarray(grad[k]), want, rtol=1e-8, err_msg=k)


def test_a_member_already_steady_and_one_that_fails_are_reported():
    start = jnp.asarray(exact(PARAMS))
    y_star, stats = steady_state(production, start, PARAMS, return_stats=True)
    np.testing.assert_allclose(np.asarray(y_star), exact(PARAMS), rtol=1e-12)
    assert np.all(np.isinf(np.asarray(stats["time"])))
    # Growth without bound (y' = y) never gets steady: NaN and a failure status.
    y_none, stats = steady_state(lambda y, t, p: y, jnp.ones((1, 1)),
                                 return_stats=True, max_steps=20)
    assert np.all(np.isnan(np.asarray(y_none)))
    assert int(stats["status"][0]) not in (Status.SUCCESS, Status.EVENT)


def test_t_span_ending_at_inf_needs_a_terminal_event():
    def steady(y, t, p):  # RMS(f) falls through 1e-9
        return jnp.log(jnp.sqrt(jnp.mean(production(y, t, p) ** 2))) - jnp.log(1e-9)

    t_span = jnp.array([0.0, 1.0, jnp.inf])
    ys, stats = solve(production, jnp.ones((2, 2)), t_span, PARAMS, return_stats=True,
                      event=Event(steady, terminal=True, direction=-1), rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(np.asarray(stats["status"]), [Status.EVENT] * 2)
    np.testing.assert_allclose(np.asarray(stats["event_state"]), exact(PARAMS), rtol=1e-7)
    assert np.all(np.isnan(np.asarray(ys[:, -1])))  # the save at inf is never reached
    # The gradient through the trajectory and the event agrees with the closed form.
    grad = jax.grad(lambda a: solve(production, jnp.ones((2, 2)), t_span, dict(PARAMS, a=a),
                                    return_stats=True, rtol=1e-10, atol=1e-12,
                                    event=Event(steady, terminal=True, direction=-1)
                                    )[1]["event_state"][:, 1].sum())(PARAMS["a"])
    np.testing.assert_allclose(np.asarray(grad), 1 / 0.3, rtol=1e-6)
    with pytest.raises(ValueError, match="must be finite; it may end at inf only together with a "
                       "terminal event"):
        solve(production, jnp.ones((2, 2)), t_span, PARAMS)


def test_a_bare_per_member_vector_is_read_as_solve_reads_it():
    # y' = k - y with one k per member (a bare (N,) array): y* = k, dy*/dk = 1.
    def relax(y, t, p):
        return p - y

    k = jnp.array([1.0, 2.0, 3.0])
    y_star = steady_state(relax, jnp.zeros((3, 1)), k)
    np.testing.assert_allclose(np.asarray(y_star[:, 0]), np.asarray(k), rtol=1e-12)
    grad = jax.grad(lambda k: jnp.sum(steady_state(relax, jnp.zeros((3, 1)), k)))(k)
    np.testing.assert_allclose(np.asarray(grad), 1.0, rtol=1e-12)


def isomerisation(y, t, p):
    """a <-> b at rates k1, k2: a + b is conserved, J is singular; a* = k2 T/(k1 + k2)."""
    flux = p[0] * y[0] - p[1] * y[1]
    return jnp.stack([-flux, flux])


def test_conservation_laws_keep_y0s_totals_in_value_and_gradient():
    y0 = jnp.array([[1.0, 0.5], [0.2, 2.0]])
    k = jnp.array([[2.0, 1.0], [0.5, 3.0]])
    y_star = steady_state(isomerisation, y0, k)
    total = np.asarray(y0).sum(axis=1)
    k1, k2 = np.asarray(k).T
    want = np.stack([k2 * total / (k1 + k2), k1 * total / (k1 + k2)], axis=1)
    np.testing.assert_allclose(np.asarray(y_star), want, rtol=1e-12)

    def a_star(y0, k):
        return jnp.sum(steady_state(isomerisation, y0, k)[:, 0])

    d_y0, d_k = jax.grad(a_star, argnums=(0, 1))(y0, k)
    share = k2 / (k1 + k2)  # da*/da0 = da*/db0
    np.testing.assert_allclose(np.asarray(d_y0), np.stack([share, share], axis=1), rtol=1e-10)
    np.testing.assert_allclose(np.asarray(d_k), np.stack(
        [-k2 * total / (k1 + k2) ** 2, k1 * total / (k1 + k2) ** 2], axis=1), rtol=1e-10)
