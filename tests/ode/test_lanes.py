"""SIMD lanes (``lanes=``): bit-identical to the scalar path (``lanes=1``) through the public API.

Mixed ensembles put stiff and non-stiff members, NaN members and members finishing orders of
magnitude apart side by side in one vector; every output (ys, stats, events, gradients) must be
the same bytes whatever the lane count. tests/cpp/test_lanes.cc holds the engine itself to the
same standard, stepper by stepper.
"""

import re

import jax
import jax.numpy as jnp
import jax.scipy.special
import numpy as np
import pytest
from jax import lax

from shoal import _jit
from shoal.ode import Event, Status, solve

jax.config.update("jax_enable_x64", True)

LANES = [0, 4]  # the host's width, and a narrower one


def lorenz(y, t, p):
    return jnp.stack([p[0] * (y[1] - y[0]), y[0] * (p[1] - y[2]) - y[1], y[0] * y[1] - p[2] * y[2]])


def robertson(y, t, p):
    r1, r2, r3 = p[0] * y[0], p[1] * y[1] ** 2, p[2] * y[1] * y[2]
    return jnp.stack([-r1 + r3, r1 - r2 - r3, r2])


# A table read (jnp.interp), a comparison, exp: in the lanes (gathers, masks, shoal's exp).
GRID = jnp.array([0.0, 1.0, 2.0, 3.0])
LEVELS = jnp.array([1.0, 2.0, 0.5, 1.0])


def tabled(y, t, p):
    return jnp.stack([-p[0] * jnp.interp(t, GRID, LEVELS) * y[0] + jnp.exp(-t),
                      jnp.maximum(y[0], 0.25) - y[1]])


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def assert_same_solves(run):
    reference = jax.tree_util.tree_leaves(run(1))
    for lanes in LANES:
        for got, want in zip(jax.tree_util.tree_leaves(run(lanes)), reference, strict=True):
            assert same(got, want), f"lanes={lanes}"


def mixed_lorenz(n=29, dtype=np.float64):
    rho = np.linspace(0.0, 28.0, n)[np.argsort(np.sin(np.arange(n)))]
    p = np.stack([np.full(n, 10.0), rho, np.full(n, 8 / 3)], 1).astype(dtype)
    y0 = np.ones((n, 3), dtype)
    y0[4] = np.nan                   # a NaN member
    p[n - 4, 0] = 1e4                # a stiff one that runs out of steps
    t_end = np.logspace(-2, 1, n).astype(dtype)  # finish times 1e-2 .. 10
    t_span = t_end[:, None] * np.linspace(0, 1, 9, dtype=dtype)[None, :]
    return y0, t_span, p


def test_tsit5_mixed_ensemble_is_bit_identical():
    y0, t_span, p = mixed_lorenz()
    def run(lanes):
        return solve(lorenz, y0, t_span, p, method="tsit5", rtol=1e-8, atol=1e-8,
                     max_steps=3000, return_stats=True, lanes=lanes)

    assert_same_solves(run)
    status = np.asarray(run(0)[1]["status"])
    assert {Status.SUCCESS, Status.NON_FINITE, Status.MAX_STEPS_REACHED} <= set(status.tolist())


def test_float32_is_bit_identical():
    y0, t_span, p = mixed_lorenz(dtype=np.float32)
    assert_same_solves(lambda lanes: solve(lorenz, y0, t_span, p, method="tsit5", rtol=1e-5,
                                           atol=1e-5, max_steps=3000, lanes=lanes))


@pytest.mark.parametrize("lu_precision", ["fp64", "fp32"])
def test_rodas5p_stiff_and_nonstiff_members(lu_precision):
    n = 23
    k1 = np.geomspace(0.04, 4e4, n)[np.argsort(np.cos(np.arange(n)))]
    p = np.stack([k1, np.full(n, 3e7), np.full(n, 1e4)], 1)
    y0 = np.tile([1.0, 0.0, 0.0], (n, 1))
    y0[3, 0] = np.nan
    t_span = np.concatenate([[0.0], np.logspace(-6, 5, 12)])
    assert_same_solves(lambda lanes: solve(robertson, y0, t_span, p, method="rodas5p",
                                           lu_precision=lu_precision, rtol=1e-6, atol=1e-10,
                                           return_stats=True, lanes=lanes))


def per_lane_tabled(y, t, p):
    return tabled(y, t, p) + jnp.stack([0.0, 0.01 * jnp.arcsinh(y[1])])


@pytest.mark.parametrize("method", ["tsit5", "rodas5p"])
@pytest.mark.parametrize("f", [tabled, per_lane_tabled])
def test_table_and_per_lane_rhs_with_stops_jumps_and_events(method, f):
    n = 17
    p = np.linspace(0.2, 6.0, n)[:, None]
    def run(lanes):
        return solve(f, np.tile([1.0, 0.0], (n, 1)), np.linspace(0, 3, 7), p,
                     tstops=[1.0, 2.0], jump_fn=lambda y, t, p: y + jnp.array([0.5, 0]),
                     event=Event(lambda y, t, p: y[1] - 0.6, terminal=True), method=method,
                     rtol=1e-8, atol=1e-9, return_stats=True, lanes=lanes)

    assert_same_solves(run)
    assert Status.EVENT in np.asarray(run(0)[1]["status"]).tolist()


def test_sparse_solver_in_lanes():
    m = 8

    def ring(y, t, p):
        u, v = y[0::2], y[1::2]
        dv = p[0] * (1 - u ** 2) * v - u + 0.5 * (jnp.roll(u, 1) - 2 * u + jnp.roll(u, -1))
        return jnp.stack([v, dv], 1).reshape(-1)

    n = 13
    y0 = np.tile(np.tile([2.0, 0.0], m), (n, 1))
    y0[:, 0] += np.linspace(0, 1, n)
    mu = np.geomspace(1, 100, n)[::-1][:, None]
    assert_same_solves(lambda lanes: solve(ring, y0, np.linspace(0, 2, 5), mu,
                                           method="rodas5p", sparsity="auto", rtol=1e-6,
                                           atol=1e-8, lanes=lanes))


@pytest.mark.parametrize("method", ["tsit5", "rodas5p"])
def test_gradients_are_bit_identical(method):
    y0, t_span, p = mixed_lorenz(n=11)
    p[:, 0] = 10.0  # every member differentiable
    y0[4] = 1.0

    def run(lanes):
        def loss(q):
            return jnp.sum(solve(lorenz, y0, t_span[:, :5], q, method=method, rtol=1e-7,
                                 atol=1e-9, lanes=lanes)[:, -1] ** 2)

        return jax.value_and_grad(loss)(jnp.asarray(p))

    assert_same_solves(run)


@pytest.mark.parametrize("bad", [3, -1, 128, 2.0, True, "4"])
def test_lanes_must_be_zero_or_a_power_of_two(bad):
    with pytest.raises(ValueError, match="lanes must be 0"):
        solve(lorenz, np.ones(3), [0.0, 1.0], np.ones(3), lanes=bad)


# Beyond arithmetic, still in the lanes: shoal's own functions (exp, log, log1p, pow, sin, cos,
# tanh, asin, atan2, erf, erfc, sqrt), comparisons as masks (where, maximum, abs, sign, clip):
# the scalar path's bits.
def gated(y, t, p):
    rate = p[0] * jnp.exp(-p[1] / (1.0 + y[1] ** 2))
    switch = jnp.where(t > 0.5, 1.0, 0.2)
    flux = jnp.sqrt(jnp.abs(y[1]) + 1.0) * jnp.sign(y[0] - 0.3)
    wave = (jnp.sin(3.0 * t) * jnp.tanh(y[1]) + jnp.log1p(y[0] ** 2) * jnp.cos(t)
            + jnp.power(1.0 + y[0] ** 2, -p[1]) + 0.1 * jnp.arcsin(jnp.tanh(y[1]))
            + 0.1 * jax.scipy.special.erf(y[1]) * jax.scipy.special.erfc(y[0]))
    return jnp.stack([-rate * y[0] + switch * flux + 0.1 * jnp.arctan2(y[1], 1.0 + y[0] ** 2),
                      rate * jnp.maximum(y[0], 0.0) - jnp.clip(y[1], -1.0, 0.7)
                      + jax.nn.sigmoid(y[0]) + 0.2 * wave - 0.01 * jnp.log(1.0 + y[0] ** 2)])


def gated_ensemble(n=21, dtype=np.float64):
    p = np.stack([np.geomspace(0.3, 3e3, n), np.linspace(0.1, 2.0, n)], 1).astype(dtype)
    p = p[np.argsort(np.sin(np.arange(n)))]   # stiff and non-stiff members side by side
    y0 = np.tile(np.array([1.0, -0.5], dtype), (n, 1))
    y0[2] = np.nan
    return y0, np.linspace(0, 2, 6).astype(dtype), p


def test_functions_and_masks_run_in_the_lanes():
    from shoal.ode._codegen.model_struct import generate_model
    assert generate_model(gated, 2, 2, np.float64).lane_arithmetic
    assert generate_model(tabled, 2, 1, np.float64).lane_arithmetic  # a table: gathers
    assert not generate_model(per_lane_tabled, 2, 1, np.float64).lane_arithmetic  # asinh


@pytest.mark.parametrize("method", ["tsit5", "rodas5p"])
def test_functions_and_masks_are_bit_identical(method):
    y0, t_span, p = gated_ensemble()
    assert_same_solves(lambda lanes: solve(gated, y0, t_span, p, method=method, rtol=1e-8,
                                           atol=1e-10, return_stats=True, lanes=lanes))


def test_functions_and_masks_float32_and_sparse():
    y0, t_span, p = gated_ensemble(dtype=np.float32)
    assert_same_solves(lambda lanes: solve(gated, y0, t_span, p, method="rodas5p", rtol=1e-4,
                                           atol=1e-6, lanes=lanes))
    y0, t_span, p = gated_ensemble()
    assert_same_solves(lambda lanes: solve(gated, y0, t_span, p, method="rodas5p",
                                           sparsity="auto", rtol=1e-7, atol=1e-9, lanes=lanes))


@pytest.mark.parametrize("method", ["tsit5", "rodas5p"])
def test_functions_and_masks_gradients_are_bit_identical(method):
    y0, t_span, p = gated_ensemble(n=9)
    y0[2] = 1.0

    def run(lanes):
        def loss(q, y0):
            return jnp.sum(solve(gated, y0, t_span, q, method=method, rtol=1e-7, atol=1e-9,
                                 lanes=lanes)[:, -1] ** 2)

        return jax.value_and_grad(loss, argnums=(0, 1))(jnp.asarray(p), jnp.asarray(y0))

    assert_same_solves(run)


# Table reads in the lanes: integers are per-lane integer vectors (simd::IntLanes), their choices
# masked selects and the reads gathers. Every way of reading a constant table: jnp.interp on a
# uniform grid (searchsorted from a guess), on an uneven grid (a binary search) at a state-
# dependent point, searchsorted on a geometric grid with takes (fill mode), a uniform grid's
# index by floor/astype/clip, and a parameter read at a run-time index; t runs past the tables.
UNIFORM = np.linspace(0.0, 3.0, 40)
UNEVEN = np.sort(np.random.default_rng(3).uniform(-2.0, 2.0, 25))
GEOMETRIC = np.geomspace(0.05, 3.0, 30)


def table_reads(y, t, p):
    dtype = y.dtype
    uniform, uneven = jnp.asarray(UNIFORM, dtype), jnp.asarray(UNEVEN, dtype)
    geometric = jnp.asarray(GEOMETRIC, dtype)
    a = jnp.interp(t, uniform, jnp.cos(2.0 * uniform))
    b = jnp.interp(y[0], uneven, jnp.tanh(uneven))
    i = jnp.clip(jnp.searchsorted(geometric, t, side="right"), 1, GEOMETRIC.size - 1)
    levels = jnp.sin(geometric)
    c = (jnp.take(levels, i) - jnp.take(levels, i - 1)) / (geometric[i] - geometric[i - 1])
    h = float(UNIFORM[1] - UNIFORM[0])
    k = jnp.clip(jnp.floor((t - float(UNIFORM[0])) / h).astype(jnp.int32), 0, UNIFORM.size - 2)
    w = (t - uniform[k]) / h
    values = jnp.exp(-uniform)
    d = (1 - w) * values[k] + w * values[k + 1]
    e = p[jnp.clip(jnp.floor(t).astype(jnp.int32), 0, 1)]
    return jnp.stack([-p[0] * a * y[0] + 0.2 * c + 0.1 * d * y[1],
                      b - p[1] * y[1] + 0.01 * e * y[0]])


def table_ensemble(n=19, dtype=np.float64):
    p = np.stack([np.geomspace(0.2, 200.0, n), np.linspace(0.1, 2.0, n)], 1).astype(dtype)
    p = p[np.argsort(np.cos(np.arange(n)))]
    y0 = np.stack([np.linspace(-2.5, 2.5, n), np.linspace(1.0, -1.0, n)], 1).astype(dtype)
    return y0, np.linspace(0, 4.0, 6).astype(dtype), p   # the tables end at 3


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_table_reads_run_in_the_lanes(dtype):
    from shoal.ode._codegen.model_struct import generate_model
    model = generate_model(table_reads, 2, 2, dtype)
    assert model.lane_arithmetic
    for read in ("search_sorted_near(", "search_sorted(", "gather_indexed<T>(p, ", "pick("):
        assert read in model.source
    # A read at an index computed from the state is the read itself for numbers (math.hpp's
    # gather_indexed), never indexed(gather(…)), which copies the value (a dual of lanes by memcpy).
    assert "indexed(gather" not in model.source


@pytest.mark.parametrize("method", ["tsit5", "rodas5p"])
def test_table_reads_are_bit_identical(method):
    y0, t_span, p = table_ensemble()
    y0[4] = np.nan  # a NaN query: the searches' fallback, a NaN member
    assert_same_solves(lambda lanes: solve(table_reads, y0, t_span, p, method=method, rtol=1e-8,
                                           atol=1e-10, return_stats=True, lanes=lanes))


@pytest.mark.parametrize("method", ["tsit5", "rodas5p"])
def test_table_reads_float32_are_bit_identical(method):
    y0, t_span, p = table_ensemble(dtype=np.float32)
    assert_same_solves(lambda lanes: solve(table_reads, y0, t_span, p, method=method, rtol=1e-4,
                                           atol=1e-6, return_stats=True, lanes=lanes))


@pytest.mark.parametrize("method", ["tsit5", "rodas5p"])
def test_table_reads_gradients_are_bit_identical(method):
    y0, t_span, p = table_ensemble(n=9)

    def run(lanes):
        def loss(q, y0):
            return jnp.sum(solve(table_reads, y0, t_span, q, method=method, rtol=1e-7,
                                 atol=1e-9, lanes=lanes)[:, -1] ** 2)

        return jax.value_and_grad(loss, argnums=(0, 1))(jnp.asarray(p), jnp.asarray(y0))

    assert_same_solves(run)


# Tables passed in params (run-time, each member its own): jnp.interp and searchsorted over
# them search in the lanes, each lane in its own member's table.
def runtime_table_reads(y, t, p):
    grid, levels = p["grid"], p["levels"]
    a = jnp.interp(t, grid, levels)
    i = jnp.clip(jnp.searchsorted(grid, y[0], side="right"), 1, grid.size - 1)
    return jnp.stack([-a * y[0] + 0.1 * levels[i], levels[i - 1] * jnp.tanh(y[0]) - y[1]])


def runtime_tables(n=13, dtype=np.float64):
    rng = np.random.default_rng(5)
    grid = np.sort(rng.uniform(-2.0, 4.0, (n, 24)), axis=1)
    grid[:, 0], grid[3, 5] = -2.0, grid[3, 4]  # a repeated knot
    levels = rng.uniform(0.2, 2.0, (n, 24))
    y0 = np.stack([np.linspace(-2.5, 4.5, n), np.linspace(1.0, -1.0, n)], 1)
    y0[6, 0] = np.nan  # a NaN query: a NaN member
    return (y0.astype(dtype), np.linspace(0, 3.0, 5).astype(dtype),
            {"grid": grid.astype(dtype), "levels": levels.astype(dtype)})


def test_runtime_table_searches_run_in_the_lanes():
    from shoal.ode._codegen.model_struct import generate_model
    model = generate_model(lambda y, t, p: runtime_table_reads(
        y, t, {"grid": p[:24], "levels": p[24:]}), 2, 48, np.float64)
    assert model.lane_arithmetic and "search_sorted(p, 24, " in model.source


@pytest.mark.parametrize("method", ["tsit5", "rodas5p"])
def test_runtime_table_searches_are_bit_identical(method):
    y0, t_span, p = runtime_tables()
    assert_same_solves(lambda lanes: solve(runtime_table_reads, y0, t_span, p, method=method,
                                           rtol=1e-8, atol=1e-10, return_stats=True,
                                           lanes=lanes))
    y32, t32, p32 = runtime_tables(dtype=np.float32)
    assert_same_solves(lambda lanes: solve(runtime_table_reads, y32, t32, p32, method=method,
                                           rtol=1e-4, atol=1e-6, lanes=lanes))


def test_runtime_table_gradients_are_bit_identical():
    y0, t_span, p = runtime_tables(n=9)
    y0[6, 0] = 0.5

    def run(lanes):
        def loss(q):
            return jnp.sum(solve(runtime_table_reads, y0, t_span, q, method="rodas5p",
                                 rtol=1e-7, atol=1e-9, lanes=lanes)[:, -1] ** 2)

        return jax.value_and_grad(loss)({k: jnp.asarray(v) for k, v in p.items()})

    assert_same_solves(run)


# Shared leaves (params_axes None) are copied into a lane only when its row of them changes:
# under vmap over a shared leaf, each batch's members use their own row, and with 7 members a
# batch lanes of 4 or 8 hold members of two rows at once.
def shared_levels(y, t, p):
    return runtime_table_reads(y, t, {"grid": p["grid"], "levels": p["levels"] * p["scale"]})


@pytest.mark.parametrize("method", ["tsit5", "rodas5p"])
def test_shared_rows_changing_inside_the_lanes(method):
    y0, t_span, p = runtime_tables(n=7)
    y0[6, 0] = 0.5
    shared = {"grid": jnp.asarray(p["grid"][0]), "levels": jnp.asarray(p["levels"][:3])}
    scale = jnp.linspace(0.5, 1.5, 7)

    def run(lanes, grid, levels):
        return solve(shared_levels, y0, t_span, {"grid": grid, "levels": levels, "scale": scale},
                     params_axes={"grid": None, "levels": None, "scale": 0}, method=method,
                     rtol=1e-8, atol=1e-10, lanes=lanes)

    batched = lambda lanes: jax.vmap(lambda lv: run(lanes, shared["grid"], lv))(  # noqa: E731
        shared["levels"])
    assert_same_solves(batched)
    for b in range(3):  # each batch is the solve with its own row alone
        assert same(batched(0)[b], run(0, shared["grid"], shared["levels"][b]))


# A reaction network as modellers write it: a constant stoichiometry matrix times the rates, a
# contraction above the code generator's table threshold (a loop over the matrix's nonzeros).
_SPECIES, _REACTIONS = 20, 48
_STOICH = np.zeros((_SPECIES, _REACTIONS))
for _j in range(_REACTIONS):
    _a, _b = _j % _SPECIES, (7 * _j + 3) % _SPECIES
    _STOICH[_a, _j] -= 1.0
    _STOICH[_b, _j] += 1.0 if _a != _b else 0.0


def stoichiometric(y, t, p):
    src = jnp.asarray([j % _SPECIES for j in range(_REACTIONS)])
    rates = p[0] * (1.0 + 0.1 * jnp.arange(_REACTIONS, dtype=y.dtype)) * y[src] ** 1.5
    return jnp.asarray(_STOICH, y.dtype) @ rates - p[1] * y


def test_constant_stoichiometry_runs_in_the_lanes():
    from shoal.ode._codegen.model_struct import generate_model
    model = generate_model(stoichiometric, _SPECIES, 2, np.float64)
    assert model.lane_arithmetic and "_columns[j]]" in model.source


@pytest.mark.parametrize("method,sparsity", [("tsit5", None), ("rodas5p", "dense"),
                                             ("rodas5p", "auto")])
def test_constant_stoichiometry_is_bit_identical_and_right(method, sparsity):
    rng = np.random.default_rng(11)
    y0 = rng.uniform(0.5, 1.5, (11, _SPECIES))
    p = np.stack([rng.uniform(0.5, 2.0, 11), rng.uniform(0.01, 0.1, 11)], 1)
    ts = np.linspace(0.0, 2.0, 4)
    options = {} if sparsity is None else {"sparsity": sparsity}
    assert_same_solves(lambda lanes: solve(stoichiometric, y0, ts, p, method=method, rtol=1e-9,
                                           atol=1e-11, lanes=lanes, **options))
    from scipy.integrate import solve_ivp
    ref = solve_ivp(lambda t, y: np.asarray(stoichiometric(jnp.asarray(y), t, p[2])), (0, 2.0),
                    y0[2], t_eval=ts, method="DOP853", rtol=1e-12, atol=1e-13)
    got = np.asarray(solve(stoichiometric, y0, ts, p, method=method, rtol=1e-9, atol=1e-11,
                           **options))
    np.testing.assert_allclose(got[2], ref.y.T, rtol=1e-6, atol=1e-8)


# Integer arithmetic beside the floats, per lane: an integer parameter's floor division and
# remainder, integer where/abs/sign/maximum, a bool converted both ways, a lax.switch on a
# computed index (every branch evaluated, the taken one selected) and an integer table read.
STEPS = np.array([3, -1, 4, 1, -5, 9, 2, -6], np.int32)


def integer_model(y, t, p):
    k = jnp.floor(p[1] * 7.0).astype(jnp.int32)
    q, r = k // 3, k % 3
    j = jnp.clip(jnp.abs(q - 2) + jnp.sign(r - 1), 0, STEPS.size - 1)
    step = jnp.maximum(jnp.asarray(STEPS)[j], jnp.where(y[0] > 0.5, -2, 0))
    gate = (y[1] < 0.0).astype(jnp.int32) + (t > 1.5)
    branch = lax.switch(jnp.clip(jnp.floor(t).astype(jnp.int32), 0, 2),
                        [lambda u: u, lambda u: -0.5 * u, lambda u: jnp.sin(u)], y[1])
    return jnp.stack([-p[0] * y[0] + 0.1 * step.astype(y.dtype) + 0.05 * gate,
                      y[0] - 0.3 * branch + 0.01 * (r == 1)])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_integer_arithmetic_is_bit_identical(dtype):
    from shoal.ode._codegen.model_struct import generate_model
    assert generate_model(integer_model, 2, 2, dtype).lane_arithmetic
    y0, t_span, p = table_ensemble(dtype=dtype)
    tol = 1e-8 if dtype == np.float64 else 1e-4
    assert_same_solves(lambda lanes: solve(integer_model, y0, t_span, p, method="rodas5p",
                                           rtol=tol, atol=tol, return_stats=True, lanes=lanes))


def _entries(fn, *args):
    """The kernel entry points a jitted function's CPU lowering calls."""
    return re.findall(r'entry = "(\w+)"', jax.jit(fn).lower(*args).as_text())


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_an_ensemble_smaller_than_one_vector_runs_scalar_by_default(dtype):
    # Idle lanes step placeholders at full cost (a 400-variable dense solve of one trajectory:
    # 73 s in 8 lanes, 6 s scalar), so lanes=0 counts the call's trajectories, vmapped ones
    # included, and takes the lanes only from one full vector up; an explicit width is kept.
    width = _jit.native_vector_bytes() // np.dtype(dtype).itemsize
    p = np.array([10.0, 28.0, 8 / 3], dtype)
    t = np.linspace(0, 1, 3).astype(dtype)

    def run(y0, **options):
        return solve(lorenz, y0, t, p, method="tsit5", rtol=1e-5, atol=1e-6, **options)

    def ones(n):
        return jnp.ones((n, 3), dtype)

    assert _entries(run, ones(1)) == ["shoal_ode_tsit5"]
    assert _entries(run, ones(width - 1)) == ["shoal_ode_tsit5"]
    assert _entries(run, ones(width)) == ["shoal_ode_tsit5_lanesnative"]
    assert _entries(lambda y0: run(y0, lanes=4), ones(1)) == ["shoal_ode_tsit5_lanes4"]
    assert _entries(jax.vmap(run), ones(width)[:, None]) == ["shoal_ode_tsit5_lanesnative"]
    assert _entries(jax.vmap(run), ones(width - 1)[:, None]) == ["shoal_ode_tsit5"]
    # Whichever path runs, the same bytes.
    y0 = ones(width - 1) + jnp.arange(width - 1, dtype=dtype)[:, None]
    assert same(run(y0), run(y0, lanes=4))


# -- saves inside steps (each lane's dense output): many per step, a different number in each
# lane, around stops, jumps and a terminal event, through a save_fn, in a joint (sensitivity)
# solve and a DAE.

def _dense_saves(n, count=100):
    # Each member its own span, 0.8 to 4, with the same number of saves: several per step, and a
    # different number in each lane's step.
    return np.linspace(0.0, np.linspace(0.8, 4.0, n), count).T


@pytest.mark.parametrize(("method", "options"), [
    ("tsit5", {}), ("vern7", {}), ("rodas5p", {}), ("rodas4", {}), ("rosenbrock23", {}),
    ("rodas5p", {"sparsity": "auto"}), ("rodas5p", {"lu_precision": "fp32"}),
])
def test_many_saves_per_step_around_stops_jumps_and_an_event(method, options):
    n = 19
    t_span = _dense_saves(n)
    assert np.all(np.diff(t_span, axis=1) > 0)
    p = np.stack([np.full(n, 10.0), np.linspace(5.0, 28.0, n), np.full(n, 8 / 3)], 1)
    y0 = np.ones((n, 3)) + np.linspace(0.0, 1.0, n)[:, None]

    def run(lanes, **extra):
        return solve(lorenz, y0, t_span, p, method=method, rtol=1e-7, atol=1e-9,
                     tstops=[0.5, 1.7], jump_fn=lambda y, t, p: y.at[2].add(0.1 * p[0]),
                     event=Event(lambda y, t, p: y[2] - 40.0, terminal=True),
                     return_stats=True, lanes=lanes, **options, **extra)

    assert_same_solves(run)
    assert_same_solves(lambda lanes: run(lanes, save_fn=lambda y, t, p: y[:2] * p[1]))
    statuses = np.asarray(run(0)[1]["status"]).tolist()
    assert Status.EVENT in statuses and Status.SUCCESS in statuses


@pytest.mark.parametrize("method", ["tsit5", "rodas5p"])
def test_many_saves_per_step_in_a_joint_solve_and_a_dae(method):
    n = 11
    t_span = _dense_saves(n)
    p = np.stack([np.full(n, 10.0), np.linspace(5.0, 28.0, n), np.full(n, 8 / 3)], 1)
    y0 = np.ones((n, 3)) + np.linspace(0.0, 1.0, n)[:, None]

    def saves(p, lanes):
        return solve(lorenz, y0, t_span, p, method=method, rtol=1e-7, atol=1e-9, lanes=lanes)

    assert_same_solves(lambda lanes: jax.jacfwd(lambda p: saves(p, lanes))(jnp.asarray(p)))
    if method == "rodas5p":  # Robertson as a DAE: M = diag(1, 1, 0)
        k = np.stack([np.linspace(0.02, 0.06, n), np.full(n, 3e7), np.full(n, 1e4)], 1)

        def dae(y, t, k):
            r = robertson(y, t, k)
            return jnp.stack([r[0], r[1], y[0] + y[1] + y[2] - 1.0])

        assert_same_solves(lambda lanes: solve(
            dae, np.tile([1.0, 0.0, 0.0], (n, 1)), 1e-3 * t_span, k, method="rodas5p",
            mass=np.diag([1.0, 1.0, 0.0]), rtol=1e-7, atol=1e-10, lanes=lanes))
