"""Parameter pytrees: structure, per-trajectory and shared leaves, run-time tables, gradients
with respect to any leaf, and closures over traced values."""

from __future__ import annotations

import dataclasses
import re
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

from shoal.ode import _model, solve

jax.config.update("jax_enable_x64", True)

N = 4
GRID = np.linspace(0.0, 2.0, 11)
TABLE = np.sin(GRID)
TS = jnp.linspace(0.0, 2.0, 5)
RATES = np.linspace(0.5, 2.0, N)
TIGHT = dict(rtol=1e-10, atol=1e-12)


def forced_decay(y, t, p):
    """y' = -k y + table(t), the table interpolated on a grid: both given as leaves."""
    return -p["k"] * y + jnp.interp(t, p["grid"], p["table"])


def table_params(table=TABLE):
    return {"k": jnp.asarray(RATES), "grid": jnp.asarray(GRID), "table": jnp.asarray(table)}


def exact_table_gradient(k: float) -> tuple[float, np.ndarray, float]:
    """y(2), d y(2) / d table and d y(2) / d k for y(0) = 1, by SciPy on each grid interval
    (the forcing has kinks at the knots, so one interval at a time is smooth)."""
    hats = np.eye(GRID.size)

    def rhs(t, z):
        y, s_table, s_k = z[0], z[1:-1], z[-1]
        forcing = [np.interp(t, GRID, h) for h in hats]
        return np.concatenate([[-k * y + np.interp(t, GRID, TABLE)], -k * s_table + forcing,
                               [-k * s_k - y]])

    z = np.concatenate([[1.0], np.zeros(GRID.size + 1)])
    for a, b in zip(GRID[:-1], GRID[1:], strict=True):
        z = solve_ivp(rhs, (a, b), z, method="DOP853", rtol=1e-13, atol=1e-15).y[:, -1]
    return z[0], z[1:-1], z[-1]


def test_dict_params_equal_the_flattened_solve_bit_for_bit():
    y0 = jnp.ones((N, 1))
    got = solve(forced_decay, y0, TS, table_params(), **TIGHT)

    def flat(y, t, p):  # the same model with a bare (N, 1) array and the table compiled in
        return -p * y + jnp.interp(t, jnp.asarray(GRID), jnp.asarray(TABLE))

    want = solve(flat, y0, TS, jnp.asarray(RATES)[:, None], **TIGHT)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


class Decay(NamedTuple):
    rate: jax.Array
    offset: jax.Array


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Forcing:
    amplitude: jax.Array
    frequency: jax.Array


@jax.tree_util.register_pytree_node_class
class PiecewiseLinear:
    """A user's table class, registered as a pytree: knots and values are its leaves."""

    def __init__(self, knots, values):
        self.knots, self.values = knots, values

    def __call__(self, x):
        return jnp.interp(x, self.knots, self.values)

    def tree_flatten(self):
        return (self.knots, self.values), None

    @classmethod
    def tree_unflatten(cls, aux, leaves):
        return cls(*leaves)


def test_f_receives_the_structure_it_was_given():
    seen = {}

    def f(y, t, p):
        decay, (forcing, table), count = p
        seen.update(decay=type(decay), forcing=type(forcing), table=type(table),
                    rate=decay.rate.shape, count=(count.shape, count.dtype))
        return (-decay.rate * y + decay.offset
                + forcing.amplitude * jnp.sin(forcing.frequency * t) + table(t) * count)

    params = (Decay(jnp.asarray(RATES), jnp.full((N,), 0.1)),
              (Forcing(jnp.asarray(0.3), jnp.asarray(2.0)),
               PiecewiseLinear(jnp.asarray(GRID), jnp.asarray(TABLE))),
              jnp.arange(N, dtype=jnp.int32))
    got = solve(f, jnp.ones((N, 1)), TS, params, **TIGHT)
    assert seen == dict(decay=Decay, forcing=Forcing, table=PiecewiseLinear, rate=(),
                        count=((), jnp.int32))

    def by_hand(t, y, k, c, count):
        return -k * y + c + 0.3 * np.sin(2.0 * t) + np.interp(t, GRID, TABLE) * count

    for m in range(N):
        ref = solve_ivp(by_hand, (0.0, 2.0), [1.0], t_eval=np.asarray(TS), method="DOP853",
                        rtol=1e-12, atol=1e-14, args=(RATES[m], 0.1, m), max_step=0.01).y.T
        np.testing.assert_allclose(np.asarray(got[m]), ref, rtol=1e-7, atol=1e-9)


def test_a_leaf_f_accepts_both_ways_is_refused_and_params_axes_settles_it():
    # A table of exactly N entries that f can take whole (a sum) or one entry per member: no
    # reading is guessed; params_axes says which.
    y0 = jnp.ones((N, 1))
    table = jnp.linspace(1.0, 2.0, N)

    def f(y, t, p):
        return -jnp.sum(p["w"]) * y

    with pytest.raises(ValueError, match=r"params\['w'\].*both ways.*params_axes=\{'w': 0\}"
                       r".*params_axes=\{'w': None\}"):
        solve(f, y0, TS, {"w": table})
    per_traj = solve(f, y0, TS, {"w": table}, params_axes={"w": 0})
    shared = solve(f, y0, TS, {"w": table}, params_axes={"w": None})
    t = np.asarray(TS)
    np.testing.assert_allclose(np.asarray(per_traj[:, :, 0]),
                               np.exp(-np.outer(np.asarray(table), t)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(shared[:, :, 0]),
                               np.tile(np.exp(-float(table.sum()) * t), (N, 1)), rtol=1e-6)
    # A single y0 with per-trajectory leaves named by params_axes: N comes from the leaves.
    single = solve(f, jnp.ones(1), TS, {"w": table}, params_axes=0)
    np.testing.assert_array_equal(np.asarray(single), np.asarray(per_traj))


def test_bad_parameter_pytrees_are_named():
    y0 = jnp.ones((N, 1))
    with pytest.raises(ValueError, match="params_axes entries must be 0"):
        solve(forced_decay, y0, TS, table_params(), params_axes={"k": 1, "grid": None,
                                                               "table": None})
    with pytest.raises(ValueError, match="prefix"):
        solve(forced_decay, y0, TS, table_params(), params_axes={"k": 0})
    with pytest.raises(ValueError, match=r"params\['table'\]: 11"):
        solve(forced_decay, y0, TS, table_params(), params_axes={"k": 0, "grid": None,
                                                               "table": 0})
    with pytest.raises(ValueError, match="scalar"):
        solve(lambda y, t, p: -p * y, y0, TS, {"k": 1.0}, params_axes=0)
    with pytest.raises(TypeError, match=r"params\['k'\] must be real"):
        solve(forced_decay, y0, TS, dict(table_params(), k=jnp.ones(N) * 1j))


def test_new_table_values_never_retrace():
    traces = []

    def f(y, t, p):
        traces.append(1)
        return forced_decay(y, t, p)

    y0 = jnp.ones((N, 1))
    a = solve(f, y0, TS, table_params())
    first = len(traces)  # the model's trace, and the shape-only traces that read the leaves
    b = solve(f, y0, TS, table_params(2.0 * TABLE))
    assert len(traces) == first
    # Linear in the forcing: y(t) - y_homogeneous doubles with the table.
    hom = solve(f, y0, TS, table_params(0.0 * TABLE))
    np.testing.assert_allclose(np.asarray(b - hom), 2.0 * np.asarray(a - hom), rtol=1e-6,
                               atol=1e-12)


@pytest.mark.parametrize("method", ["tsit5", "rodas5p"])
def test_gradient_with_respect_to_a_shared_table(method):
    k = 1.3  # y0 is one state: every leaf is shared

    def y_end(table):
        params = {"k": jnp.asarray(k), "grid": jnp.asarray(GRID), "table": table}
        return solve(forced_decay, jnp.ones(1), jnp.array([0.0, 2.0]), params, method=method,
                     **TIGHT)[0, -1, 0]

    value, ref, _ = exact_table_gradient(k)
    np.testing.assert_allclose(float(y_end(jnp.asarray(TABLE))), value, rtol=1e-8)
    np.testing.assert_allclose(np.asarray(jax.grad(y_end)(jnp.asarray(TABLE))), ref,
                               rtol=1e-7, atol=1e-10)


def test_gradients_with_respect_to_own_and_shared_leaves_together():
    y0 = jnp.ones((N, 1))

    def loss(params):
        return solve(forced_decay, y0, TS, params, **TIGHT)[:, -1, 0].sum()

    grads = jax.grad(loss)(table_params())
    exact = [exact_table_gradient(k) for k in RATES]
    # The shared table's cotangent sums the ensemble; the rates' is one per trajectory.
    np.testing.assert_allclose(np.asarray(grads["table"]), sum(e[1] for e in exact), rtol=1e-7,
                               atol=1e-10)
    np.testing.assert_allclose(np.asarray(grads["k"]), [e[2] for e in exact], rtol=1e-7)
    np.testing.assert_array_equal(np.asarray(grads["grid"]).shape, GRID.shape)


def test_jacfwd_with_respect_to_a_scalar_that_builds_the_table():
    def y_end(amplitude):
        params = {"k": jnp.asarray(1.3), "grid": jnp.asarray(GRID),
                  "table": amplitude * jnp.asarray(TABLE)}
        return solve(forced_decay, jnp.ones(1), jnp.array([0.0, 2.0]), params,
                     **TIGHT)[0, -1, 0]

    _, ref, _ = exact_table_gradient(1.3)
    np.testing.assert_allclose(float(jax.jacfwd(y_end)(1.0)), ref @ TABLE, rtol=1e-7)
    np.testing.assert_allclose(float(jax.grad(y_end)(1.0)), ref @ TABLE, rtol=1e-7)


def test_closed_over_traced_tables_are_inputs():
    grid = jnp.asarray(GRID)

    def loss(amplitude):
        table = amplitude * jnp.sin(grid)  # traced under grad/jit/vmap
        f = lambda y, t, p: -p * y + jnp.interp(t, grid, table)  # noqa: E731
        return solve(f, jnp.ones((N, 1)), TS, jnp.asarray(RATES)[:, None], **TIGHT)[:, -1].sum()

    def loss_params(amplitude):
        params = dict(table_params(amplitude * jnp.sin(grid)))
        return solve(forced_decay, jnp.ones((N, 1)), TS, params, **TIGHT)[:, -1].sum()

    np.testing.assert_array_equal(float(jax.jit(loss)(1.5)), float(loss_params(1.5)))
    g = jax.grad(loss)(1.5)
    np.testing.assert_allclose(float(g), float(jax.grad(loss_params)(1.5)), rtol=1e-12)
    np.testing.assert_allclose(float(jax.jit(jax.grad(loss))(1.5)), float(g), rtol=1e-12)
    amplitudes = jnp.array([0.5, 1.0, 2.0])
    np.testing.assert_allclose(np.asarray(jax.vmap(loss)(amplitudes)),
                               [float(loss(a)) for a in amplitudes], rtol=1e-12)


def test_vmap_over_a_shared_leaf():
    def y_end(table):
        return solve(forced_decay, jnp.ones((N, 1)), TS, table_params(table), **TIGHT)[:, -1, 0]

    tables = jnp.stack([jnp.asarray(TABLE) * s for s in (0.5, 1.0, 3.0)])
    np.testing.assert_allclose(np.asarray(jax.vmap(y_end)(tables)),
                               np.stack([np.asarray(y_end(t)) for t in tables]), rtol=1e-12)


def test_closure_traces_are_not_cached():
    # A model that read traced closure values is regenerated per call, never kept with stale
    # tracers; one without them is traced once.
    grid = jnp.asarray(GRID)
    f_plain = lambda y, t, p: -p * y  # noqa: E731
    solve(f_plain, jnp.ones(1), TS, jnp.ones(1))
    solve(f_plain, jnp.ones(1), TS, jnp.ones(1))
    assert len(_model._traced[f_plain]) == 1

    def run(amplitude):
        table = amplitude * jnp.sin(grid)
        f = lambda y, t, p: -p * y + jnp.interp(t, grid, table)  # noqa: E731
        out = solve(f, jnp.ones(1), TS, jnp.ones(1))
        assert not _model._traced.get(f)
        return out

    jax.jit(run)(1.0)


def test_jacfwd_through_a_large_table_integrates_one_column_per_direction():
    # Three scalars build a 2 000-entry shared table: forward mode integrates 3 sensitivity
    # columns (the directions), not 2 000 (reverse mode would integrate a column per entry).
    grid = jnp.linspace(0.0, 2.0, 2000)

    def y_end(theta):
        table = theta[0] + theta[1] * jnp.sin(theta[2] * grid)
        params = {"k": jnp.asarray(RATES), "grid": grid, "table": table}
        return solve(forced_decay, jnp.ones((N, 1)), TS, params, method="tsit5",
                     **TIGHT)[:, -1, 0]

    theta = jnp.array([0.2, 1.0, 1.5])
    lowered = jax.jit(jax.jacfwd(y_end)).lower(theta).as_text()
    assert re.search(r'"shoal_ode_tsit5_dir3(_lanes\w+)?"', lowered) and "_sens" not in lowered
    forward = np.asarray(jax.jacfwd(y_end)(theta))
    # ... against the closed form of d y(T) / d theta for y' = -k y + g(t; theta).
    t_end = float(TS[-1])
    s = np.linspace(0.0, t_end, 20001)
    for m, k in enumerate(RATES):
        kernel = np.exp(-k * (t_end - s))
        dg = [np.ones_like(s), np.sin(1.5 * s), 1.0 * s * np.cos(1.5 * s)]
        want = [np.trapezoid(kernel * d, s) for d in dg]
        np.testing.assert_allclose(forward[m], want, rtol=1e-6, atol=1e-8)


def test_columns_beyond_the_stack_budget_are_integrated_in_chunks(monkeypatch):
    # On the plain solve's steps, chunked joint solves give the columns of one joint solve.
    import shoal.ode._directional as directional

    def y_end(table):
        return solve(forced_decay, jnp.ones((N, 1)), TS, table_params(table), method="tsit5",
                     sens_error_control=False, **TIGHT)[:, -1, 0]

    table = jnp.asarray(TABLE)
    whole_rev, whole_fwd = jax.jacrev(y_end)(table), jax.jacfwd(y_end)(table)
    monkeypatch.setattr(directional, "STACK_BUDGET", 4 * 8 * (4 * 25 + 24))  # 3 columns
    assert directional._max_columns(1, 25, 8) == 3
    chunked_rev, chunked_fwd = jax.jacrev(y_end)(table), jax.jacfwd(y_end)(table)
    np.testing.assert_allclose(np.asarray(chunked_rev), np.asarray(whole_rev), rtol=1e-12,
                               atol=1e-14)
    np.testing.assert_allclose(np.asarray(chunked_fwd), np.asarray(whole_fwd), rtol=1e-12,
                               atol=1e-14)


def test_a_run_time_table_costs_no_source():
    # A table in params is read where it lies in p: 10 000 entries generate the same code as
    # 100 but for the digits of the sizes and offsets.
    from shoal.ode import _codegen, _params

    def source(n):
        split = _params.split({"k": jnp.ones(1), "grid": jnp.linspace(0.0, 2.0, n),
                               "table": jnp.ones(n)}, None, None, np.float64)
        return _codegen.generate_model(forced_decay, 1, split.layout, np.float64).source

    small, large = source(100), source(10_000)
    assert len(large) < 1.05 * len(small)
    assert "p + 10001" in large


@jax.tree_util.register_pytree_node_class
class NaturalCubicSpline:
    """A natural cubic spline as a scientist writes it in jax.numpy: coefficients solved for
    outside f, evaluated inside f with searchsorted and gathers."""

    def __init__(self, knots, values, second):
        self.knots, self.values, self.second = knots, values, second

    @classmethod
    def fit(cls, knots, values):
        h = jnp.diff(knots)
        n = knots.size
        rows = jnp.zeros((n, n)).at[0, 0].set(1.0).at[-1, -1].set(1.0)
        i = jnp.arange(1, n - 1)
        rows = rows.at[i, i - 1].set(h[:-1] / 6).at[i, i].set((h[:-1] + h[1:]) / 3)
        rows = rows.at[i, i + 1].set(h[1:] / 6)
        slopes = jnp.diff(values) / h
        rhs = jnp.zeros(n).at[1:-1].set(slopes[1:] - slopes[:-1])
        return cls(knots, values, jnp.linalg.solve(rows, rhs))

    def __call__(self, x):
        k = jnp.clip(jnp.searchsorted(self.knots, x) - 1, 0, self.knots.size - 2)
        x0, x1 = self.knots[k], self.knots[k + 1]
        h = x1 - x0
        a, b = (x1 - x) / h, (x - x0) / h
        return (a * self.values[k] + b * self.values[k + 1]
                + ((a**3 - a) * self.second[k] + (b**3 - b) * self.second[k + 1]) * h**2 / 6)

    def tree_flatten(self):
        return (self.knots, self.values, self.second), None

    @classmethod
    def tree_unflatten(cls, aux, leaves):
        return cls(*leaves)


def test_gradient_through_a_spline_object_against_central_differences():
    knots = jnp.linspace(0.0, 2.0, 9)

    def f(y, t, p):
        rate, spline = p
        return -rate * y + spline(t)

    def loss(values):
        params = (jnp.asarray(RATES), NaturalCubicSpline.fit(knots, values))
        return jnp.sum(solve(f, jnp.ones((N, 1)), TS, params, **TIGHT)[:, -1, 0] ** 2)

    values = jnp.cos(knots)
    grad = np.asarray(jax.grad(loss)(values))
    eps = 0.1  # the loss is quadratic in the values: central differences are exact at any step
    central = np.array([(loss(values.at[i].add(eps)) - loss(values.at[i].add(-eps))) / (2 * eps)
                        for i in range(knots.size)])
    np.testing.assert_allclose(grad, central, rtol=1e-5, atol=1e-8)


def test_a_run_time_table_read_at_the_state_in_the_sparsity_pattern():
    def f(y, t, p):
        return jnp.stack([-p["k"] * y[0] + jnp.interp(y[1], p["grid"], p["table"]), -y[1],
                          -y[2]])

    params = {"k": jnp.asarray(1.3), "grid": jnp.asarray(GRID), "table": jnp.asarray(TABLE)}
    pattern = _model.structural_pattern(_model.generated_model(
        f, 3, _params_layout(params), np.float64)[0])
    np.testing.assert_array_equal(pattern, [[1, 1, 0], [0, 1, 0], [0, 0, 1]])
    y0 = jnp.array([1.0, 1.5, 1.0])
    dense = solve(f, y0, TS, params, **TIGHT)
    sparse = solve(f, y0, TS, params, sparsity="auto", **TIGHT)
    np.testing.assert_allclose(np.asarray(sparse), np.asarray(dense), rtol=1e-9, atol=1e-12)


def _params_layout(params):
    from shoal.ode import _params

    return _params.split(params, None, None, np.float64).layout


@pytest.mark.parametrize("method", ["tsit5", "rodas5p"])
def test_directions_and_unit_columns_give_the_same_derivatives(method, monkeypatch):
    # Above UNIT_COLUMNS entries the JVP integrates directions; forced here on a small problem,
    # on the plain solve's steps every derivative equals the unit-column one.
    import shoal.ode._differentiation as differentiation

    opts = dict(method=method, sens_error_control=False, **TIGHT)

    def ys(y0, params):
        return solve(forced_decay, y0, TS, params, **opts)

    def loss(y0, params):
        return jnp.sum(ys(y0, params)[:, -1] ** 2)

    y0, params = jnp.ones((N, 1)), table_params()
    dparams = jax.tree_util.tree_map(lambda x: 0.1 * jnp.cos(x), params)
    transforms = {
        "jvp": lambda: jax.jvp(ys, (y0, params), (0.5 * y0, dparams))[1],
        "jacfwd": lambda: jax.jacfwd(ys, argnums=(0, 1))(y0, params),
        "grad": lambda: jax.grad(loss, argnums=(0, 1))(y0, params),
        "vmap_grad": lambda: jax.vmap(jax.grad(loss, argnums=1), in_axes=(None, 0))(
            y0, jax.tree_util.tree_map(lambda x: jnp.stack([x, 1.5 * x]), params)),
    }
    unit = {name: fn() for name, fn in transforms.items()}
    monkeypatch.setattr(differentiation, "UNIT_COLUMNS", 0)
    for name, fn in transforms.items():
        got = fn()
        for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(unit[name]),
                        strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-11, atol=1e-13,
                                       err_msg=name)
