"""Writes into arrays in f: ``x.at[...].set/add/multiply/min/max`` (scatter) and
``lax.dynamic_update_slice``, at constant indices and at indices computed from y, t and p.

Each model is compiled once and evaluated at random points, where many computed indices are out
of range, against JAX's own evaluation (1e-13 float64, 1e-6 float32); the dual-number Jacobian
against ``jax.jacfwd``; the sparsity tracer's pattern; hypothesis programs mixing gathers,
scatters and interpolation; the generated source of a DISCO-EB-style derivative vector; and a
solve of a scatter-built model against SciPy.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jax import lax
from test_codegen import (
    CompiledModel,
    assert_close,
    assert_compiles_for_the_device,
    assert_matches_at,
    assert_pattern_covers_jacobians,
    jacobians_at,
    jax_eval,
)

from shoal.ode import solve
from shoal.ode._codegen import generate_model
from shoal.ode._model import detect_pattern


@pytest.fixture(autouse=True, scope="module")
def _x64():
    with jax.enable_x64(True):
        yield


N, NP = 6, 3


def _index(x, dtype=jnp.int32):
    # from -8 to 8 for |x| <= 2: out of range at both ends (after jnp wraps -6..-1)
    return (4.0 * x).astype(dtype)


def _mix(arrays):
    """One length-N output from several: a weighted sum, so that every term shows."""
    return sum((k + 1.0) * a.ravel() for k, a in enumerate(arrays))


def _constant_writes(y, t, p):
    # The DISCO-EB way of filling a derivative vector, and every combine at constant indices.
    dy = jnp.zeros(N, y.dtype)
    dy = dy.at[0].set(y[1] * p[0]).at[1].set(-y[0])
    dy = dy.at[2].add(t * y[2]).at[2].add(y[3])
    dy = dy.at[3].set(y[4]).at[3].multiply(p[1])
    dy = dy.at[4:6].set(y[:2]).at[4].min(y[5]).at[5].max(y[2])
    dy = dy.at[-1].add(y[3])
    dy = dy.at[7].set(100.0)  # out of range: dropped
    dy = dy.at[7].set(y[0], mode="clip")  # clipped onto the last element
    dups = y.at[jnp.array([1, 1, 3])].add(y[3:]).at[jnp.array([0, 2, 0])].set(p)
    m = y.reshape(2, 3).at[1, :].set(p).at[:, 0].multiply(t).at[0, 1:].add(y[4:])
    return _mix([dy, dups, m])


def _computed_writes(y, t, p):
    i, j, k = _index(y[0]), _index(t, jnp.int64), _index(p[0])
    x = y * p[1]
    return _mix(
        [
            x.at[i].set(y[1]),  # default mode: dropped out of range
            x.at[j].add(y[2], mode="clip"),
            x.at[k].multiply(y[3], mode="drop"),
            x.at[i].min(y[4], mode="promise_in_bounds"),  # dropped, as JAX on CPU does
            x.at[j].max(t, mode="clip"),
            x.at[jnp.stack([i, i, j])].add(y[3:]),  # duplicates accumulate
            x.at[jnp.stack([i, j, i])].set(y[:3]),  # duplicates: the last one wins
            x.at[jnp.stack([k, k])].multiply(p[:2], mode="clip"),
        ]
    )


def _computed_windows(y, t, p):
    i, j = _index(y[1]), _index(y[2], jnp.int64)
    m = y.reshape(2, 3)
    counts = jnp.arange(N, dtype=jnp.int32).at[i].add(j.astype(jnp.int32))
    return _mix(
        [
            m.at[i, :].set(p),
            m.at[:, j].add(y[:2], mode="clip"),
            m.at[i, j].set(t),
            lax.dynamic_update_slice(y, y[:2] * t, (i,)),  # the start is clamped
            lax.dynamic_update_slice(m, p[None, :2], (i, j.astype(jnp.int32))),
            counts.astype(y.dtype),
        ]
    )


MODELS = [_constant_writes, _computed_writes, _computed_windows]


def _points(seed, dtype, count=40):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        y = rng.uniform(-2.0, 2.0, N)
        yield y.astype(dtype), dtype(rng.uniform(-2.0, 2.0)), rng.uniform(-2, 2, NP).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("f", MODELS, ids=lambda f: f.__name__.strip("_"))
def test_writes_match_jax(f, dtype):
    # float32 relative to the mixed terms' size (up to ~50), which the weighted sum may cancel
    floor = 1.0 if dtype == np.float64 else 10.0
    assert_matches_at(f, N, NP, dtype, _points(1, dtype), floor=floor)


def _central_differences(f, y, t, p, h=1e-6):
    cols = [
        (jax_eval(f, y + h * e, t, p, np.float64) - jax_eval(f, y - h * e, t, p, np.float64))
        / (2 * h)
        for e in np.eye(N)
    ]
    return np.stack(cols, axis=1)


@pytest.mark.parametrize("f", MODELS, ids=lambda f: f.__name__.strip("_"))
def test_dual_jacobian_matches_jacfwd(f):
    for got, want, y, t, p in jacobians_at(f, N, NP, _points(2, np.float64, count=15)):
        # jacfwd of scatter-min/max at a clipped out-of-range index is NaN (JAX 0.10.2);
        # the derivative there is that of the element the write lands on.
        rows = np.isnan(want).any(axis=1)
        np.testing.assert_allclose(got[~rows], want[~rows], rtol=1e-12, atol=1e-12)
        if rows.any():
            fd = _central_differences(jax.jit(f), y, t, p)
            np.testing.assert_allclose(got[rows], fd[rows], rtol=1e-7, atol=1e-7)


@pytest.mark.parametrize("f", MODELS, ids=lambda f: f.__name__.strip("_"))
def test_sparsity_pattern_covers_the_jacobian(f):
    assert_pattern_covers_jacobians(f, N, NP, _points(3, np.float64, count=15))


def _pattern_model(y, t, p):
    x = jnp.zeros(N, y.dtype).at[_index(y[0])].set(y[1])  # every element: value and index
    x = x.at[2].add(y[3])  # a constant index writes one element
    return x.at[_index(t)].multiply(y[4])  # t carries no state dependency into the index


def test_sparsity_pattern_of_computed_writes_is_exact():
    want = np.zeros((N, N), bool)
    want[:, [0, 1, 4]] = True
    want[2, 3] = True
    np.testing.assert_array_equal(detect_pattern(_pattern_model, N, NP, np.float64), want)


def test_computed_reads_are_the_read_itself_for_numbers():
    """The sparsity tracer's dependency of a read on what its index came from is spelled
    gather_indexed (math.hpp), the read itself for numbers: indexed(gather(…)) would copy the
    value, a dual of SIMD lanes by a call to memcpy. The pattern still has the dependency."""
    def f(y, t, p):
        return _pattern_model(y, t, p) + y[_index(y[2])]

    source = generate_model(f, N, NP, np.float64).source
    assert "gather_indexed<T>(" in source and "indexed(gather" not in source
    np.testing.assert_array_equal(detect_pattern(f, N, NP, np.float64)[:, 2], True)


def test_constant_index_writes_generate_the_same_code_as_stacking():
    n = 26

    def terms(y, p):
        return [jnp.sin(y[k]) * p[k % 3] + y[(k + 1) % n] for k in range(n)]

    def scattered(y, t, p):
        dy = jnp.zeros(n, y.dtype)
        for k, v in enumerate(terms(y, p)):
            dy = dy.at[k].set(v)
        return dy

    def stacked(y, t, p):
        return jnp.stack(terms(y, p))

    source = generate_model(scattered, n, NP, np.float64).source
    assert source == generate_model(stacked, n, NP, np.float64).source


def test_writes_compile_for_the_device():
    assert_compiles_for_the_device(generate_model(_computed_windows, N, NP, np.float64))


def test_source_is_linear_in_operand_times_updates():
    def f(y, t, p):
        return y.at[_index(y[0])].set(p[0])

    lines = {n: generate_model(f, n, NP, np.float64).source.count("\n") for n in (8, 64)}
    assert lines[64] - lines[8] <= 2 * (64 - 8) + 64 - 8  # a compare and a select per element


# -- hypothesis: programs mixing gathers, scatters and interpolation ------------------------------

XP = np.linspace(-1.0, 1.0, 7)
FP = np.cos(2.0 * XP)
_SOURCES = ("y0", "y3", "t", "p1", "const")
_STEP = st.tuples(
    st.sampled_from(
        ("set", "add", "multiply", "min", "max", "take", "interp", "slice", "update_slice")
    ),
    st.sampled_from(_SOURCES),
    st.integers(-9, 9),  # the constant index, or a scale of the computed one
    st.sampled_from(("promise_in_bounds", "clip", "drop", "fill")),
    st.integers(0, N - 1),  # the element written or read besides the index
)


def _program(steps):
    def f(y, t, p):
        x = y
        for kind, source, c, mode, e in steps:
            if source == "const":
                i = jnp.int32(c)
            else:
                v = {"y0": y[0], "y3": y[3], "t": t, "p1": p[1]}[source]
                i = _index(v * (0.5 + abs(c) / 6.0))
            if kind in ("set", "add", "multiply", "min", "max"):
                write_mode = "drop" if mode == "fill" else mode
                x = getattr(x.at[i], kind)(x[e] * 0.5 + t, mode=write_mode)
            elif kind == "take":
                x = x.at[e].add(jnp.take(x, i, mode="clip" if mode == "clip" else "fill"))
            elif kind == "interp":
                x = x.at[e].set(jnp.interp(x[(e + 1) % N], XP, FP) * x[e])
            elif kind == "slice":
                x = x + lax.dynamic_slice(jnp.concatenate([x, x]), (i,), (N,))
            else:
                x = lax.dynamic_update_slice(x, x[:2][::-1] * p[0], (i,))
        return x

    return f


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
@given(st.lists(_STEP, min_size=1, max_size=5))
def test_random_programs_of_gathers_scatters_and_interpolation_match_jax(steps):
    f = _program(steps)
    model = CompiledModel(f, N, NP, np.float64)
    for y, t, p in _points(4, np.float64, count=8):
        want = jax_eval(f, y, t, p, np.float64)
        assert_close(model(y, t, p), want, rtol=1e-13, floor=1.0, where=f"steps={steps}")


# -- a solve ---------------------------------------------------------------------------------------


def _chain(y, t, p):
    # A decay chain 0 -> 1 -> 2 with a forced oscillator, filled in by scatters; the forcing term
    # lands on the element whose index the state selects (y[3] stays in [0.5, 1.5]: element 3).
    dy = jnp.zeros(4, y.dtype)
    dy = dy.at[0].set(-p[0] * y[0])
    dy = dy.at[1].set(p[0] * y[0] - p[1] * y[1])
    dy = dy.at[2].add(p[1] * y[1])
    dy = dy.at[2].add(-0.1 * y[2])
    return dy.at[jnp.round(y[3] * 3).astype(jnp.int32)].add(0.05 * jnp.cos(t) * y[2])


@pytest.mark.parametrize("method", ["tsit5", "rodas5p"])
def test_scatter_built_model_solve_matches_scipy(method):
    scipy_integrate = pytest.importorskip("scipy.integrate")
    y0 = np.array([1.0, 0.5, 0.0, 1.0])
    ts = np.linspace(0.0, 3.0, 6)
    params = np.array([0.8, 0.3])
    ys = np.asarray(solve(_chain, y0, ts, params, method=method, rtol=1e-12, atol=1e-14))
    ref = scipy_integrate.solve_ivp(
        lambda t, y: np.asarray(_chain(jnp.asarray(y), t, jnp.asarray(params))),
        (ts[0], ts[-1]),
        y0,
        t_eval=ts,
        rtol=1e-13,
        atol=1e-15,
        method="DOP853",
    )
    np.testing.assert_allclose(ys[0], ref.y.T, rtol=1e-10, atol=1e-13)
