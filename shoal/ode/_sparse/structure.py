"""``SparseStructure``: everything the kernel needs about one pattern, the Python reference of
the emitted arithmetic, and the entry to its C++ emission."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from shoal.ode._sparse import emission


def read_only(a) -> np.ndarray:
    """A contiguous, non-writable copy (or view) of ``a``."""
    a = np.ascontiguousarray(a)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class SparseStructure:
    """Everything the kernel needs about one pattern. Arrays are read-only.

    Indices: ``perm[k]`` is the original variable eliminated k-th (new -> original), ``iperm`` the
    inverse (original -> new). CSR arrays describe ``L + U`` of the permuted matrix
    ``M[k, l] = A[perm[k], perm[l]]``, row-major with sorted columns.
    """

    n: int
    ordering: str  # the ordering used: "amd", or "natural" (asked, or less fill)
    pattern: np.ndarray  # (n, n) bool: the Jacobian pattern, ORIGINAL order, diagonal set
    perm: np.ndarray  # new -> original
    iperm: np.ndarray  # original -> new
    colours: np.ndarray  # colour of each ORIGINAL column
    n_colours: int
    filled: np.ndarray  # (n, n) bool: L + U pattern, PERMUTED order
    row_ptr: np.ndarray  # (n + 1,) CSR of L + U (permuted)
    col_idx: np.ndarray  # (nnz,) permuted column of each slot
    nnz: int
    diag_ptr: np.ndarray  # (n,) slot of permuted diagonal k
    jacobian_slots: np.ndarray  # (n, n_colours): [i, c] slot of (i, j), colour(j) = c; or -1
    # factorisation schedule (up-looking): L entries in execution order and their updates
    l_slot: np.ndarray  # slot of L entry (i, k)
    l_pivot: np.ndarray  # slot of the diagonal (k, k) it is divided by
    update_ptr: np.ndarray  # updates of L entry e: update_ptr[e] .. update_ptr[e + 1]
    # slot (i, j) of each update; its source is the t-th U entry right of (k, k), that is slot
    # l_pivot[e] + 1 + t
    update_dst: np.ndarray
    # the same updates as runs of consecutive destinations (the table-driven emission's form):
    run_ptr: np.ndarray  # runs of L entry e: run_ptr[e] .. run_ptr[e + 1]
    run_dst: np.ndarray  # first destination slot of each run
    run_len: np.ndarray  # its length; sources continue consecutively across the runs
    col_orig: np.ndarray  # (nnz,) ORIGINAL column of each slot (perm[col_idx])

    @property
    def nnz_jacobian(self) -> int:
        return int(self.pattern.sum())

    @property
    def fill(self) -> int:
        """Entries of L + U not in the (diagonal-augmented) Jacobian pattern."""
        return self.nnz - self.nnz_jacobian

    @property
    def n_updates(self) -> int:
        """Multiply-subtract updates in the factorisation."""
        return int(self.update_dst.size)

    @property
    def n_substitutions(self) -> int:
        """Off-diagonal multiply-subtracts in the forward and back substitutions together."""
        return self.nnz - self.n

    def slot(self, i: int, j: int) -> int:
        """CSR slot of entry (i, j) in ORIGINAL indices; -1 if not in L + U."""
        r, c = int(self.iperm[i]), int(self.iperm[j])
        lo, hi = int(self.row_ptr[r]), int(self.row_ptr[r + 1])
        k = lo + int(np.searchsorted(self.col_idx[lo:hi], c))
        return k if k < hi and int(self.col_idx[k]) == c else -1

    def assemble(self, matrix) -> np.ndarray:
        """The CSR values of a dense ``(n, n)`` matrix (ORIGINAL order) on the Jacobian pattern:
        entries outside the pattern are dropped, fill slots are 0 (testing and debugging aid)."""
        m = np.asarray(matrix)
        a = np.zeros(self.nnz, dtype=m.dtype)
        rows, cols = np.nonzero(self.pattern)
        a[self.jacobian_slots[rows, self.colours[cols]]] = m[rows, cols]
        return a

    # -- Python reference of the emitted arithmetic (same operations, same order) ------------

    def factor_reference(self, a: np.ndarray) -> None:
        """In-place unpivoted LU of the CSR values ``a``, exactly as the emitted ``factor``."""
        dtype = a.dtype.type
        ptr, dst = self.update_ptr.tolist(), self.update_dst.tolist()
        for e, (ik, kk) in enumerate(zip(self.l_slot.tolist(), self.l_pivot.tolist(), strict=True)):
            m = dtype(a[ik] / a[kk])
            a[ik] = m
            for t, ij in enumerate(dst[ptr[e] : ptr[e + 1]]):
                a[ij] = dtype(a[ij] - dtype(m * a[kk + 1 + t]))

    def solve_reference(self, a: np.ndarray, b: np.ndarray) -> None:
        """``b := A^-1 b`` in place (ORIGINAL order), exactly as the emitted ``solve``."""
        T = b.dtype.type
        perm, ptr, dp, co = (
            x.tolist() for x in (self.perm, self.row_ptr, self.diag_ptr, self.col_orig)
        )
        for i in range(self.n):
            s = b[perm[i]]
            for p in range(ptr[i], dp[i]):
                s = T(s - T(T(a[p]) * b[co[p]]))
            b[perm[i]] = s
        for i in range(self.n - 1, -1, -1):
            s = b[perm[i]]
            for p in range(dp[i] + 1, ptr[i + 1]):
                s = T(s - T(T(a[p]) * b[co[p]]))
            b[perm[i]] = T(s / T(a[dp[i]]))

    def solve_transposed_reference(self, a: np.ndarray, b: np.ndarray) -> None:
        """``b := A^-T b`` in place (ORIGINAL order), exactly as the emitted
        ``solve_transposed``."""
        T = b.dtype.type
        perm, ptr, dp, co = (
            x.tolist() for x in (self.perm, self.row_ptr, self.diag_ptr, self.col_orig)
        )
        for i in range(self.n):
            w = T(b[perm[i]] / T(a[dp[i]]))
            b[perm[i]] = w
            for p in range(dp[i] + 1, ptr[i + 1]):
                b[co[p]] = T(b[co[p]] - T(T(a[p]) * w))
        for i in range(self.n - 1, -1, -1):
            z = b[perm[i]]
            for p in range(ptr[i], dp[i]):
                b[co[p]] = T(b[co[p]] - T(T(a[p]) * z))

    # -- C++ emission -------------------------------------------------------------------------

    def unroll_choice(self, unrolled: bool | None = None) -> tuple[bool, bool]:
        """(factor unrolled, solves unrolled) for ``emit_cpp(unrolled=...)``."""
        return emission.unroll_choice(self, unrolled)

    def emit_cpp(self, name: str, unrolled: bool | None = None, transposed: bool = False) -> str:
        """C++17 source (host and device) of ``struct name`` with the sparse LU of this
        structure.

        ``unrolled=True``: factorisation and both triangular solves as straight-line code with
        literal slots; ``False``: loops over index tables; ``None``: the factorisation is unrolled
        while ``n_updates <= MAX_UNROLLED_UPDATES`` and the solves while
        ``n_substitutions <= MAX_UNROLLED_SUBSTITUTIONS``. ``transposed``: with
        ``solve_transposed`` too (the adjoint's), emitted as the solves are. All emissions
        perform the same floating-point operations in the same order. Needs
        ``#include "shoal/config.hpp"`` first.
        """
        return emission.emit_cpp(self, name, unrolled, transposed)
