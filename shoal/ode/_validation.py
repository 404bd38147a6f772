"""Checks on ``solve``'s arguments that need more than a shape: values the kernel would read
differently from the user (subnormals, which the CPU kernel flushes to zero; spans that
overflow), dtypes it was not built for, and flags that must really be booleans.

Each check raises a ``ValueError`` or ``TypeError`` naming the argument, what it got and what
was expected, before anything is compiled or run.
"""

from __future__ import annotations

import numpy as np

# The kernels compute in these; y0's dtype is the solve's.
SOLVE_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def solve_dtype(dtype) -> np.dtype:
    """y0's floating dtype, if the kernels can compute in it."""
    dtype = np.dtype(dtype)
    if dtype not in SOLVE_DTYPES:
        raise TypeError(f"y0 must be float32 or float64 (the precision of the solve); got dtype "
                        f"{dtype.name}: convert it with y0.astype(jnp.float32)")
    return dtype


def flag(name: str, value) -> bool:
    """A Python bool: a string such as "False" or an array would be silently truthy."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False; got {value!r}")
    return bool(value)


def _as_read(values, dtype):
    """values as the kernel reads them: subnormals of dtype flushed to zero (XLA's CPU threads
    run with flush-to-zero and denormals-are-zero)."""
    values = np.asarray(values, dtype)
    return np.where(np.abs(values) < np.finfo(dtype).tiny, np.zeros((), dtype), values)


def time_row(where: str, row, dtype) -> None:
    """One t_span row: finite, strictly increasing as the kernel reads it, a finite span."""
    row = np.asarray(row, dtype)
    if not np.all(np.isfinite(row)):
        raise ValueError(f"{where} must be finite; got {row}")
    with np.errstate(over="ignore"):  # an overflowing span is reported below
        steps, read_steps = np.diff(row), np.diff(_as_read(row, dtype))
    if np.any(steps <= 0):
        raise ValueError(f"{where} must be strictly increasing; got {row}")
    if np.any(read_steps <= 0):
        raise ValueError(f"{where} must be strictly increasing once subnormal times (below "
                         f"{np.finfo(dtype).tiny:.3g} in magnitude for {np.dtype(dtype).name}), "
                         f"which the kernel reads as 0, are flushed; got {row}")
    with np.errstate(over="ignore"):
        span = row[-1] - row[0]
    if not np.isfinite(span):
        raise ValueError(f"{where} spans {row[0]!r} to {row[-1]!r}, whose length overflows "
                         f"{np.dtype(dtype).name}; shift or rescale time")


def normal_positive(name: str, values, dtype) -> None:
    """Positive numbers the kernel reads as given: not subnormal in dtype (those read as 0)."""
    values = np.asarray(values, np.float64)
    tiny = float(np.finfo(dtype).tiny)
    if np.any((values > 0) & (values < tiny)):
        raise ValueError(f"{name} must be at least {tiny:.3g} (the smallest normal "
                         f"{np.dtype(dtype).name}; the kernel reads subnormals as 0); got "
                         f"{values}")
    big = float(np.finfo(dtype).max)
    if np.any(values > big):
        raise ValueError(f"{name} must be at most {big:.3g} (the largest {np.dtype(dtype).name}); "
                         f"got {values}")


def options_in_dtype(opts, dtype) -> None:
    """The run-time options the kernel converts to the solve's dtype survive the conversion."""
    for name in ("rtol", "atol", "sens_atol", "max_step"):
        value = getattr(opts, name)
        if value is not None:
            normal_positive(name, value, dtype)
    normal_positive("factor_min", opts.factor_min, dtype)
    normal_positive("factor_max", opts.factor_max, dtype)
