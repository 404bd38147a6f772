"""Primitives evaluated in NumPy while translating, where NumPy gives XLA's exact result.

The code generator evaluates equations on known values twice over: it folds constants
(``Walker.fold``) and it moves arrays of element ids through data-movement primitives to learn
where each element goes (``data_movement.moved_ids``). Done by binding the primitive eagerly, each
distinct primitive, parameter set and shape compiles an XLA executable, 20-50 ms apiece: 107 of
them, 3.5 s, in the first translation of a 72-variable model's adjoint. Here are the primitives
whose result NumPy computes exactly as XLA does: pure data movement (any dtype: only elements
move), and the correctly rounded arithmetic of IEEE 754 (add, sub, mul, neg) and conversions that
are exact or rounded to nearest alike in both, away from subnormal numbers (which XLA's CPU code
may flush to zero). Anything else returns None and is bound eagerly.
"""

from __future__ import annotations

import numpy as np


def move(name: str, params: dict, arrays: list) -> list[np.ndarray] | None:
    """The outputs of data-movement primitive ``name`` on ``arrays``, or None if not covered."""
    if not arrays:
        return None
    x = arrays[0]
    if name == "slice" and all(isinstance(v, np.ndarray) for v in arrays):
        strides = params["strides"] or (1,) * x.ndim
        return [x[tuple(slice(b, e, st) for b, e, st in zip(
            params["start_indices"], params["limit_indices"], strides, strict=True))]]
    if name == "squeeze":
        return [np.squeeze(x, axis=tuple(params["dimensions"]))]
    if name == "expand_dims":
        return [np.expand_dims(x, axis=tuple(params["dimensions"]))]
    if name == "reshape" and params.get("dimensions") is None:
        return [x.reshape(params["new_sizes"])]
    if name == "broadcast_in_dim" and params.get("sharding") is None and len(arrays) == 1:
        shape, dims = tuple(params["shape"]), tuple(params["broadcast_dimensions"])
        expanded = [1] * len(shape)
        for axis, size in zip(dims, x.shape, strict=True):
            expanded[axis] = size
        return [np.broadcast_to(x.reshape(expanded), shape)]
    if name == "concatenate":
        return [np.concatenate(arrays, axis=params["dimension"])]
    if name == "rev":
        return [np.flip(x, axis=tuple(params["dimensions"]))]
    if name == "transpose":
        return [np.transpose(x, params["permutation"])]
    if name == "pad":
        return [_pad(x, arrays[1], params["padding_config"])]
    if name == "stack":
        return [np.stack(arrays, axis=params["axis"])]
    if name == "unstack":
        return [np.take(x, i, axis=params["axis"]) for i in range(x.shape[params["axis"]])]
    if name == "split":
        cuts = np.cumsum(params["sizes"])[:-1]
        return list(np.split(x, cuts, axis=params["axis"]))
    if name == "tile":
        return [np.tile(x, params["reps"])]
    return None


def _pad(x: np.ndarray, value: np.ndarray, config) -> np.ndarray:
    """lax.pad: per axis, ``interior`` copies of ``value`` between elements, then ``low`` and
    ``high`` at the ends (negative ones cut elements off)."""
    value = np.asarray(value, dtype=x.dtype)
    for axis, (low, high, interior) in enumerate(config):
        n = x.shape[axis]
        if interior and n > 1:
            shape = list(x.shape)
            shape[axis] = n + (n - 1) * interior
            spread = np.full(shape, value, dtype=x.dtype)
            every = [slice(None)] * x.ndim
            every[axis] = slice(None, None, interior + 1)
            spread[tuple(every)] = x
            x = spread
        keep = [slice(None)] * x.ndim
        keep[axis] = slice(max(-low, 0), x.shape[axis] - max(-high, 0))
        x = x[tuple(keep)]
        widths = [(0, 0)] * x.ndim
        widths[axis] = (max(low, 0), max(high, 0))
        x = np.pad(x, widths, constant_values=value)
    return x


_ARITHMETIC = {"add": np.add, "sub": np.subtract, "mul": np.multiply}


def _exact_dtype(dtype: np.dtype) -> bool:
    """Where NumPy and XLA give every value the same result: floats as IEEE 754 (correctly
    rounded; NaN stays NaN), integers as two's complement (wrapping)."""
    dtype = np.dtype(dtype)
    return dtype.kind in "iu" or dtype in (np.dtype(np.float32), np.dtype(np.float64))


def fold(name: str, params: dict, arrays: list) -> list[np.ndarray] | None:
    """The outputs of primitive ``name`` on the constant ``arrays``, where NumPy's equal XLA's;
    None otherwise."""
    arrays = [np.asarray(a) for a in arrays]
    moved = move(name, params, arrays)
    if moved is not None:
        return moved
    if name in _ARITHMETIC or name == "neg":
        dtype = arrays[0].dtype
        shapes = {a.shape for a in arrays if a.ndim}  # a 0-d operand is broadcast, as in lax
        if not _exact_dtype(dtype) or any(a.dtype != dtype for a in arrays) or len(shapes) > 1:
            return None
        if params.get("out_dtype") is not None:  # mul's wider result (int8 × int8 → int32)
            return None
        with np.errstate(all="ignore"):
            out = np.asarray(np.negative(arrays[0]) if name == "neg"
                             else _ARITHMETIC[name](arrays[0], arrays[1]), dtype=dtype)
        return None if _subnormal(out, *arrays) else [out]
    if name == "iota" and params.get("sharding") is None:
        dtype, shape, dim = np.dtype(params["dtype"]), tuple(params["shape"]), params["dimension"]
        if not _exact_dtype(dtype):
            return None
        line = np.arange(shape[dim], dtype=dtype)
        expanded = [1] * len(shape)
        expanded[dim] = shape[dim]
        return [np.broadcast_to(line.reshape(expanded), shape).copy()]
    if name == "convert_element_type" and params.get("sharding") is None:
        source, target = arrays[0].dtype, np.dtype(params["new_dtype"])
        # Integers to integers (wrapping) or to floats, floats to floats (rounded to nearest):
        # not floats to integers (XLA saturates, NumPy does not) nor anything to or from bool.
        if not (_exact_dtype(source) and _exact_dtype(target)) or (
                source.kind == "f" and target.kind in "iu"):
            return None
        with np.errstate(all="ignore"):
            out = arrays[0].astype(target)
        return None if _subnormal(out, arrays[0]) else [out]
    return None


def _subnormal(*arrays: np.ndarray) -> bool:
    """Whether a float among them is subnormal: XLA's CPU code may flush those to zero, NumPy
    keeps them (measured: a float32 product of 1e-30 and 1e-10)."""
    for a in arrays:
        if a.dtype.kind == "f" and a.size:
            magnitude = np.abs(a[np.isfinite(a)])
            if np.any((magnitude > 0) & (magnitude < np.finfo(a.dtype).tiny)):
                return True
    return False
