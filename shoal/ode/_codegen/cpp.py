"""C++ spelling of jaxpr dtypes and constants in a model (floats compute in the solve's ``T``)."""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np


def is_float(dtype) -> bool:
    return jnp.issubdtype(dtype, jnp.floating)


def ctype(dtype) -> str:
    dtype = np.dtype(dtype)
    if is_float(dtype):
        return "T"
    if dtype == np.bool_:
        return "bool"
    if jnp.issubdtype(dtype, jnp.unsignedinteger):
        return f"uint{dtype.itemsize * 8}_t"
    if jnp.issubdtype(dtype, jnp.integer):
        return f"int{dtype.itemsize * 8}_t"
    raise NotImplementedError(f"dtype {dtype} is not supported in a model")


def double(value) -> str:
    """A C++ double constant expression (NaN and infinities have no literal)."""
    v = float(value)
    if math.isnan(v):
        return '__builtin_nan("")'
    if math.isinf(v):
        return "__builtin_huge_val()" if v > 0 else "-__builtin_huge_val()"
    # repr() round-trips a double exactly; the value already has the jaxpr's precision.
    return repr(v)


def literal(value, dtype) -> str:
    """C++ literal for a constant element of the given (jaxpr) dtype."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return "true" if bool(value) else "false"
    if is_float(dtype):
        return f"T({double(value)})"
    v = int(value)
    return f"{ctype(dtype)}({v}LL)" if v < 0 else f"{ctype(dtype)}({v}ULL)"


def clamped_index(i: str, hi: int) -> str:
    """An int64_t index clamped to [0, hi], spelled with pick (a masked choice in SIMD lanes)."""
    return f"pick({i} < 0, int64_t(0), pick({i} > {hi}, int64_t({hi}), {i}))"
