"""Table lookups at run-time indices: searchsorted, interp, splines, RegularGridInterpolator,
gather, dynamic_slice, take, x[i].

Each model is compiled once and evaluated at random points, many out of the table's range or
with out-of-range indices, against JAX's own evaluation of ``f`` (1e-13 float64, 1e-6 float32);
the dual-number Jacobian against ``jax.jacfwd``; the sparsity tracer's pattern; the source size
against the table's length; and a solve of an interpolated-rate model against SciPy.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.scipy.interpolate import RegularGridInterpolator
from test_codegen import CompiledModel, dual_jacobian, jax_eval

from shoal.ode import solve
from shoal.ode._codegen import generate_model
from shoal.ode._model import detect_pattern


@pytest.fixture(autouse=True, scope="module")
def _x64():
    with jax.enable_x64(True):
        yield


N, NP = 4, 3
XP = np.sort(np.random.default_rng(0).uniform(-1.0, 1.0, 11))
XP[4] = XP[5]  # a repeated knot: left and right differ there
FP = np.cos(3.0 * XP)
TABLE2 = np.arange(24.0).reshape(4, 6) ** 1.5


def _c(a, like):
    """A closed-over table in the model's precision."""
    return jnp.asarray(a, dtype=like.dtype)


def _index(x, dtype=jnp.int32):
    # from about -8 to 8: out of range at both ends of every table here
    return (4.0 * x).astype(dtype)


def _natural_spline(xk, fk):
    """Natural cubic spline coefficients (a, b, c, d per interval), computed in NumPy."""
    h = np.diff(xk)
    n = len(xk)
    A = np.zeros((n, n))
    r = np.zeros(n)
    A[0, 0] = A[-1, -1] = 1.0
    for i in range(1, n - 1):
        A[i, i - 1 : i + 2] = h[i - 1], 2 * (h[i - 1] + h[i]), h[i]
        r[i] = 3 * ((fk[i + 1] - fk[i]) / h[i] - (fk[i] - fk[i - 1]) / h[i - 1])
    c = np.linalg.solve(A, r)
    b = (fk[1:] - fk[:-1]) / h - h * (2 * c[:-1] + c[1:]) / 3
    d = (c[1:] - c[:-1]) / (3 * h)
    return fk[:-1], b, c[:-1], d


SK = np.linspace(-1.0, 1.0, 9)
SPLINE = _natural_spline(SK, np.sin(2.0 * SK))


def _spline(x, like):
    a, b, c, d = (_c(v, like) for v in SPLINE)
    i = jnp.clip(jnp.searchsorted(_c(SK, like), x, side="right") - 1, 0, len(SK) - 2)
    dx = x - _c(SK, like)[i]
    return a[i] + dx * (b[i] + dx * (c[i] + dx * d[i]))


def _interp(y, t, p):
    xp, fp = _c(XP, y), _c(FP, y)
    return jnp.stack(
        [
            jnp.interp(y[0], xp, fp),
            jnp.interp(y[1], xp, fp, left=-2.0, right=3.0),
            jnp.interp(t, xp, fp, period=1.5),
            jnp.interp(y[3] * p[0], xp, fp, left=p[1]),
        ]
    )


def _interp_vector(y, t, p):
    return jnp.interp(y, _c(XP, y), _c(FP, y)) * y[::-1]


def _spline_model(y, t, p):
    return jnp.stack([_spline(y[0], y), _spline(t, y), _spline(y[2] * p[2], y), y[3]])


def _searchsorted(method):
    def f(y, t, p):
        xp = _c(XP, y)
        q = jnp.stack([y[0], y[1], t, _c(XP[4], y)])  # the last one on the repeated knot
        left = jnp.searchsorted(xp, q, side="left", method=method)
        right = jnp.searchsorted(xp, q, side="right", method=method)
        return (left * 100 + right).astype(y.dtype)

    f.__name__ = f"searchsorted_{method}"
    return f


def _searchsorted_symbolic(method):
    # The sorted array is p itself: the generic lt_to/le_to and dynamic_slice translations.
    def f(y, t, p):
        left = jnp.searchsorted(p, y, side="left", method=method)
        right = jnp.searchsorted(p, y[::-1], side="right", method=method)
        return (left * 10 + right).astype(y.dtype)

    f.__name__ = f"searchsorted_symbolic_{method}"
    return f


GX, GY = np.linspace(-1.0, 1.0, 5), np.linspace(-1.5, 0.5, 7)
GRID_VALUES = np.sin(3.0 * GX[:, None] + GY[None, :])


def _regular_grid(y, t, p):
    grid = (_c(GX, y), _c(GY, y))
    points = jnp.stack([y[:2], jnp.stack([t, y[3]])], axis=-1)
    out = [
        RegularGridInterpolator(grid, _c(GRID_VALUES, y), method=method, fill_value=fill)(points)
        for method, fill in (("linear", None), ("linear", np.nan), ("nearest", -3.0))
    ]
    return jnp.concatenate(out)[:4] + jnp.concatenate(out)[2:]


def _take(y, t, p):
    fp = _c(FP, y)
    return jnp.stack(
        [
            jnp.take(fp, _index(y[0])),  # mode fill: NaN out of range
            jnp.take(fp, _index(y[1], jnp.int64), mode="clip"),
            jnp.take(fp, _index(y[2]), mode="fill", fill_value=-7.0),
            jnp.take(fp, _index(t, jnp.int64), mode="wrap"),
        ]
    )


def _getitem(y, t, p):
    fp, tab = _c(FP, y), _c(TABLE2, y)
    i, j = _index(y[0]), _index(y[1], jnp.int64)
    return jnp.stack([fp[i], tab[i, j], tab[j][i], fp[_index(p[0])] * y[3]])


def _gather_vector(y, t, p):
    # x[array of indices] is a gather with a batch of indices (negative ones wrap first)
    idx = jnp.stack([_index(y[0]), _index(y[1]), _index(t), _index(p[0])])
    return _c(FP, y)[idx] + _c(TABLE2, y)[idx, 2]


def _lax_gather(y, t, p):
    dn = lax.GatherDimensionNumbers(
        offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0, 1)
    )
    idx = jnp.stack([_index(y[:2]), _index(y[2:])], axis=-1)
    tab = _c(TABLE2, y)
    out = []
    for mode in ("clip", "fill", "promise_in_bounds"):
        # promise_in_bounds is clamped on every XLA backend; JAX evaluates it so too
        g = lax.gather(tab, idx, dn, slice_sizes=(1, 2), mode=mode, fill_value=-1.0)
        out.append(g.sum(axis=1))
    return jnp.concatenate(out)[:4] * jnp.concatenate(out)[2:6]


def _dynamic_slice(y, t, p):
    tab = _c(TABLE2, y)
    s = lax.dynamic_slice(tab, (_index(y[0], jnp.int64), _index(t, jnp.int64)), (2, 3))
    s1 = lax.dynamic_slice(_c(FP, y), (_index(y[1]),), (4,))
    return s.sum(axis=1).repeat(2) * s1


def _state_index(y, t, p):
    # y indexed at indices computed from y, t, p: a local array
    i = _index(y[0])
    return jnp.stack(
        [
            y[i],
            jnp.take(y, _index(t), mode="fill", fill_value=0.5),
            lax.dynamic_slice(y, (_index(p[1]),), (2,)).sum(),
            y[jnp.clip(_index(y[2]), 0, N - 1)] * p[i % NP],
        ]
    )


# The models whose dual-number Jacobian is also checked, then the rest.
DIFFERENTIATED = [
    _interp,
    _interp_vector,
    _spline_model,
    _regular_grid,
    _take,
    _getitem,
    _dynamic_slice,
    _state_index,
]
CASES = [
    *DIFFERENTIATED,
    *(_searchsorted(m) for m in ("scan", "scan_unrolled", "sort", "compare_all")),
    *(_searchsorted_symbolic(m) for m in ("scan", "scan_unrolled", "sort", "compare_all")),
    _gather_vector,
    _lax_gather,
]


def _points(seed, dtype, count=40):
    rng = np.random.default_rng(seed)
    for k in range(count):
        y = rng.uniform(-2.0, 2.0, N)
        if k % 5 == 0:  # exactly on knots, including the repeated one
            y[:2] = XP[[4, k % len(XP)]]
        t = rng.uniform(-2.0, 2.0)
        p = np.sort(rng.uniform(-1.5, 1.5, NP))  # sorted: the symbolic searchsorted's table
        yield y.astype(dtype), dtype(t), p.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("f", CASES, ids=lambda f: f.__name__.strip("_"))
def test_lookup_matches_jax(f, dtype):
    model = CompiledModel(f, N, NP, dtype)
    rtol = 1e-13 if dtype == np.float64 else 1e-6
    for y, t, p in _points(1, dtype):
        got = model(y, t, p).astype(np.float64)
        want = jax_eval(f, y, t, p, dtype).astype(np.float64)
        ok = (np.abs(got - want) <= rtol * np.maximum(np.abs(want), 1.0)) | (
            np.isnan(got) & np.isnan(want)
        )
        assert ok.all(), f"at y={y}, t={t}, p={p}:\n  C++: {got}\n  JAX: {want}"


# -- derivatives: dual numbers, nested duals, the sparsity tracer ---------------------------------

@pytest.mark.parametrize("f", DIFFERENTIATED, ids=lambda f: f.__name__.strip("_"))
def test_dual_jacobian_matches_jacfwd(f):
    jac = dual_jacobian(f, N, NP)
    for y, t, p in _points(2, np.float64, count=15):
        got = jac(y, float(t), p)
        want = np.asarray(jax.jacfwd(f)(jnp.asarray(y), jnp.asarray(t), jnp.asarray(p)))
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def _pattern_model(y, t, p):
    fp = _c(FP, y)
    return jnp.stack(
        [
            jnp.interp(y[1], _c(XP, y), fp),
            fp[_index(y[2])],  # a constant read at a state-dependent index depends on y[2]
            y[_index(t)],  # a state read at a time-dependent index may read any y
            lax.dynamic_slice(fp, (_index(y[0] + y[3]),), (2,)).sum() + 0.0 * p[0],
        ]
    )


def test_sparsity_pattern_of_state_dependent_lookups():
    want = np.array(
        [
            [0, 1, 0, 0],
            [0, 0, 1, 0],
            [1, 1, 1, 1],
            [1, 0, 0, 1],
        ],
        dtype=bool,
    )
    np.testing.assert_array_equal(detect_pattern(_pattern_model, N, NP, np.float64), want)


# -- the source does not grow with the table -----------------------------------------------------


def _table_model(n):
    xs = np.linspace(0.0, 1.0, n) ** 2  # not a linspace, whose entries are computed, not read
    fs = np.exp(-xs) * np.sin(7 * xs)

    def f(y, t, p):
        xp, fp = _c(xs, y), _c(fs, y)
        k = jnp.searchsorted(xp, y[1], method="compare_all")
        return jnp.stack(
            [
                jnp.interp(t, xp, fp),
                jnp.interp(y[0], xp, fp, period=1.0),
                fp[_index(y[2])] + jnp.take(fp, k, mode="clip"),
                jnp.searchsorted(xp, y[3], method="sort").astype(y.dtype),
            ]
        )

    return f


def _split_tables(source):
    """(the table initialisers, everything else)."""
    tables = "\n".join(line for line in source.splitlines() if line.startswith("#define SHOAL_"))
    rest = "\n".join(line for line in source.splitlines() if not line.startswith("#define SHOAL_"))
    return tables, rest


def test_source_does_not_grow_with_the_table():
    small = generate_model(_table_model(100), N, NP, np.float64).source
    large = generate_model(_table_model(10_000), N, NP, np.float64).source
    small_tables, small_rest = _split_tables(small)
    large_tables, large_rest = _split_tables(large)
    # only the digits of the table's length change outside the table data
    assert re.sub(r"\d+", "0", small_rest) == re.sub(r"\d+", "0", large_rest)
    # (a few digits more in the lengths and bounds: 100 -> 10000, 99 -> 9999)
    assert len(large_rest) - len(small_rest) <= 200
    assert len(large) - len(small) <= len(large_tables) - len(small_tables) + 200
    # each table is emitted once, however many lookups read it
    assert len(re.findall(r"^#define SHOAL_", large, flags=re.M)) == 4  # xp, fp; periodic xp, fp
    print(
        f"\nsource: {len(small)} chars for 100 entries ({len(small_rest)} without the tables),"
        f" {len(large)} for 10 000 ({len(large_rest)} without the tables)"
    )


# -- a solve of an interpolated-rate model -------------------------------------------------------

K_GRID = np.linspace(0.0, 2.0, 2001)
K_VALUES = 1.0 + 0.5 * np.sin(3.0 * K_GRID) ** 2


def _decay(y, t, p):
    return -p[0] * jnp.interp(t, K_GRID, K_VALUES) * y


@pytest.mark.parametrize("method", ["tsit5", "rodas5p"])
def test_interpolated_rate_solve_matches_scipy_and_gradient_matches_fd(method):
    scipy_integrate = pytest.importorskip("scipy.integrate")
    ts = np.linspace(0.0, 2.0, 5)
    y0 = np.array([1.0, 2.0])

    def final(k):
        ys = solve(_decay, y0, ts, jnp.stack([k]), method=method, rtol=1e-11, atol=1e-13)
        return ys[0, -1].sum()

    ys = np.asarray(solve(_decay, y0, ts, np.array([0.7]), method=method, rtol=1e-11, atol=1e-13))
    ref = scipy_integrate.solve_ivp(
        lambda t, y: -0.7 * np.interp(t, K_GRID, K_VALUES) * y,
        (0.0, 2.0),
        y0,
        t_eval=ts,
        rtol=1e-12,
        atol=1e-14,
        method="DOP853",
    )
    np.testing.assert_allclose(ys[0], ref.y.T, rtol=1e-8)
    grad = float(jax.grad(final)(0.7))
    # h large enough that the adaptive step sequences of the two solves (which cross the
    # table's kinks differently) add little noise: truncation ~ (h * integral of K)**2 / 6
    h = 1e-3
    fd = (float(final(0.7 + h)) - float(final(0.7 - h))) / (2 * h)
    np.testing.assert_allclose(grad, fd, rtol=2e-6)
    integral = np.trapezoid(K_VALUES, K_GRID)  # exact for the piecewise-linear rate
    np.testing.assert_allclose(grad, -integral * y0.sum() * np.exp(-0.7 * integral), rtol=1e-8)


# -- searches on a uniform grid: the index from the grid, confirmed by comparisons -----------------

UNIFORM = np.linspace(-1.0, 3.0, 101)  # spacing 0.04, which no float represents exactly


GEOMETRIC = np.geomspace(1e-3, 10.0, 101)
IRREGULAR = np.sort(np.random.default_rng(3).uniform(-1.0, 3.0, 101))


def _both_sides_search(grid):
    """A model searching ``grid`` for y[0] and y[1] on both sides (one model per grid)."""
    def f(y, t, p):
        xp = _c(grid, y)
        return jnp.stack([jnp.searchsorted(xp, y[i], side=side) for i in (0, 1)
                          for side in ("left", "right")]).astype(y.dtype)

    return f


_uniform_search = _both_sides_search(UNIFORM)
_geometric_search = _both_sides_search(GEOMETRIC)


def _irregular_search(y, t, p):
    xp = _c(IRREGULAR, y)
    return jnp.stack([jnp.searchsorted(xp, y[i]) for i in range(N)]).astype(y.dtype)


def _grid_queries(grid, dtype):
    """Every knot, its neighbouring floats, midpoints, both ends and beyond, 0, negatives, NaN
    and infinities."""
    knots = grid.astype(dtype)
    up = np.nextafter(knots, np.asarray(np.inf, dtype))
    down = np.nextafter(knots, np.asarray(-np.inf, dtype))
    mids = ((knots[1:] + knots[:-1]) / 2).astype(dtype)
    odd = np.array([-np.inf, np.inf, np.nan, -5.0, 0.0, 1e-9, 7.0, 30.0, -1.0, 3.0], dtype=dtype)
    queries = np.concatenate([knots, up, down, mids, odd])
    # Not the subnormal neighbours of the knot at 0: XLA's CPU flushes them to 0, this test's
    # direct call does not (in a solve the kernel runs on XLA's threads and flushes too).
    return queries[~((queries != 0) & (np.abs(queries) < np.finfo(dtype).tiny))]


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("grid, f", [(UNIFORM, _uniform_search), (GEOMETRIC, _geometric_search)],
                         ids=["linspace", "geomspace"])
def test_a_search_on_a_grid_is_searchsorted_exactly(grid, f, dtype):
    model = CompiledModel(f, N, NP, dtype)
    assert "search_sorted_near(" in model.model.source
    queries = _grid_queries(grid, dtype)
    for a, b in zip(queries, np.roll(queries, 7), strict=True):
        y = np.array([a, b, 0.0, 0.0], dtype=dtype)
        got = model(y, dtype(0.0), np.zeros(NP, dtype))
        want = jax_eval(f, y, 0.0, np.zeros(NP), dtype)
        np.testing.assert_array_equal(got, want, err_msg=f"queries {a!r}, {b!r}")


def test_an_irregular_table_keeps_the_binary_search():
    model = CompiledModel(_irregular_search, N, NP, np.float64)
    assert "search_sorted_near(" not in model.model.source
    y = np.array([-1.0, 0.5, 2.0, 11.0])
    np.testing.assert_array_equal(model(y, 0.0, np.zeros(NP)),
                                  jax_eval(_irregular_search, y, 0.0, np.zeros(NP), np.float64))
