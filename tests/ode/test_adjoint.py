"""Reverse mode by the discrete adjoint (``adjoint=True``; shoal/ode/_adjoint.py,
include/shoal/ode/adjoint.hpp with explicit_rk_adjoint.hpp and rosenbrock_adjoint.hpp, f's
products from shoal/ode/_codegen/vjp.py).

The adjoint transposes the steps the solve took, holding them fixed as the forward sensitivities
do: with ``sens_error_control=False`` and a given first step both take the plain solve's steps,
and the two gradients agree to rounding. Otherwise they agree within the tolerance, and both
match closed forms. Covered: every method (explicit and Rosenbrock, stiff problems), saves inside
steps (the continuous extension, Verner's extra stages) and at step ends, y0, own and shared
parameters, pytree leaves, run-time tables, arrays f closes over, stops with doses, save_fn,
vmap, jacrev, a failing member, adjoint="auto", and the clear refusals.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shoal.ode import Event, Status, solve

jax.config.update("jax_enable_x64", True)

EXPLICIT = ("tsit5", "vern7", "vern9")
ROSENBROCK = ("rodas5p", "rodas4", "rosenbrock23")


def lorenz(y, t, p):
    return jnp.array([p[0] * (y[1] - y[0]), y[0] * (p[1] - y[2]) - y[1],
                      y[0] * y[1] - p[2] * y[2]])


Y0 = jnp.array([[1.0, 0.5, 0.0], [0.3, 0.2, 0.1], [-1.0, 2.0, 20.0]])
P = jnp.array([10.0, 28.0, 8.0 / 3.0])
# Saves between steps and irregular, so most are served by the continuous extension.
TS = jnp.array([0.0, 0.013, 0.2, 0.37, 0.5, 0.81, 1.0])


def _lorenz_loss(method, adjoint, **options):
    def loss(y0, p):
        ys = solve(lorenz, y0, TS, p, method=method, adjoint=adjoint, **options)
        weights = jnp.arange(1.0, 1.0 + ys.size).reshape(ys.shape) / ys.size
        return jnp.sum(weights * jnp.sin(ys))
    return jax.grad(loss, (0, 1))


@pytest.mark.parametrize("method", EXPLICIT)
def test_same_steps_give_the_forward_gradient_to_rounding(method):
    options = dict(rtol=1e-8, atol=1e-8, sens_error_control=False, first_step=1e-3)
    adjoint = _lorenz_loss(method, True, **options)(Y0, P)
    forward = _lorenz_loss(method, False, **options)(Y0, P)
    for a, f in zip(adjoint, forward, strict=True):
        np.testing.assert_allclose(a, f, rtol=1e-11, atol=1e-11 * float(jnp.max(jnp.abs(f))))


@pytest.mark.parametrize("method", EXPLICIT)
def test_default_steps_agree_with_forward_sensitivities_within_the_tolerance(method):
    rtol = 1e-10
    adjoint = _lorenz_loss(method, True, rtol=rtol, atol=rtol)(Y0, P)
    forward = _lorenz_loss(method, False, rtol=rtol, atol=rtol)(Y0, P)
    for a, f in zip(adjoint, forward, strict=True):
        scale = float(jnp.max(jnp.abs(f)))
        np.testing.assert_allclose(a, f, rtol=0, atol=100 * rtol * scale)


def decay(y, t, p):
    return -p["k"] * y + p["source"]


@pytest.mark.parametrize("method", EXPLICIT)
def test_closed_form_with_own_and_shared_leaves(method):
    # y' = -k y + s: y(t) = s/k + (y0 - s/k) e^{-kt}; k per trajectory, s shared.
    k = jnp.array([0.5, 1.0, 2.0, 3.5])
    s = jnp.array(0.7)
    y0 = jnp.array([[1.0], [2.0], [0.5], [-1.0]])
    ts = jnp.array([0.0, 0.1, 0.35, 0.9, 1.4, 2.0])

    def loss(y0, k, s):
        ys = solve(decay, y0, ts, {"k": k, "source": s}, params_axes={"k": 0, "source": None},
                   method=method, rtol=1e-11, atol=1e-11, adjoint=True)
        return jnp.sum(ys[..., 0] ** 2)

    def exact(y0, k, s):
        ys = s / k[:, None] + (y0 - s / k[:, None]) * jnp.exp(-k[:, None] * ts[None])
        return jnp.sum(ys ** 2)

    got = jax.grad(loss, (0, 1, 2))(y0, k, s)
    want = jax.grad(exact, (0, 1, 2))(y0[:, 0:1], k, s)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-8, atol=1e-9)


def test_a_network_with_shared_weights_matches_forward_mode():
    rng = np.random.default_rng(0)
    weights = {"W1": jnp.array(rng.normal(size=(16, 2)) / 2), "b1": jnp.array(rng.normal(size=16)),
               "W2": jnp.array(rng.normal(size=(2, 16)) / 4)}

    def mlp(y, t, p):
        return p["W2"] @ jnp.tanh(p["W1"] @ y + p["b1"]) - 0.1 * y

    y0 = jnp.array(rng.normal(size=(5, 2)))
    ts = jnp.linspace(0.0, 2.0, 9)

    def loss(w, adjoint):
        ys = solve(mlp, y0, ts, w, params_axes=None, method="tsit5", rtol=1e-10, atol=1e-10,
                   adjoint=adjoint)
        return jnp.sum(ys[:, -1] ** 2) + jnp.sum(ys[:, 3])

    got = jax.grad(loss)(weights, True)
    want = jax.grad(loss)(weights, False)
    for key in weights:
        scale = float(jnp.max(jnp.abs(want[key])))
        np.testing.assert_allclose(got[key], want[key], rtol=0, atol=1e-7 * scale)


def test_a_run_time_table_matches_jacfwd():
    # A table of 120 entries read by jnp.interp: forward mode needs a column per entry. The
    # knots are stops: an entry acts on f between its neighbours only, and a step across many
    # knots samples that bump at a few stage times, so the derivative of the discretisation
    # with respect to it is poor (test_entries_acting_between_knots_need_stops).
    grid = jnp.linspace(0.0, 3.0, 120)
    values = jnp.cos(grid) + 2.0

    def f(y, t, p):
        return jnp.array([-jnp.interp(t, grid, p) * y[0], y[0] - 0.5 * y[1]])

    y0 = jnp.array([[1.0, 0.0], [2.0, 1.0]])
    ts = jnp.linspace(0.0, 3.0, 7)

    def final(table, adjoint):
        ys = solve(f, y0, ts, table, params_axes=None, method="vern7", rtol=1e-11, atol=1e-11,
                   tstops=grid[1:-1], adjoint=adjoint)
        return jnp.sum(ys[:, -1, :] * jnp.array([1.0, 3.0]))

    got = jax.grad(final)(values, True)
    want = jax.jacfwd(final)(values, False)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-8 * float(jnp.max(jnp.abs(want))))


def test_arrays_f_closes_over_are_differentiated():
    def loss(scale, adjoint):
        def f(y, t, p):
            return -scale * p * y

        ys = solve(f, jnp.array([[1.0], [2.0]]), jnp.array([0.0, 0.5, 1.0]),
                   jnp.array([[1.0], [2.0]]), method="tsit5", rtol=1e-11, atol=1e-11,
                   adjoint=adjoint)
        return jnp.sum(ys)

    scale = jnp.array(0.8)
    exact = jax.grad(lambda c: jnp.sum(jnp.array([1.0, 2.0])[:, None] * jnp.exp(
        -c * jnp.array([1.0, 2.0])[:, None] * jnp.array([0.0, 0.5, 1.0])[None])))(scale)
    np.testing.assert_allclose(jax.grad(loss)(scale, True), exact, rtol=1e-8)
    np.testing.assert_allclose(jax.jit(jax.grad(loss), static_argnums=1)(scale, True), exact,
                               rtol=1e-8)


def test_vmap_of_grad_and_jacrev():
    def loss(p, y0):
        return jnp.sum(solve(lorenz, y0, TS, p, method="tsit5", rtol=1e-9, atol=1e-9,
                             adjoint=True)[:, -1])

    ps = jnp.stack([P, P * 1.01, P * 0.98])
    batched = jax.vmap(jax.grad(loss), in_axes=(0, None))(ps, Y0)
    one_by_one = jnp.stack([jax.grad(loss)(p, Y0) for p in ps])
    np.testing.assert_allclose(batched, one_by_one, rtol=1e-12)

    def saves(p, adjoint):
        return solve(lorenz, Y0, TS, p, method="tsit5", rtol=1e-9, atol=1e-9,
                     adjoint=adjoint)[:, -1, :]

    jac = jax.jacrev(saves)(P, True)  # 9 cotangents in one adjoint call
    want = jax.jacfwd(saves)(P, False)
    assert jac.shape == (3, 3, 3)
    np.testing.assert_allclose(jac, want, rtol=0, atol=1e-6 * float(jnp.max(jnp.abs(want))))


def test_a_failing_member_has_a_nan_gradient_and_the_others_are_unaffected():
    def blowup(y, t, p):
        return p * y ** 2

    y0 = jnp.array([[0.5], [3.0], [0.2]])  # the middle one blows up at t = 1/3
    rates = jnp.ones(3)
    ts = jnp.array([0.0, 0.5, 1.0])

    def loss(r, y0):
        return jnp.sum(solve(blowup, y0, ts, r[:, None], method="tsit5", rtol=1e-9,
                             atol=1e-9, adjoint=True))

    g = jax.grad(loss)(rates, y0)
    _, stats = solve(blowup, y0, ts, rates[:, None], method="tsit5", rtol=1e-9, atol=1e-9,
                     return_stats=True)
    assert int(stats["status"][1]) != Status.SUCCESS
    keep = np.array([0, 2])
    assert np.isnan(g[1]) and np.all(np.isfinite(g[keep]))
    alone = jax.grad(loss)(rates[keep], y0[keep])
    np.testing.assert_array_equal(g[keep], alone)
    # y = y0 / (1 - r y0 t): d/dr of y(0.5) + y(1) at r = 1
    for i in (0, 2):
        y = float(y0[i, 0])
        want = sum(y * y * t / (1 - y * t) ** 2 for t in (0.5, 1.0))
        np.testing.assert_allclose(g[i], want, rtol=1e-7)


@pytest.mark.parametrize("method", EXPLICIT)
def test_doses_at_stops_and_a_save_fn_match_forward_mode(method):
    # A one-compartment dose model: jump_fn adds p["dose"] at each stop, save_fn records a
    # nonlinear observable of the state and p; stops between and at save times.
    def f(y, t, p):
        return jnp.array([-p["ka"] * y[0], p["ka"] * y[0] - p["ke"] * y[1] ** 1.5])

    def dose(y, t, p):
        return y.at[0].add(p["dose"] * (1.0 + 0.1 * t))

    def observe(y, t, p):
        return jnp.array([y[1] / p["v"], jnp.log1p(y[0] * y[1])])

    params = {"ka": jnp.array([1.2, 0.8]), "ke": jnp.array(0.3), "dose": jnp.array(2.0),
              "v": jnp.array(4.0)}
    axes = {"ka": 0, "ke": None, "dose": None, "v": None}
    y0 = jnp.array([[1.0, 0.0], [0.5, 0.2]])
    ts = jnp.array([0.0, 0.7, 1.0, 1.5, 2.6, 3.0, 4.0])
    stops = jnp.array([0.0, 1.0, 2.2, 3.0])

    def loss(y0, params, adjoint):
        ys = solve(f, y0, ts, params, params_axes=axes, tstops=stops, jump_fn=dose,
                   save_fn=observe, method=method, rtol=1e-9, atol=1e-9,
                   sens_error_control=False, first_step=1e-3, adjoint=adjoint)
        return jnp.sum(ys * jnp.arange(1.0, 1.0 + ys.shape[-1]))

    got = jax.grad(loss, (0, 1))(y0, params, True)
    want = jax.grad(loss, (0, 1))(y0, params, False)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want),
                    strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def test_a_dose_gradient_against_its_closed_form():
    # y' = -k y with a dose D at t = 1: y(2) = (y0 e^{-k} + D) e^{-k}.
    def loss(k, dose):
        ys = solve(lambda y, t, p: -p["k"] * y, jnp.array([1.5]), jnp.array([0.0, 2.0]),
                   {"k": k, "dose": dose}, tstops=jnp.array([1.0]),
                   jump_fn=lambda y, t, p: y + p["dose"], method="vern9", rtol=1e-12,
                   atol=1e-12, adjoint=True)
        return ys[0, -1, 0]

    k, dose = 0.7, 0.4
    exact = jax.grad(lambda k, d: (1.5 * jnp.exp(-k) + d) * jnp.exp(-k), (0, 1))(k, dose)
    np.testing.assert_allclose(jax.grad(loss, (0, 1))(k, dose), exact, rtol=1e-9)


@pytest.mark.parametrize("method", ("tsit5", "vern9", "rodas5p"))
@pytest.mark.parametrize("terminal", (True, False))
def test_events_match_forward_mode(method, terminal):
    # A damped oscillator crossing y0 = 0.2 downwards: the event's time and state (with the
    # implicit-function rule around the adjoint), the saves after a terminal event NaN (masked)
    # and untouched by the gradient, saves inside the event's step.
    def f(y, t, p):
        return jnp.array([y[1], -p[0] * y[0] - p[1] * y[1]])

    event = Event(lambda y, t, p: y[0] - 0.2 * p[2], terminal=terminal, direction=-1)
    y0 = jnp.array([[1.0, 0.0], [0.8, 0.3]])
    ts = jnp.array([0.0, 0.3, 0.55, 0.9, 1.5, 3.0])

    def loss(y0, p, adjoint):
        ys, stats = solve(f, y0, ts, p, event=event, method=method, rtol=1e-9, atol=1e-9,
                          sens_error_control=False, first_step=1e-3, return_stats=True,
                          adjoint=adjoint)
        ys = jnp.where(jnp.isnan(ys), 0.0, ys)
        return (jnp.sum(ys[..., 0] ** 2) + jnp.sum(stats["event_time"] ** 2)
                + jnp.sum(stats["event_state"] * jnp.array([1.0, 3.0])))

    p = jnp.array([4.0, 0.3, 1.0])
    got = jax.grad(loss, (0, 1))(y0, p, True)
    want = jax.grad(loss, (0, 1))(y0, p, False)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-11)


def test_forward_mode_and_the_values_are_unchanged():
    plain = solve(lorenz, Y0, TS, P, method="tsit5", rtol=1e-9, atol=1e-9)
    with_adjoint = solve(lorenz, Y0, TS, P, method="tsit5", rtol=1e-9, atol=1e-9, adjoint=True)
    np.testing.assert_array_equal(plain, with_adjoint)

    def final(p, adjoint):
        return solve(lorenz, Y0, TS, p, method="tsit5", rtol=1e-9, atol=1e-9,
                     adjoint=adjoint)[:, -1, :]

    np.testing.assert_array_equal(jax.jacfwd(final)(P, True), jax.jacfwd(final)(P, False))


def test_auto_takes_the_adjoint_beyond_the_crossover_and_forward_columns_below(monkeypatch):
    from shoal.ode import _adjoint

    calls = []
    original = _adjoint.adjoint_cotangents
    monkeypatch.setattr(_adjoint, "adjoint_cotangents",
                        lambda *a: calls.append(1) or original(*a))
    grid = jnp.linspace(0.0, 1.0, 40)

    def f(y, t, p):
        return -jnp.interp(t, grid, p) * y

    def loss(table, adjoint):
        return jnp.sum(solve(f, jnp.array([[1.0], [2.0]]), jnp.array([0.0, 0.5, 1.0]), table,
                             params_axes=None, method="tsit5", rtol=1e-10, atol=1e-10,
                             tstops=grid[1:-1], adjoint=adjoint))

    table = 1.0 + grid ** 2
    few = table[:_adjoint.AUTO_ENTRIES["explicit", None]]
    grid_few = grid[:_adjoint.AUTO_ENTRIES["explicit", None]]

    def loss_few(values, adjoint):
        return jnp.sum(solve(lambda y, t, p: -jnp.interp(t, grid_few, p) * y,
                             jnp.array([[1.0], [2.0]]), jnp.array([0.0, 0.3]), values,
                             params_axes=None, method="tsit5", rtol=1e-10, atol=1e-10,
                             adjoint=adjoint))

    np.testing.assert_array_equal(jax.grad(loss_few)(few, "auto"), jax.grad(loss_few)(few, False))
    assert not calls
    got = jax.grad(loss)(table, "auto")
    assert calls
    np.testing.assert_allclose(got, jax.grad(loss)(table, False), rtol=0,
                               atol=1e-8 * float(jnp.max(jnp.abs(got))))
    # Few entries with a stiff method: forward sensitivities.
    calls.clear()
    g = jax.grad(lambda p: jnp.sum(solve(lorenz, Y0, TS, p, method="rodas5p",
                                         adjoint="auto")))(P)
    assert np.all(np.isfinite(g)) and not calls


def test_the_adjoint_option_is_checked():
    with pytest.raises(TypeError, match="adjoint must be True, False or 'auto', got 'yes'"):
        solve(lorenz, Y0, TS, P, adjoint="yes")


@pytest.mark.parametrize("adjoint", [True, "auto"])
def test_lowering_the_adjoint_for_a_gpu_says_why_it_was_chosen(adjoint):
    """No GPU needed: the gradient lowered for CUDA. "auto" decides by JAX's default backend (the
    CPU here), so a computation placed on a GPU reaches the CPU-only adjoint; the error says so."""
    table = jnp.linspace(1.0, 2.0, 40)

    def loss(table):
        return jnp.sum(solve(lambda y, t, p: -jnp.interp(t, jnp.linspace(0.0, 1.0, 40), p) * y,
                             Y0[:, :1], TS, table, params_axes=None, adjoint=adjoint))

    why = (r" \(adjoint='auto' chose it because JAX's default backend is the CPU\)"
           if adjoint == "auto" else "")
    with pytest.raises(NotImplementedError, match=f"adjoint runs on the CPU only{why}; on a GPU"):
        jax.jit(jax.grad(loss)).trace(table).lower(lowering_platforms=("cuda",))


def test_entries_acting_between_knots_need_stops():
    # The adjoint differentiates the steps the solve took. A table entry read by jnp.interp(t,
    # ...) acts on f between its neighbouring knots only; steps that span many knots sample
    # that bump at a few stage times, and the derivative of that discretisation with respect to
    # the entry is far from the true one (the README says to put stops at the knots). With
    # them, the gradient is right to 1e-8 even at rtol 1e-6.
    grid = jnp.linspace(0.0, 1.0, 40)

    def loss(table, rtol, stops, adjoint=True):
        return jnp.sum(solve(lambda y, t, p: -jnp.interp(t, grid, p) * y,
                             jnp.array([[1.0], [2.0]]), jnp.array([0.0, 0.5, 1.0]), table,
                             params_axes=None, method="tsit5", rtol=rtol, atol=rtol,
                             tstops=stops, adjoint=adjoint))

    table = 1.0 + grid ** 2
    reference = jax.grad(loss)(table, 1e-12, grid[1:-1], False)

    def error(g):
        return float(jnp.max(jnp.abs(g - reference)) / jnp.max(jnp.abs(reference)))

    assert error(jax.grad(loss)(table, 1e-6, grid[1:-1])) < 1e-8
    assert error(jax.grad(loss)(table, 1e-6, None)) > 1e-2


def robertson(y, t, p):
    k1, k2, k3 = p[0], p[1], p[2]
    return jnp.array([-k1 * y[0] + k3 * y[1] * y[2],
                      k1 * y[0] - k2 * y[1] ** 2 - k3 * y[1] * y[2], k2 * y[1] ** 2])


ROBER_Y0 = jnp.array([[1.0, 0.0, 0.0], [0.9, 0.1, 0.0]])
ROBER_TS = jnp.array([0.0, 0.1, 1.0, 10.0, 40.0])
ROBER_P = jnp.array([0.04, 3e7, 1e4])


def _robertson_grad(method, adjoint, **options):
    def loss(y0, p):
        ys = solve(robertson, y0, ROBER_TS, p, method=method, adjoint=adjoint, **options)
        return jnp.sum(ys * jnp.array([1.0, 1e4, 2.0]))
    return jax.grad(loss, (0, 1))(ROBER_Y0, ROBER_P)


@pytest.mark.parametrize("method", ROSENBROCK)
def test_stiff_same_steps_give_the_forward_gradient_to_rounding(method):
    # Robertson: the transposed solves against the step's own factors, the second-order
    # products of the iteration matrix (jvp_vjp), the dense output at interior saves.
    options = dict(rtol=1e-8, atol=1e-10, sens_error_control=False, first_step=1e-6)
    adjoint = _robertson_grad(method, True, **options)
    forward = _robertson_grad(method, False, **options)
    for a, f in zip(adjoint, forward, strict=True):
        np.testing.assert_allclose(a, f, rtol=1e-11, atol=1e-12 * float(jnp.max(jnp.abs(f))))


@pytest.mark.parametrize("method", ("rodas5p", "rodas4"))
def test_stiff_default_steps_agree_within_the_tolerance(method):
    adjoint = _robertson_grad(method, True, rtol=1e-9, atol=1e-11)
    forward = _robertson_grad(method, False, rtol=1e-9, atol=1e-11)
    for a, f in zip(adjoint, forward, strict=True):
        np.testing.assert_allclose(a, f, rtol=0, atol=1e-6 * float(jnp.max(jnp.abs(f))))


def test_stiff_closed_form_non_autonomous_with_doses_and_float32_factors():
    # y' = -k (y - cos t): the ∂f/∂t term of the step; with k = 1e4 stiff. A dose at t = 0.5.
    # y(t) = cos-forced; checked against forward mode (the fp32 factorisation's adjoint solves
    # read float factors: agreement to ~1e-6).
    def f(y, t, p):
        return -p[0] * (y - jnp.cos(p[1] * t))

    def loss(p, adjoint, lu):
        ys = solve(f, jnp.array([[0.0], [1.0]]), jnp.array([0.0, 0.3, 0.7, 1.0]), p,
                   method="rodas5p", rtol=1e-9, atol=1e-11, tstops=jnp.array([0.5]),
                   jump_fn=lambda y, t, p: y + 0.1 * p[1], lu_precision=lu,
                   sens_error_control=False, first_step=1e-5, adjoint=adjoint)
        return jnp.sum(ys ** 2)

    p = jnp.array([1e4, 2.0])
    np.testing.assert_allclose(jax.grad(loss)(p, True, "fp64"), jax.grad(loss)(p, False, "fp64"),
                               rtol=1e-9)
    np.testing.assert_allclose(jax.grad(loss)(p, True, "fp32"), jax.grad(loss)(p, False, "fp32"),
                               rtol=1e-5)


CHAIN_N = 12  # sparse by default from 12 variables (_model.AUTO_SPARSE_MIN_VARS)


def chain(y, t, k):
    n = CHAIN_N
    forward = k[:n - 1] * y[:-1]
    backward = k[n - 1:2 * n - 2] * y[1:]
    flux = forward - backward
    dy = jnp.zeros(n).at[:-1].add(-flux).at[1:].add(flux)
    return dy - k[2 * n - 2] * y ** 2 + k[2 * n - 1]


CHAIN_RATES = jnp.concatenate([jnp.logspace(0, 4, CHAIN_N - 1), jnp.logspace(-1, 2, CHAIN_N - 1),
                               jnp.array([0.5, 0.1])])


def _chain_grad(adjoint, **options):
    y0 = jnp.stack([jnp.linspace(1.0, 0.1, CHAIN_N), jnp.linspace(0.2, 1.0, CHAIN_N)])

    def loss(k):
        ys = solve(chain, y0, jnp.array([0.0, 0.01, 0.4, 1.0]), k, params_axes=None,
                   adjoint=adjoint, **options)
        return jnp.sum(ys[:, 1:] * jnp.arange(1.0, CHAIN_N + 1))

    return jax.grad(loss)(CHAIN_RATES)


def test_many_rates_of_a_stiff_network_and_a_sparse_primal():
    # A 12-species chain with 24 rate constants, on the default steps: within the tolerance.
    want = _chain_grad(False, rtol=1e-9, atol=1e-11)
    got = _chain_grad(True, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 * float(jnp.max(jnp.abs(want))))


@pytest.mark.parametrize(("method", "emitted"), [("rodas5p", "unrolled"), ("rodas5p", "tables"),
                                                 ("rodas4", "tables"),
                                                 ("rosenbrock23", "unrolled")])
def test_a_sparse_primal_is_transposed_by_its_own_solver(monkeypatch, method, emitted):
    # The adjoint of a sparse solve steps with the sparse solver and transposes the step with
    # its solve_transposed, straight-line or (beyond the size thresholds, forced here) loops
    # over index tables: on the plain solve's steps the gradient is the forward columns' (also
    # sparse) to rounding, and the dense LU's within it.
    from shoal.ode._sparse import emission

    if emitted == "tables":
        monkeypatch.setattr(emission, "MAX_UNROLLED_UPDATES", 0)
        monkeypatch.setattr(emission, "MAX_UNROLLED_SUBSTITUTIONS", 0)
    options = dict(method=method, rtol=1e-8, atol=1e-10, sens_error_control=False,
                   first_step=1e-6)
    _, stats = solve(chain, jnp.linspace(1.0, 0.1, CHAIN_N)[None], jnp.array([0.0, 1.0]),
                     CHAIN_RATES, params_axes=None, return_stats=True,
                     **{k: v for k, v in options.items() if k != "sens_error_control"})
    assert bool(stats["sparse"][0])
    adjoint = _chain_grad(True, **options)
    forward = _chain_grad(False, **options)
    scale = float(jnp.max(jnp.abs(forward)))
    np.testing.assert_allclose(adjoint, forward, rtol=1e-10, atol=1e-12 * scale)
    dense = _chain_grad(True, sparsity="dense", **options)
    np.testing.assert_allclose(adjoint, dense, rtol=1e-7, atol=1e-9 * scale)


def test_save_and_start_times_are_differentiated_around_the_adjoint():
    def loss(ts, adjoint):
        ys = solve(lorenz, Y0, ts, P, method="vern7", rtol=1e-10, atol=1e-10,
                   sens_error_control=False, first_step=1e-3, adjoint=adjoint)
        return jnp.sum(jnp.sin(ys))

    np.testing.assert_allclose(jax.grad(loss)(TS, True), jax.grad(loss)(TS, False), rtol=1e-9,
                               atol=1e-10)


def test_sixty_six_rates_of_a_twenty_species_network_forward_and_adjoint_agree():
    # Forward sensitivities with 66 columns: in 8 SIMD lanes their nested dual numbers overflowed
    # a worker thread's stack (a segfault); such joint solves now run on the scalar path
    # (_build.for_ensemble). The adjoint gives the same gradient within the tolerance.
    rng = np.random.default_rng(3)
    n, m = 20, 66
    a, b, c = (rng.integers(0, n, m) for _ in range(3))
    bimolecular = rng.random(m) < 0.5

    def f(y, t, k):
        flux = k * y[a] * jnp.where(bimolecular, y[b], 1.0)
        dy = jnp.zeros(n).at[a].add(-flux).at[c].add(flux)
        return dy.at[b].add(jnp.where(bimolecular, -flux, 0.0)) + 0.1 - 0.1 * y

    rates = jnp.asarray(10.0 ** rng.uniform(-2, 4, m))
    y0 = jnp.asarray(rng.uniform(0.5, 1.5, (16, n)))

    def loss(k, adjoint):
        ys = solve(f, y0, jnp.linspace(0.0, 2.0, 4), k, params_axes=None, rtol=1e-8,
                   atol=1e-10, sparsity="dense", adjoint=adjoint)
        return jnp.sum(ys[:, 1:, :5])

    want = jax.grad(loss)(rates, False)
    got = jax.grad(loss)(rates, True)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 * float(jnp.max(jnp.abs(want))))


@pytest.mark.parametrize("entries", [24, 25])  # both sides of "auto"'s explicit threshold
def test_grad_jacrev_and_jacfwd_agree_on_both_sides_of_the_auto_threshold(entries):
    # On the plain solve's steps (sens_error_control off, a given first step) the adjoint and
    # forward columns differentiate the same discretisation: agreement to 1e-10, with y0
    # differentiated and not, shared and per-member leaves.
    grid = jnp.linspace(0.0, 1.0, entries)

    def f(y, t, p):
        return -(jnp.sum(p["table"] * jnp.cos(grid * y[0])) / entries + p["k"]) * y

    y0 = jnp.array([[1.0], [2.0]])
    ts = jnp.array([0.0, 0.37, 1.0])
    options = dict(method="tsit5", rtol=1e-9, atol=1e-9, sens_error_control=False,
                   first_step=1e-3, adjoint="auto", params_axes={"table": None, "k": 0})

    def saves(table, k, y0):
        return solve(f, y0, ts, {"table": table, "k": k}, **options)[:, -1, 0]

    table, k = 1.0 + grid, jnp.array([0.1, 0.2])
    for argnums in ((0,), (0, 1), (0, 1, 2)):
        reverse = jax.jacrev(saves, argnums)(table, k, y0)
        forward = jax.jacfwd(saves, argnums)(table, k, y0)
        grad = jax.grad(lambda *a: jnp.sum(saves(*a)), argnums)(table, k, y0)
        for r, fw, g in zip(reverse, forward, grad, strict=True):
            np.testing.assert_allclose(r, fw, rtol=1e-10, atol=1e-13)
            np.testing.assert_allclose(g, jnp.sum(fw, axis=0), rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("method", ("tsit5", "vern7", "rodas5p"))
def test_the_forward_solve_in_the_lanes_gives_the_scalar_paths_bits(method):
    # adjoint_lanes.hpp: 11 members (a partial last vector of 8), doses at stops (jumps),
    # a save_fn, a terminal event, one member that blows up (NaN), per-member and shared leaves.
    def f(y, t, p):
        return jnp.array([-p["ka"] * y[0], p["ka"] * y[0] - p["ke"] * y[1] ** 2])

    def dose(y, t, p):
        return y.at[0].add(p["dose"])

    def observe(y, t, p):
        return jnp.array([y[1] * p["scale"], y[0] * y[1]])

    n = 11
    ka = jnp.linspace(0.6, 1.6, n).at[7].set(-40.0)  # member 7: y0 grows like e^{40 t}
    params = {"ka": ka, "ke": jnp.array(0.3), "dose": jnp.array(0.5), "scale": jnp.array(2.0)}
    axes = {"ka": 0, "ke": None, "dose": None, "scale": None}
    y0 = jnp.stack([jnp.linspace(0.5, 1.5, n), jnp.zeros(n)], axis=1)
    ts = jnp.array([0.0, 0.5, 1.0, 2.0, 3.0])
    event = Event(lambda y, t, p: y[1] - 0.45, terminal=True, direction=1)

    def loss(params, y0, lanes, adjoint=True):
        ys, stats = solve(f, y0, ts, params, params_axes=axes, tstops=jnp.array([0.7, 1.4]),
                          jump_fn=dose, save_fn=observe, event=event, method=method,
                          rtol=1e-8, atol=1e-8, max_steps=400, lanes=lanes,
                          sens_error_control=False, first_step=1e-3, adjoint=adjoint,
                          return_stats=True)
        ys = jnp.where(jnp.isnan(ys), 0.0, ys)
        return jnp.sum(ys * jnp.arange(1.0, 3.0)) + jnp.sum(
            jnp.where(jnp.isnan(stats["event_time"]), 0.0, stats["event_time"]))

    scalar = jax.grad(loss, (0, 1))(params, y0, 1)
    lanes = jax.grad(loss, (0, 1))(params, y0, 8)
    for a, b in zip(jax.tree_util.tree_leaves(lanes), jax.tree_util.tree_leaves(scalar),
                    strict=True):
        np.testing.assert_array_equal(a, b)
    # The failing member's gradient is NaN, the others' finite and forward mode's.
    d_ka, d_y0 = lanes[0]["ka"], lanes[1]
    assert np.isnan(d_ka[7]) and np.all(np.isnan(d_y0[7]))
    keep = np.arange(n) != 7
    assert np.all(np.isfinite(d_ka[keep]))
    forward = jax.grad(loss, (0, 1))(params, y0, 8, False)
    np.testing.assert_allclose(d_ka[keep], forward[0]["ka"][keep], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(d_y0[keep], forward[1][keep], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("n", [11, 12])  # both sides of the default sparse threshold
def test_grad_jacrev_and_jacfwd_agree_on_both_sides_of_the_sparse_threshold(n):
    # Dense LU below 12 variables, the sparse solver from 12 (_model.AUTO_SPARSE_MIN_VARS): on
    # the plain solve's steps the adjoint (grad, jacrev) and forward columns (jacfwd) agree to
    # 1e-10, y0 differentiated and not, a per-member and a shared leaf.
    def f(y, t, p):
        flux = p["k"] * y[:-1] - p["back"] * y[1:]
        return jnp.zeros(n).at[:-1].add(-flux).at[1:].add(flux) - 0.5 * y ** 2 + 0.1

    y0 = jnp.stack([jnp.linspace(1.0, 0.1, n), jnp.linspace(0.2, 1.0, n)])
    options = dict(method="rodas5p", rtol=1e-8, atol=1e-10, sens_error_control=False,
                   first_step=1e-6, adjoint=True, params_axes={"k": None, "back": 0})
    _, stats = solve(f, y0, jnp.array([0.0, 1.0]),
                     {"k": jnp.logspace(0, 3, n - 1), "back": jnp.full((2, n - 1), 0.3)},
                     return_stats=True, **options)
    assert bool(stats["sparse"][0]) == (n >= 12)

    def saves(k, back, y0):
        return solve(f, y0, jnp.array([0.0, 0.05, 1.0]), {"k": k, "back": back},
                     **options)[:, 1:, ::3].ravel()

    k, back = jnp.logspace(0, 3, n - 1), jnp.full((2, n - 1), 0.3)
    for argnums in ((0,), (0, 1), (0, 1, 2)):
        reverse = jax.jacrev(saves, argnums)(k, back, y0)
        forward = jax.jacfwd(saves, argnums)(k, back, y0)
        grad = jax.grad(lambda *a: jnp.sum(saves(*a)), argnums)(k, back, y0)
        for r, fw, g in zip(reverse, forward, grad, strict=True):
            scale = float(jnp.max(jnp.abs(fw)))
            np.testing.assert_allclose(r, fw, rtol=1e-10, atol=1e-12 * scale)
            np.testing.assert_allclose(g, jnp.sum(fw, axis=0), rtol=1e-10, atol=1e-12 * scale)
