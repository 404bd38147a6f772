"""numpy_eval: the primitives the code generator evaluates in NumPy give JAX's exact result.

Each case binds the primitive eagerly in JAX and evaluates it with numpy_eval, on values chosen
to reach the edges (negative and interior padding, integer wrap-around, signed zeros, NaN,
rounding to float32, a 0-d operand broadcast); the two must agree in dtype, shape and bytes.
What NumPy would compute differently (float to integer conversion, bool, integer_pow) must be
left to JAX (None).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from shoal.ode._codegen import numpy_eval
from shoal.ode._codegen.jax_internals import eager

jax.config.update("jax_enable_x64", True)


def _primitive(fn, *args):
    """The (only) primitive equation of fn(*args)."""
    (eqn,) = jax.make_jaxpr(fn)(*args).jaxpr.eqns
    return eqn


def _agree(fn, *args, evaluate=numpy_eval.fold):
    eqn = _primitive(fn, *args)
    got = evaluate(eqn.primitive.name, dict(eqn.params), [np.asarray(a) for a in args])
    assert got is not None, eqn.primitive.name
    with eager():
        want = eqn.primitive.bind(*[jnp.asarray(a) for a in args], **eqn.params)
    want = want if eqn.primitive.multiple_results else [want]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        w = np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        assert np.ascontiguousarray(g).tobytes() == w.tobytes()


X = np.arange(24, dtype=np.int32).reshape(4, 6)
F = np.array([[1.5, -0.0, np.nan, 1e308], [3.0, -2.25, 0.1, np.inf]])


@pytest.mark.parametrize("config", [
    [(1, 2, 0), (0, 0, 0)],
    [(-1, 1, 1), (2, -3, 2)],
    [(0, 0, 3), (-2, -2, 0)],
    [(-3, 2, 1), (1, 0, 1)],
])
def test_pad_with_negative_and_interior_padding(config):
    _agree(lambda x, v: lax.pad(x, v, config), X, np.int32(-7))
    _agree(lambda x, v: lax.pad(x, v, config), F, np.float64(np.nan))


def test_movements():
    _agree(lambda x: lax.split(x, (1, 2, 3), axis=1), X)
    _agree(lambda x: lax.split(x, (3, 1), axis=1), F)
    _agree(lambda x: jnp.unstack(x, axis=1), X)
    _agree(lambda x: jnp.unstack(x, axis=0), F)
    _agree(lambda a, b: jnp.stack([a, b], axis=1), X[0], X[1])
    _agree(lambda x: lax.tile(x, (2, 3)), X, evaluate=numpy_eval.move)
    _agree(lambda x: lax.slice(x, (1, 0), (4, 6), (2, 3)), X)
    _agree(lambda x: lax.rev(x, (1,)), F)
    _agree(lambda x: lax.transpose(x, (1, 0)), F)
    _agree(lambda x: lax.broadcast_in_dim(x, (3, 4, 6), (1, 2)), X)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_arithmetic_rounds_as_xla(dtype):
    rng = np.random.default_rng(0)
    a = (rng.standard_normal(200) * 10.0 ** rng.integers(-30, 30, 200)).astype(dtype)
    b = (rng.standard_normal(200) * 10.0 ** rng.integers(-30, 30, 200)).astype(dtype)
    a[:4] = [np.nan, -0.0, np.inf, 0.0]
    b[:4] = [1.0, 0.0, -np.inf, -0.0]
    with np.errstate(all="ignore"):
        product = a * b
    keep = (np.abs(product) > np.finfo(dtype).tiny * 4) | ~np.isfinite(product)
    a, b = a[keep], b[keep]  # no subnormal product here (the next test)
    for op in (lax.add, lax.sub, lax.mul):
        _agree(op, a, b)
        _agree(op, dtype(0.1), b)  # a 0-d operand, broadcast
    _agree(lax.neg, a)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_subnormal_numbers_are_left_to_jax(dtype):
    """XLA's CPU code flushes a float32 subnormal product to zero where NumPy keeps it."""
    tiny = np.finfo(dtype).tiny
    for a, b in ((np.array([tiny], dtype), np.array([0.25], dtype)),  # subnormal result
                 (np.array([tiny / 4], dtype), np.array([1.0], dtype))):  # subnormal operand
        eqn = _primitive(lax.mul, a, b)
        assert numpy_eval.fold("mul", dict(eqn.params), [a, b]) is None
    to_f32 = _primitive(lambda x: lax.convert_element_type(x, np.float32), np.float64([1e-40]))
    assert numpy_eval.fold("convert_element_type", dict(to_f32.params), [np.float64([1e-40])]) \
        is None


def test_integer_arithmetic_wraps_as_xla():
    big = np.array([2**31 - 1, -(2**31), 7, -1], dtype=np.int32)
    for op in (lax.add, lax.sub, lax.mul):
        _agree(op, big, big)
    small = np.array([127, -128, 100], dtype=np.int8)
    _agree(lax.mul, small, small)
    _agree(lax.neg, big)


def test_iota_and_conversions():
    _agree(lambda: lax.broadcasted_iota(np.int32, (3, 5), 1))
    _agree(lambda: lax.broadcasted_iota(np.float64, (4, 2), 0))
    _agree(lambda x: lax.convert_element_type(x, np.float32), F)  # rounded to nearest, NaN, inf
    _agree(lambda x: lax.convert_element_type(x, np.float64), np.float32([1.1, np.nan, -0.0]))
    _agree(lambda x: lax.convert_element_type(x, np.int8), np.int32([300, -129, 5]))
    _agree(lambda x: lax.convert_element_type(x, np.float64), np.int64([2**62 + 1, -3]))


@pytest.mark.parametrize("fn, arg", [
    (lambda x: lax.convert_element_type(x, np.int32), np.float64([1e10, np.nan, -2.5])),
    (lambda x: lax.convert_element_type(x, np.bool_), np.float64([0.0, 2.0])),
    (lambda x: lax.integer_pow(x, 3), np.float64([1.1, 2.0])),
    (lambda x: lax.add(x, x), np.array([1, 2], dtype=jnp.bfloat16)),
    (lambda x: lax.exp(x), np.float64([1.0])),
    (lambda x: lax.mul(x, x, out_dtype=np.int32), np.int8([100, -100])),  # a wider result
])
def test_what_numpy_would_compute_differently_is_left_to_jax(fn, arg):
    eqn = _primitive(fn, arg)
    assert numpy_eval.fold(eqn.primitive.name, dict(eqn.params), [np.asarray(arg)]) is None
