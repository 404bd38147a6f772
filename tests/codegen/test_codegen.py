"""The code generator against JAX itself.

Every model here is printed by ``shoal.ode._codegen``, compiled through the host JIT cache
together with a tiny ``extern "C"`` entry point, loaded with ctypes and evaluated once; the
result must equal ``f`` evaluated by JAX (eagerly). Three parts:

- one deterministic case per supported primitive (and per call-like, loop and branch construct),
  in float64 to 1e-13 and float32 to 1e-6, relative;
- a hypothesis differential test over random programs built from those primitives (float64,
  1e-13 relative to max(|value|, 1); see the comment above ``OPS`` for how programs stay exact
  where it matters);
- the errors: unsupported primitives, state-dependent indices, wrong output shape or dtype.

Each model is a separate C++ compile (~0.3-1 s), cached on disk like every shoal model.
"""

from __future__ import annotations

import ctypes
import functools
import operator
import re

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jax import lax

from shoal import _jit
from shoal.ode import _codegen
from shoal.ode._codegen import DOT_TABLE_THRESHOLD, ModelTraceError, generate, generate_model
from shoal.ode._model import detect_pattern


@pytest.fixture(autouse=True, scope="module")
def _x64():
    # conftest.py turns x64 on for the session; this keeps the module right when run alone.
    with jax.enable_x64(True):
        yield


# -- harness -------------------------------------------------------------------------------------

# The model is instantiated for double and float whatever dtype it was traced in, so every
# library also checks that the source compiles for both scalar types.
_HARNESS = """
#define SHOAL_TEST_EXPORT extern "C" __attribute__((visibility("default"), used))
SHOAL_TEST_EXPORT const char shoal_cache_key[] = SHOAL_CACHE_KEY;
SHOAL_TEST_EXPORT void eval(const double* y, double t, const double* p, double* dy) {
  shoal_generated::Model::rhs<double>(y, t, p, dy);
}
SHOAL_TEST_EXPORT void eval_f32(const float* y, float t, const float* p, float* dy) {
  shoal_generated::Model::rhs<float>(y, t, p, dy);
}
"""


@functools.cache
def _load(source: str) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(_jit.compile_library(source + _HARNESS)))
    for name, ctype in (("eval", ctypes.c_double), ("eval_f32", ctypes.c_float)):
        fn = getattr(lib, name)
        ptr = ctypes.POINTER(ctype)
        fn.argtypes = [ptr, ctype, ptr, ptr]
        fn.restype = None
    return lib


class CompiledModel:
    """``f`` printed by the code generator, compiled, and callable on NumPy inputs."""

    def __init__(self, f, n_vars: int, n_params: int, dtype):
        self.dtype = np.dtype(dtype)
        self.model = generate_model(f, n_vars, n_params, self.dtype)
        self.lib = _load(self.model.source)

    def __call__(self, y, t, p) -> np.ndarray:
        m = self.model
        ctype = ctypes.c_double if self.dtype == np.float64 else ctypes.c_float
        fn = self.lib.eval if self.dtype == np.float64 else self.lib.eval_f32
        y = np.ascontiguousarray(y, dtype=self.dtype).reshape(m.n_vars)
        p = np.ascontiguousarray(p, dtype=self.dtype).reshape(m.n_params)
        dy = np.full(m.n_vars, np.nan, dtype=self.dtype)
        ptr = ctypes.POINTER(ctype)
        # A zero-length p still needs a valid pointer.
        p_buf = p if p.size else np.zeros(1, dtype=self.dtype)
        fn(y.ctypes.data_as(ptr), ctype(t), p_buf.ctypes.data_as(ptr), dy.ctypes.data_as(ptr))
        return dy


def jax_eval(f, y, t, p, dtype) -> np.ndarray:
    """``f`` evaluated by JAX (eagerly), with the tuple-of-scalars convention of the solver."""
    out = f(jnp.asarray(y, dtype), jnp.asarray(t, dtype), jnp.asarray(p, dtype))
    if isinstance(out, (tuple, list)):
        out = jnp.stack([jnp.asarray(o) for o in out])
    return np.asarray(out)


# The dual-number Jacobian (Rodas5P's scalar type); the model must also compile for nested duals
# (sensitivities) and float duals, which are instantiated only.
_DUAL_HARNESS = """
#include "shoal/ad/dual.hpp"
#define SHOAL_TEST_EXPORT extern "C" __attribute__((visibility("default"), used))
SHOAL_TEST_EXPORT const char shoal_cache_key[] = SHOAL_CACHE_KEY;
using D = shoal::ad::Dual<double, N_VARS>;
// J[i * n + j] = d f_i / d y_j, one dual direction per state variable.
SHOAL_TEST_EXPORT void jacobian(const double* y, double t, const double* p, double* J) {
  D yd[N_VARS], pd[N_PARAMS + 1], dy[N_VARS];
  for (int j = 0; j < N_VARS; ++j) yd[j] = shoal::ad::variable<double, N_VARS>(y[j], j);
  for (int j = 0; j < N_PARAMS; ++j) pd[j] = D(p[j]);
  shoal_generated::Model::rhs<D>(yd, D(t), pd, dy);
  for (int i = 0; i < N_VARS; ++i)
    for (int j = 0; j < N_VARS; ++j) J[i * N_VARS + j] = dy[i].d[j];
}
template void shoal_generated::Model::rhs<shoal::ad::Dual<shoal::ad::Dual<double, 1>, 2>>(
    const shoal::ad::Dual<shoal::ad::Dual<double, 1>, 2>*,
    const shoal::ad::Dual<shoal::ad::Dual<double, 1>, 2>&,
    const shoal::ad::Dual<shoal::ad::Dual<double, 1>, 2>*,
    shoal::ad::Dual<shoal::ad::Dual<double, 1>, 2>*);
template void shoal_generated::Model::rhs<shoal::ad::Dual<float, 3>>(
    const shoal::ad::Dual<float, 3>*, const shoal::ad::Dual<float, 3>&,
    const shoal::ad::Dual<float, 3>*, shoal::ad::Dual<float, 3>*);
"""


@functools.cache
def dual_jacobian(f, n_vars: int, n_params: int):
    """``jac(y, t, p) -> (n_vars, n_vars)``: f's generated C++ differentiated by dual numbers."""
    source = generate_model(f, n_vars, n_params, np.float64).source
    harness = _DUAL_HARNESS.replace("N_VARS", str(n_vars)).replace("N_PARAMS", str(n_params))
    lib = ctypes.CDLL(str(_jit.compile_library(source + harness)))
    ptr = ctypes.POINTER(ctypes.c_double)
    lib.jacobian.argtypes = [ptr, ctypes.c_double, ptr, ptr]

    def jac(y, t, p):
        J = np.full(n_vars * n_vars, np.nan)
        y, p = np.ascontiguousarray(y, np.float64), np.ascontiguousarray(p, np.float64)
        p_buf = p if p.size else np.zeros(1)
        lib.jacobian(y.ctypes.data_as(ptr), t, p_buf.ctypes.data_as(ptr), J.ctypes.data_as(ptr))
        return J.reshape(n_vars, n_vars)

    return jac


def assert_close(got, want, *, rtol, floor=0.0, where=""):
    """got == want to ``rtol`` relative to ``max(|want|, floor)``, NaN where want has NaN."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = np.maximum(np.abs(want), floor)
    with np.errstate(invalid="ignore"):  # inf - inf; equal infinities pass through got == want
        err = np.abs(got - want)
    bad = ~((err <= rtol * scale) | (np.isnan(got) & np.isnan(want)) | (got == want))
    assert not bad.any(), (
        f"generated C++ differs from JAX at {np.flatnonzero(bad).tolist()} {where}\n"
        f"  C++: {got!r}\n  JAX: {want!r}\n  rel: {(err / np.where(scale > 0, scale, 1))!r}"
    )


def assert_matches_at(f, n_vars, n_params, dtype, points, *, floor=1.0):
    """The compiled model equals jitted JAX at every (y, t, p) of ``points``: 1e-13 relative in
    float64, 1e-6 in float32 (relative to ``max(|value|, floor)``)."""
    model, reference = CompiledModel(f, n_vars, n_params, dtype), jax.jit(f)
    rtol = 1e-13 if np.dtype(dtype) == np.float64 else 1e-6
    for y, t, p in points:
        want = jax_eval(reference, y, t, p, dtype)
        assert_close(model(y, t, p), want, rtol=rtol, floor=floor, where=f"at y={y} t={t} p={p}")


def jacobians_at(f, n_vars, n_params, points):
    """(dual-number Jacobian of the C++, jax.jacfwd of f, y, t, p) at each float64 point."""
    jac, jacfwd = dual_jacobian(f, n_vars, n_params), jax.jit(jax.jacfwd(f))
    for y, t, p in points:
        want = np.asarray(jacfwd(jnp.asarray(y), jnp.asarray(t), jnp.asarray(p)))
        yield jac(y, float(t), p), want, y, t, p


def assert_pattern_covers_jacobians(f, n_vars, n_params, points):
    """The sparsity tracer's pattern holds every nonzero of jax.jacfwd at every point."""
    pattern, jacfwd = detect_pattern(f, n_vars, n_params, np.float64), jax.jit(jax.jacfwd(f))
    for y, t, p in points:
        jac = np.asarray(jacfwd(jnp.asarray(y), jnp.asarray(t), jnp.asarray(p)))
        assert not np.any((jac != 0) & ~pattern), f"at y={y} t={t} p={p}"


def assert_compiles_for_the_device(model, sensitivities=True):
    """NVRTC compiles the model into Tsit5's and Rodas5P's kernels cleanly, Rodas5P's with
    sensitivities unless ``sensitivities=False`` (a model with many parameters)."""
    from shoal import _nvrtc
    from shoal.ode import _kernel_source
    from shoal.ode._kernel_source import Variant
    from shoal.ode._options import Method

    if not _nvrtc.available():
        pytest.skip("NVRTC not found")  # reported as skipped; tests/cuda/test_nvrtc.py says why
    rodas5p = Variant(Method.RODAS5P, sens=(False, True)) if sensitivities else Variant(
        Method.RODAS5P)
    for variant in (Variant(Method.TSIT5), rodas5p):
        source = _kernel_source.library_source(model, variant, "cuda")
        cubin, log = _nvrtc.compile_source(source.replace("SHOAL_CACHE_KEY", '"k"'), "sm_90")
        assert variant.entry.encode() in cubin
        assert "warning" not in log.lower(), log


def assert_matches(f, n_vars, n_params, dtype, y, t, p, *, rtol, floor=0.0):
    """C++ == JAX to ``rtol`` relative to ``max(|jax|, floor)``, NaN where JAX has NaN."""
    got = CompiledModel(f, n_vars, n_params, dtype)(y, t, p)
    want = jax_eval(f, y, t, p, dtype)
    assert got.dtype == want.dtype == np.dtype(dtype)
    assert_close(got, want, rtol=rtol, floor=floor)


def primitives_of(closed) -> set[str]:
    """Every primitive name in a jaxpr, sub-jaxprs (jit, custom_jvp, remat, ...) included."""
    names = set()

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            names.add(eqn.primitive.name)
            for value in eqn.params.values():
                for sub in value if isinstance(value, (tuple, list)) else (value,):
                    if hasattr(sub, "eqns"):
                        walk(sub)
                    elif hasattr(sub, "jaxpr") and hasattr(sub.jaxpr, "eqns"):
                        walk(sub.jaxpr)

    walk(closed.jaxpr)
    return names


# -- one case per primitive ----------------------------------------------------------------------

N, NP = 6, 3
# Half-integers for the rounding modes, a zero for sign, nothing at a pole of what is applied.
Y = np.array([0.3, -1.2, 2.5, -0.5, 1.5, 0.0])
T = 0.7
P = np.array([1.3, -0.4, 2.0])

_RNG = np.random.default_rng(20261129)
_M_SMALL = np.round(_RNG.uniform(-1, 1, (N, N)), 2) * (_RNG.uniform(size=(N, N)) < 0.7)
_K_BIG = max(DOT_TABLE_THRESHOLD // N + 4, 100)  # K*N multiply-adds: above the table threshold
_M_IN = _RNG.uniform(-1, 1, (_K_BIG, N)) / N
_M_OUT = _RNG.uniform(-1, 1, (N, _K_BIG)) / _K_BIG
_M_BATCH = _RNG.uniform(-1, 1, (2, _K_BIG, 3)) / 3
_M_OUT_NONFINITE = _M_OUT.copy()
_M_OUT_NONFINITE[1, 3], _M_OUT_NONFINITE[2, 5], _M_OUT_NONFINITE[4, :2] = np.inf, np.nan, -np.inf
_W = np.linspace(-1.0, 2.0, N)


@jax.custom_jvp
def _soft_abs(x):
    return jnp.sqrt(x * x + 0.25)


_soft_abs.defjvp(
    lambda primals, tangents: (
        _soft_abs(primals[0]),
        primals[0] / _soft_abs(primals[0]) * tangents[0],
    )
)


@jax.custom_vjp
def _scaled_sin(x, s):
    return jnp.sin(x) * s


_scaled_sin.defvjp(
    lambda x, s: (_scaled_sin(x, s), (x, s)),
    lambda res, g: (jnp.cos(res[0]) * res[1] * g, jnp.sum(jnp.sin(res[0]) * g)),
)


def _c(value, like):
    """A NumPy constant in the precision of the traced model (float64 would promote f32)."""
    return np.asarray(value).astype(like.dtype)


def _name_of(wrapped) -> str:
    """The call-like primitive a wrapper traces to (its name differs between JAX versions)."""
    return jax.make_jaxpr(wrapped)(1.0).eqns[0].primitive.name


def _cmp_case(op):
    return lambda y, t, p: jnp.where(op(y, 0.3), y, -t) + op(y, -0.5).astype(y.dtype)


def _select3(y, t, p):
    index = (y > 0).astype(jnp.int32) + (y > 1).astype(jnp.int32)
    return lax.select_n(index, y, -t * y, 2 * y)


def _integer_ops(y, t, p):
    i = (y * 4).astype(jnp.int32)
    j = lax.max(i, jnp.int32(-2)) * 3 - lax.min(i, jnp.int32(1)) + lax.rem(i, jnp.int32(3))
    return (j // 1 + lax.div(i, jnp.int32(2)) + lax.abs(-i)).astype(y.dtype) * y


def _gathers(y, t, p):
    a = y[jnp.array([2, 0, 1, 5, 4, 3])]
    b = y.reshape(2, 3)[:, np.array([2, 0, 1])].reshape(N)
    return a + b * y[3] + jnp.take(p, jnp.array([1, 1, 0, 2, 0, 1]))


def _gather_fill(y, t, p):
    idx = jnp.array([0, 9, 2])  # 9 is out of bounds
    i = (y * 4).astype(jnp.int32)
    return jnp.concatenate(
        [
            y.at[idx].get(mode="fill", fill_value=0.5),
            i.at[idx].get(mode="fill").astype(y.dtype) * 1e-9,
        ]
    )


def _nan_propagation(y, t, p):
    nan_at_0 = y / y  # y[5] == 0
    return (
        jnp.maximum(nan_at_0, 0.5)
        + jnp.minimum(0.5, nan_at_0)
        + jnp.sign(nan_at_0)
        + lax.clamp(_c(-1.0, y), nan_at_0, _c(1.0, y))
        + jnp.max(nan_at_0) * y
    )


_K = np.linspace(0.1, 0.6, N)


@jax.custom_jvp
def _scale_by_array(u):
    return u * jnp.asarray(_K, u.dtype)  # a closed-over jax array inside the custom rule


_scale_by_array.defjvp(
    lambda primals, tangents: (_scale_by_array(primals[0]), _scale_by_array(tangents[0]))
)


def _nested_calls(y, t, p):
    inner = jax.jit(lambda v: _scale_by_array(v) * 2 + _scaled_sin(v, p[1]))
    return jax.checkpoint(lambda u: inner(u) + _soft_abs(u))(y)


def _scans(y, t, p):
    def step(carry, x):
        return carry * 0.5 + x * t, carry * x

    carry, ys = lax.scan(step, y[0], y[1:4])  # xs in, ys out
    _, ys_rev = lax.scan(step, p[0], y[:2], reverse=True)
    looped = lax.fori_loop(0, 3, lambda i, c: jnp.sin(c) + i, y)  # Python-int bounds: a scan
    poly = jnp.polyval(_c([0.5, -1.0, 2.0], y), y)
    return looped + poly + carry + jnp.concatenate([ys, ys_rev, ys[:1]])


def _conds(y, t, p):
    a = lax.cond(y[0] > 0.5, lambda u: jnp.log(u), lambda u: u * t, y)  # log(<0) not taken
    b = lax.switch((y[1] * 2).astype(jnp.int32), [jnp.sin, lambda u: -u, lambda u: u * p[0]], y)
    c = lax.cond(t > 10.0, jnp.cos, jnp.sin, y)  # predicate depends on t only
    d = lax.cond(True, jnp.cos, jnp.sin, y)  # constant predicate
    return a + b + c + d


def _table_batched(y, t, p):
    m = _c(_M_BATCH, y)
    h = jnp.tanh(jnp.einsum("bkc,bc->bk", m, y.reshape(2, 3)))  # table, const lhs
    return jnp.einsum("bk,bkc->bc", h, m).reshape(N)  # table, const rhs


# name, f, primitives that must appear in the trace.
CASES = [
    ("add", lambda y, t, p: y + p[0], {"add"}),
    ("sub", lambda y, t, p: y - t, {"sub"}),
    ("mul", lambda y, t, p: y * p[1], {"mul"}),
    ("div", lambda y, t, p: y / p[0] + p[1] / (y + 3.0), {"div"}),
    ("neg", lambda y, t, p: -y, {"neg"}),
    ("max", lambda y, t, p: jnp.maximum(y, p[1]), {"max"}),
    ("min", lambda y, t, p: jnp.minimum(y, t), {"min"}),
    ("abs", lambda y, t, p: jnp.abs(y - t), {"abs"}),
    ("sign", lambda y, t, p: jnp.sign(y) + jnp.sign(-y), {"sign"}),
    ("exp", lambda y, t, p: jnp.exp(y), {"exp"}),
    ("exp2", lambda y, t, p: jnp.exp2(y), {"exp2"}),
    ("log", lambda y, t, p: jnp.log(jnp.abs(y) + 0.5), {"log"}),
    ("log1p", lambda y, t, p: jnp.log1p(jnp.abs(y)), {"log1p"}),
    ("expm1", lambda y, t, p: jnp.expm1(y), {"expm1"}),
    ("sqrt", lambda y, t, p: jnp.sqrt(jnp.abs(y)), {"sqrt"}),
    ("rsqrt", lambda y, t, p: lax.rsqrt(jnp.abs(y) + 0.1), {"rsqrt"}),
    ("cbrt", lambda y, t, p: jnp.cbrt(y), {"cbrt"}),
    ("pow", lambda y, t, p: jnp.power(jnp.abs(y) + 0.5, p[0]) + (y * y + 1.0) ** y, {"pow"}),
    ("integer_pow", lambda y, t, p: y**3 + (y + 3.0) ** -2 + y**2 * y**5, {"integer_pow"}),
    ("square", lambda y, t, p: jnp.square(y - t), {"square"}),
    ("sin", lambda y, t, p: jnp.sin(y), {"sin"}),
    ("cos", lambda y, t, p: jnp.cos(y), {"cos"}),
    ("tan", lambda y, t, p: jnp.tan(y), {"tan"}),
    ("asin", lambda y, t, p: jnp.arcsin(y / 3), {"asin"}),
    ("acos", lambda y, t, p: jnp.arccos(y / 3), {"acos"}),
    ("atan", lambda y, t, p: jnp.arctan(y), {"atan"}),
    ("atan2", lambda y, t, p: jnp.arctan2(y, p[1]) + jnp.arctan2(p[0], y), {"atan2"}),
    ("sinh", lambda y, t, p: jnp.sinh(y), {"sinh"}),
    ("cosh", lambda y, t, p: jnp.cosh(y), {"cosh"}),
    ("tanh", lambda y, t, p: jnp.tanh(y), {"tanh"}),
    ("asinh", lambda y, t, p: jnp.arcsinh(y), {"asinh"}),
    ("acosh", lambda y, t, p: jnp.arccosh(1.5 + y * y), {"acosh"}),
    ("atanh", lambda y, t, p: jnp.arctanh(y / 3), {"atanh"}),
    ("logistic", lambda y, t, p: jax.nn.sigmoid(y), {"logistic"}),
    ("erf", lambda y, t, p: jsp.erf(y), {"erf"}),
    ("erfc", lambda y, t, p: jsp.erfc(y), {"erfc"}),
    ("floor", lambda y, t, p: jnp.floor(y), {"floor"}),
    ("ceil", lambda y, t, p: jnp.ceil(y), {"ceil"}),
    ("round_even", lambda y, t, p: jnp.round(y), {"round"}),
    ("round_away", lambda y, t, p: lax.round(y), {"round"}),
    ("rem", lambda y, t, p: jnp.fmod(y, 0.7), {"rem"}),
    ("is_finite", lambda y, t, p: jnp.where(jnp.isfinite(y / y), y, t), {"is_finite"}),
    *[
        (name, _cmp_case(op), {name})
        for name, op in [
            ("eq", operator.eq),
            ("ne", operator.ne),
            ("lt", operator.lt),
            ("le", operator.le),
            ("gt", operator.gt),
            ("ge", operator.ge),
        ]
    ],
    (
        "logical",
        lambda y, t, p: jnp.where(((y > 0) & (y < 2)) | ~(y > t) ^ (y < -1), y, t),
        {"and", "or", "not", "xor"},
    ),
    ("select_n", lambda y, t, p: jnp.where(y > t, jnp.sin(y), y * p[0]), {"select_n"}),
    ("select_n_int", _select3, {"select_n"}),
    (
        "clamp",
        lambda y, t, p: lax.clamp(_c(-1.0, y), y, p[0]) + lax.clamp(y[:3] - 1, p, y[:3] + 1).sum(),
        {"clamp"},
    ),
    ("clip", lambda y, t, p: jnp.clip(y, -1, t), set()),
    (
        "convert_element_type",
        lambda y, t, p: (y * 4).astype(jnp.int32).astype(y.dtype) + (y > 0) + y.astype(bool),
        {"convert_element_type"},
    ),
    ("integer_ops", _integer_ops, {"max", "min", "rem", "div", "abs"}),
    (
        "broadcast_in_dim",
        lambda y, t, p: y + jnp.broadcast_to(y[0], (N,)) + t,
        {"broadcast_in_dim"},
    ),
    (
        "expand_dims",
        lambda y, t, p: (jnp.expand_dims(y, 0) * jnp.expand_dims(p, 1))[1],
        {"broadcast_in_dim"},
    ),
    ("reshape", lambda y, t, p: y.reshape(2, 3)[::-1].reshape(N), {"reshape", "rev"}),
    ("transpose", lambda y, t, p: y.reshape(2, 3).T.reshape(N), {"transpose"}),
    ("squeeze", lambda y, t, p: jnp.squeeze(y.reshape(1, N), 0) * y[2], {"squeeze"}),
    (
        "slice",
        lambda y, t, p: jnp.concatenate([y[1:3], y[::2], y[5:]]) * y[0],
        {"slice", "concatenate"},
    ),
    ("gather", _gathers, {"gather"}),
    (
        "dynamic_slice",
        lambda y, t, p: (
            lax.dynamic_slice(jnp.concatenate([y, -y]), (2,), (N,))
            + lax.dynamic_slice(y.reshape(2, 3), (1, 1), (1, 2)).sum()
        ),
        {"dynamic_slice"},
    ),
    (
        "dynamic_update_slice",
        lambda y, t, p: lax.dynamic_update_slice(y, p[:2] * t, (3,)),
        {"dynamic_update_slice"},
    ),
    ("pad", lambda y, t, p: lax.pad(y[1:4], p[0], [(1, 0, 1)]) + jnp.pad(y[1:], (0, 1)), {"pad"}),
    ("tile", lambda y, t, p: jnp.tile(y[:3], 2) * y, {"tile"}),
    (
        "stack_unstack",
        lambda y, t, p: jnp.stack(jnp.unstack(y)[::-1]) + jnp.split(y, 2)[1][0],
        {"unstack", "split"},
    ),
    ("dot_small", lambda y, t, p: _c(_M_SMALL, y) @ y + (y @ y) * p[0], {"dot_general"}),
    (
        "dot_table",
        lambda y, t, p: (
            _c(_M_OUT, y) @ jnp.tanh(_c(_M_IN, y) @ y)
            + jnp.tanh(y @ _c(_M_IN.T, y)) @ _c(_M_OUT.T, y)
        ),
        {"dot_general"},
    ),
    ("dot_table_batched", _table_batched, {"dot_general"}),
    (
        "dot_table_nonfinite",
        lambda y, t, p: _c(_M_OUT_NONFINITE, y) @ jnp.tanh(_c(_M_IN, y) @ y),
        {"dot_general"},
    ),
    ("reduce_sum", lambda y, t, p: y.reshape(2, 3).sum(0).repeat(2) + jnp.sum(y), {"reduce_sum"}),
    (
        "reduce_max",
        lambda y, t, p: jnp.max(y.reshape(3, 2), axis=1).repeat(2) - jnp.max(y),
        {"reduce_max"},
    ),
    (
        "reduce_min",
        lambda y, t, p: jnp.min(y.reshape(2, 3), axis=0).repeat(2) * jnp.min(y),
        {"reduce_min"},
    ),
    ("reduce_prod", lambda y, t, p: jnp.prod(y + 2) * y, {"reduce_prod"}),
    (
        "iota",
        lambda y, t, p: jnp.arange(N) * y + lax.broadcasted_iota(jnp.int32, (2, 3), 1).reshape(N),
        {"iota"},
    ),
    (
        "jit",
        lambda y, t, p: jax.jit(lambda u, s: jnp.sin(u) * s + _c(_W, u))(y, t),
        {_name_of(jax.jit(jnp.sin))},
    ),
    ("custom_jvp", lambda y, t, p: _soft_abs(y) + jax.nn.relu(y), {"custom_jvp_call"}),
    ("custom_vjp", lambda y, t, p: _scaled_sin(y, p[0]), {"custom_vjp_call"}),
    (
        "checkpoint",
        lambda y, t, p: jax.checkpoint(lambda u: jnp.sin(u) * jnp.cos(u))(y),
        {_name_of(jax.checkpoint(jnp.sin))},
    ),
    (
        "closed_over_constants",
        lambda y, t, p: y * _c(_W, y) + jnp.asarray(_W[::-1], y.dtype) + _c(_M_SMALL[0], y),
        set(),
    ),
    ("stop_gradient", lambda y, t, p: lax.stop_gradient(y) * y, {"stop_gradient"}),
    ("copy", lambda y, t, p: jnp.copy(y) + jnp.array(y), set()),
    (
        "integer_square",
        lambda y, t, p: jnp.square((y * 4).astype(jnp.int32)).astype(y.dtype),
        {"square"},
    ),
    ("gather_fill", _gather_fill, {"gather"}),
    ("nan_propagation", _nan_propagation, {"max", "min", "sign", "clamp", "reduce_max"}),
    (
        "reduce_and_or",
        lambda y, t, p: jnp.where(jnp.all(y > -2) & jnp.any(y > 2), y, t),
        {"reduce_and", "reduce_or"},
    ),
    ("custom_jvp_closure", lambda y, t, p: _scale_by_array(y), {"custom_jvp_call"}),
    ("nested_calls", _nested_calls, {"custom_jvp_call", "custom_vjp_call"}),
    ("scan", _scans, {"scan"}),
    ("cond", _conds, {"cond"}),
    (
        "while_constant_trip_count",
        lambda y, t, p: lax.fori_loop(0, jnp.int32(4), lambda i, c: c * t + i.astype(c.dtype), y),
        {"while"},
    ),
    ("uses_time_and_params", lambda y, t, p: jnp.sin(t * p[0]) * y + p[2], set()),
]


# Long float32 sums with cancellation (XLA and the table loop add in different orders) are
# compared relative to their terms' size rather than to the small result.
_F32_FLOOR = {"dot_table": 1.0, "dot_table_batched": 1.0, "dot_table_nonfinite": 1.0}


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("name, f, prims", CASES, ids=[c[0] for c in CASES])
def test_primitive(name, f, prims, dtype):
    closed = _codegen.trace(f, N, NP, dtype)
    assert prims <= primitives_of(closed), f"{name} no longer traces to {prims}"
    if dtype == np.float64:
        assert_matches(f, N, NP, dtype, Y, T, P, rtol=1e-13, floor=1e-300)
    else:
        assert_matches(f, N, NP, dtype, Y, T, P, rtol=1e-6, floor=_F32_FLOOR.get(name, 1e-30))


# -- random programs -----------------------------------------------------------------------------
#
# A program is a list of instructions over a pool of (N,)-vectors: y, t and p broadcast, and a
# closed-over constant. Every operation maps values of size <= 10 to values of size <= 10 with a
# bounded derivative (hence the safe domains: log of |a|+1, asin of 0.9*tanh(a), ...), so rounding
# differences between libm and XLA stay near 1 ulp of that scale. Discontinuous operations (floor,
# comparisons, conversion to integer, ...) only ever see "exact" values - ones computed without
# any rounding, bit-identical in C++ and in JAX - so they cannot flip on a 1-ulp difference.


def _squash(a):
    return jnp.tanh(a)


# name -> (arity, arguments that must be exact, result exact when the arguments are, f(args, k))
# where k is a small random integer some operations use.
def _ipow(a, k):
    return (jnp.tanh(a) * 1.5) ** (2 + k % 4) if k % 2 else (jnp.tanh(a) + 2.0) ** -(1 + k % 3)


def _where_cmp(a, b, c, d, k):
    ops = (jnp.less, jnp.less_equal, jnp.greater, jnp.greater_equal, jnp.equal, jnp.not_equal)
    return jnp.where(ops[k % 6](a, b), c, d)


def _select_int(a, b, c, d, k):
    return lax.select_n((a > 0).astype(jnp.int32) + (a >= 1).astype(jnp.int32), b, c, d)


def _dot_small(a, k):
    m = np.random.default_rng(k).uniform(-1, 1, (N, N)) / N
    m[np.random.default_rng(k + 1).uniform(size=(N, N)) < 0.3] = 0.0  # structural zeros
    return m @ a if k % 2 else a @ m.T


def _dot_table(a, k):
    rng = np.random.default_rng(k)
    m_in = rng.uniform(-1, 1, (_K_BIG, N)) / N
    m_out = rng.uniform(-1, 1, (N, _K_BIG)) / _K_BIG
    if k % 2:
        return m_out @ jnp.tanh(m_in @ a)
    return jnp.tanh(a @ m_in.T) @ m_out.T


def _halve_while_large(a, cap):
    # halving is exact, so is the trip count it gives (at most cap: inf stays large)
    def body(c):
        return c[0] * 0.5, c[1] + 1

    return lax.while_loop(lambda c: (jnp.max(jnp.abs(c[0])) > 1.0) & (c[1] < cap), body, (a, 0))[0]


def _wrap_custom_jvp(fn):
    g = jax.custom_jvp(lambda *xs: fn(*xs))
    g.defjvp(lambda primals, tangents: (g(*primals), tangents[0]))
    return g


def _wrap_custom_vjp(fn):
    g = jax.custom_vjp(lambda *xs: fn(*xs))
    g.defvjp(lambda *xs: (g(*xs), None), lambda res, ct: None)
    return g


_WRAPPERS = {
    "jit": jax.jit,
    "custom_jvp": _wrap_custom_jvp,
    "custom_vjp": _wrap_custom_vjp,
    "checkpoint": jax.checkpoint,
}

OPS = {
    # arithmetic
    "add": (2, (), False, lambda a, b, k: (a + b) * 0.5),
    "sub": (2, (), False, lambda a, b, k: (a - b) * 0.5),
    "mul": (2, (), False, lambda a, b, k: a * _squash(b)),
    "div": (2, (), False, lambda a, b, k: a / (1.0 + b * b)),
    "half": (1, (), True, lambda a, k: a * 0.5),
    "neg": (1, (), True, lambda a, k: -a),
    "max": (2, (), True, lambda a, b, k: jnp.maximum(a, b)),
    "min": (2, (), True, lambda a, b, k: jnp.minimum(a, b)),
    "abs": (1, (), True, lambda a, k: jnp.abs(a)),
    "sign": (1, (0,), True, lambda a, k: jnp.sign(a)),
    # elementary functions
    "exp": (1, (), False, lambda a, k: jnp.exp(_squash(a) * 2.0)),
    "log": (1, (), False, lambda a, k: jnp.log(jnp.abs(a) + 1.0)),
    "log1p": (1, (), False, lambda a, k: jnp.log1p(jnp.abs(a))),
    "expm1": (1, (), False, lambda a, k: jnp.expm1(_squash(a))),
    "sqrt": (1, (), False, lambda a, k: jnp.sqrt(a * a * 0.5 + 0.1)),
    "rsqrt": (1, (), False, lambda a, k: lax.rsqrt(a * a + 0.1)),
    "cbrt": (1, (), False, lambda a, k: jnp.cbrt(a - 11.0)),
    "pow": (2, (), False, lambda a, b, k: jnp.power(jnp.abs(_squash(a)) + 0.5, _squash(b) * 3.0)),
    "integer_pow": (1, (), False, lambda a, k: _ipow(a, k)),
    "square": (1, (), False, lambda a, k: jnp.square(a) * 0.1),
    "sin": (1, (), False, lambda a, k: jnp.sin(a)),
    "cos": (1, (), False, lambda a, k: jnp.cos(a)),
    "tan": (1, (), False, lambda a, k: jnp.tan(_squash(a))),
    "asin": (1, (), False, lambda a, k: jnp.arcsin(_squash(a) * 0.9)),
    "acos": (1, (), False, lambda a, k: jnp.arccos(_squash(a) * 0.9)),
    "atan": (1, (), False, lambda a, k: jnp.arctan(a)),
    "atan2": (2, (), False, lambda a, b, k: jnp.arctan2(a, jnp.abs(b) + 0.1)),
    "sinh": (1, (), False, lambda a, k: jnp.sinh(_squash(a) * 2.0)),
    "cosh": (1, (), False, lambda a, k: jnp.cosh(a * 0.25)),
    "tanh": (1, (), False, lambda a, k: jnp.tanh(a)),
    "asinh": (1, (), False, lambda a, k: jnp.arcsinh(a)),
    "acosh": (1, (), False, lambda a, k: jnp.arccosh(1.5 + a * a)),
    "atanh": (1, (), False, lambda a, k: jnp.arctanh(_squash(a) * 0.9)),
    "logistic": (1, (), False, lambda a, k: jax.nn.sigmoid(a)),
    "erf": (1, (), False, lambda a, k: jsp.erf(a)),
    # rounding, comparisons, selection, conversion: exact arguments only
    "floor": (1, (0,), True, lambda a, k: jnp.floor(a)),
    "ceil": (1, (0,), True, lambda a, k: jnp.ceil(a)),
    "round": (1, (0,), True, lambda a, k: jnp.round(a) if k % 2 else lax.round(a)),
    "where": (4, (0, 1), True, _where_cmp),
    "select_n": (4, (0,), True, _select_int),
    "clamp": (3, (), True, lambda a, b, c, k: lax.clamp(jnp.minimum(b, c), a, jnp.maximum(b, c))),
    "clamp_scalar": (1, (), True, lambda a, k: lax.clamp(a.dtype.type(-1.5), a, a.dtype.type(2))),
    "clip": (1, (), True, lambda a, k: jnp.clip(a, -2.0, 1.0)),
    "to_int": (
        1,
        (0,),
        True,
        lambda a, k: (a * 4).astype(jnp.int32 if k % 2 else jnp.int64).astype(a.dtype) * 0.25,
    ),
    "to_float": (2, (0, 1), True, lambda a, b, k: (a > b).astype(a.dtype)),
    # data movement
    "roll": (1, (), True, lambda a, k: jnp.roll(a, 1 + k % (N - 1))),
    "rev": (1, (), True, lambda a, k: a[::-1]),
    "gather": (1, (), True, lambda a, k: a[jnp.asarray(np.random.default_rng(k).permutation(N))]),
    "gather_np": (1, (), True, lambda a, k: a[np.random.default_rng(k).integers(0, N, N)]),
    "strided": (1, (), True, lambda a, k: jnp.concatenate([a[::2], a[1::2]])),
    "element": (2, (), True, lambda a, b, k: jnp.maximum(a, b[k % N])),
    "transpose": (1, (), True, lambda a, k: a.reshape(2, 3).T.reshape(N)),
    "dynamic_slice": (
        2,
        (),
        True,
        lambda a, b, k: lax.dynamic_slice(jnp.concatenate([a, b]), (k % N,), (N,)),
    ),
    "dynamic_update_slice": (
        2,
        (),
        True,
        lambda a, b, k: lax.dynamic_update_slice(a, b[1:3], (k % 5,)),
    ),
    "expand_squeeze": (
        1,
        (),
        True,
        lambda a, k: lax.squeeze(jnp.expand_dims(a, 0 if k % 2 else 1), (0 if k % 2 else 1,)),
    ),
    "tile": (1, (), True, lambda a, k: jnp.tile(a[k % 2 : k % 2 + 3], 2)),
    "pad": (2, (), True, lambda a, b, k: lax.pad(a[1:4], b[0], [(1, 2, 0)])),
    # reductions and contractions
    "reduce_sum": (
        2,
        (),
        False,
        lambda a, b, k: (a + b.reshape(2, 3).sum(axis=0).repeat(2)) * 0.25,
    ),
    "reduce_max": (2, (), True, lambda a, b, k: jnp.minimum(a, jnp.max(b))),
    "reduce_min": (
        2,
        (),
        True,
        lambda a, b, k: jnp.maximum(a, jnp.min(b.reshape(3, 2), axis=1).repeat(2)),
    ),
    "dot_state": (2, (), False, lambda a, b, k: (a + jnp.dot(a, b) / 60.0) * 0.5),
    "dot_small": (1, (), False, _dot_small),
    "dot_table": (1, (), False, _dot_table),
    "iota": (1, (), False, lambda a, k: a * jnp.arange(N) / N),
    # branches and loops: a static trip count (unrolled), one from the state (a C++ loop)
    "cond": (2, (0,), False, lambda a, b, k: lax.cond(a[k % N] > 0, jnp.sin, lambda u: u * 0.5, b)),
    "while_halving": (1, (0,), True, lambda a, k: _halve_while_large(a, 1 + k % 3)),
    "fori_loop": (
        1,
        (),
        False,
        lambda a, k: lax.fori_loop(0, 1 + k % 3, lambda i, c: jnp.sin(c) * 0.9 + 0.1 * i, a),
    ),
}

_LEAVES = 4  # y, t, p, a constant


@st.composite
def programs(draw):
    exact = [True] * _LEAVES
    instructions = []
    for _ in range(draw(st.integers(8, 20))):
        name = draw(st.sampled_from(sorted(OPS)))
        arity, need_exact, keeps_exact, _ = OPS[name]
        exact_ids = [i for i, e in enumerate(exact) if e]
        args = tuple(
            draw(st.sampled_from(exact_ids if i in need_exact else range(len(exact))))
            for i in range(arity)
        )
        k = draw(st.integers(0, 2**16))
        wrapper = draw(st.sampled_from([None, None, None, *sorted(_WRAPPERS)]))
        instructions.append((name, args, k, wrapper))
        exact.append(keeps_exact and all(exact[a] for a in args))
    return instructions, draw(st.booleans())


def program_function(program, const):
    instructions, as_tuple = program

    def f(y, t, p):
        vals = [
            y,
            jnp.broadcast_to(t, (N,)),
            p[jnp.array([0, 1, 2, 0, 1, 2])],
            jnp.asarray(const, y.dtype),
        ]
        for name, args, k, wrapper in instructions:
            fn = functools.partial(lambda fn, k, *xs: fn(*xs, k), OPS[name][3], k)
            if wrapper is not None:
                fn = _WRAPPERS[wrapper](fn)
            vals.append(fn(*(vals[a] for a in args)))
        # Every instruction reaches the output, with its own weight.
        out = sum(v * (1.0 / (i + 1)) for i, v in enumerate(vals[_LEAVES:]))
        return tuple(out[i] for i in range(N)) if as_tuple else out

    return f


# Tiny magnitudes become 0: XLA's CPU threads flush subnormals, which is not what is tested here.
_values = st.one_of(
    st.floats(-3, 3).map(lambda v: v if abs(v) > 1e-100 else 0.0),
    st.sampled_from([0.0, -0.0, 0.5, -0.5, 1.0, 1.5, -2.5, 2.0]),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    program=programs(),
    y=st.lists(_values, min_size=N, max_size=N),
    t=_values,
    p=st.lists(_values, min_size=NP, max_size=NP),
    const=st.lists(_values, min_size=N, max_size=N),
)
def test_random_programs_match_jax(program, y, t, p, const):
    f = program_function(program, np.asarray(const))
    assert_matches(f, N, NP, np.float64, np.asarray(y), t, np.asarray(p), rtol=1e-13, floor=1.0)


# -- output conventions and errors ---------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_tuple_of_scalars(dtype):
    def f(y, t, p):
        return (y[1], -p[0] * y[0] + t, 0.0)

    assert_matches(
        f, 3, 1, dtype, [0.5, -1.25, 2.0], 0.75, [1.5], rtol=1e-13 if dtype == np.float64 else 1e-6
    )
    assert_matches(
        lambda y, t, p: list(f(y, t, p)),
        3,
        1,
        dtype,
        [0.5, -1.25, 2.0],
        0.75,
        [1.5],
        rtol=1e-13 if dtype == np.float64 else 1e-6,
    )


def test_no_params_and_constant_output():
    assert_matches(
        lambda y, t, p: jnp.zeros_like(y) + jnp.cos(t),
        2,
        0,
        np.float64,
        [1.0, 2.0],
        0.5,
        [],
        rtol=1e-13,
    )


def _unsupported_cumlogsumexp(y, t, p):
    return lax.cumlogsumexp(y) * t


def _unsupported_top_k(y, t, p):
    return jnp.tile(lax.top_k(y, 2)[0], 3) + p[0]


def _unsupported_igamma(y, t, p):
    return y * jsp.gammainc(2.0, y * y + 1.0)


@pytest.mark.parametrize(
    "f, primitive",
    [
        (_unsupported_cumlogsumexp, "cumlogsumexp"),
        (_unsupported_top_k, "top_k"),
        (_unsupported_igamma, "igamma"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_unsupported_primitive_names_it_and_the_line(f, primitive):
    with pytest.raises(NotImplementedError) as info:
        generate_model(f, N, NP, np.float64)
    message = str(info.value)
    assert f"'{primitive}'" in message
    # The body's one line, even when the primitive sits inside a jnp function's own jit.
    assert f"test_codegen.py:{f.__code__.co_firstlineno + 1}" in message


def _index_from_state(y, t, p):
    return y[(y[0] > 0).astype(jnp.int32)] * y


def _gather_from_state(y, t, p):
    return jnp.take(p, y.astype(jnp.int32))


def _slice_at_time(y, t, p):
    return jnp.tile(lax.dynamic_slice(y, (t.astype(jnp.int32),), (2,)), 3)


def _update_at_param(y, t, p):
    return lax.dynamic_update_slice(y, y[:2], (p[0].astype(jnp.int32),))


@pytest.mark.parametrize(
    "f",
    [_index_from_state, _gather_from_state, _slice_at_time, _update_at_param],
    ids=lambda f: f.__name__.strip("_"),
)
def test_reads_and_writes_at_indices_from_state_are_translated(f):
    # test_table_lookups.py and test_scatter.py have the rest: every mode, derivatives
    y = np.array([0.5, -1.0, 2.0, 7.0, -9.0, 1.5])
    for t in (-3.0, 0.0, 2.5, 9.0):
        assert_matches(f, N, NP, np.float64, y, t, np.linspace(-1.0, 1.0, NP), rtol=1e-13)


@pytest.mark.parametrize(
    "f, match",
    [
        (lambda y, t, p: y[:2], r"shape \(6,\)"),
        (lambda y, t, p: jnp.sum(y), r"shape \(6,\)"),
        (lambda y, t, p: y.reshape(6, 1), r"shape \(6,\)"),
        (lambda y, t, p: (y, y), r"shape \(6,\)"),
        (lambda y, t, p: y.astype(jnp.float32), "dtype float64"),
        (lambda y, t, p: (y > 0).astype(jnp.int32), "dtype float64"),
    ],
    ids=["short", "scalar", "column", "two_arrays", "float32", "int32"],
)
def test_wrong_output_is_a_value_error(f, match):
    with pytest.raises(ValueError, match=match) as info:
        generate_model(f, N, NP, np.float64)
    assert isinstance(info.value, ModelTraceError)


def test_float32_model_must_return_float32():
    with pytest.raises(ModelTraceError, match="dtype float32"):
        generate_model(lambda y, t, p: y * np.ones(N), N, NP, np.float32)


def test_closed_over_tracers_become_trailing_shared_parameters():
    def outer(q):
        model, closure = generate(lambda y, t, p: y * q[0] + q[1], N, NP, np.float64)
        assert closure and closure[0].shape == (2,)
        assert (model.n_params, model.n_shared) == (NP + 2, 2)
        assert f"p[{NP}]" in model.source and f"p[{NP + 1}]" in model.source
        with pytest.raises(ModelTraceError, match="generate"):
            generate_model(lambda y, t, p: y * q[0], N, NP, np.float64)
        return q

    jax.jit(outer)(jnp.array([1.0, 2.0]))


def test_a_traced_integer_closure_is_a_trailing_parameter_read_back_as_an_integer():
    seen = {}

    def outer(i):
        model, closure = generate(lambda y, t, p: y * (i // 2), N, NP, np.float64)
        seen.update(model=model, closure=closure)
        return i

    jax.jit(outer)(7)
    (carried,) = seen["closure"]
    assert jnp.issubdtype(carried.dtype, jnp.floating)  # carried in p, as params leaves are
    assert seen["model"].n_params == NP + 1
    # ... and converted back in the model (to I64, the integers of T's lanes, in a lanes rhs)
    assert re.search(r"static_cast<(int|I)64(_t)?>", seen["model"].source)


def test_closing_over_a_traced_complex_array_is_a_value_error():
    def outer(z):
        generate(lambda y, t, p: y * jnp.real(z), N, NP, np.float64)
        return z

    with pytest.raises(ModelTraceError, match="complex"):
        jax.jit(outer)(1.0 + 2.0j)


def test_repeated_subexpressions_are_emitted_once():
    def f(y, t, p):
        return jnp.stack([jnp.sin(y[0] * p[0]) + 1.0, jnp.sin(y[0] * p[0]) * 2.0])

    source = generate_model(f, 2, 1, np.float64).source.replace("dy[1]", "")
    assert source.count("sin(") == 1 and source.count("(y[0] * p[0])") == 1
