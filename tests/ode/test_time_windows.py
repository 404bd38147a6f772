"""Per-trajectory time windows and derivatives with respect to the times (t_span)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shoal.ode import Status, solve

jax.config.update("jax_enable_x64", True)

METHODS = ["tsit5", "rodas5p"]
TIGHT = dict(rtol=1e-11, atol=1e-13)


def decay(y, t, p):
    return -p[0] * y


def forced(y, t, p):  # non-autonomous and nonlinear: the time derivatives are not trivial
    return jnp.stack([y[1], -p[0] * jnp.sin(y[0]) + 0.3 * jnp.cos(1.7 * t)])


@pytest.mark.parametrize("method", METHODS)
def test_each_member_of_a_windowed_ensemble_equals_its_lone_solve_bit_for_bit(method):
    t_span = jnp.array([[0.0, 0.5, 1.0, 2.0], [1.0, 1.1, 3.0, 7.0], [-2.0, -1.0, 0.0, 0.5]])
    y0 = jnp.array([[0.3, 0.0], [1.0, -0.2], [-0.4, 0.1]])
    p = jnp.array([[1.0], [2.0], [0.5]])
    ys, st = solve(forced, y0, t_span, p, method=method, return_stats=True)
    assert ys.shape == (3, 4, 2)
    for i in range(3):
        alone, st_i = solve(forced, y0[i], t_span[i], p[i], method=method, return_stats=True)
        np.testing.assert_array_equal(np.asarray(ys[i]), np.asarray(alone[0]))
        assert int(st["accepted"][i]) == int(st_i["accepted"][0])


@pytest.mark.parametrize("method", METHODS)
def test_starts_orders_of_magnitude_apart_match_the_closed_form(method):
    starts = np.array([1e-6, 1e-2, 1.0, 1e2, 1e4])
    t_span = starts[:, None] + np.array([0.0, 0.5, 1.0, 3.0])[None, :]
    k = 0.8
    ys = solve(decay, jnp.ones((5, 1)), t_span, [k], method=method, **TIGHT)
    expected = np.exp(-k * (t_span - starts[:, None]))
    np.testing.assert_allclose(np.asarray(ys[..., 0]), expected, rtol=1e-9)


def test_a_windowed_t_span_sets_the_ensemble_size_and_broadcasts_the_rest():
    t_span = jnp.array([[0.0, 1.0], [0.0, 2.0]])
    ys = solve(decay, jnp.array([1.0]), t_span, [1.0], method="tsit5", **TIGHT)
    np.testing.assert_allclose(np.asarray(ys[:, 1, 0]), np.exp([-1.0, -2.0]), rtol=1e-9)


def test_vmap_over_windows_folds_into_one_ensemble():
    rows = jnp.array([[0.0, 1.0, 2.0], [0.5, 1.0, 4.0], [1.0, 2.0, 3.0]])

    def one(t):
        return solve(decay, jnp.ones((2, 1)), t, jnp.array([[1.0], [3.0]]), method="tsit5")

    batched = jax.vmap(one)(rows)
    for b in range(3):
        np.testing.assert_array_equal(np.asarray(batched[b]), np.asarray(one(rows[b])))
    per_member = jax.vmap(one)(jnp.stack([rows, rows[::-1]], axis=1))  # (3, 2, 3) windows
    assert per_member.shape == (3, 2, 3, 1)


def test_bad_rows_name_the_row_eagerly_and_fail_only_that_member_under_jit():
    good, bad = [0.0, 1.0, 2.0], [0.0, 2.0, 1.0]
    with pytest.raises(ValueError, match=r"t_span\[1\] must be strictly increasing"):
        solve(decay, jnp.ones((2, 1)), jnp.array([good, bad]), [1.0])
    with pytest.raises(ValueError, match=r"t_span\[0\] must be finite"):
        solve(decay, jnp.ones((2, 1)), jnp.array([[0.0, np.nan, 1.0], good]), [1.0])
    with pytest.raises(ValueError, match="each must be N or 1"):
        solve(decay, jnp.ones((3, 1)), jnp.array([good, good]), [1.0])
    run = jax.jit(lambda t: solve(decay, jnp.ones((2, 1)), t, [1.0], return_stats=True))
    ys, st = run(jnp.array([good, bad]))
    assert st["status"].tolist() == [Status.SUCCESS, Status.INVALID_INPUT]
    assert np.all(np.isfinite(np.asarray(ys[0]))) and np.all(np.isnan(np.asarray(ys[1, 1:])))


def _central(fn, x, eps):
    x = np.asarray(x, dtype=float)
    cols = []
    for j in range(x.size):
        e = np.zeros_like(x)
        e.flat[j] = eps
        cols.append((np.asarray(fn(x + e)) - np.asarray(fn(x - e))) / (2 * eps))
    return np.stack(cols, axis=-1)


@pytest.mark.parametrize("method", METHODS)
def test_derivatives_with_respect_to_save_and_start_times_match_finite_differences(method):
    y0 = jnp.array([[0.4, 0.1], [1.2, -0.3]])
    p = jnp.array([[1.0], [1.7]])

    def saves(t):
        return solve(forced, y0, t, p, method=method, **TIGHT)

    t = np.array([0.1, 0.6, 1.3, 2.0])
    jac = np.asarray(jax.jacfwd(saves)(jnp.asarray(t)))  # (2, 4, 2, 4)
    fd = _central(saves, t, 1e-5)
    np.testing.assert_allclose(jac, fd, atol=1e-6)
    # The first save is y0 whatever the start: its derivatives vanish exactly.
    np.testing.assert_allclose(jac[:, 0], 0.0, atol=1e-12)
    # Reverse mode agrees, and per-trajectory rows are differentiable too.
    rows = jnp.asarray(np.stack([t, t + 0.25]))

    def loss(rows):
        return jnp.sum(solve(forced, y0, rows, p, method=method, **TIGHT) ** 2)

    grad = np.asarray(jax.grad(loss)(rows))
    fd_rows = _central(lambda r: loss(jnp.asarray(r.reshape(2, 4))), np.asarray(rows).ravel(),
                       1e-5).reshape(2, 4)
    np.testing.assert_allclose(grad, fd_rows, rtol=1e-5, atol=1e-7)


def test_start_time_derivative_of_a_decay_is_the_closed_form():
    k, T = 1.3, 2.0

    def final(t0):
        return solve(decay, jnp.array([1.0]), jnp.stack([t0, T]), [k], **TIGHT)[0, -1, 0]

    assert float(jax.grad(final)(0.5)) == pytest.approx(k * np.exp(-k * (T - 0.5)), rel=1e-8)


def test_times_differentiate_together_with_parameters():
    def loss(t, p):
        return jnp.sum(solve(forced, jnp.array([0.4, 0.1]), t, p, method="tsit5", **TIGHT))

    t, p = jnp.array([0.0, 1.0, 2.0]), jnp.array([1.1])
    dt, dp = jax.grad(loss, argnums=(0, 1))(t, p)
    fd_t = _central(lambda x: loss(jnp.asarray(x), p), np.asarray(t), 1e-5)
    fd_p = _central(lambda x: loss(t, jnp.asarray(x)), np.asarray(p), 1e-6)
    np.testing.assert_allclose(np.asarray(dt), fd_t, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(np.asarray(dp), fd_p, rtol=1e-5)


def test_tstops_are_not_differentiable_and_say_so():
    with pytest.raises(NotImplementedError, match="tstops"):
        jax.grad(lambda s: solve(decay, jnp.array([1.0]), jnp.array([0.0, 1.0]), [1.0],
                                 tstops=jnp.stack([s]))[0, -1, 0])(0.5)


def energy_and_phase(y, t, p):  # depends on t itself too
    return jnp.stack([0.5 * y[1] ** 2 + p[0] * (1.0 - jnp.cos(y[0])), y[0] * jnp.cos(t)])


@pytest.mark.parametrize("method", METHODS)
def test_save_fn_outputs_differentiate_with_respect_to_the_times(method):
    # d/dt_i h(y(t_i), t_i) = h_y f + h_t, computed by a second solve whose save is that rate.
    y0 = jnp.array([[0.4, 0.1], [1.2, -0.3]])
    p = jnp.array([[1.0], [1.7]])

    def saves(t):
        return solve(forced, y0, t, p, method=method, save_fn=energy_and_phase, **TIGHT)

    t = np.array([0.1, 0.6, 1.3, 2.0])
    jac = np.asarray(jax.jacfwd(saves)(jnp.asarray(t)))  # (2, 4, 2, 4)
    np.testing.assert_allclose(jac, _central(saves, t, 1e-5), atol=1e-6)
    grad = np.asarray(jax.grad(lambda t: jnp.sum(saves(t) ** 2))(jnp.asarray(t)))
    fd = _central(lambda t: jnp.sum(saves(jnp.asarray(t)) ** 2), t, 1e-5)
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-7)
