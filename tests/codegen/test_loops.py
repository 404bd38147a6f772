"""Loops in f: while loops with a run-time trip count and long scans as C++ loops.

Three models group the constructs (each model is a compile): root finders (Newton on Kepler's
equation, bisection, a counter carry, a fori_loop with a parameter bound, an integer carry
computed from floats that indexes a table), long loops (a 10 000-step scan over a constant
table, a fori_loop carrying an array, a reverse scan over symbolic xs with integer ys) and
nesting (while in while, a loop in a cond branch, a cond in a loop, a long scan in a while).
Values against JAX at 1e-13 (float64) and 1e-6 (float32); the dual-number Jacobian against
``jax.jacfwd``; the sparsity tracer's pattern, exact where each loop mixes only some components;
the source size against a scan's length; solves by Tsit5 and Rodas5P against SciPy.
"""

from __future__ import annotations

import ctypes
import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
from jax import lax
from test_codegen import CompiledModel

from shoal import _jit
from shoal.ode import solve
from shoal.ode._codegen import MAX_UNROLLED_STATEMENTS, generate_model


@pytest.fixture(autouse=True, scope="module")
def _x64():
    with jax.enable_x64(True):
        yield


N, NP = 6, 2
P = np.array([0.8, -0.3])
TAB = np.cos(np.arange(10.0))
XS_LONG = np.random.default_rng(1).uniform(0.0, 1.0, 10_000)


def _pattern(rows):
    """The boolean N × N matrix with row i true in the columns rows[i]."""
    out = np.zeros((N, N), dtype=bool)
    for i, columns in enumerate(rows):
        out[i, list(columns)] = True
    return out


def _eps(x):
    return jnp.finfo(x.dtype).eps


def _kepler(mean_anomaly, e):
    """E - e sin E = M by Newton's method from E = M, to a tolerance."""

    def cond(c):
        return jnp.abs(c[1]) > 100 * _eps(c[1])

    def body(c):
        E = c[0]
        dE = (E - e * jnp.sin(E) - mean_anomaly) / (1 - e * jnp.cos(E))
        return E - dE, dE

    return lax.while_loop(cond, body, (mean_anomaly, jnp.ones_like(mean_anomaly)))[0]


def _cubic_root(v):
    """x^3 + x = v: bisection on a constant bracket, then two Newton steps."""

    def cond(c):
        lo, hi, i = c
        return (hi - lo > 1e3 * _eps(lo)) & (i < 200)

    def body(c):
        lo, hi, i = c
        mid = 0.5 * (lo + hi)
        above = mid**3 + mid - v > 0
        return jnp.where(above, lo, mid), jnp.where(above, mid, hi), i + 1

    lo, hi, _ = lax.while_loop(cond, body, (-10.0 * jnp.ones_like(v), 10.0 * jnp.ones_like(v), 0))
    x = 0.5 * (lo + hi)
    for _ in range(2):
        x = x - (x**3 + x - v) / (3 * x**2 + 1)
    return x


def _halvings(x):
    """x halved until |x| < 1, plus the count: an integer carry beside a float one."""
    x, n = lax.while_loop(lambda c: jnp.abs(c[0]) >= 1, lambda c: (c[0] / 2, c[1] + 1), (x, 0))
    return x + n


def _roots(y, t, p):
    n = 3 + (2 * p[0]).astype(jnp.int32)  # a trip count from a parameter

    def step(i, c):
        u, v = c
        return 0.5 * u + 0.1 * jnp.sin(u) + 0.01 * i, 0.9 * v + 0.1 * u

    u, v = lax.fori_loop(0, n, step, (y[4], y[5]))

    # An integer carry computed from a float, indexing a table: the read depends on y[0].
    def walk(c):
        x, k = c
        x = x + 0.5 + 0.1 * jnp.asarray(TAB, y.dtype)[k]
        return x, jnp.clip(x.astype(jnp.int32), 0, 9)

    x, k = lax.while_loop(lambda c: c[0] < 4.0, walk, (y[0] ** 2, 0))
    return jnp.stack([
        _kepler(y[0] + t, 0.3 + 0.2 * jnp.tanh(y[1])),
        _halvings(37.0 * y[2]),
        _cubic_root(y[3]),
        u,
        v,
        x + jnp.asarray(TAB, y.dtype)[k],
    ])


ROOTS_PATTERN = _pattern([{0, 1}, {2}, {3}, {4}, {4, 5}, {0}])


def _long(y, t, p):
    # 10 000 Euler steps over a constant table: a for loop reading a static table.
    c, _ = lax.scan(lambda c, x: (c + 1e-4 * (-c * x + jnp.sin(t)), None), y[0],
                    jnp.asarray(XS_LONG, y.dtype))

    # An array carry over 500 constant iterations, reading a table at the counter.
    def mix(i, a):
        return 0.99 * a + 0.01 * jnp.asarray(TAB, y.dtype)[i % 10] * jnp.roll(a, 1)

    a = lax.fori_loop(0, 500, mix, y[1:4])

    # A reverse scan over symbolic xs (y repeated), with integer ys computed from floats.
    def smooth(s, x):
        s = 0.99 * s + 0.01 * x
        return s, jnp.floor(10 * s).astype(jnp.int32)

    s, ks = lax.scan(smooth, y[4], jnp.tile(y[:4], 100), reverse=True)

    # A traced but constant bound: a while loop whose condition is constant, too long to unroll.
    def decay(i, r):
        return 0.999 * r + 1e-3 * jnp.sin(y[5] + 1e-3 * i)

    r = lax.fori_loop(0, jnp.int32(700), decay, y[5])
    return jnp.stack([c, a[0], a[1] + a[2], s + ks[0] + ks[7], y[5] * s, r + jnp.sum(a)])


LONG_PATTERN = _pattern([{0}, {1, 2, 3}, {1, 2, 3}, {0, 1, 2, 3, 4}, {0, 1, 2, 3, 4, 5},
                         {1, 2, 3, 5}])


def _newton_sqrt(v):
    """sqrt(v) by Newton's method. No cap on the iterations: for v < 0 it never ends, so in a
    cond's branch it must run only when that branch is taken, as in JAX."""

    def cond(c):
        x, x_old = c
        return jnp.abs(x - x_old) > 100 * _eps(x) * x

    return lax.while_loop(cond, lambda c: (0.5 * (c[0] + v / c[0]), c[0]), (v, 2 * v + 1))[0]


def _nested(y, t, p):
    # while in while: a sum of Newton square roots over a trip count from the state.
    def outer(c):
        i, s = c
        return i + 1, s + _newton_sqrt(y[1] ** 2 + 1.0 + i)

    _, s = lax.while_loop(lambda c: c[0] < 2 + jnp.abs(y[0]).astype(jnp.int32), outer, (0, 0.0))
    in_cond = lax.cond(y[2] > 0, _newton_sqrt, lambda v: -2.0 * v, y[2])

    # a cond in a while loop
    def grow(c):
        return lax.cond(c > 3.0, lambda u: 1.5 * u, lambda u: u + 1.0 + 0.1 * y[0] ** 2, c)

    grown = lax.while_loop(lambda c: c < 10.0, grow, 0.1 * y[3])

    # a long scan inside a while loop
    def relax(c):
        k, x = c
        x, _ = lax.scan(lambda x, w: (x + 1e-3 * w * (jnp.cos(x) - x), None), x,
                        jnp.asarray(XS_LONG[:300], y.dtype))
        return k + 1, x

    _, relaxed = lax.while_loop(lambda c: (c[0] < 3) & (c[1] < 10.0), relax, (0, y[4]))

    # an array carry read at a carry index (a local array declared inside the loop's body)
    def pick(c):
        i, v = c
        return i + 1, 0.5 * v + 0.1 * v[i % 3]

    _, picked = lax.while_loop(lambda c: c[0] < 2 + (y[5] > 0), pick, (0, jnp.stack([y[5], t, t])))
    return jnp.stack([s, in_cond, grown, relaxed, picked.sum(), s * y[5]])


NESTED_PATTERN = _pattern([{1}, {2}, {0, 3}, {4}, {5}, {1, 5}])

MODELS = {"roots": (_roots, ROOTS_PATTERN), "long": (_long, LONG_PATTERN),
          "nested": (_nested, NESTED_PATTERN)}


def _points(dtype, count=6):
    rng = np.random.default_rng(7)
    for k in range(count):
        y = rng.uniform(-2.0, 2.0, N)
        if k == 0:
            y[2] = 0.0  # no halvings at all
        yield y.astype(dtype), dtype(rng.uniform(-1.0, 1.0)), P.astype(dtype)


def test_loops_are_loops_not_unrolled():
    for name, (f, _) in MODELS.items():
        source = generate_model(f, N, NP, np.float64).source
        assert "for (bool grew" in source, name
        assert ("for (int64_t i" in source) == (name != "roots"), name
        assert len(source.splitlines()) < 400, name
        # the branch holding a loop that would not end for y[2] <= 0 runs only when taken
        assert ("if (shoal::math::ControlFlow<T>::test(" in source) == (name == "nested"), name


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name", MODELS)
def test_loops_match_jax(name, dtype):
    f = MODELS[name][0]
    model, reference = CompiledModel(f, N, NP, dtype), jax.jit(f)
    rtol = 1e-13 if dtype == np.float64 else 1e-6
    for y, t, p in _points(dtype):
        got = model(y, t, p).astype(np.float64)
        want = np.asarray(reference(y, t, p)).astype(np.float64)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol, err_msg=f"at y={y}, t={t}")


# -- derivatives and structure: dual numbers, nested duals, the sparsity tracer --------------

_HARNESS = """
#include "shoal/ad/dual.hpp"
#include "shoal/ad/sparsity_tracer.hpp"
#define SHOAL_TEST_EXPORT extern "C" __attribute__((visibility("default"), used))
SHOAL_TEST_EXPORT const char shoal_cache_key[] = SHOAL_CACHE_KEY;
using M = shoal_generated::Model;
using D = shoal::ad::Dual<double, M::n_vars>;
// J[i * n + j] = d f_i / d y_j, one dual direction per state variable.
SHOAL_TEST_EXPORT void jacobian(const double* y, double t, const double* p, double* J) {
  D yd[M::n_vars], pd[M::n_params], dy[M::n_vars];
  for (int j = 0; j < M::n_vars; ++j) yd[j] = shoal::ad::variable<double, M::n_vars>(y[j], j);
  for (int j = 0; j < M::n_params; ++j) pd[j] = D(p[j]);
  M::rhs<D>(yd, D(t), pd, dy);
  for (int i = 0; i < M::n_vars; ++i)
    for (int j = 0; j < M::n_vars; ++j) J[i * M::n_vars + j] = dy[i].d[j];
}
SHOAL_TEST_EXPORT void pattern(unsigned char* out) {
  using Tr = shoal::ad::Tracer<1>;
  Tr y[M::n_vars], p[M::n_params], dy[M::n_vars];
  for (int j = 0; j < M::n_vars; ++j) y[j] = Tr::variable(j);
  M::rhs<Tr>(y, Tr(), p, dy);
  for (int i = 0; i < M::n_vars; ++i)
    for (int j = 0; j < M::n_vars; ++j) out[i * M::n_vars + j] = dy[i].depends_on(j);
}
// Instantiated only: the model must compile for nested and float duals too.
using DD = shoal::ad::Dual<shoal::ad::Dual<double, 1>, 2>;
using DF = shoal::ad::Dual<float, 3>;
template void M::rhs<DD>(const DD*, const DD&, const DD*, DD*);
template void M::rhs<DF>(const DF*, const DF&, const DF*, DF*);
"""


def _library(f, n, harness):
    lib = ctypes.CDLL(str(_jit.compile_library(
        generate_model(f, n, NP, np.float64).source + harness)))
    vector = np.ctypeslib.ndpointer(np.float64, flags="C")
    lib.jacobian.argtypes = [vector, ctypes.c_double, vector, vector]
    lib.pattern.argtypes = [np.ctypeslib.ndpointer(np.uint8, flags="C")]
    return lib


def _pattern_of(lib, n):
    out = np.zeros((n, n), np.uint8)
    lib.pattern(out)
    return out.astype(bool)


@functools.cache
def _derivatives(name):
    lib = _library(MODELS[name][0], N, _HARNESS)

    def jac(y, t, p):
        out = np.full((N, N), np.nan)
        lib.jacobian(np.ascontiguousarray(y, float), float(t), np.ascontiguousarray(p, float), out)
        return out

    return jac, _pattern_of(lib, N)


@pytest.mark.parametrize("name", MODELS)
def test_dual_jacobian_matches_jacfwd_and_pattern_is_exact(name):
    f, want_pattern = MODELS[name]
    jac, pattern = _derivatives(name)
    np.testing.assert_array_equal(pattern, want_pattern)
    jacfwd = jax.jit(jax.jacfwd(f))
    for y, t, p in _points(np.float64):
        want = np.asarray(jacfwd(y, t, p))
        np.testing.assert_allclose(jac(y, float(t), p), want, rtol=1e-12, atol=1e-12)
        assert not np.any((want != 0) & ~pattern)


def _rotating(y, t, p):
    # Each iteration rotates three carries; the trip count (1 or 2) comes from a parameter.
    def body(c):
        i, a, b, d = c
        return i + 1, b, d, a

    _, a, b, d = lax.while_loop(lambda c: c[0] < 1 + (p[0] > 0), body, (0, y[0], y[1], y[2]))
    return jnp.stack([a, b, d, y[3]])


def test_pattern_covers_every_trip_count():
    got = _pattern_of(_library(_rotating, 4, _HARNESS.split("// Instantiated only")[0]), 4)
    # one trip count makes the carries one permutation of y[:3], another another: the pattern
    # holds every one (the carries' sets joined until they stop growing)
    want = np.zeros((4, 4), dtype=bool)
    want[:3, :3] = want[3, 3] = True
    np.testing.assert_array_equal(got, want)
    for p0 in (-1.0, 1.0):
        jac = jax.jacfwd(_rotating)(jnp.arange(4.0), 0.0, jnp.array([p0, 0.0]))
        assert not np.any((np.asarray(jac) != 0) & ~want)


# -- size: the source does not grow with a loop's length ------------------------------------------


def _scan_model(n):
    xs = np.random.default_rng(2).uniform(0.0, 1.0, n)

    def f(y, t, p):
        c, _ = lax.scan(lambda c, x: (c * (1 - 1e-3 * x) + 1e-3 * jnp.sin(y[1] * x), None),
                        y[0], jnp.asarray(xs, y.dtype))
        return jnp.stack([c, y[1], y[2], y[3], y[4], y[5]])

    return f


def test_source_does_not_grow_with_the_scan_length():
    def split(source):
        lines = source.splitlines()
        tables = "\n".join(line for line in lines if line.startswith("#define SHOAL_"))
        return tables, "\n".join(line for line in lines if not line.startswith("#define SHOAL_"))

    small_tables, small = split(generate_model(_scan_model(10), N, NP, np.float64).source)
    mid_tables, mid = split(generate_model(_scan_model(2_000), N, NP, np.float64).source)
    large_tables, large = split(generate_model(_scan_model(10_000), N, NP, np.float64).source)
    # 10 steps are unrolled; longer scans are one loop whose code changes only in its bound
    assert "for (" not in small and "for (" in large
    assert re.sub(r"\d+", "0", mid) == re.sub(r"\d+", "0", large)
    assert len(large) <= len(small), (len(small), len(large))
    assert len(large_tables) > 10_000 * 5  # xs is in a static table
    # and 20 steps of this body (under 10 statements) are still unrolled
    assert 20 * 10 <= MAX_UNROLLED_STATEMENTS
    assert "for (" not in split(generate_model(_scan_model(20), N, NP, np.float64).source)[1]


# -- a solve of a model with a state-dependent while loop -----------------------------------------


def _orbit(y, t, p):
    # a pendulum-like orbit whose force is evaluated at the eccentric anomaly of y[0]
    E = _kepler(y[0], p[0])
    return jnp.stack([y[1], -jnp.sin(E) - 0.1 * y[1]])


def _orbit_numpy(t, y, e):
    E = y[0]
    for _ in range(100):
        dE = (E - e * np.sin(E) - y[0]) / (1 - e * np.cos(E))
        E -= dE
        if abs(dE) < 1e-15:
            break
    return [y[1], -np.sin(E) - 0.1 * y[1]]


ORBIT_Y0, ORBIT_T = np.array([1.0, 0.5]), np.linspace(0.0, 4.0, 5)


@pytest.mark.parametrize("method, sparsity", [("tsit5", None), ("rodas5p", None),
                                              ("rodas5p", "auto")])
def test_solve_with_a_newton_loop_matches_scipy(method, sparsity):
    es = np.array([0.1, 0.5, 0.8])
    y0, ts = ORBIT_Y0, ORBIT_T
    ys = np.asarray(solve(_orbit, y0, ts, es[:, None], method=method, sparsity=sparsity,
                          rtol=1e-10, atol=1e-12))
    for i, e in enumerate(es):
        ref = scipy.integrate.solve_ivp(_orbit_numpy, (0.0, 4.0), y0, t_eval=ts, args=(e,),
                                        rtol=1e-12, atol=1e-14, method="DOP853")
        np.testing.assert_allclose(ys[i], ref.y.T, rtol=1e-8, atol=1e-9)


def test_gradient_through_a_newton_loop_matches_finite_differences():
    def final(e):
        ys = solve(_orbit, ORBIT_Y0, ORBIT_T, jnp.stack([e]), rtol=1e-11, atol=1e-13)
        return ys[0, -1, 0]

    h = 1e-4
    fd = (float(final(0.5 + h)) - float(final(0.5 - h))) / (2 * h)
    np.testing.assert_allclose(float(jax.grad(final)(0.5)), fd, rtol=1e-6)
