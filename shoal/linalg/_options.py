"""What one eigh call solves, as one frozen record, checked once where eigh's arguments arrive.

Every primal (the LAPACK kernels, the cuSOLVER kernels, the pure-JAX path) takes an
``EighOptions``; the compiled kernels receive it as ONE dictionary attribute, ``options``, that
XLA decodes into the C++ struct of the same name (src/linalg/eigh_options.hpp). The enum values
below are those of the C++ enums.
"""

from __future__ import annotations

import dataclasses
import enum
import numbers
import operator
from typing import Any

import numpy as np

__all__ = ["EighOptions", "Problem", "Subset", "Triangle", "problem_type"]


class Triangle(enum.IntEnum):
    """The triangle of the (row-major) a and b that is read; the other one never is."""

    LOWER = 0
    UPPER = 1


class Problem(enum.IntEnum):
    """The standard problem ``a v = λ v``, or the generalized one of LAPACK's itype:
    1 ``a v = λ b v``, 2 ``a b v = λ v``, 3 ``b a v = λ v``."""

    STANDARD = 0
    TYPE1 = 1
    TYPE2 = 2
    TYPE3 = 3

    @property
    def generalized(self) -> bool:
        return self is not Problem.STANDARD


class Subset(enum.IntEnum):
    """All eigenpairs, those of 0-based inclusive indices ``[il, iu]``, or those in ``(vl, vu]``."""

    ALL = 0
    BY_INDEX = 1
    BY_VALUE = 2


def problem_type(value: Any, name: str) -> Problem:
    """The generalized problem of type ``value`` (1, 2 or 3); ``name`` is the caller's keyword."""
    # not a bool, and not an array (whose ``in`` would be elementwise or ambiguous)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) or \
            value not in (1, 2, 3):
        raise ValueError(f"{name} must be 1, 2 or 3; got {name}={value!r}")
    return Problem(int(value))


_FIELD_TYPES = (
    ("problem", Problem),
    ("triangle", Triangle),
    ("vectors", bool),
    ("subset", Subset),
    ("il", operator.index),
    ("iu", operator.index),
    ("vl", float),
    ("vu", float),
    ("shared_b", bool),
)


@dataclasses.dataclass(frozen=True)
class EighOptions:
    """The problem, the triangle read, whether eigenvectors are computed, the subset, and
    whether b is shared by the batch.

    Fields that the subset does not use are zero, so equal problems compare (and hash) equal.
    """

    problem: Problem = Problem.STANDARD
    triangle: Triangle = Triangle.LOWER
    vectors: bool = True
    subset: Subset = Subset.ALL
    il: int = 0
    iu: int = 0
    vl: float = 0.0
    vu: float = 0.0
    # Every batch element has the same b: the CPU kernels factorise it once (per thread), not
    # once per element. Set by eigh when b has no batch elements of its own; other kernels
    # read each element's (equal) b as usual.
    shared_b: bool = False

    def __post_init__(self):
        # Coerce (plain ints and bools are accepted) so that equal problems hash equal.
        for name, kind in _FIELD_TYPES:
            object.__setattr__(self, name, kind(getattr(self, name)))
        if self.subset is Subset.BY_INDEX and not 0 <= self.il <= self.iu:
            raise ValueError(f"EighOptions: need 0 <= il <= iu; got il={self.il}, iu={self.iu}")
        if self.subset is Subset.BY_VALUE and not self.vl < self.vu:
            raise ValueError(f"EighOptions: need vl < vu; got vl={self.vl}, vu={self.vu}")

    @classmethod
    def build(
        cls,
        n: int,
        *,
        problem: Problem,
        lower: bool,
        eigvals_only: bool,
        subset_by_index=None,
        subset_by_value=None,
        shared_b: bool = False,
    ) -> EighOptions:
        """From ``eigh``'s arguments for matrices of order ``n`` (ValueError where wrong)."""
        if subset_by_index is not None and subset_by_value is not None:
            raise ValueError("pass at most one of subset_by_index and subset_by_value")
        subset, il, iu, vl, vu = Subset.ALL, 0, 0, 0.0, 0.0
        if subset_by_index is not None:
            try:
                if any(isinstance(i, (bool, np.bool_)) for i in subset_by_index):
                    raise TypeError("a bool is not an index")
                il, iu = (operator.index(i) for i in subset_by_index)
            except (TypeError, ValueError):
                raise ValueError(
                    f"subset_by_index must be two integers (first, last), got {subset_by_index!r}"
                ) from None
            if not 0 <= il <= iu <= n - 1:
                raise ValueError(
                    f"subset_by_index={tuple(subset_by_index)!r} is invalid for n={n}: "
                    "need 0 <= first <= last <= n - 1"
                )
            subset = Subset.BY_INDEX
        elif subset_by_value is not None:
            try:
                vl, vu = (float(x) for x in subset_by_value)
            except (TypeError, ValueError):
                raise ValueError(
                    f"subset_by_value must be two numbers (low, high], got {subset_by_value!r}"
                ) from None
            if not vl < vu:
                raise ValueError(f"subset_by_value={tuple(subset_by_value)!r}: need low < high")
            big = float(np.finfo(np.float64).max)
            vl, vu = max(vl, -big), min(vu, big)
            # The kernel reads subnormal bounds as 0 (flush-to-zero): (0, 5e-324] would be empty
            # there and a kernel error; as read, it is an empty interval, refused here.
            tiny = float(np.finfo(np.float64).tiny)
            vl, vu = (0.0 if abs(x) < tiny else x for x in (vl, vu))
            if not vl < vu:
                raise ValueError(
                    f"subset_by_value={tuple(subset_by_value)!r}: need low < high, with "
                    f"subnormal bounds (below {tiny:.3g} in magnitude) read as 0"
                )
            subset = Subset.BY_VALUE
        return cls(
            problem=problem,
            triangle=Triangle.LOWER if lower else Triangle.UPPER,
            vectors=not eigvals_only,
            subset=subset,
            il=il,
            iu=iu,
            vl=vl,
            vu=vu,
            shared_b=shared_b and problem.generalized,
        )

    @property
    def lower(self) -> bool:
        return self.triangle is Triangle.LOWER

    @property
    def generalized(self) -> bool:
        return self.problem.generalized

    def count(self, n: int) -> int:
        """m, the number of eigenvalues returned for order n (a by-value subset pads to n)."""
        return self.iu - self.il + 1 if self.subset is Subset.BY_INDEX else n

    def replace(self, **changes) -> EighOptions:
        return dataclasses.replace(self, **changes)

    def whole(self) -> EighOptions:
        """The same problem without a subset: all eigenpairs."""
        return self.replace(subset=Subset.ALL, il=0, iu=0, vl=0.0, vu=0.0)

    def attribute(self) -> dict:
        """The FFI attribute: a dictionary that lowers to an ``ir.DictAttr``."""
        return dict(
            problem=np.int64(self.problem),
            triangle=np.int64(self.triangle),
            vectors=np.bool_(self.vectors),
            subset=np.int64(self.subset),
            il=np.int64(self.il),
            iu=np.int64(self.iu),
            vl=np.float64(self.vl),
            vu=np.float64(self.vu),
            shared_b=np.bool_(self.shared_b),
        )
