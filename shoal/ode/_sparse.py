"""Host-side analysis of a Jacobian sparsity pattern, and emission of its sparse direct solver.

Everything here runs once, on the host, when a kernel is built; nothing here imports JAX.

Pipeline (``analyze``):

1. ``normalize_pattern`` turns what the user passed as ``sparsity=`` into an ``(n, n)`` boolean
   mask with the diagonal set (the iteration matrix ``I/(h*gamma) - J`` always has it).
2. ``colour_columns`` colours the column-intersection graph greedily (best of several vertex
   orderings, verified orthogonal): one dual-number sweep per colour recovers the Jacobian.
3. ``amd_ordering`` (SuiteSparse AMD via cvxopt, on ``S + S^T``; kept only when it fills less
   than the natural order) or the natural ordering gives a symmetric permutation ``P S P^T``,
   which keeps every diagonal entry on the diagonal; there is no pivoting, so the structure is
   fixed at compile time and the same in every thread.
4. ``symbolic_lu`` eliminates the permuted pattern bit-per-entry: exactly the entries an
   unpivoted numeric LU touches, no more and no less.
5. One CSR image of ``L + U`` (L strictly left of the diagonal with unit diagonal implied, U from
   the diagonal rightwards), factorised in place, up-looking, row by row.

``SparseStructure.emit_cpp`` emits a C++17 struct (host and device) with the factorisation and
both triangular solves either as straight-line code with literal slots or as loops over index
tables. Both perform the same floating-point operations in the same order, so they agree bit for
bit (and with ``SparseStructure.factor_reference`` / ``solve_reference``, the same sequence in
Python, when the C++ is compiled without floating-point contraction).
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass

import numpy as np
import scipy.sparse

__all__ = [
    "MAX_UNROLLED_SUBSTITUTIONS",
    "MAX_UNROLLED_UPDATES",
    "ORDERINGS",
    "SparseStructure",
    "amd_ordering",
    "analyze",
    "colour_columns",
    "normalize_pattern",
    "symbolic_lu",
]

# Above these sizes the factorisation (multiply-subtract updates) / the two triangular solves
# (off-diagonal multiply-subtracts, forward and back together) are emitted as loops over index
# tables instead of straight-line code, to bound the generated source and its compile time.
# Measured compile cost of straight-line code, CPU time per instantiation (factor<S> or
# solve<S, T>): g++ -O3 about 1.3 ms per update and 0.4 ms per substitution; nvcc -arch=sm_90
# about 2.4 ms per update and 0.9 ms per substitution (mildly superlinear: 3802 updates cost
# 3.8x what 1215 do); table-driven, well under a second whatever the size. The solves run once
# per stage and sensitivity column, the factorisation once per step, so they get more room.
# Source: about 40 bytes per unrolled operation.
MAX_UNROLLED_UPDATES = 2000
MAX_UNROLLED_SUBSTITUTIONS = 4000

ORDERINGS = ("amd", "natural")

_EXPECTED = ("an (n, n) boolean (or 0/1) mask, a SciPy sparse matrix, or an (nnz, 2) integer "
             "array of (row, col) pairs")


# --------------------------------------------------------------------------------------------
# 1. Input normalisation
# --------------------------------------------------------------------------------------------

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
                f"({n}, {n}) for {n} variables")
        coo = scipy.sparse.coo_matrix(sparsity)
        mask = np.zeros((n, n), dtype=bool)
        mask[np.asarray(coo.row, dtype=np.intp), np.asarray(coo.col, dtype=np.intp)] = True
        return _with_diagonal(mask)

    if sparsity is None or isinstance(sparsity, (str, bytes, dict, set)):
        raise TypeError(f"sparsity must be {_EXPECTED}; got {type(sparsity).__name__} "
                        f"{sparsity!r}")
    try:
        arr = np.asarray(sparsity)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"sparsity of type {type(sparsity).__name__} could not be read as an "
                        f"array ({exc}); expected {_EXPECTED}") from None
    desc = f"shape {arr.shape}, dtype {arr.dtype}"
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"sparsity has {desc}; expected {_EXPECTED}")

    if arr.ndim == 2 and arr.shape == (n, n):
        return _mask(arr, n, desc)
    if arr.dtype.kind == "b":
        raise ValueError(f"sparsity is a boolean mask of shape {arr.shape}; expected ({n}, {n}) "
                         f"for {n} variables")
    if arr.size == 0 and arr.ndim in (1, 2) and (arr.ndim == 1 or arr.shape[1] in (0, 2)):
        return _with_diagonal(np.zeros((n, n), dtype=bool))  # no pairs: the diagonal alone
    if arr.ndim == 2 and arr.shape[1] == 2:
        return _pairs(arr, n, desc)
    raise ValueError(f"sparsity has {desc}; expected an ({n}, {n}) mask for {n} variables or an "
                     f"(nnz, 2) integer array of (row, col) pairs")


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
            f"mask must hold booleans or 0/1 (pass `jacobian != 0` to use a matrix's nonzeros)")
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
            f"({bad.size} pair(s) out of range; {desc}); negative indices are not accepted")
    mask = np.zeros((n, n), dtype=bool)
    mask[pairs[:, 0], pairs[:, 1]] = True
    return _with_diagonal(mask)


def _square_bool(pattern, what: str = "pattern") -> np.ndarray:
    if scipy.sparse.issparse(pattern):
        pattern = pattern.toarray() != 0
    p = np.asarray(pattern)
    if p.ndim != 2 or p.shape[0] != p.shape[1] or p.shape[0] < 1:
        raise ValueError(f"{what} must be a square (n, n) mask with n >= 1, got shape {p.shape}")
    return np.array(p != 0, dtype=bool, order="C") if p.dtype != bool else p


# --------------------------------------------------------------------------------------------
# 2. Colouring of the column-intersection graph
# --------------------------------------------------------------------------------------------

_RANDOM_SEEDS = (0, 1, 2)


def colour_columns(pattern) -> np.ndarray:
    """Colours (``0..n_colours-1``) of the columns of ``pattern`` such that no row holds two
    nonzeros of one colour.

    Columns ``j`` and ``k`` conflict when some row has nonzeros in both. The result is the
    greedy colouring with the fewest colours over several vertex orderings (natural,
    largest-first, smallest-last, incidence-degree, DSATUR and a few seeded random ones; ties go
    to the earlier in that list), then improved by iterated greedy (Culberson: recolouring in an
    order that keeps each colour class together never needs more colours), stopping early at the
    lower bound (the most nonzeros in a row). Deterministic; verified before return.
    """
    p = _square_bool(pattern)
    n = p.shape[0]
    adj = _conflict_graph(p)
    degree = np.array([len(a) for a in adj], dtype=np.int64)
    lower_bound = int(p.sum(axis=1).max())

    best = None
    candidates = [
        lambda: _greedy(adj, np.arange(n)),
        lambda: _greedy(adj, np.argsort(-degree, kind="stable")),
        lambda: _greedy(adj, _smallest_last(adj, degree)),
        lambda: _greedy(adj, _incidence_degree(adj, degree)),
        lambda: _dsatur(adj, degree),
    ] + [lambda s=s: _greedy(adj, np.random.default_rng(s).permutation(n)) for s in _RANDOM_SEEDS]
    for make in candidates:
        colours = make()
        if best is None or colours.max() < best.max():
            best = colours
        if best.max() + 1 <= lower_bound:
            break
    if best.max() + 1 > lower_bound:
        best = _iterated_greedy(adj, best, lower_bound)
    _verify_colouring(p, best)
    return best


_ITERATED_GREEDY_ROUNDS = 40


def _iterated_greedy(adj: list[np.ndarray], colours: np.ndarray, lower_bound: int) -> np.ndarray:
    rng = np.random.default_rng(12345)
    best, current = colours, colours
    for it in range(_ITERATED_GREEDY_ROUNDS):
        k = int(current.max()) + 1
        sizes = np.bincount(current, minlength=k)
        strategy = it % 3
        if strategy == 0:
            class_order = np.arange(k)[::-1]                     # reverse
        elif strategy == 1:
            class_order = np.argsort(-sizes, kind="stable")       # largest class first
        else:
            class_order = rng.permutation(k)                      # random
        rank = np.empty(k, dtype=np.int64)
        rank[class_order] = np.arange(k)
        order = np.argsort(rank[current], kind="stable")
        current = _greedy(adj, order)
        if current.max() < best.max():
            best = current
            if best.max() + 1 <= lower_bound:
                break
    return best


def _conflict_graph(p: np.ndarray) -> list[np.ndarray]:
    s = scipy.sparse.csr_matrix(p.astype(np.int32))
    c = (s.T @ s).tocsr()
    c.setdiag(0)
    c.eliminate_zeros()
    c.sort_indices()
    return [c.indices[c.indptr[j]:c.indptr[j + 1]].astype(np.int64) for j in range(p.shape[0])]


def _greedy(adj: list[np.ndarray], order) -> np.ndarray:
    n = len(adj)
    colours = np.full(n, -1, dtype=np.int64)
    for v in order:
        used = colours[adj[v]]
        used = used[used >= 0]
        if used.size == 0:
            colours[v] = 0
            continue
        taken = np.zeros(used.size + 1, dtype=bool)
        taken[used[used <= used.size]] = True
        colours[v] = int(np.argmin(taken))  # the smallest colour no neighbour has
    return colours


def _smallest_last(adj: list[np.ndarray], degree: np.ndarray) -> np.ndarray:
    """Repeatedly remove a vertex of least remaining degree; colour in reverse removal order."""
    n = len(adj)
    deg = degree.astype(np.float64)
    removed = []
    for _ in range(n):
        v = int(np.argmin(deg))
        removed.append(v)
        deg[v] = np.inf
        deg[adj[v]] -= 1
    return np.array(removed[::-1], dtype=np.int64)


def _incidence_degree(adj: list[np.ndarray], degree: np.ndarray) -> np.ndarray:
    """Next: the vertex with most already-ordered neighbours (ties: larger degree, lower index)."""
    n = len(adj)
    incidence = np.zeros(n, dtype=np.int64)
    key = np.zeros(n, dtype=np.float64)
    done = np.zeros(n, dtype=bool)
    order = []
    for _ in range(n):
        key[:] = incidence * (n + 1) + degree
        key[done] = -1
        v = int(np.argmax(key))
        order.append(v)
        done[v] = True
        incidence[adj[v]] += 1
    return np.array(order, dtype=np.int64)


def _dsatur(adj: list[np.ndarray], degree: np.ndarray) -> np.ndarray:
    """Brelaz's DSATUR: colour next the vertex whose neighbours show the most distinct colours."""
    n = len(adj)
    colours = np.full(n, -1, dtype=np.int64)
    seen = [set() for _ in range(n)]
    saturation = np.zeros(n, dtype=np.int64)
    key = np.zeros(n, dtype=np.float64)
    for _ in range(n):
        key[:] = saturation * (n + 1) + degree
        key[colours >= 0] = -1
        v = int(np.argmax(key))
        c = 0
        while c in seen[v]:
            c += 1
        colours[v] = c
        for w in adj[v]:
            if c not in seen[w]:
                seen[w].add(c)
                saturation[w] += 1
    return colours


def _verify_colouring(p: np.ndarray, colours: np.ndarray) -> None:
    n = p.shape[0]
    if colours.shape != (n,) or (colours < 0).any():
        raise RuntimeError(f"shoal bug: colouring {colours!r} is not a colour per column")
    n_colours = int(colours.max()) + 1
    if set(colours.tolist()) != set(range(n_colours)):
        raise RuntimeError("shoal bug: colours are not contiguous from 0")
    rows, cols = np.nonzero(p)
    keys = rows.astype(np.int64) * n_colours + colours[cols]
    if np.unique(keys).size != keys.size:
        raise RuntimeError("shoal bug: the column colouring is not orthogonal (a row holds two "
                           "nonzeros of one colour)")


# --------------------------------------------------------------------------------------------
# 3. Ordering
# --------------------------------------------------------------------------------------------

def amd_ordering(pattern) -> np.ndarray:
    """SuiteSparse AMD (through cvxopt) on the symmetrised pattern ``S + S^T``.

    Returns ``perm`` with ``perm[k]`` the original index of the ``k``-th eliminated variable, to be
    applied symmetrically (``S[perm][:, perm]``).
    """
    p = _square_bool(pattern)
    n = p.shape[0]
    try:
        import cvxopt
        import cvxopt.amd
    except ImportError as exc:  # pragma: no cover - cvxopt is a dependency
        raise ImportError("ordering='amd' needs cvxopt (pip install cvxopt), which carries "
                          "SuiteSparse AMD; or pass ordering='natural'") from exc
    sym = p | p.T
    np.fill_diagonal(sym, True)
    rows, cols = np.nonzero(np.tril(sym))
    a = cvxopt.spmatrix(1.0, rows.tolist(), cols.tolist(), (n, n))
    perm = np.array(list(cvxopt.amd.order(a, "L")), dtype=np.int64)
    if perm.shape != (n,) or not np.array_equal(np.sort(perm), np.arange(n)):
        raise RuntimeError(f"AMD returned {perm!r}, not a permutation of 0..{n - 1}")
    return perm


# --------------------------------------------------------------------------------------------
# 4. Symbolic factorisation
# --------------------------------------------------------------------------------------------

def symbolic_lu(pattern_permuted) -> np.ndarray:
    """The filled pattern of ``L + U`` of an unpivoted LU of a matrix with this (already
    permuted) pattern: pattern-only Gaussian elimination, one Python-int bitset per row.

    Up-looking: row ``i`` takes, for each ``k < i`` present in it in increasing order (fill
    included, as it appears), the strictly-upper part of the final row ``k``. Exactly the entries
    the numeric factorisation touches. The diagonal is taken as present.
    """
    p = _square_bool(pattern_permuted, "pattern_permuted")
    n = p.shape[0]
    rows = [int.from_bytes(np.packbits(r, bitorder="little").tobytes(), "little") | (1 << i)
            for i, r in enumerate(p)]
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
        bits = np.unpackbits(np.frombuffer(r.to_bytes(nbytes, "little"), dtype=np.uint8),
                             bitorder="little")
        out[i] = bits[:n].astype(bool)
    return out


# --------------------------------------------------------------------------------------------
# 5. The structure
# --------------------------------------------------------------------------------------------

def _frozen(a) -> np.ndarray:
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
    ordering: str                # the ordering used: "amd", or "natural" (asked, or less fill)
    pattern: np.ndarray          # (n, n) bool: the Jacobian pattern, ORIGINAL order, diagonal set
    perm: np.ndarray             # new -> original
    iperm: np.ndarray            # original -> new
    colours: np.ndarray          # colour of each ORIGINAL column
    n_colours: int
    filled: np.ndarray           # (n, n) bool: L + U pattern, PERMUTED order
    row_ptr: np.ndarray          # (n + 1,) CSR of L + U (permuted)
    col_idx: np.ndarray          # (nnz,) permuted column of each slot
    nnz: int
    diag_ptr: np.ndarray         # (n,) slot of permuted diagonal k
    jacobian_slots: np.ndarray   # (n, n_colours): [i, c] slot of (i, j), colour(j) = c; or -1
    # factorisation schedule (up-looking): L entries in execution order and their updates
    l_slot: np.ndarray           # slot of L entry (i, k)
    l_pivot: np.ndarray          # slot of the diagonal (k, k) it is divided by
    update_ptr: np.ndarray       # updates of L entry e: update_ptr[e] .. update_ptr[e + 1]
    update_dst: np.ndarray       # slot (i, j) of each update; its source is the t-th U entry
                                 # right of (k, k): slot l_pivot[e] + 1 + t
    # the same updates as runs of consecutive destinations (the table-driven emission's form):
    run_ptr: np.ndarray          # runs of L entry e: run_ptr[e] .. run_ptr[e + 1]
    run_dst: np.ndarray          # first destination slot of each run
    run_len: np.ndarray          # its length; sources continue consecutively across the runs
    col_orig: np.ndarray         # (nnz,) ORIGINAL column of each slot (perm[col_idx])

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
            for t, ij in enumerate(dst[ptr[e]:ptr[e + 1]]):
                a[ij] = dtype(a[ij] - dtype(m * a[kk + 1 + t]))

    def solve_reference(self, a: np.ndarray, b: np.ndarray) -> None:
        """``b := A^-1 b`` in place (ORIGINAL order), exactly as the emitted ``solve``."""
        T = b.dtype.type
        perm, ptr, dp, co = (x.tolist() for x in (self.perm, self.row_ptr, self.diag_ptr,
                                                  self.col_orig))
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

    # -- C++ emission -------------------------------------------------------------------------

    def unroll_choice(self, unrolled: bool | None = None) -> tuple[bool, bool]:
        """(factor unrolled, solves unrolled) for ``emit_cpp(unrolled=...)``."""
        if unrolled is None:
            return (self.n_updates <= MAX_UNROLLED_UPDATES,
                    self.n_substitutions <= MAX_UNROLLED_SUBSTITUTIONS)
        if not isinstance(unrolled, (bool, np.bool_)):
            raise TypeError(f"unrolled must be True, False or None, got {unrolled!r}")
        return bool(unrolled), bool(unrolled)

    def emit_cpp(self, name: str, unrolled: bool | None = None) -> str:
        """C++17 source (host and device) of ``struct name`` with the sparse LU of this
        structure.

        ``unrolled=True``: factorisation and both triangular solves as straight-line code with
        literal slots; ``False``: loops over index tables; ``None``: the factorisation is unrolled
        while ``n_updates <= MAX_UNROLLED_UPDATES`` and the solves while
        ``n_substitutions <= MAX_UNROLLED_SUBSTITUTIONS``. All emissions perform the same
        floating-point operations in the same order. Needs ``#include "shoal/config.hpp"`` first.
        """
        return _emit(self, name, *self.unroll_choice(unrolled))


def analyze(pattern, ordering: str = "amd") -> SparseStructure:
    """Colouring, ordering, symbolic factorisation and CSR layout of an ``(n, n)`` pattern (the
    diagonal is added if missing)."""
    if not isinstance(ordering, str) or ordering not in ORDERINGS:
        raise ValueError(f"ordering must be one of {', '.join(map(repr, ORDERINGS))}; got "
                         f"{ordering!r}")
    p = np.array(_square_bool(pattern), dtype=bool)
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
            u_cols = col_idx[diag_ptr[k] + 1:row_ptr[k + 1]]
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

    i64 = lambda x: _frozen(np.asarray(x, dtype=np.int64))  # noqa: E731
    return SparseStructure(
        n=n, ordering=ordering, pattern=_frozen(p), perm=i64(perm), iperm=i64(iperm),
        colours=i64(colours), n_colours=n_colours, filled=_frozen(filled), row_ptr=i64(row_ptr),
        col_idx=i64(col_idx), nnz=nnz, diag_ptr=i64(diag_ptr), jacobian_slots=i64(jac),
        l_slot=i64(l_slot), l_pivot=i64(l_pivot), update_ptr=i64(update_ptr),
        update_dst=i64(update_dst), run_ptr=i64(run_ptr), run_dst=i64(run_dst),
        run_len=i64(run_len), col_orig=i64(perm[col_idx]))


# --------------------------------------------------------------------------------------------
# 6. Emission
# --------------------------------------------------------------------------------------------

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _ints(values, per_line: int = 24) -> str:
    vals = [str(int(v)) for v in values] or ["0"]  # no zero-length arrays in C++
    lines = [", ".join(vals[k:k + per_line]) for k in range(0, len(vals), per_line)]
    return "{ \\\n    " + ", \\\n    ".join(lines) + "}"  # macro body: continued lines


def _emit(s: SparseStructure, name: str, factor_unrolled: bool, solve_unrolled: bool) -> str:
    if not isinstance(name, str) or not _IDENT.match(name) or name.startswith("__"):
        raise ValueError(f"name must be a C++ identifier, got {name!r}")
    ns = f"shoal_sparse_tables_{name}"
    n, nc = s.n, s.n_colours

    tables = {
        "colour": s.colours,
        "jacobian_slot": s.jacobian_slots.ravel(),
        "diagonal_slot": s.diag_ptr[s.iperm],
    }
    if not factor_unrolled:
        tables.update(l_slot=s.l_slot, l_pivot=s.l_pivot, run_ptr=s.run_ptr,
                      run_dst=s.run_dst, run_len=s.run_len)
    if not solve_unrolled:
        tables.update(perm=s.perm, row_ptr=s.row_ptr, diag_ptr=s.diag_ptr, col_orig=s.col_orig)

    out = [
        f"// Sparse LU of a {n}x{n} pattern: {s.nnz_jacobian} Jacobian entries, "
        f"{s.nnz} in L+U (fill {s.fill}, ordering {s.ordering!r}), {nc} colours,",
        f"// {s.n_updates} factorisation updates ({'unrolled' if factor_unrolled else 'tables'}), "
        f"{s.n_substitutions} substitutions ({'unrolled' if solve_unrolled else 'tables'}).",
        "// Generated by shoal.ode._sparse; host and device (include shoal/config.hpp first).",
        f"namespace {ns} {{",
    ]
    # Each table is spelled once (a macro) and instantiated as a host array and, under CUDA, a
    # device array; the functions pick theirs by __CUDA_ARCH__, so a host pass never reads a
    # __device__ variable.
    for t, vals in tables.items():
        out.append(f"#define {ns}_{t} {_ints(vals)}")
    out.append("#if !defined(__CUDA_ARCH__)")
    out.append("namespace host {")
    out += [f"static const int {t}[] = {ns}_{t};" for t in tables]
    out.append("}  // namespace host")
    out.append("#endif")
    out.append("#if defined(__CUDACC__) || defined(__CUDACC_RTC__)")
    out.append("namespace device {")
    out += [f"__device__ static const int {t}[] = {ns}_{t};" for t in tables]
    out.append("}  // namespace device")
    out.append("#endif")
    out += [f"#undef {ns}_{t}" for t in tables]
    out.append(f"}}  // namespace {ns}")
    out.append("")

    tab = (f"#if defined(__CUDA_ARCH__)\n    namespace tab = {ns}::device;\n#else\n"
           f"    namespace tab = {ns}::host;\n#endif")

    out += [
        f"struct {name} {{",
        f"  static constexpr int n = {n};",
        f"  static constexpr int nnz = {s.nnz};",
        f"  static constexpr int n_colours = {nc};",
        "",
        "  // Colour of ORIGINAL column j.",
        "  SHOAL_HD static int colour(int j) {",
        tab,
        "    return tab::colour[j];",
        "  }",
        "  // CSR slot of the Jacobian entry (i, j), ORIGINAL indices, colour(j) == c; -1 if none.",
        "  SHOAL_HD static int jacobian_slot(int i, int c) {",
        tab,
        f"    return tab::jacobian_slot[i * {nc} + c];",
        "  }",
        "  // CSR slot of the diagonal entry of ORIGINAL variable i.",
        "  SHOAL_HD static int diagonal_slot(int i) {",
        tab,
        "    return tab::diagonal_slot[i];",
        "  }",
        "",
        "  // In-place unpivoted LU of a[nnz] (L strictly left of the diagonal, unit diagonal",
        "  // implied; U from the diagonal rightwards), up-looking, row by row.",
        "  template <class S> SHOAL_HD static void factor(S* a) {",
    ]
    if factor_unrolled:
        dst = s.update_dst.tolist()
        ptr = s.update_ptr.tolist()
        for e, (ik, kk) in enumerate(zip(s.l_slot.tolist(), s.l_pivot.tolist(), strict=True)):
            out.append(f"    a[{ik}] /= a[{kk}];")
            out += [f"    a[{ij}] -= a[{ik}] * a[{kk + 1 + t}];"
                    for t, ij in enumerate(dst[ptr[e]:ptr[e + 1]])]
        if not s.l_slot.size:
            out.append("    (void)a;")
    else:
        out += [
            tab,
            f"    for (int e = 0; e < {s.l_slot.size}; ++e) {{",
            "      const int ik = tab::l_slot[e];",
            "      const int kk = tab::l_pivot[e];",
            "      const S m = a[ik] / a[kk];",
            "      a[ik] = m;",
            "      int src = kk + 1;  // sources: the U entries right of (k, k), in order",
            "      for (int r = tab::run_ptr[e]; r < tab::run_ptr[e + 1]; ++r) {",
            "        const int shift = tab::run_dst[r] - src;",
            "        const int end = src + tab::run_len[r];",
            "        for (; src < end; ++src) a[shift + src] -= m * a[src];",
            "      }",
            "    }",
        ]
    out += [
        "  }",
        "",
        "  // b (ORIGINAL ordering) := A^-1 b with the factors from factor(); the permutation is",
        "  // applied in place. Factors are read as T(a[k]).",
        "  template <class S, class T> SHOAL_HD static void solve(const S* a, T* b) {",
    ]
    if solve_unrolled:
        perm, ptr, dp, co = (x.tolist() for x in (s.perm, s.row_ptr, s.diag_ptr, s.col_orig))
        for i in range(n):  # forward: L y = P b, y stored at b[perm[i]]
            if dp[i] > ptr[i]:
                terms = " ".join(f"s -= T(a[{p}]) * b[{co[p]}];" for p in range(ptr[i], dp[i]))
                out.append(f"    {{ T s = b[{perm[i]}]; {terms} b[{perm[i]}] = s; }}")
        for i in range(n - 1, -1, -1):  # back: U x = y
            terms = "".join(f" s -= T(a[{p}]) * b[{co[p]}];" for p in range(dp[i] + 1, ptr[i + 1]))
            out.append(f"    {{ T s = b[{perm[i]}];{terms} b[{perm[i]}] = s / T(a[{dp[i]}]); }}")
    else:
        out += [
            tab,
            f"    for (int i = 0; i < {n}; ++i) {{",
            "      const int pi = tab::perm[i];",
            "      T s = b[pi];",
            "      for (int p = tab::row_ptr[i]; p < tab::diag_ptr[i]; ++p)",
            "        s -= T(a[p]) * b[tab::col_orig[p]];",
            "      b[pi] = s;",
            "    }",
            f"    for (int i = {n - 1}; i >= 0; --i) {{",
            "      const int pi = tab::perm[i];",
            "      const int d = tab::diag_ptr[i];",
            "      T s = b[pi];",
            "      for (int p = d + 1; p < tab::row_ptr[i + 1]; ++p)",
            "        s -= T(a[p]) * b[tab::col_orig[p]];",
            "      b[pi] = s / T(a[d]);",
            "    }",
        ]
    out += ["  }", "};", ""]
    return "\n".join(out)
