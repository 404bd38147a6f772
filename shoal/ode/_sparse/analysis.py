"""``analyze``: a pattern's colouring, ordering, symbolic factorisation, CSR layout of ``L + U``
and factorisation schedule, as a ``SparseStructure``."""

from __future__ import annotations

import numpy as np

from shoal.ode._sparse.colouring import colour_columns
from shoal.ode._sparse.ordering import ORDERINGS, amd_ordering
from shoal.ode._sparse.pattern import square_bool
from shoal.ode._sparse.structure import SparseStructure, read_only
from shoal.ode._sparse.symbolic import symbolic_lu


def analyze(pattern, ordering: str = "amd") -> SparseStructure:
    """Colouring, ordering, symbolic factorisation and CSR layout of an ``(n, n)`` pattern (the
    diagonal is added if missing)."""
    if not isinstance(ordering, str) or ordering not in ORDERINGS:
        raise ValueError(
            f"ordering must be one of {', '.join(map(repr, ORDERINGS))}; got {ordering!r}"
        )
    p = np.array(square_bool(pattern), dtype=bool)
    n = p.shape[0]
    np.fill_diagonal(p, True)

    colours = colour_columns(p)
    n_colours = int(colours.max()) + 1
    perm = np.arange(n, dtype=np.int64)
    filled = symbolic_lu(p)
    if ordering == "amd":
        # AMD is a heuristic: on some patterns (rings, narrow bands) the natural order fills
        # less. Keep whichever gives fewer entries in L + U; ties keep the natural order.
        amd = amd_ordering(p)
        filled_amd = symbolic_lu(p[np.ix_(amd, amd)])
        if filled_amd.sum() < filled.sum():
            perm, filled = amd, filled_amd
        else:
            ordering = "natural"
    iperm = np.empty(n, dtype=np.int64)
    iperm[perm] = np.arange(n)

    counts = filled.sum(axis=1)
    row_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=row_ptr[1:])
    _, col_idx = np.nonzero(filled)  # row-major, sorted columns
    col_idx = col_idx.astype(np.int64)
    nnz = int(row_ptr[-1])
    slot_of = np.full((n, n), -1, dtype=np.int64)  # permuted (r, c) -> slot
    slot_of[filled] = np.arange(nnz)
    diag_ptr = slot_of[np.arange(n), np.arange(n)]

    jac = np.full((n, n_colours), -1, dtype=np.int64)
    rows, cols = np.nonzero(p)
    jac[rows, colours[cols]] = slot_of[iperm[rows], iperm[cols]]
    if (jac[rows, colours[cols]] < 0).any():
        raise RuntimeError("shoal bug: a Jacobian entry has no slot in L + U")

    l_slot, l_pivot, update_ptr, update_dst = [], [], [0], []
    run_ptr, run_dst, run_len = [0], [], []
    for i in range(n):
        for pos in range(int(row_ptr[i]), int(diag_ptr[i])):
            k = int(col_idx[pos])
            l_slot.append(pos)
            l_pivot.append(int(diag_ptr[k]))
            u_cols = col_idx[diag_ptr[k] + 1 : row_ptr[k + 1]]
            dst = slot_of[i, u_cols]
            if (dst < 0).any():
                raise RuntimeError("shoal bug: symbolic factorisation missed a fill entry")
            update_dst.extend(dst.tolist())
            update_ptr.append(len(update_dst))
            if dst.size:
                starts = np.concatenate([[0], np.flatnonzero(np.diff(dst) != 1) + 1])
                run_dst.extend(dst[starts].tolist())
                run_len.extend(np.diff(np.concatenate([starts, [dst.size]])).tolist())
            run_ptr.append(len(run_dst))

    i64 = lambda x: read_only(np.asarray(x, dtype=np.int64))  # noqa: E731
    return SparseStructure(
        n=n,
        ordering=ordering,
        pattern=read_only(p),
        perm=i64(perm),
        iperm=i64(iperm),
        colours=i64(colours),
        n_colours=n_colours,
        filled=read_only(filled),
        row_ptr=i64(row_ptr),
        col_idx=i64(col_idx),
        nnz=nnz,
        diag_ptr=i64(diag_ptr),
        jacobian_slots=i64(jac),
        l_slot=i64(l_slot),
        l_pivot=i64(l_pivot),
        update_ptr=i64(update_ptr),
        update_dst=i64(update_dst),
        run_ptr=i64(run_ptr),
        run_dst=i64(run_dst),
        run_len=i64(run_len),
        col_orig=i64(perm[col_idx]),
    )
