"""The adjoint's products as model functions (shoal/ode/_codegen/vjp.py): ``vjp`` (wᵀ f_y, wᵀ f_p)
and ``jvp_vjp`` (∂/∂(y, p) of wᵀ (f_y v + f_t τ)), compiled and evaluated against JAX's own, and
the source of a table's vjp bounded whatever the table's length (a gather's transpose writes a
local array at the run-time index: scatters.py)."""

import ctypes
import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shoal import _jit
from shoal.ode._codegen import ModelFunction, generate

jax.config.update("jax_enable_x64", True)

_HARNESS = """
#define SHOAL_TEST_EXPORT extern "C" __attribute__((visibility("default"), used))
SHOAL_TEST_EXPORT const char shoal_cache_key[] = SHOAL_CACHE_KEY;
SHOAL_TEST_EXPORT void first(const double* y, double t, const double* q, double* out) {
  shoal_generated::Model::vjp<double>(y, t, q, out);
}
SHOAL_TEST_EXPORT void second(const double* y, double t, const double* q, double* out) {
  shoal_generated::Model::jvp_vjp<double>(y, t, q, out);
}
"""


@functools.cache
def _compiled(f, n, n_params):
    model, _ = generate(f, n, n_params, np.float64,
                        (ModelFunction("vjp", f), ModelFunction("jvp_vjp", f)))
    lib = ctypes.CDLL(str(_jit.compile_library(model.source + _HARNESS)))
    ptr = ctypes.POINTER(ctypes.c_double)
    for fn in (lib.first, lib.second):
        fn.argtypes = [ptr, ctypes.c_double, ptr, ptr]
        fn.restype = None
    return model, lib


def _call(fn, y, t, q, n, size, times=1):
    """The function's out after ``times`` calls: ȳ written over NaN, p̄ added to zeros."""
    ptr = ctypes.POINTER(ctypes.c_double)
    out = np.concatenate([np.full(n, np.nan), np.zeros(size - n)])
    y, q = np.ascontiguousarray(y, float), np.ascontiguousarray(q, float)
    for _ in range(times):
        fn(y.ctypes.data_as(ptr), t, q.ctypes.data_as(ptr), out.ctypes.data_as(ptr))
    return out


GRID = jnp.linspace(0.0, 4.0, 2000)
CASES = {
    "lorenz": (lambda y, t, p: jnp.array([p[0] * (y[1] - y[0]), y[0] * (p[1] - y[2]) - y[1],
                                          y[0] * y[1] - p[2] * y[2]]), 3, 3),
    "functions": (lambda y, t, p: -p[0] * jnp.exp(-p[1] * y) * y ** p[2]
                  + jnp.sin(t * y) * jnp.tanh(y), 4, 3),
    "table of 2000 in p": (lambda y, t, p: jnp.array([-jnp.interp(t, GRID, p[:2000]) * y[0]
                                                      + p[2000] * y[1], y[0] - y[1] * t]),
                           2, 2001),
    "network": (lambda y, t, p: p[48:80].reshape(2, 16) @ jnp.tanh(
        p[:32].reshape(16, 2) @ y + p[32:48]), 2, 80),
    # Two hidden layers of 32, the middle one as h @ W (the weight on the right): its cotangent
    # is an outer product of two loop results, written by one loop nest (contractions._dot_block).
    "deep network": (lambda y, t, p: p[1120:1184].reshape(2, 32) @ jnp.tanh(
        jnp.tanh(p[:64].reshape(32, 2) @ y) @ p[64:1088].reshape(32, 32) / 8.0
        + p[1088:1120]), 2, 1184),
    # The same with the middle weight on the left (W @ h, as neural networks write it): its
    # cotangent's outer product is added to p-bar where it is made
    # (contractions.fuse_outer_products).
    "deep network, weights on the left": (lambda y, t, p: p[1120:1184].reshape(2, 32) @ jnp.tanh(
        p[64:1088].reshape(32, 32) @ jnp.tanh(p[:64].reshape(32, 2) @ y) / 8.0
        + p[1088:1120]), 2, 1184),
    # One 16 x 16 weight applied twice: its cotangent is the sum of two outer products, which
    # are not added to p-bar where they are made (contractions.fuse_outer_products).
    # (Scaled, as above, so that tanh does not saturate.)
    "a layer applied twice": (lambda y, t, p: p[256:288].reshape(2, 16) @ jnp.tanh(
        p[:256].reshape(16, 16) @ jnp.tanh(p[:256].reshape(16, 16) @ jnp.tanh(
            p[288:320].reshape(16, 2) @ y) / 16.0) / 16.0), 2, 320),
    # Table reads whose cotangents move before they are summed (scattered.py): an offset slice,
    # a reversed table (a table of destinations), a 2-D table read at two computed indices.
    "reads through movements": (lambda y, t, p: jnp.array([
        jnp.interp(t, GRID[:100], p[7:107]) * y[0] + p[::-1][jnp.clip(
            jnp.floor(y[1] * 20).astype(int), 0, 106)],
        p[107:207].reshape(10, 10)[jnp.clip(jnp.floor(t * 3).astype(int), 0, 9),
                                   jnp.clip(jnp.floor(y[0] * 5).astype(int), -3, 12)] * y[1]]),
        2, 207),
    # An entry overwritten at a computed index, then one read at another: the write's transpose
    # zeros the read's scattered cotangent at the first index (applied in order).
    "a write, then a read": (lambda y, t, p: jnp.array([
        p[:64].at[jnp.clip(jnp.floor(t * 10).astype(int), 0, 63)].set(y[0] * p[64])[
            jnp.clip(jnp.floor(y[1] * 20).astype(int), 0, 63)] * y[1], y[0] * t]), 2, 65),
    # Cotangents that other operations take in full (materialised): a cumulative sum of the
    # table, and reads inside a loop.
    "reads through a cumsum and a loop": (lambda y, t, p: jnp.array([
        jnp.cumsum(p[:64])[jnp.clip(jnp.floor(t * 10).astype(int), 0, 63)] * y[0],
        jax.lax.fori_loop(0, 3, lambda k, acc: acc + p[jnp.clip(
            jnp.floor(y[0] * 9).astype(int) + k, 0, 63)], 0.0) * y[1]]), 2, 64),
}


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("t", [-1.0, 0.3, 1.2345, 9.0])  # the table's both sides and outside
def test_products_match_jax(name, t):
    f, n, n_params = CASES[name]
    _, lib = _compiled(f, n, n_params)
    rng = np.random.default_rng(0)
    y, p = rng.uniform(0.5, 1.5, n), rng.uniform(0.5, 1.5, n_params)
    v, w, tau = rng.normal(size=n), rng.normal(size=n), 0.7
    _, pull = jax.vjp(lambda y, p: f(y, t, p), jnp.array(y), jnp.array(p))
    want = np.concatenate([np.asarray(x) for x in pull(jnp.array(w))])
    # Called twice: ȳ is written, p̄ added to what out held.
    got = _call(lib.first, y, t, np.concatenate([p, w]), n, n + n_params, times=2)
    want[n:] *= 2
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13 * np.max(np.abs(want)))

    def directional(y, p):
        return jax.jvp(lambda y, s: f(y, s, p), (y, jnp.array(t)),
                       (jnp.array(v), jnp.array(tau)))[1]

    _, pull = jax.vjp(directional, jnp.array(y), jnp.array(p))
    want = np.concatenate([np.asarray(x) for x in pull(jnp.array(w))])
    got = _call(lib.second, y, t, np.concatenate([p, v, [tau], w]), n, n + n_params)
    # ȳ sums about a thousand second-order terms: JAX's own value moves by 1.4e-12 max|want| with
    # the order XLA sums them in (its pipeline at backend level 0 without fusion emitters against
    # its default, measured on the deep network at t = 9), so the bound leaves it that room.
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-11 * np.max(np.abs(want)))


def test_a_weights_cotangent_is_one_loop_nest():
    f, n, n_params = CASES["deep network"]
    model, _ = generate(f, n, n_params, np.float64, (ModelFunction("vjp", f),))
    body = model.source[model.source.index("static void vjp"):]
    assert body.count("for (int j = 0; j < 32; ++j)") == 1, body
    # With the weight on the left the nest adds each product to p-bar where it makes it,
    # without a local of 32 x 32 (contractions.fuse_outer_products; test_products_match_jax
    # checks the values); a weight applied twice sums two products first, in locals.
    fused = {"deep network, weights on the left": True, "a layer applied twice": False}
    for name, expected in fused.items():
        f, n, n_params = CASES[name]
        model, _ = generate(f, n, n_params, np.float64, (ModelFunction("vjp", f),))
        body = model.source[model.source.index("static void vjp"):]
        assert ("j] += " in body) == expected, body
        assert bool(re.search(r"T local\w+\[(1024|320)\];", body)) != expected, body


def test_a_tables_vjp_does_not_grow_with_the_table():
    """Neither its source nor its work: no loop over the table (its cotangent is a few
    additions at the computed indices: scattered.py)."""
    sizes = {}
    for length in (200, 2000):
        grid = jnp.linspace(0.0, 1.0, length)

        def f(y, t, p, grid=grid, length=length):
            return -jnp.interp(t, grid, p[:length]) * y

        model, _ = generate(f, 1, length, np.float64, (ModelFunction("vjp", f),))
        body = model.source[model.source.index("static void vjp"):]
        sizes[length] = body.count("\n")
        assert "for (" not in body, body
    assert sizes[2000] == sizes[200] < 150, sizes
