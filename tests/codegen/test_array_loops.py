"""Elementwise equations over long arrays are emitted as C++ loops (``_codegen.array_loops``):
the same values bit for bit as the straight-line emission, in plain and dual numbers, the same
sparsity pattern, and a source that does not grow with the array's length."""

from __future__ import annotations

import ctypes

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_codegen import CompiledModel, jax_eval
from test_scans import _JACOBIAN_HARNESS

from shoal import _jit
from shoal.ode import solve
from shoal.ode._codegen import array_loops, generate_model
from shoal.ode._model import structural_pattern

N = 40  # above LOOP_MIN_SIZE


def mixed(y, t, p):
    """Broadcast scalars, constant arrays, slices, concatenations, a reversal, integer and bool
    arrays (an index computed from the state) and a select."""
    ell = jnp.arange(N, dtype=y.dtype)
    below = jnp.concatenate([jnp.zeros((1,), y.dtype), y[:-1]])
    above = jnp.concatenate([y[1:], y[:1]])
    s = p[0] * (ell * below - (ell + 1) * above) / (2 * ell + 1) + jnp.sin(y[::-1]) * t
    k = jnp.clip((jnp.abs(y) * 10).astype(jnp.int32), 0, 3) + jnp.arange(N) % 2
    table = jnp.asarray(np.linspace(1.0, 2.0, 5), y.dtype)
    return jnp.where(y > 0, s, jnp.exp(-y) * p[1]) + table[k] * y**2


def _straight_line(monkeypatch):
    monkeypatch.setattr(array_loops, "LOOP_MIN_SIZE", 10**9)


def _jacobian(model, y, p):
    lib = ctypes.CDLL(str(_jit.compile_library(model.source + _JACOBIAN_HARNESS)))
    ptr = ctypes.POINTER(ctypes.c_double)
    lib.jacobian.argtypes = [ptr, ctypes.c_double, ptr, ptr]
    jac = np.full((N, N), np.nan)
    lib.jacobian(y.ctypes.data_as(ptr), 0.7, p.ctypes.data_as(ptr), jac.ctypes.data_as(ptr))
    return jac


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_loops_equal_straight_line_code_bit_for_bit(dtype, monkeypatch):
    rng = np.random.default_rng(0)
    y, p = rng.normal(size=N).astype(dtype), np.array([1.3, -0.4], dtype)
    looped = CompiledModel(mixed, N, 2, dtype)
    assert "for (int i = 0; i < 40; ++i)" in looped.model.source
    _straight_line(monkeypatch)
    straight = CompiledModel(mixed, N, 2, dtype)
    assert "for (int i" not in straight.model.source
    got = looped(y, 0.7, p)
    np.testing.assert_array_equal(got, straight(y, 0.7, p))
    want = jax_eval(mixed, y, 0.7, p, dtype)
    np.testing.assert_allclose(got, want, rtol=1e-13 if dtype == np.float64 else 1e-6)


def test_dual_jacobian_and_sparsity_pattern_equal_straight_line_code(monkeypatch):
    rng = np.random.default_rng(1)
    y, p = rng.normal(size=N), np.array([0.9, 2.0])
    looped = generate_model(mixed, N, 2, np.float64)
    jac, pattern = _jacobian(looped, y, p), structural_pattern(looped)
    _straight_line(monkeypatch)
    straight = generate_model(mixed, N, 2, np.float64)
    np.testing.assert_array_equal(jac, _jacobian(straight, y, p))
    np.testing.assert_array_equal(pattern, structural_pattern(straight))
    want = np.asarray(jax.jacfwd(mixed)(jnp.asarray(y), 0.7, jnp.asarray(p)))
    np.testing.assert_allclose(jac, want, rtol=1e-12, atol=1e-300)



def strided(y, t, p):
    """Columns of a parameter matrix: operands read at a stride."""
    table = p.reshape(N, 3)
    return table[:, 1] * y[::-1] - table[:, 2] * jnp.tanh(y) + table[:, 0]


def test_strided_operands_are_read_in_place(monkeypatch):
    rng = np.random.default_rng(2)
    y, p = rng.normal(size=N), rng.normal(size=3 * N)
    looped = CompiledModel(strided, N, 3 * N, np.float64)
    for read in ("p[1 + i * 3]", "p[2 + i * 3]", "p[0 + i * 3]"):
        assert read in looped.model.source
    _straight_line(monkeypatch)
    straight = CompiledModel(strided, N, 3 * N, np.float64)
    np.testing.assert_array_equal(looped(y, 0.7, p), straight(y, 0.7, p))
    np.testing.assert_allclose(looped(y, 0.7, p), jax_eval(strided, y, 0.7, p, np.float64),
                               rtol=1e-13)


def shifted(y, t, p):
    """Lorenz-96's rolls, a concatenation with a zero padded on, a scalar placed among elements,
    and p read at an offset: operands of a few contiguous runs each."""
    padded = jnp.concatenate([jnp.zeros((1,), y.dtype), y[:-2], y[:1] * t])
    return ((jnp.roll(y, -1) - jnp.roll(y, 2)) * jnp.roll(y, 1) - y + p[0]
            + p[1:N + 1] * padded)


def _blocks(y, sizes):
    """y's blocks of ``sizes`` in reverse order: an operand of len(sizes) runs."""
    ends = np.cumsum(sizes)
    return jnp.concatenate([y[e - s:e] for s, e in zip(sizes, ends, strict=True)][::-1])


def test_operands_of_a_few_runs_split_the_loop_instead_of_copying(monkeypatch):
    # Rolls and concatenations are read where they lie, the loop split at the runs' ends; the
    # same bits as the straight-line code in numbers and dual numbers, in the SIMD lanes.
    rng = np.random.default_rng(3)
    y, p = rng.normal(size=N), rng.normal(size=N + 1)
    looped = CompiledModel(shifted, N, N + 1, np.float64)
    source = looped.model.source
    assert "local" not in source
    assert "for (int i = 2; i < 39; ++i)" in source and "y[i - 2]" in source
    assert looped.model.lane_arithmetic
    jac = _jacobian(looped.model, y, p)
    _straight_line(monkeypatch)
    straight = CompiledModel(shifted, N, N + 1, np.float64)
    np.testing.assert_array_equal(looped(y, 0.7, p), straight(y, 0.7, p))
    np.testing.assert_array_equal(jac, _jacobian(straight.model, y, p))
    np.testing.assert_allclose(looped(y, 0.7, p), jax_eval(shifted, y, 0.7, p, np.float64),
                               rtol=1e-13)


@pytest.mark.parametrize("pieces", [array_loops.MAX_SEGMENTS, array_loops.MAX_SEGMENTS + 1])
def test_an_operand_of_more_runs_than_segments_is_copied(pieces):
    sizes = [N // pieces] * (pieces - 1)
    sizes.append(N - sum(sizes))

    def f(y, t, p):
        return _blocks(y, sizes) * p[0] - y

    rng = np.random.default_rng(4)
    y, p = rng.normal(size=N), np.array([1.7])
    model = CompiledModel(f, N, 1, np.float64)
    assert ("local" in model.model.source) == (pieces > array_loops.MAX_SEGMENTS)
    np.testing.assert_allclose(model(y, 0.3, p), jax_eval(f, y, 0.3, p, np.float64),
                               rtol=1e-15)


def chain(y, t, p):
    """Lorenz-96's chain of elementwise loops, a result read twice (not fused into its reader)
    and one read by a later, not the next, loop."""
    step = (jnp.roll(y, -1) - jnp.roll(y, 2)) * jnp.roll(y, 1) - y + p[0]
    twice = jnp.exp(-y * y)
    later = jnp.sin(y) * p[1]
    return (step * twice + twice) * jnp.cos(y) + later


def _unfused(monkeypatch):
    monkeypatch.setattr(array_loops, "fuse_chains", lambda lines: lines)


def test_a_chain_of_loops_is_one_loop_with_the_same_bits(monkeypatch):
    rng = np.random.default_rng(5)
    y, p = rng.normal(size=N), np.array([8.0, 0.4])
    fused = CompiledModel(chain, N, 2, np.float64)
    rhs = fused.model.source.split("static void rhs", 1)[1]
    # step's four loops are one, split where its rolls' runs end; exp(-y*y), read twice, is
    # stored; sin(y) * p[1] is read two loops later.
    assert "for (int i = 2; i < 39; ++i)" in rhs and "T(T(T(y[1 + i] - y[i - 2])" in rhs
    assert rhs.count(f"[{N}];") == 5, rhs
    assert fused.model.lane_arithmetic
    jac = _jacobian(fused.model, y, p)
    # In the SIMD lanes, the scalar path's bits.
    y0 = jnp.asarray(rng.normal(size=(9, N)))
    ts = jnp.linspace(0.0, 0.5, 3)
    lanes = [solve(chain, y0, ts, jnp.asarray(p), method="tsit5", lanes=w) for w in (1, 8)]
    np.testing.assert_array_equal(lanes[0], lanes[1])
    _unfused(monkeypatch)
    plain = CompiledModel(chain, N, 2, np.float64)
    assert plain.model.source.split("static void rhs", 1)[1].count(f"[{N}];") == 14
    np.testing.assert_array_equal(fused(y, 0.7, p), plain(y, 0.7, p))
    np.testing.assert_array_equal(jac, _jacobian(plain.model, y, p))
    np.testing.assert_allclose(fused(y, 0.7, p), jax_eval(chain, y, 0.7, p, np.float64),
                               rtol=1e-13)


def _loops(name, bounds, expression):
    return [f"T {name}[{bounds[-1]}];", *(
        f"for (int i = {lo}; i < {hi}; ++i) {name}[i] = {expression};"
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True))]


@pytest.mark.parametrize("stretches", [array_loops.MAX_SEGMENTS, array_loops.MAX_SEGMENTS + 1])
def test_chains_fuse_up_to_the_stretches_limit(stretches):
    # The producer's stretches start at 0, 1, 2, ...; the consumer's at 0, 6, 12, ...
    made = [*range(stretches // 2), N]
    used = [*range(0, 6 * (stretches - stretches // 2) + 1, 6), N]
    assert len(set(made[:-1]) | set(used[:-1])) == stretches
    lines = [*_loops("v1", made, "(y[i] - p[0])"), *_loops("v2", used, "exp(v1[i])"),
             "for (int i = 0; i < 40; ++i) dy[i] = v2[i];"]
    out = array_loops.fuse_chains(lines)
    if stretches > array_loops.MAX_SEGMENTS:
        assert out == lines
    else:
        assert "T v1[40];" not in out and len(out) == stretches + 2
        assert all("exp(T(y[i] - p[0]))" in line for line in out[1:-1])


def test_chains_are_not_fused_where_the_array_is_read_elsewhere():
    cases = {
        "read at a constant index": ["const T v3 = (v1[5] * t);"],
        "read twice by the next loop": [],
        "not by the next statement": ["const T v3 = (t * t);"],
    }
    for what, between in cases.items():
        consumer = "(v1[i] * v1[i])" if what.startswith("read twice") else "(v1[i] * y[i])"
        lines = [*_loops("v1", [0, N], "(y[i] + t)")]
        if what.startswith("not by"):
            lines += between + _loops("v2", [0, N], consumer)
        else:
            lines += _loops("v2", [0, N], consumer) + between
        assert array_loops.fuse_chains(lines) == lines, what


@pytest.mark.parametrize("pieces", [array_loops.MAX_SEGMENTS, array_loops.MAX_SEGMENTS + 1])
def test_grad_jacrev_and_jacfwd_agree_on_both_sides_of_the_stretches_limit(pieces):
    # The vector-Jacobian products are generated through the same loops (split and fused below
    # the limit, copied above it): the adjoint's grad and jacrev against forward mode's jacfwd,
    # with a per-member and a shared leaf, y0 differentiated and not.
    sizes = [N // pieces] * (pieces - 1)
    sizes.append(N - sum(sizes))

    def f(y, t, p):
        mixed_up = _blocks(y, sizes)
        return (y - mixed_up) * p["shared"][0] - p["own"] * y + 0.1 * jnp.sin(y)

    members = 3
    y0 = jnp.asarray(np.random.default_rng(6).normal(size=(members, N)))
    own = jnp.linspace(0.5, 1.5, members)
    shared = jnp.array([0.7])
    ts = jnp.array([0.0, 0.2, 0.5])

    def saves(shared, own, y0, adjoint):
        ys = solve(f, y0, ts, {"shared": shared, "own": own},
                   params_axes={"shared": None, "own": 0}, method="tsit5", rtol=1e-9,
                   atol=1e-9, sens_error_control=False, first_step=1e-3, adjoint=adjoint)
        return ys[:, -1, :3].ravel()

    source = generate_model(lambda y, t, p: f(y, t, {"shared": p[:1], "own": p[1]}), N, 2,
                            np.float64).source
    assert ("local" in source) == (pieces > array_loops.MAX_SEGMENTS)
    for argnums in ((0, 1), (0, 1, 2)):
        forward = jax.jacfwd(saves, argnums)(shared, own, y0, False)
        reverse = jax.jacrev(saves, argnums)(shared, own, y0, True)
        grad = jax.grad(lambda *a: jnp.sum(saves(*a, True)), argnums)(shared, own, y0)
        for r, fw, g in zip(reverse, forward, grad, strict=True):
            scale = float(jnp.max(jnp.abs(fw)))
            np.testing.assert_allclose(r, fw, rtol=1e-10, atol=1e-12 * scale)
            np.testing.assert_allclose(g, jnp.sum(fw, axis=0), rtol=1e-10, atol=1e-12 * scale)
