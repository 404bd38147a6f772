"""Hypothesis strategies for hostile values: every kind of thing a caller may pass by mistake
(None, strings, objects, complex, bool, int, Python scalars and lists, arrays of random shapes
and dtypes) and the floating values that break arithmetic (NaN, ±Inf, ±1e308, the smallest
subnormal 5e-324, -0.0)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

SPECIAL_FLOATS = [np.nan, np.inf, -np.inf, 1e308, -1e308, 5e-324, -5e-324, 1e-310, 0.0, -0.0,
                  1.0, -1.0, 0.5, 1e-300, 1e300]

special_floats = st.sampled_from(SPECIAL_FLOATS)
any_floats = st.one_of(special_floats, st.floats(allow_nan=True, allow_infinity=True,
                                                 allow_subnormal=True))

DTYPES = [np.float64, np.float32, np.float16, np.int32, np.int64, np.bool_, np.complex128,
          np.uint8]


def arrays(max_dims: int = 3, max_side: int = 4):
    """Arrays of random dtype and shape, float ones mostly made of the special values."""
    shapes = hnp.array_shapes(min_dims=0, max_dims=max_dims, min_side=0, max_side=max_side)
    floats = hnp.arrays(st.sampled_from([np.float64, np.float32]), shapes,
                        elements=st.one_of(special_floats, st.floats(-10, 10, width=32)))
    others = hnp.arrays(st.sampled_from(DTYPES), shapes)
    return st.one_of(floats, others)


non_numbers = st.sampled_from([None, "abc", "1.0", b"\x00", object(), np.array([object()]),
                               np.array(["a", "b"]), {"a": 1.0}, [[1.0], [1.0, 2.0]], 1j,
                               [1j, 2.0], lambda x: x])

python_numbers = st.one_of(any_floats, st.integers(-(2**70), 2**70), st.booleans(),
                           st.complex_numbers(allow_nan=True, allow_infinity=True))

python_lists = st.lists(st.one_of(special_floats, st.integers(-5, 5), st.booleans()),
                        max_size=4)


def anything(max_dims: int = 3):
    """Any hostile value for an array argument."""
    return st.one_of(non_numbers, python_numbers, python_lists, arrays(max_dims))


scalars = st.one_of(non_numbers, python_numbers, arrays(max_dims=1, max_side=2),
                    st.sampled_from([np.float32(1e-3), np.int64(7), np.bool_(True)]))
