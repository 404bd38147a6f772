"""What the user passed as ``sparsity=``, as an ``(n, n)`` boolean mask with the diagonal set
(the iteration matrix ``I/(h*gamma) - J`` always has it)."""

from __future__ import annotations

import operator

import numpy as np
import scipy.sparse

_EXPECTED = (
    "an (n, n) boolean (or 0/1) mask, a SciPy sparse matrix, or an (nnz, 2) integer "
    "array of (row, col) pairs"
)


def normalize_pattern(sparsity, n: int) -> np.ndarray:
    """The Jacobian pattern as a fresh ``(n, n)`` bool array with the diagonal set.

    ``sparsity`` may be an ``(n, n)`` boolean or 0/1 mask (NumPy, JAX, nested lists, ...), a
    SciPy sparse matrix or array of any format (every *stored* entry is structural, an explicit
    zero included), or an ``(nnz, 2)`` integer array of ``(row, col)`` pairs (duplicates
    allowed). An ``(n, n)`` array is always read as a mask, so with ``n == 2`` pass pairs as a
    list of ``(nnz, 2)`` with ``nnz != 2`` or as a mask.
    """
    if isinstance(n, (bool, np.bool_)):
        raise TypeError(f"n must be an integer number of variables, got {n!r}")
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"n must be an integer number of variables, got {n!r}") from None
    if n < 1:
        raise ValueError(f"n must be at least 1 (the number of variables), got {n}")

    if scipy.sparse.issparse(sparsity):
        if sparsity.ndim != 2 or tuple(sparsity.shape) != (n, n):
            raise ValueError(
                f"sparsity is a SciPy sparse matrix of shape {tuple(sparsity.shape)}; expected "
                f"({n}, {n}) for {n} variables"
            )
        coo = scipy.sparse.coo_matrix(sparsity)
        mask = np.zeros((n, n), dtype=bool)
        mask[np.asarray(coo.row, dtype=np.intp), np.asarray(coo.col, dtype=np.intp)] = True
        return _with_diagonal(mask)

    if sparsity is None or isinstance(sparsity, (str, bytes, dict, set)):
        raise TypeError(f"sparsity must be {_EXPECTED}; got {type(sparsity).__name__} {sparsity!r}")
    try:
        arr = np.asarray(sparsity)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"sparsity of type {type(sparsity).__name__} could not be read as an "
            f"array ({exc}); expected {_EXPECTED}"
        ) from None
    desc = f"shape {arr.shape}, dtype {arr.dtype}"
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"sparsity has {desc}; expected {_EXPECTED}")

    if arr.ndim == 2 and arr.shape == (n, n):
        return _mask(arr, n, desc)
    if arr.dtype.kind == "b":
        raise ValueError(
            f"sparsity is a boolean mask of shape {arr.shape}; expected ({n}, {n}) "
            f"for {n} variables"
        )
    if arr.size == 0 and arr.ndim in (1, 2) and (arr.ndim == 1 or arr.shape[1] in (0, 2)):
        return _with_diagonal(np.zeros((n, n), dtype=bool))  # no pairs: the diagonal alone
    if arr.ndim == 2 and arr.shape[1] == 2:
        return _pairs(arr, n, desc)
    raise ValueError(
        f"sparsity has {desc}; expected an ({n}, {n}) mask for {n} variables or an "
        f"(nnz, 2) integer array of (row, col) pairs"
    )


def _with_diagonal(mask: np.ndarray) -> np.ndarray:
    np.fill_diagonal(mask, True)
    return mask


def _mask(arr: np.ndarray, n: int, desc: str) -> np.ndarray:
    if arr.dtype.kind == "b":
        return _with_diagonal(np.array(arr, dtype=bool, order="C"))
    bad = ~((arr == 0) | (arr == 1))  # also catches NaN
    if bad.any():
        i, j = (int(x) for x in np.argwhere(bad)[0])
        raise ValueError(
            f"sparsity is an ({n}, {n}) mask ({desc}) holding {arr[i, j]!r} at ({i}, {j}); a "
            f"mask must hold booleans or 0/1 (pass `jacobian != 0` to use a matrix's nonzeros)"
        )
    return _with_diagonal(np.array(arr == 1, dtype=bool, order="C"))


def _pairs(arr: np.ndarray, n: int, desc: str) -> np.ndarray:
    if arr.dtype.kind not in "iu":
        raise TypeError(f"sparsity holds (row, col) pairs ({desc}); the pairs must be integers")
    pairs = arr.astype(np.int64, copy=False)
    bad = np.flatnonzero(((pairs < 0) | (pairs >= n)).any(axis=1))
    if bad.size:
        k = int(bad[0])
        row, col = (int(x) for x in pairs[k])
        raise ValueError(
            f"sparsity pair {k} is (row={row}, col={col}), outside 0..{n - 1} for {n} variables "
            f"({bad.size} pair(s) out of range; {desc}); negative indices are not accepted"
        )
    mask = np.zeros((n, n), dtype=bool)
    mask[pairs[:, 0], pairs[:, 1]] = True
    return _with_diagonal(mask)


def square_bool(pattern, what: str = "pattern") -> np.ndarray:
    if scipy.sparse.issparse(pattern):
        pattern = pattern.toarray() != 0
    p = np.asarray(pattern)
    if p.ndim != 2 or p.shape[0] != p.shape[1] or p.shape[0] < 1:
        raise ValueError(f"{what} must be a square (n, n) mask with n >= 1, got shape {p.shape}")
    return np.array(p != 0, dtype=bool, order="C") if p.dtype != bool else p
