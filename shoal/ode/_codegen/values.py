"""The symbolic value of a jaxpr variable: an object array of C++ expressions and constants."""

from __future__ import annotations

import numpy as np


class Sym:
    """An array value: an object array of elements (str = C++ expression, else a constant)."""

    __slots__ = ("elems", "dtype")

    def __init__(self, elems: np.ndarray, dtype):
        self.elems = elems
        self.dtype = np.dtype(dtype)

    @property
    def shape(self):
        return self.elems.shape

    def is_const(self) -> bool:
        return all(not isinstance(e, str) for e in self.elems.flat)

    def const_value(self) -> np.ndarray:
        return np.asarray(self.elems.tolist(), dtype=self.dtype).reshape(self.elems.shape)


def const_sym(value) -> Sym:
    """The value of a constant array, element by element."""
    arr = np.asarray(value)
    obj = np.empty(arr.shape, dtype=object)
    for idx in np.ndindex(arr.shape):
        obj[idx] = arr[idx].item() if arr.ndim else arr.item()
    return Sym(obj, arr.dtype)
