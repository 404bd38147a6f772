"""Symbolic factorisation: the fill of an unpivoted LU, from the pattern alone."""

from __future__ import annotations

import numpy as np

from shoal.ode._sparse.pattern import square_bool


def symbolic_lu(pattern_permuted) -> np.ndarray:
    """The filled pattern of ``L + U`` of an unpivoted LU of a matrix with this (already
    permuted) pattern: pattern-only Gaussian elimination, one Python-int bitset per row.

    Up-looking: row ``i`` takes, for each ``k < i`` present in it in increasing order (fill
    included, as it appears), the strictly-upper part of the final row ``k``. Exactly the entries
    the numeric factorisation touches. The diagonal is taken as present.
    """
    p = square_bool(pattern_permuted, "pattern_permuted")
    n = p.shape[0]
    rows = [
        int.from_bytes(np.packbits(r, bitorder="little").tobytes(), "little") | (1 << i)
        for i, r in enumerate(p)
    ]
    upper = [0] * n
    for i in range(n):
        r = rows[i]
        below = (1 << i) - 1
        done = 0  # columns < k already applied
        while True:
            pending = r & below & ~done
            if not pending:
                break
            k = (pending & -pending).bit_length() - 1
            r |= upper[k]
            done = (1 << (k + 1)) - 1
        rows[i] = r
        upper[i] = (r >> (i + 1)) << (i + 1)
    nbytes = (n + 7) // 8
    out = np.zeros((n, n), dtype=bool)
    for i, r in enumerate(rows):
        bits = np.unpackbits(
            np.frombuffer(r.to_bytes(nbytes, "little"), dtype=np.uint8), bitorder="little"
        )
        out[i] = bits[:n].astype(bool)
    return out
