"""Reverse mode equals forward mode everywhere (issue 24).

``jax.grad`` through ``solve`` is the transpose of the tangent map, evaluated by whichever of
four paths the sizes pick: a unit column per differentiated entry in the JVP (at most
``UNIT_COLUMNS`` entries), the directional primitive's transpose with one joint solve of unit
columns (when they fit the stack budget, ``_max_columns``), or with those columns integrated in
chunks of unit directions. Forward mode picks between unit columns and chunks of directions on
its own rule. A bug in one path (cotangents of an input that is not differentiated added into
the first entries, found beyond one chunk) is invisible to tests that stay on one side of the
thresholds, so this suite draws random sizes on both sides of each, every combination of
differentiated inputs (y0, a per-member leaf, a shared leaf, the save times) with and without a
terminal event and a ``save_fn``, and asserts grad == jacfwd == jacrev.

The thresholds are lowered (monkeypatched) so that small problems cross them; the real ones are
crossed by the issue's reproducer at the bottom. Without sensitivity error control every path
takes the plain solve's steps, so the three agree to rounding (1e-10 relative asserted).
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shoal.ode._differentiation as differentiation
import shoal.ode._directional as directional
from shoal.ode import Event, solve

N = 3
T_SAVE = np.array([0.0, 0.3, 0.7, 1.2])
INPUTS = ("y0", "own", "shared", "t_span")


def _model(k_own: int, k_shared: int):
    """A two-state model in which every parameter entry moves the solution differently."""
    c_own = np.linspace(0.5, 1.5, k_own)
    c_shared = np.cos(np.arange(k_shared) + 0.5)

    def f(y, t, p):
        s_own = jnp.dot(p["own"], c_own)
        s_shared = jnp.dot(p["shared"], c_shared)
        return jnp.stack([-(1.0 + 0.1 * s_own**2) * y[0] + 0.3 * y[1],
                          -0.5 * y[1] + 0.2 * jnp.tanh(y[0]) + 0.1 * s_shared * jnp.cos(t)])

    return f


def _event_fn(y, t, p):  # y[0] falls from ~1 through 0.6 near t = 0.5
    return y[0] - 0.6


def _save_fn(y, t, p):  # three observables that mix the state, the time and the parameters
    return jnp.stack([y[0] * y[1], jnp.sin(t) * y[1], y[0] + jnp.sum(p["shared"])])


def _loss(f, method, event, save, wanted, values):
    """The loss as a function of the differentiated inputs only (the others are constants)."""
    options = dict(method=method, rtol=1e-9, atol=1e-11, sens_error_control=False)
    if event:
        options["event"] = Event(_event_fn, terminal=True)
    if save:
        options["save_fn"] = _save_fn

    def loss(*diff):
        x = dict(values, **dict(zip(wanted, diff, strict=True)))
        params = {"own": x["own"], "shared": x["shared"]}
        ys, stats = solve(f, x["y0"], x["t_span"], params, params_axes={"own": 0, "shared": None},
                          return_stats=True, **options)
        weights = jnp.arange(1.0, 1.0 + ys[0].size).reshape(ys.shape[1:])
        reached = jnp.where(jnp.isfinite(ys), ys, 0.0)  # saves after a terminal event are NaN
        total = jnp.sum(weights * reached**2)
        if event:
            total = total + jnp.sum(stats["event_time"]) + jnp.sum(stats["event_state"] ** 2)
        return total

    return loss


def _cases():
    """(method, event, save, wanted, k_own, k_shared, unit_columns, max_columns): seeded draws
    on both sides of the two thresholds for every combination of differentiated inputs."""
    rng = np.random.default_rng(24)
    cases = []
    for method in ("tsit5", "rodas5p"):
        for r in range(1, len(INPUTS) + 1):
            for wanted in itertools.combinations(INPUTS, r):
                event, save = (bool(b) for b in rng.integers(2, size=2))
                k_own, k_shared = (int(k) for k in rng.integers(1, 8, size=2))
                entries = (2 * ("y0" in wanted or "t_span" in wanted) + k_own * ("own" in wanted)
                           + k_shared * ("shared" in wanted))
                # The unit-column limit and the chunk width each land just below, at, or just
                # above the number of differentiated entries.
                unit_columns = max(0, entries + int(rng.integers(-1, 2)))
                max_columns = max(1, entries + int(rng.integers(-2, 2)))
                cases.append((method, event, save, wanted, k_own, k_shared, unit_columns,
                              max_columns))
    return cases


def _ids(case):
    method, event, save, wanted, k_own, k_shared, unit, chunk = case
    return (f"{method}-{'+'.join(wanted)}-own{k_own}-shared{k_shared}-unit{unit}-chunk{chunk}"
            f"{'-event' if event else ''}{'-save_fn' if save else ''}")


@pytest.mark.parametrize("case", _cases(), ids=_ids)
def test_grad_equals_jacfwd_and_jacrev_across_thresholds(case, monkeypatch):
    method, event, save, wanted, k_own, k_shared, unit_columns, max_columns = case
    n_params = k_own + k_shared
    monkeypatch.setattr(differentiation, "UNIT_COLUMNS", unit_columns)
    monkeypatch.setattr(directional, "STACK_BUDGET", (max_columns + 1) * 8 * (4 * n_params + 48))
    assert directional._max_columns(2, n_params, 8) == max_columns

    rng = np.random.default_rng(k_own * 10 + k_shared)
    values = {"y0": jnp.asarray(1.0 + 0.1 * rng.random((N, 2))),
              "own": jnp.asarray(0.3 * rng.standard_normal((N, k_own))),
              "shared": jnp.asarray(0.3 * rng.standard_normal(k_shared)),
              "t_span": jnp.asarray(T_SAVE)}
    loss = _loss(_model(k_own, k_shared), method, event, save, wanted, values)
    args = [values[name] for name in wanted]
    argnums = tuple(range(len(wanted)))
    reverse = jax.grad(loss, argnums=argnums)(*args)
    forward = jax.jacfwd(loss, argnums=argnums)(*args)
    rev_jac = jax.jacrev(loss, argnums=argnums)(*args)
    for name, g, fwd, rev in zip(wanted, reverse, forward, rev_jac, strict=True):
        scale = float(jnp.max(jnp.abs(fwd)))
        assert np.all(np.isfinite(np.asarray(g))), name
        assert scale > 0, name  # every differentiated input moves the loss
        np.testing.assert_allclose(np.asarray(g), np.asarray(fwd), rtol=0, atol=1e-10 * scale,
                                   err_msg=f"grad vs jacfwd, {name}")
        np.testing.assert_allclose(np.asarray(rev), np.asarray(fwd), rtol=0, atol=1e-10 * scale,
                                   err_msg=f"jacrev vs jacfwd, {name}")


@pytest.mark.parametrize("n_params", [249, 250])
def test_issue_reproducer_on_both_sides_of_the_real_chunk_budget(n_params):
    # With the real budget a 2-state model with 249 parameters fits one joint solve and 250 do
    # not; y0 is not differentiated. The wrong gradient was the sum of dL/dy0 added to the
    # first entries.
    assert directional._max_columns(2, 249, 8) >= 249
    assert directional._max_columns(2, 250, 8) < 250
    assert differentiation.UNIT_COLUMNS < 249

    def f(y, t, p):
        return jnp.tanh(p[0:4].reshape(2, 2) @ y) + 0.01 * jnp.sum(p[4:]) - y

    y0 = jnp.linspace(0.5, 1.0, 6).reshape(3, 2)
    p = 0.1 * jnp.sin(jnp.arange(float(n_params)))

    def loss(p):
        ys = solve(f, y0, jnp.linspace(0.0, 1.0, 5), p, method="tsit5", rtol=1e-10, atol=1e-10)
        return jnp.sum(ys**2)

    reverse, forward = jax.grad(loss)(p), jax.jacfwd(loss)(p)
    np.testing.assert_allclose(np.asarray(reverse), np.asarray(forward), rtol=0,
                               atol=1e-10 * float(jnp.max(jnp.abs(forward))))


def test_vmap_of_grad_in_chunks_equals_one_grad_per_batch_element(monkeypatch):
    # Batched primals through the chunked transpose (y0 not differentiated, two chunks).
    monkeypatch.setattr(directional, "STACK_BUDGET", 4 * 8 * (4 * 7 + 48))
    assert directional._max_columns(2, 7, 8) == 3
    f = _model(4, 3)
    y0 = jnp.asarray(1.0 + 0.1 * np.arange(6.0).reshape(N, 2))

    def loss(own, shared):
        ys = solve(f, y0, jnp.asarray(T_SAVE), {"own": own, "shared": shared},
                   params_axes={"own": 0, "shared": None}, sens_error_control=False,
                   method="tsit5", rtol=1e-9, atol=1e-11)
        return jnp.sum(ys**2)

    rng = np.random.default_rng(7)
    owns = jnp.asarray(0.3 * rng.standard_normal((2, N, 4)))
    shareds = jnp.asarray(0.3 * rng.standard_normal((2, 3)))
    batched = jax.vmap(jax.grad(loss, argnums=(0, 1)))(owns, shareds)
    for b in range(2):
        one = jax.jacfwd(loss, argnums=(0, 1))(owns[b], shareds[b])
        for got, want in zip(batched, one, strict=True):
            np.testing.assert_allclose(np.asarray(got[b]), np.asarray(want), rtol=0,
                                       atol=1e-10 * float(jnp.max(jnp.abs(want))))


# 7 entries above the unit-column limit (chunks of 3) and at it (unit columns, one joint
# solve); 5 entries, y0 not differentiated, in chunks of 4 and as unit columns.
@pytest.mark.parametrize("method, wanted, unit_columns, max_columns", [
    ("rodas4", ("y0", "own", "shared"), 6, 3),
    ("rodas4", ("y0", "own", "shared"), 7, 7),
    ("rodas4", ("own", "shared"), 4, 4),
    ("rodas4", ("own", "shared"), 5, 6),
    ("rosenbrock23", ("y0", "own", "shared"), 6, 3),
    ("rosenbrock23", ("own", "shared"), 5, 6),
])
def test_other_tableaus_take_the_same_paths(method, wanted, unit_columns, max_columns,
                                            monkeypatch):
    # Rodas4 and Rosenbrock23 are other tableaus of the Rosenbrock engine (Rosenbrock23 not
    # stiffly accurate: y_new and the error from weights): their joint steppers on both sides of
    # the thresholds, grad == jacfwd == jacrev.
    case = (method, False, True, wanted, 3, 2, unit_columns, max_columns)
    test_grad_equals_jacfwd_and_jacrev_across_thresholds(case, monkeypatch)


def _table_model(y, t, p):
    """Reads its shared table as generated code reads parameters in place (ad/param_reads.hpp):
    a search of a run-time grid and gathers at its result (jnp.interp over p["grid"]), and a
    gather at an index computed at run time (from t: its jumps do not move with the parameters,
    and are stops, so finite differences see the same derivative); the per-member leaf through
    a product."""
    k = jnp.interp(t, p["grid"], p["table"])
    step = p["table"][jnp.clip(jnp.floor(4.0 * t).astype(int), 0, p["table"].size - 1)]
    return jnp.stack([-(1.0 + k**2 + 0.1 * jnp.dot(p["own"], p["own"])) * y[0] + 0.3 * y[1],
                      -0.5 * y[1] + 0.2 * step * jnp.tanh(y[0])])


# Entries: y0 2 + own 2 + table 6. Each combination just below the unit-column limit (chunks of
# directions, max_columns of them) and at it (unit columns in one joint solve).
@pytest.mark.parametrize("method, wanted, unit_columns, max_columns", [
    ("tsit5", ("y0", "own", "table"), 9, 4),
    ("tsit5", ("y0", "own", "table"), 10, 10),
    ("tsit5", ("table",), 5, 2),
    ("tsit5", ("table",), 6, 6),
    ("rodas5p", ("y0", "own", "table"), 9, 4),
    ("rodas5p", ("y0", "own", "table"), 10, 10),
    ("rodas5p", ("own", "table"), 7, 3),
    ("rodas5p", ("own", "table"), 8, 8),
])
@pytest.mark.parametrize("lanes", [1, 4])  # the scalar reads, and gathers per lane
def test_run_time_tables_on_both_sides_of_the_thresholds(method, wanted, unit_columns,
                                                          max_columns, lanes, monkeypatch):
    n_params = 2 + 6 + 6  # own, grid, table
    monkeypatch.setattr(differentiation, "UNIT_COLUMNS", unit_columns)
    monkeypatch.setattr(directional, "STACK_BUDGET", (max_columns + 1) * 8 * (4 * n_params + 48))
    assert directional._max_columns(2, n_params, 8) == max_columns
    rng = np.random.default_rng(5)
    values = {"y0": jnp.asarray(1.0 + 0.3 * rng.random((N, 2))),
              "own": jnp.asarray(0.3 * rng.standard_normal((N, 2))),
              "table": jnp.asarray(0.5 + rng.random(6))}
    grid = jnp.linspace(0.0, 1.2, 6) ** 1.5  # not uniform: a search, not a computed index

    def loss(*diff):
        x = dict(values, **dict(zip(wanted, diff, strict=True)))
        ys = solve(_table_model, x["y0"], jnp.asarray(T_SAVE),
                   {"own": x["own"], "grid": grid, "table": x["table"]},
                   params_axes={"own": 0, "grid": None, "table": None}, method=method,
                   tstops=jnp.array([0.25, 0.5, 0.75, 1.0]), rtol=1e-9, atol=1e-11,
                   sens_error_control=False, lanes=lanes)
        return jnp.sum(jnp.arange(1.0, 1.0 + ys[0].size).reshape(ys.shape[1:]) * ys**2)

    args = [values[name] for name in wanted]
    argnums = tuple(range(len(wanted)))
    reverse = jax.grad(loss, argnums=argnums)(*args)
    forward = jax.jacfwd(loss, argnums=argnums)(*args)
    rev_jac = jax.jacrev(loss, argnums=argnums)(*args)
    for name, g, fwd, rev in zip(wanted, reverse, forward, rev_jac, strict=True):
        scale = float(jnp.max(jnp.abs(fwd)))
        assert scale > 0 and np.all(np.isfinite(np.asarray(g))), name
        np.testing.assert_allclose(np.asarray(g), np.asarray(fwd), rtol=0, atol=1e-10 * scale,
                                   err_msg=f"grad vs jacfwd, {name}")
        np.testing.assert_allclose(np.asarray(rev), np.asarray(fwd), rtol=0, atol=1e-10 * scale,
                                   err_msg=f"jacrev vs jacfwd, {name}")
    # All three could share a wrong column (a parameter read with another's seed): against
    # central differences along a random direction, too, to what an adaptive solve at rtol 1e-9
    # resolves (its steps change with the perturbation: ~1e-4 relative at this eps; a parameter
    # read with a neighbour's seed is off by order one).
    direction = [jnp.asarray(rng.standard_normal(a.shape)) for a in args]
    eps = 1e-4
    plus = loss(*(a + eps * d for a, d in zip(args, direction, strict=True)))
    minus = loss(*(a - eps * d for a, d in zip(args, direction, strict=True)))
    along = sum(float(jnp.vdot(g, d)) for g, d in zip(reverse, direction, strict=True))
    assert abs(float(plus - minus) / (2 * eps) - along) < 2e-3 * abs(along), along
