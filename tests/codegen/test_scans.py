"""Cumulative scans, argmax/argmin and sort in f: the generated C++ against JAX itself.

Values at 1e-13 (float64) and 1e-6 (float32) including ties, NaN and signed zeros; the
dual-number Jacobian against ``jax.jacfwd``; the sparsity tracer's pattern against the structure;
one Rodas5P solve against a closed form.
"""

from __future__ import annotations

import ctypes
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from jax import lax
from test_codegen import assert_matches

from shoal import _jit
from shoal.ode import solve
from shoal.ode._codegen import generate_model
from shoal.ode._model import detect_pattern

N, NP = 6, 2
Y = np.array([0.5, -1.0, 2.0, 0.5, -9.0, 1.5])
TIES = np.array([1.0, 3.0, 3.0, -2.0, 1.0, -2.0])
SPECIAL = np.array([0.0, -0.0, np.nan, -np.inf, 2.0, -0.0])
P = np.array([0.25, -1.5])

MODELS = {
    "cumsum": lambda y, t, p: jnp.cumsum(y) * t,
    "cumsum_reverse": lambda y, t, p: lax.cumsum(y, reverse=True) + p[0],
    "cumprod": lambda y, t, p: jnp.cumprod(y * p[0]),
    "cummax": lambda y, t, p: lax.cummax(y),
    "cummin_reverse": lambda y, t, p: lax.cummin(y, reverse=True),
    "cumsum_2d_axis0": lambda y, t, p: jnp.cumsum(y.reshape(2, 3), axis=0).reshape(N),
    "cumprod_2d_axis1": lambda y, t, p: jnp.cumprod(y.reshape(2, 3), axis=1).reshape(N),
    "cumsum_int": lambda y, t, p: jnp.cumsum(jnp.floor(y).astype(jnp.int32)).astype(y.dtype),
    "argmax": lambda y, t, p: y * jnp.argmax(y),
    "argmin": lambda y, t, p: y + jnp.argmin(y),
    "argmax_rows": lambda y, t, p: jnp.tile(jnp.argmax(y.reshape(2, 3), axis=1), 3) * y,
    "argmin_int": lambda y, t, p: y - jnp.argmin(jnp.round(y).astype(jnp.int32)),
    "sort": lambda y, t, p: jnp.sort(y) * t,
    "sort_descending": lambda y, t, p: -jnp.sort(-y),
    "argsort": lambda y, t, p: jnp.argsort(y).astype(y.dtype) + y,
    "sort_rows": lambda y, t, p: jnp.sort(y.reshape(3, 2), axis=0).reshape(N),
    "sort_two_keys": lambda y, t, p: lax.sort(
        (jnp.floor(y), y, jnp.arange(N, dtype=y.dtype)), num_keys=2)[2] * y,
    "median": lambda y, t, p: y - jnp.median(y),
    "sort_int": lambda y, t, p: jnp.sort(jnp.round(y * 2).astype(jnp.int32)).astype(y.dtype),
}


# NaN and infinities converted to integers are out of C++'s (and XLA's) defined range, so the
# integer models take finite inputs only.
CASES = [(name, y) for name in MODELS
         for y in (("plain", Y), ("ties", TIES), ("nan_inf_zeros", SPECIAL))
         if not (name.endswith("_int") and y[0] == "nan_inf_zeros")]


@pytest.mark.parametrize("name, y", CASES, ids=[f"{n}-{y[0]}" for n, y in CASES])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_matches_jax(name, y, dtype):
    rtol = 1e-13 if dtype == np.float64 else 1e-6
    assert_matches(MODELS[name], N, NP, dtype, y[1], 0.75, P, rtol=rtol, floor=1.0)


def test_argsort_keeps_signed_zeros_and_nans_in_input_order_like_jax():
    f = MODELS["argsort"]
    for y in (SPECIAL, SPECIAL[::-1].copy(), np.array([0.0, -0.0, 0.0, -0.0, np.nan, -np.nan])):
        assert_matches(f, N, NP, np.float64, y, 0.0, P, rtol=1e-13)


def test_sorting_too_many_elements_names_the_limit():
    with pytest.raises(NotImplementedError, match="at most 64 elements"):
        generate_model(lambda y, t, p: jnp.sort(jnp.tile(y, 11))[:N], N, NP, np.float64)


# -- derivatives: the dual-number Jacobian that Rodas5P uses ---------------------------------

_JACOBIAN_HARNESS = """
#include "shoal/ad/jacobian.hpp"
#define SHOAL_TEST_EXPORT extern "C" __attribute__((visibility("default"), used))
SHOAL_TEST_EXPORT const char shoal_cache_key[] = SHOAL_CACHE_KEY;
SHOAL_TEST_EXPORT void jacobian(const double* y, double t, const double* p, double* jac) {
  using M = shoal_generated::Model;
  double f[M::n_vars], ft[M::n_vars];
  shoal::ad::rhs_and_jacobian<M, double, double>(y, t, p, f, jac, ft);
}
"""


@functools.cache
def _jacobian_fn(name):
    model = generate_model(MODELS[name], N, NP, np.float64)
    lib = ctypes.CDLL(str(_jit.compile_library(model.source + _JACOBIAN_HARNESS)))
    ptr = ctypes.POINTER(ctypes.c_double)
    lib.jacobian.argtypes = [ptr, ctypes.c_double, ptr, ptr]

    def jac(y, t, p):
        out = np.full((N, N), np.nan)
        y, p = np.ascontiguousarray(y, float), np.ascontiguousarray(p, float)
        lib.jacobian(y.ctypes.data_as(ptr), t, p.ctypes.data_as(ptr), out.ctypes.data_as(ptr))
        return out

    return jac


DIFFERENTIABLE = ["cumsum", "cumsum_reverse", "cumprod", "cummax", "cummin_reverse",
                  "cumprod_2d_axis1", "argmax", "sort", "sort_descending", "sort_rows",
                  "sort_two_keys", "median"]


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_dual_jacobian_matches_jacfwd(name):
    y = np.array([0.5, -1.0, 2.0, 0.75, -9.0, 1.5])  # no ties: the derivative is defined
    want = np.asarray(jax.jacfwd(MODELS[name])(jnp.asarray(y), 0.75, jnp.asarray(P)))
    np.testing.assert_allclose(_jacobian_fn(name)(y, 0.75, P), want, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_sparsity_pattern_covers_the_jacobian(name):
    pattern = detect_pattern(MODELS[name], N, NP, np.float64)
    for seed in range(3):
        y = np.random.default_rng(seed).standard_normal(N) * 3
        jac = np.asarray(jax.jacfwd(MODELS[name])(jnp.asarray(y), 0.75, jnp.asarray(P)))
        assert not np.any((jac != 0) & ~pattern), name


def test_cumsum_pattern_is_exactly_lower_triangular():
    got = detect_pattern(MODELS["cumsum"], N, NP, np.float64)
    np.testing.assert_array_equal(got, np.tril(np.ones((N, N), bool)))


def test_rodas5p_solve_of_a_cumulative_model_matches_the_matrix_exponential():
    # y' = -k cumsum(y) = -k L y with L the lower-triangular matrix of ones.
    k = np.array([0.3, 0.7, 1.1])[:, None]
    y0 = np.linspace(1.0, 2.0, N)
    ts = np.linspace(0.0, 2.0, 5)
    ys = solve(lambda y, t, p: -p[0] * jnp.cumsum(y), y0, ts, k, rtol=1e-10, atol=1e-12)
    lower = np.tril(np.ones((N, N)))
    for i, ki in enumerate(k[:, 0]):
        want = np.stack([scipy.linalg.expm(-ki * lower * t) @ y0 for t in ts])
        np.testing.assert_allclose(np.asarray(ys[i]), want, rtol=2e-8, atol=1e-10)
