"""scipy.linalg.eigh's keywords that shoal accepts for drop-in use but does not need.

- ``check_finite``: shoal always checks the triangle it reads (``LinAlgError`` outside ``jit``,
  NaN under it); ``False`` does not skip that O(n²) scan.
- ``overwrite_a``, ``overwrite_b``: JAX arrays are immutable; nothing is ever overwritten.
- ``driver``: validated as SciPy does (an unknown name, a generalized driver without ``b``, a
  standard one with ``b``, or a driver that cannot compute subsets is a ValueError), then
  ignored: shoal calls ?syevd/?sygvd for all eigenpairs and ?syevr/?sygvx for subsets.
- ``turbo`` (SciPy < 1.14): chose the divide-and-conquer ?sygvd, which shoal uses anyway.
"""

from __future__ import annotations

import numpy as np

__all__ = ["check_scipy_keywords"]

_STANDARD = ("ev", "evd", "evr", "evx")
_GENERALIZED = ("gv", "gvd", "gvx")
_NO_SUBSETS = ("ev", "evd", "gv", "gvd")


def check_scipy_keywords(*, generalized: bool, subset: bool, driver, **flags) -> None:
    """ValueError/TypeError naming the keyword where SciPy would refuse it; otherwise nothing."""
    for name, value in flags.items():
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{name} must be True or False; got {value!r}")
    if driver is None:
        return
    if not isinstance(driver, str) or driver not in _STANDARD + _GENERALIZED:
        names = ", ".join(repr(d) for d in _STANDARD + _GENERALIZED)
        raise ValueError(f"driver must be None or one of {names}; got driver={driver!r}")
    if generalized and driver in _STANDARD:
        raise ValueError(f"driver={driver!r} solves the standard problem, but b was given")
    if not generalized and driver in _GENERALIZED:
        raise ValueError(f"driver={driver!r} solves the generalized problem and needs b")
    if subset and driver in _NO_SUBSETS:
        raise ValueError(f"driver={driver!r} cannot compute subsets of eigenvalues")
