"""Fill-reducing orderings: SuiteSparse AMD (via cvxopt), or the natural order."""

from __future__ import annotations

import numpy as np

from shoal.ode._sparse.pattern import square_bool

ORDERINGS = ("amd", "natural")


def amd_ordering(pattern) -> np.ndarray:
    """SuiteSparse AMD (through cvxopt) on the symmetrised pattern ``S + S^T``.

    Returns ``perm`` with ``perm[k]`` the original index of the ``k``-th eliminated variable, to be
    applied symmetrically (``S[perm][:, perm]``).
    """
    p = square_bool(pattern)
    n = p.shape[0]
    try:
        import cvxopt
        import cvxopt.amd
    except ImportError as exc:  # pragma: no cover - cvxopt is a dependency
        raise ImportError(
            "ordering='amd' needs cvxopt (pip install cvxopt), which carries "
            "SuiteSparse AMD; or pass ordering='natural'"
        ) from exc
    sym = p | p.T
    np.fill_diagonal(sym, True)
    rows, cols = np.nonzero(np.tril(sym))
    a = cvxopt.spmatrix(1.0, rows.tolist(), cols.tolist(), (n, n))
    perm = np.array(list(cvxopt.amd.order(a, "L")), dtype=np.int64)
    if perm.shape != (n,) or not np.array_equal(np.sort(perm), np.arange(n)):
        raise RuntimeError(f"AMD returned {perm!r}, not a permutation of 0..{n - 1}")
    return perm
