"""The adjoint's backward sweeps side by side in SIMD lanes
(include/shoal/ode/adjoint_backward_lanes.hpp): up to W finished trajectories swept together,
f's vjp called once per stage for all of them, each lane's p̄ its own.

Each trajectory must get the bits of the scalar path (lanes=1) whatever the trajectories beside
it: batches full and partial, members with very different numbers of steps (so lanes run out
at different times and idle), saves inside steps (the last stage's products in some lanes only),
shared weights read as scalars or, when a batch mixes rows of them (vmap), from the lanes' copies,
and the one case where a lane's skipped stage could change its p̄ (a partial derivative that is
not finite at another lane's point), which is repaired by sweeping that trajectory again alone.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shoal.ode import Event, solve
from shoal.ode._codegen.model_struct import ModelFunction, generate

jax.config.update("jax_enable_x64", True)

_RNG = np.random.default_rng(11)
# A 16 × 16 layer: its products are loops over the weight block (contractions.py), which read
# shared weights as scalars in the lanes.
WEIGHTS = {"W1": jnp.asarray(_RNG.normal(size=(16, 2)) / 2),
           "b1": jnp.asarray(_RNG.normal(size=16) / 4),
           "W2": jnp.asarray(_RNG.normal(size=(16, 16)) / 4),
           "W3": jnp.asarray(_RNG.normal(size=(2, 16)) / 4)}
SHARED = {"W1": None, "b1": None, "W2": None, "W3": None, "decay": 0}


def mlp(y, t, p):
    hidden = jnp.tanh(p["W2"] @ jnp.tanh(p["W1"] @ y + p["b1"]))
    return p["W3"] @ hidden - p["decay"] * y


def _members(n):
    # Amplitudes over three decades: the members take very different numbers of steps.
    scale = jnp.geomspace(0.01, 30.0, n)
    y0 = jnp.stack([scale * jnp.cos(jnp.arange(n)), scale * jnp.sin(jnp.arange(n))], axis=1)
    return y0, jnp.linspace(0.05, 0.3, n)


def _grads(method, n, lanes, ts, **options):
    y0, decay = _members(n)

    def loss(w, decay, y0):
        params = {**w, "decay": decay}
        ys = solve(mlp, y0, ts, params, params_axes=SHARED, method=method, rtol=1e-9,
                   atol=1e-9, lanes=lanes, adjoint=True, **options)
        return jnp.sum(jnp.sin(ys) * jnp.arange(1.0, 1.0 + ys.shape[1])[None, :, None])

    return jax.grad(loss, (0, 1, 2))(WEIGHTS, decay, y0)


def _assert_same_bits(a, b):
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
        np.testing.assert_array_equal(x, y)


def test_the_network_vjp_is_compiled_for_the_lanes():
    def f(y, t, p):
        return mlp(y, t, {"W1": p[:32].reshape(16, 2), "b1": p[32:48],
                          "W2": p[48:304].reshape(16, 16), "W3": p[304:336].reshape(2, 16),
                          "decay": p[336]})

    model, _ = generate(f, 2, 337, np.float64, (ModelFunction("vjp", f),))
    assert "static constexpr bool vjp_in_lanes = true;" in model.source
    assert "for (int j = 1; j < 16; ++j)" in model.source  # a product over a weight block

    # A gather at a run-time index is transposed into additions: to each entry of a small table
    # a select of the index, into a large one (array_loops.LOOP_MIN_SIZE) an addition at the
    # index (math.hpp's scatter_add, lane by lane in the lanes). Both run in the lanes.
    for size, addition in [(8, "out[9] += "), (40, "scatter_add(out, ")]:
        def table(y, t, p, size=size):
            i = jnp.clip(jnp.floor(t * 4).astype(jnp.int32), 0, size - 1)
            return -p[i] * y

        model, _ = generate(table, 2, size, np.float64, (ModelFunction("vjp", table),))
        assert "static constexpr bool vjp_in_lanes = true;" in model.source, size
        assert addition in model.source, size


@pytest.mark.parametrize("method", ["tsit5", "vern7", "vern9"])
@pytest.mark.parametrize("n", [8, 13, 19])  # one full batch; full and partial; two and partial
def test_each_member_gets_the_scalar_paths_bits(method, n):
    ts = jnp.array([0.0, 0.07, 0.3, 0.55, 1.0, 1.6, 2.0])  # saves inside steps
    scalar = _grads(method, n, 1, ts)
    for lanes in (4, 8):
        _assert_same_bits(_grads(method, n, lanes, ts), scalar)


def _dose(y, t, p):  # a dose at each stop, scaled by a shared weight and the member's decay
    return y.at[0].add(0.3 * p["b1"][0] + p["decay"])


OBSERVED = {
    # what is saved: the network's first hidden layer and the state
    "reads p": lambda y, t, p: jnp.concatenate([jnp.tanh(p["W1"] @ y + p["b1"])[:3]
                                                * p["decay"], y]),
    # a function of the state alone: its product adds nothing to p̄ (save_vjp_adds_p_bar)
    "state only": lambda y, t, p: jnp.stack([y[0] * y[1], jnp.tanh(y[1])]),
}


def test_a_product_that_adds_nothing_to_p_bar_says_so():
    def f(y, t, p):
        return -p[0] * y

    for kind, fn, adds in [("save", OBSERVED["state only"], False),
                           ("save", lambda y, t, p: y * p[1], True),
                           ("jump", lambda y, t, p: y.at[0].add(1.0), False),
                           ("jump", lambda y, t, p: y.at[0].add(p[1]), True)]:
        model, _ = generate(f, 2, 2, np.float64, (ModelFunction("vjp", f),
                                                  ModelFunction(kind, fn)))
        flag = f"static constexpr bool {kind}_vjp_adds_p_bar = false;"
        assert (flag not in model.source) == adds, (kind, adds)


@pytest.mark.parametrize("method", ["tsit5", "vern7"])
@pytest.mark.parametrize(("jump", "observed"), [(True, None), (False, "reads p"),
                                                (True, "reads p"), (True, "state only")])
def test_jumps_and_saves_add_to_the_lanes_p_bar_in_the_scalar_sweeps_order(method, jump,
                                                                           observed):
    # A jump_fn's and a save_fn's products (each reading shared weights and the member's own
    # parameter) are computed by each trajectory's own bookkeeping between the transposes on
    # lanes: its lane of p̄ visits them and comes back, so every addition keeps its place. Saves
    # at, just before and after the stops (t = 0.55 is one), inside steps and at the start.
    ts = jnp.array([0.0, 0.07, 0.3, 0.55, 0.56, 1.0, 1.6, 2.0])
    options = {}
    if jump:
        options.update(tstops=jnp.array([0.55, 1.3]), jump_fn=_dose)
    if observed:
        options.update(save_fn=OBSERVED[observed])
    scalar = _grads(method, 13, 1, ts, **options)
    for lanes in (4, 8):
        _assert_same_bits(_grads(method, 13, lanes, ts, **options), scalar)
    assert all(bool(jnp.all(jnp.isfinite(g))) for g in jax.tree_util.tree_leaves(scalar))
    # Against forward mode on the same tolerances (a different discretisation's derivative).
    y0, decay = _members(13)

    def loss(w, decay, y0, adjoint):
        ys = solve(mlp, y0, ts, {**w, "decay": decay}, params_axes=SHARED, method=method,
                   rtol=1e-9, atol=1e-9, lanes=8, adjoint=adjoint, **options)
        return jnp.sum(jnp.sin(ys) * jnp.arange(1.0, 1.0 + ys.shape[1])[None, :, None])

    want = jax.grad(loss, (0, 1, 2))(WEIGHTS, decay, y0, False)
    for got, ref in zip(jax.tree_util.tree_leaves(scalar), jax.tree_util.tree_leaves(want),
                        strict=True):
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-6 * float(jnp.max(jnp.abs(ref))))


def test_members_alone_and_in_an_ensemble_and_against_forward_mode():
    ts = jnp.linspace(0.0, 2.0, 5)
    together = _grads("tsit5", 13, 8, ts)
    y0, decay = _members(13)
    for m in (0, 5, 12):
        def loss(w, decay, y0):
            ys = solve(mlp, y0, ts, {**w, "decay": decay},
                       params_axes=SHARED,
                       method="tsit5", rtol=1e-9, atol=1e-9, lanes=8, adjoint=True)
            return jnp.sum(jnp.sin(ys) * jnp.arange(1.0, 1.0 + ys.shape[1])[None, :, None])

        alone = jax.grad(loss, (1, 2))(WEIGHTS, decay[m:m + 1], y0[m:m + 1])
        np.testing.assert_array_equal(together[1][m], alone[0][0])
        np.testing.assert_array_equal(together[2][m], alone[1][0])

    def forward(w, decay, y0):
        ys = solve(mlp, y0, ts, {**w, "decay": decay},
                   params_axes=SHARED,
                   method="tsit5", rtol=1e-9, atol=1e-9, adjoint=False)
        return jnp.sum(jnp.sin(ys) * jnp.arange(1.0, 1.0 + ys.shape[1])[None, :, None])

    want = jax.grad(forward, (0, 1, 2))(WEIGHTS, decay, y0)
    for got, ref in zip(jax.tree_util.tree_leaves(together), jax.tree_util.tree_leaves(want),
                        strict=True):
        scale = float(jnp.max(jnp.abs(ref)))
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-6 * scale)


def test_a_terminal_event_and_rows_of_shared_weights_under_vmap():
    # vmap over two weight sets: the ensemble holds two rows of shared parameters, and a batch
    # of lanes spanning both reads the weights from the lanes' copies.
    ts = jnp.array([0.0, 0.4, 0.9, 1.5, 2.5])
    y0, decay = _members(11)
    event = Event(lambda y, t, p: y[0] - 0.5 * y[1] - 2.0, terminal=True)

    def loss(w, lanes):
        ys = solve(mlp, y0, ts, {**w, "decay": decay},
                   params_axes=SHARED,
                   method="tsit5", rtol=1e-9, atol=1e-9, lanes=lanes, adjoint=True,
                   event=event)
        return jnp.sum(jnp.where(jnp.isnan(ys), 0.0, jnp.cos(ys)))

    stacked = jax.tree_util.tree_map(lambda w: jnp.stack([w, 1.1 * w]), WEIGHTS)
    scalar = jax.vmap(jax.grad(loss), in_axes=(0, None))(stacked, 1)
    lanes = jax.vmap(jax.grad(loss), in_axes=(0, None))(stacked, 8)
    _assert_same_bits(lanes, scalar)
    assert all(bool(jnp.all(jnp.isfinite(g))) for g in jax.tree_util.tree_leaves(lanes))


def test_a_non_finite_partial_at_another_lanes_point_leaves_a_member_unchanged():
    # Member 0 stays at y[1] = 0, where d/dp of where(y > 0, p log y, 0) is 0 · (−∞) = NaN, as
    # jax.grad has it: its gradient is NaN. Its neighbours' stages it computes while they skip
    # theirs (their last stage, with no save inside a step) meet the same NaN with a zero
    # cotangent; each is swept again alone, and gets the bits it gets alone and on lanes=1.
    def f(y, t, p):
        source = jnp.where(y[1] > 0, p[0] * jnp.log(y[1]), 0.0)
        return jnp.array([-p[1] * y[0] + source, -p[2] * y[1]])

    n = 8
    y0 = jnp.stack([jnp.ones(n), jnp.linspace(0.0, 2.0, n)], axis=1)  # member 0: y[1] = 0
    params = jnp.stack([jnp.full(n, 0.3), jnp.linspace(0.5, 1.5, n),
                        jnp.linspace(0.2, 0.9, n)], axis=1)
    ts = jnp.array([0.0, 0.5, 1.0, 2.0])

    def loss(p, y0, lanes):
        ys = solve(f, y0, ts, p, method="tsit5", rtol=1e-9, atol=1e-9, lanes=lanes,
                   adjoint=True)
        return jnp.sum(ys)

    lanes = jax.grad(loss, (0, 1))(params, y0, 8)
    scalar = jax.grad(loss, (0, 1))(params, y0, 1)
    assert np.all(np.isnan(lanes[0][0, :1]))
    _assert_same_bits(lanes, scalar)
    rest = jax.grad(loss, (0, 1))(params[1:], y0[1:], 8)
    assert np.all(np.isfinite(rest[0])) and np.all(np.isfinite(rest[1]))
    np.testing.assert_array_equal(lanes[0][1:], rest[0])
    np.testing.assert_array_equal(lanes[1][1:], rest[1])


def _counting_adjoint_calls(monkeypatch) -> list:
    """A list that gains an entry at every reverse-mode call by the adjoint."""
    from shoal.ode import _adjoint

    calls = []
    original = _adjoint.adjoint_cotangents
    monkeypatch.setattr(_adjoint, "adjoint_cotangents",
                        lambda *a: calls.append(1) or original(*a))
    return calls


def _routes_agree(saves, args, calls, above):
    """grad, jacrev and jacfwd of ``saves(table, k, y0)`` agree to 1e-10: the table alone (the
    adjoint taken by "auto" exactly when ``above``), then with k, then with y0 too."""
    for argnums in ((0,), (0, 1), (0, 1, 2)):
        calls.clear()
        reverse = jax.jacrev(saves, argnums)(*args)
        if argnums == (0,):
            assert bool(calls) == above
        forward = jax.jacfwd(saves, argnums)(*args)
        grad = jax.grad(lambda *a: jnp.sum(saves(*a)), argnums)(*args)
        for r, fw, g in zip(reverse, forward, grad, strict=True):
            np.testing.assert_allclose(r, fw, rtol=1e-10, atol=1e-13)
            np.testing.assert_allclose(g, jnp.sum(fw, axis=0), rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize(("method", "threshold"), [("tsit5", 8), ("rodas5p", 5)])
@pytest.mark.parametrize("above", [False, True])  # both sides of "auto"'s threshold in the lanes
def test_auto_takes_the_adjoint_beyond_the_lanes_thresholds(monkeypatch, method, threshold,
                                                            above):
    # Where the sweeps' products run on lanes: beyond 8 entries with Tsit5, 5 with Rodas5P (its
    # steps evaluated on lanes too); one at a time (lanes=1): beyond 24 and 10.
    calls = _counting_adjoint_calls(monkeypatch)
    entries = threshold + 1 if above else threshold
    grid = jnp.linspace(0.0, 1.0, entries)

    def f(y, t, p):
        return -(jnp.sum(p * jnp.cos(grid * y[0])) / entries) * y

    ts = jnp.array([0.0, 0.37, 1.0])
    y0 = jnp.linspace(0.5, 2.0, 10)[:, None]

    def loss(table, lanes, adjoint="auto"):
        ys = solve(f, y0, ts, table, params_axes=None, method=method, rtol=1e-9, atol=1e-9,
                   sens_error_control=False, first_step=1e-3, lanes=lanes, adjoint=adjoint)
        return jnp.sum(ys[:, -1] ** 2)

    table = 1.0 + grid
    got = jax.grad(loss)(table, 0)
    assert bool(calls) == above
    np.testing.assert_allclose(got, jax.grad(loss)(table, 0, False), rtol=1e-10)
    # One trajectory at a time (lanes=1) the sweeps are scalar: forward columns up to 24
    # entries (explicit) or 10 (Rosenbrock).
    calls.clear()
    jax.grad(loss)(table, 1)
    assert not calls


def _robertson_dae(y, t, k):
    return jnp.stack([-k[0] * y[0] + k[2] * y[1] * y[2],
                      k[0] * y[0] - k[1] * y[1] ** 2 - k[2] * y[1] * y[2],
                      y[0] + y[1] + y[2] - 1.0])


@pytest.mark.parametrize(("method", "options"), [
    ("rodas5p", {}), ("rodas4", {}), ("rosenbrock23", {}),
    ("rodas5p", {"lu_precision": "fp32"}),
    ("rodas5p", {"mass": np.diag([1.0, 1.0, 0.0])}),  # a DAE: M/(hγ) − J in the factors
    ("rodas5p", {"sparsity": "auto"}),  # the sparse solver: its factors load lanes too
    ("rodas4", {"sparsity": "auto", "mass": np.diag([1.0, 1.0, 0.0])}),
])
@pytest.mark.parametrize("doses", [True, False])
def test_rosenbrock_steps_evaluated_in_the_lanes_give_the_scalar_paths_bits(method, options,
                                                                            doses):
    # RosenbrockStepAdjoint::prepare_lanes: W steps evaluated again by the lanes stepper, each
    # lane's stages and factors loaded into its trajectory's stepper. 13 members (a full and a
    # partial batch) whose rates span two decades (different steps), per-member and shared
    # rates. The transposes run on the lanes too (transpose_lanes: solves with the lanes'
    # factors, f's vjp and jvp_vjp on lanes), with a dose at a stop and a save_fn, both reading
    # the member's rate, whose products each trajectory's bookkeeping adds to its lane of p̄.
    n = 13
    k = jnp.stack([jnp.geomspace(0.02, 2.0, n), jnp.full(n, 3e7), jnp.full(n, 1e4)], axis=1)
    y0 = jnp.tile(jnp.array([1.0, 0.0, 0.0]), (n, 1))
    ts = jnp.array([0.0, 0.3, 2.0, 7.0, 20.0])
    mass = options.get("mass")

    def f(y, t, p):
        rates = _robertson_dae(y, t, p)
        return rates if mass is not None else rates.at[2].set(-rates[0] - rates[1])

    def dose(y, t, p):
        amount = 0.1 * p[0] / (p[0] + 0.1)
        return y.at[0].add(amount).at[2].add(-amount)

    extra = dict(tstops=jnp.array([1.0]), jump_fn=dose,
                 save_fn=lambda y, t, p: y[:2] * p[0]) if doses else {}

    def loss(k, y0, lanes):
        ys = solve(f, y0, ts, k, method=method, rtol=1e-7, atol=1e-10, lanes=lanes,
                   adjoint=True, **extra, **options)
        return jnp.sum(jnp.log1p(ys))

    scalar = jax.grad(loss, (0, 1))(k, y0, 1)
    lanes = jax.grad(loss, (0, 1))(k, y0, 8)
    _assert_same_bits(lanes, scalar)
    assert all(bool(jnp.all(jnp.isfinite(g))) for g in lanes)


@pytest.mark.parametrize("method", ["tsit5", "rodas5p"])
@pytest.mark.parametrize(("dtype", "lanes", "with_params"), [
    (jnp.float32, 0, True),  # float32: 16 lanes on AVX-512
    (jnp.float64, 4, True),
    (jnp.float64, 0, False),  # a model without parameters: only ȳ0
])
def test_float32_other_widths_and_a_model_without_parameters(method, dtype, lanes, with_params):
    def f(y, t, p):
        a, b = (p[0], p[1]) if with_params else (1.0, 0.5)
        return jnp.array([-a * y[0] * y[1], y[0] - b * y[1]])

    n = 37
    y0 = jnp.stack([jnp.linspace(0.5, 2.0, n), jnp.linspace(1.0, 0.2, n)], axis=1).astype(dtype)
    p = (jnp.stack([jnp.linspace(0.5, 1.5, n), jnp.full(n, 0.4)], axis=1).astype(dtype)
         if with_params else None)
    tol = (1e-6, 1e-8) if dtype == jnp.float64 else (1e-4, 1e-5)

    def loss(y0, p, lanes):
        ys = solve(f, y0, jnp.array([0.0, 0.3, 1.0, 2.0]), p, method=method, rtol=tol[0],
                   atol=tol[1], lanes=lanes, adjoint=True)
        return jnp.sum(ys ** 2)

    argnums = (0, 1) if with_params else 0
    _assert_same_bits(jax.grad(loss, argnums)(y0, p, lanes), jax.grad(loss, argnums)(y0, p, 1))


@pytest.mark.parametrize(("method", "threshold", "observed"), [
    ("tsit5", 8, False),  # products on lanes
    ("rodas5p", 5, False),  # steps and products on lanes
    ("tsit5", 8, True),  # a save_fn: its products join the lanes' p̄
    ("rodas5p", 5, True),
])
@pytest.mark.parametrize("above", [False, True])
def test_grad_jacrev_and_jacfwd_agree_on_both_sides_of_the_lanes_thresholds(
        monkeypatch, method, threshold, observed, above):
    # On the plain solve's steps (sens_error_control off, a given first step) the adjoint and
    # forward columns differentiate the same discretisation: grad, jacrev and jacfwd agree to
    # 1e-10 with the table alone just at and just past "auto"'s threshold in the lanes (N = 10
    # fills them), then with the per-member leaf and y0 differentiated too (far past it).
    calls = _counting_adjoint_calls(monkeypatch)
    entries = threshold + 1 if above else threshold
    grid = jnp.linspace(0.0, 1.0, entries)

    def f(y, t, p):
        return -(jnp.sum(p["table"] * jnp.cos(grid * y[0])) / entries + p["k"]) * y

    y0 = jnp.linspace(0.5, 2.0, 10)[:, None]
    ts = jnp.array([0.0, 0.37, 1.0])
    extra = {"save_fn": lambda y, t, p: 2.0 * y} if observed else {}
    options = dict(method=method, rtol=1e-9, atol=1e-9, sens_error_control=False,
                   first_step=1e-3, adjoint="auto", params_axes={"table": None, "k": 0},
                   **extra)

    def saves(table, k, y0):
        return solve(f, y0, ts, {"table": table, "k": k}, **options)[:, -1, 0]

    _routes_agree(saves, (1.0 + grid, jnp.linspace(0.1, 0.3, 10), y0), calls, above)


@pytest.mark.parametrize("method", ["tsit5", "rodas5p"])
@pytest.mark.parametrize("per_member", [False, True])
def test_table_reads_add_into_each_lanes_own_cotangent_in_the_scalar_sweeps_order(method,
                                                                                 per_member):
    # Reads of a 64-entry table at indices found from t and from the state, so that lanes at
    # different points add into different entries, two lanes into the same entry, and one
    # lane twice into one entry (t and y[0] in the same interval). Shared (one p̄ row summed
    # over the ensemble) or one table per member (each lane its own row). 13 members: a full
    # and a partial batch of 8, two full and a partial one of 4.
    n = 13
    grid = jnp.linspace(0.0, 2.0, 64)
    table = 1.0 + 0.5 * jnp.sin(3.0 * grid)
    tables = table * jnp.linspace(0.8, 1.2, n)[:, None] if per_member else table
    y0 = jnp.stack([jnp.linspace(0.2, 1.8, n), jnp.linspace(1.0, 0.1, n)], axis=1)
    ts = jnp.array([0.0, 0.3, 1.1, 2.0])

    def f(y, t, p):
        rate = jnp.interp(t, grid, p["table"])
        uptake = jnp.interp(y[0], grid, p["table"])
        return jnp.array([-rate * y[0] + p["k"] * y[1],
                          rate * y[0] - (p["k"] + 0.1 * uptake) * y[1]])

    def loss(tables, y0, lanes, adjoint=True):
        # On the plain solve's steps (no sensitivity error control, a given first step) the
        # adjoint and forward columns differentiate the same discretisation, kinks included.
        ys = solve(f, y0, ts, {"table": tables, "k": jnp.linspace(0.2, 0.6, n)},
                   params_axes={"table": 0 if per_member else None, "k": 0}, method=method,
                   rtol=1e-9, atol=1e-9, sens_error_control=False, first_step=1e-3,
                   lanes=lanes, adjoint=adjoint)
        return jnp.sum(jnp.sin(ys) * jnp.arange(1.0, 1.0 + ys.shape[1])[None, :, None])

    scalar = jax.grad(loss, (0, 1))(tables, y0, 1)
    for lanes in (4, 8):
        _assert_same_bits(jax.grad(loss, (0, 1))(tables, y0, lanes), scalar)
    forward = jax.grad(loss, (0, 1))(tables, y0, 8, False)
    for a, fw in zip(scalar, forward, strict=True):
        np.testing.assert_allclose(a, fw, rtol=1e-9, atol=1e-12 * float(jnp.max(jnp.abs(fw))))


@pytest.mark.parametrize(("method", "threshold"), [("tsit5", 8), ("rodas5p", 5)])
@pytest.mark.parametrize("above", [False, True])
def test_a_table_read_takes_the_lanes_thresholds_and_grad_jacrev_jacfwd_agree(
        monkeypatch, method, threshold, above):
    # A table read at t (its transpose an addition at a run-time index, now on the lanes) puts
    # the model on the lanes' "auto" thresholds: just at and just past them, on the plain
    # solve's steps with stops at the knots, grad, jacrev and jacfwd agree to 1e-10, the table
    # alone, then with the per-member leaf and y0.
    calls = _counting_adjoint_calls(monkeypatch)
    entries = threshold + 1 if above else threshold
    grid = jnp.linspace(0.0, 1.0, entries)

    def f(y, t, p):
        return -(jnp.interp(t, grid, p["table"]) + p["k"]) * y

    y0 = jnp.linspace(0.5, 2.0, 10)[:, None]
    ts = jnp.array([0.0, 0.37, 1.0])
    options = dict(method=method, rtol=1e-9, atol=1e-9, sens_error_control=False,
                   first_step=1e-3, adjoint="auto", params_axes={"table": None, "k": 0},
                   tstops=grid[1:-1])

    def saves(table, k, y0):
        return solve(f, y0, ts, {"table": table, "k": k}, **options)[:, -1, 0]

    _routes_agree(saves, (1.0 + 0.5 * jnp.sin(3.0 * grid), jnp.linspace(0.1, 0.3, 10), y0), calls,
                  above)


@pytest.mark.parametrize("method", ("tsit5", "vern7"))
def test_steps_evaluated_on_the_lanes_mix_recorded_and_evaluated_stages(method):
    # A recording keeps the stages of its first steps only (adjoint.hpp's stage budget, shared by
    # a worker's 2W recordings: 9 000 to 19 000 Tsit5 steps of this 2-variable model, fewer of
    # Vern7's): member 1 (k = 20 000, stability-bound steps) takes over 30 000, the others
    # hundreds, so the lanes that evaluate their steps together have their stages recorded in
    # some lanes (member 0's, lane 0) and evaluated by f in others. Saves inside steps need the
    # dense output (Vern7's extra stages).
    def decay(y, t, k):
        return jnp.stack([-k[0] * y[0] + jnp.sin(t) * y[1], -k[1] * y[1]])

    k = jnp.array([[0.5, 2.0], [20000.0, 1.0], [1.0, 0.3], [2.0, 1.5], [1.5, 0.7]])
    y0 = jnp.tile(jnp.array([1.0, 0.5]), (5, 1))
    ts = jnp.linspace(0.0, 8.0, 9)

    def grads(lanes):
        def loss(k, y0):
            ys, stats = solve(decay, y0, ts, k, method=method, rtol=1e-7, atol=1e-9, lanes=lanes,
                              adjoint=True, return_stats=True)
            return jnp.sum(jnp.sin(ys[:, 1:]) * jnp.arange(1.0, 9.0)[None, :, None]), stats
        (_, stats), g = jax.value_and_grad(loss, (0, 1), has_aux=True)(k, y0)
        return stats["accepted"], g

    steps, scalar = grads(1)
    assert steps[1] > 30_000 and int(np.max(steps[2:])) < 1_000 and steps[0] < 1_000
    for lanes in (4, 8):
        _assert_same_bits(grads(lanes)[1], scalar)
