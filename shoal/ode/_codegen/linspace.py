"""Constant tables that are a linspace to the bit: each entry computed instead of read.

A grid built by ``np.linspace(x0, x1, n)`` (or ``x0 + h * np.arange(n)``) holds fl(fl(i·h) + x0)
in every entry but its last, which linspace sets to its stop. Where that holds for every entry,
the generated code reads the grid through ``shoal::math::Linspace`` (math.hpp), which computes an
entry from its index in the same two roundings: the same bits as the table, without the memory
read, which in SIMD lanes is a gather of W scattered entries (a grid searched and read by
``jnp.interp`` or a spline: two or more per lookup).
"""

from __future__ import annotations

import numpy as np

from shoal.ode._codegen.cpp import double

# Below this many entries a table is cheap to read: keep it a table.
MIN_SIZE = 16


def linspace_table(values: np.ndarray) -> str | None:
    """The C++ ``shoal::math::Linspace`` that computes every entry of the float64 ``values``
    (flattened) to the bit, or None where some entry is not fl(fl(i·h) + x0) (the last may be
    anything: linspace's stop)."""
    v = np.asarray(values)
    if v.dtype != np.float64 or v.size < MIN_SIZE:
        return None
    v = v.ravel()
    if not np.all(np.isfinite(v)):
        return None
    n = v.size
    x0 = v[0]
    with np.errstate(all="ignore"):
        h = (v[-1] - x0) / (n - 1)
        computed = np.arange(n - 1, dtype=np.float64) * h + x0  # the C++ operations, in order
    if not np.isfinite(h) or not np.array_equal(computed.view(np.int64), v[:-1].view(np.int64)):
        return None
    return f"shoal::math::Linspace{{{n}, {double(x0)}, {double(h)}, {double(v[-1])}}}"
