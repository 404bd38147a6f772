"""Small dense linear algebra inside f: ``lu``, ``triangular_solve``, ``custom_linear_solve``,
``lu_pivots_to_permutation`` - what jnp.linalg.solve, inv, det and slogdet trace to.

Everything is unrolled over the (small, fixed-size) matrix. ``lu`` is LAPACK's getrf: partial
pivoting on the first largest ``|a|`` of each column (primal values), the pivot row swapped in by
``select`` over the candidate rows so that dual numbers carry the chosen row's tangents and the
sparsity tracer joins every candidate, and a zero pivot leaves its column unscaled. The
substitutions skip products with a constant zero, as the reference BLAS skips zero right-hand
sides (the identity of ``inv`` stays cheap). ``custom_linear_solve`` runs its ``solve`` jaxpr: the
dual numbers differentiate the factorisation itself (``stop_gradient`` moves tangents in a model).
"""

from __future__ import annotations

import numpy as np

from shoal.ode._codegen.cpp import is_float as _is_float
from shoal.ode._codegen.values import Sym

_MAX_ORDER = 32  # rows of a factorised matrix: the code grows as n^3


def _is_zero(e) -> bool:
    return not isinstance(e, str) and e == 0


def _check(walker, eqn, a: Sym):
    if not _is_float(a.dtype):
        raise NotImplementedError(
            f"'{eqn.primitive.name}' of {a.dtype} matrices is not supported (at "
            f"{walker.where(eqn)}); use real floating-point matrices"
        )
    if max(a.shape[-2:]) > _MAX_ORDER:
        raise NotImplementedError(
            f"'{eqn.primitive.name}' of a {a.shape[-2]}x{a.shape[-1]} matrix is too large to "
            f"unroll inside f (at {walker.where(eqn)}); at most {_MAX_ORDER} rows and columns"
        )


class _Scalars:
    """Emits T arithmetic on elements (constants or names) of one dtype."""

    def __init__(self, em, dtype):
        self.em, self.dtype = em, dtype

    def r(self, e) -> str:
        return self.em.render(e, self.dtype)

    def op(self, fmt: str, *args) -> str:
        return self.em.assign("T", fmt.format(*(self.r(a) for a in args)))


def lu(walker, eqn, ins) -> list[Sym]:
    (a,) = ins
    _check(walker, eqn, a)
    m, n = a.shape[-2:]
    k = min(m, n)
    out = a.elems.copy()
    pivots = np.empty(a.shape[:-2] + (k,), dtype=object)
    perms = np.empty(a.shape[:-2] + (m,), dtype=object)
    for b in np.ndindex(a.shape[:-2]):
        out[b + (...,)], pivots[b + (...,)], perms[b + (...,)] = _lu(
            walker.em, a.elems[b].copy(), a.dtype
        )
    int32 = np.dtype(np.int32)
    return [Sym(out, a.dtype), Sym(pivots, int32), Sym(perms, int32)]


def _lu(em, a: np.ndarray, dtype):
    s = _Scalars(em, dtype)
    m, n = a.shape
    perm: list = list(range(m))
    pivots: list = []
    for k in range(min(m, n)):
        hits = _pivot(em, s, a, k, pivots)
        if hits:  # swap row k with the pivot row, whichever it is
            row_k = a[k].copy()
            for r, hit in hits:
                for j in range(n):
                    a[k, j] = s.op("select({}, {}, {})", hit, a[r, j], a[k, j])
                    a[r, j] = s.op("select({}, {}, {})", hit, row_k[j], a[r, j])
            p_k = perm[k]
            for r, hit in hits:
                perm[k] = em.assign("int32_t", f"({hit} ? {_int(perm[r])} : {_int(perm[k])})")
                perm[r] = em.assign("int32_t", f"({hit} ? {_int(p_k)} : {_int(perm[r])})")
        elif isinstance(pivots[-1], int) and pivots[-1] != k:
            r = pivots[-1]
            a[[k, r]] = a[[r, k]]
            perm[k], perm[r] = perm[r], perm[k]
        if k + 1 >= m:
            continue
        pivot = a[k, k]
        if not isinstance(pivot, str) and pivot == 0:
            continue  # LAPACK leaves the column of a zero pivot unscaled
        if isinstance(pivot, str):
            nonzero = em.assign("bool", f"(primal({pivot}) != 0)")
            pivot = s.op("select({}, {}, T(1))", nonzero, pivot)
        for r in range(k + 1, m):
            if _is_zero(a[r, k]):
                continue
            a[r, k] = s.op("({} / {})", a[r, k], pivot)
            for j in range(k + 1, n):
                if not _is_zero(a[k, j]):
                    a[r, j] = s.op("({} - {} * {})", a[r, j], a[r, k], a[k, j])
    return a, np.array(pivots, dtype=object), np.array(perm, dtype=object)


def _int(e) -> str:
    return e if isinstance(e, str) else f"int32_t({e})"


def _pivot(em, s: _Scalars, a: np.ndarray, k: int, pivots: list):
    """Append column k's pivot row to ``pivots``; the (row, bool local) pairs saying which row
    below k it is when that is decided at run time, else []."""
    m = a.shape[0]
    column = [a[r, k] for r in range(k, m)]
    if len(column) == 1:
        pivots.append(k)
        return []
    if not any(isinstance(e, str) for e in column):
        magnitudes = [abs(float(e)) for e in column]
        best = 0
        for j, v in enumerate(magnitudes):
            if v > magnitudes[best]:  # the first largest; a NaN never wins (idamax)
                best = j
        pivots.append(k + best)
        return []
    best = em.assign("auto", f"primal(abs({s.r(a[k, k])}))")
    index = f"int32_t({k})"
    for r in range(k + 1, m):
        v = em.assign("auto", f"primal(abs({s.r(a[r, k])}))")
        take = em.assign("bool", f"({v} > {best})")
        best = em.assign("auto", f"({take} ? {v} : {best})")
        index = em.assign("int32_t", f"({take} ? int32_t({r}) : {index})")
    pivots.append(index)
    return [(r, em.assign("bool", f"({index} == {r})")) for r in range(k + 1, m)]


def lu_pivots_to_permutation(walker, eqn, ins) -> list[Sym]:
    (pivots,) = ins
    size = int(eqn.params["permutation_size"])
    em = walker.em
    out = np.empty(pivots.shape[:-1] + (size,), dtype=object)
    for b in np.ndindex(pivots.shape[:-1]):
        perm: list = [f"int32_t({i})" for i in range(size)]
        for i, p in enumerate(pivots.elems[b]):
            p = em.render(p, pivots.dtype)
            old = perm[i]
            for r in range(i + 1, size):
                hit = em.assign("bool", f"({p} == {r})")
                perm[i] = em.assign("int32_t", f"({hit} ? {perm[r]} : {perm[i]})")
                perm[r] = em.assign("int32_t", f"({hit} ? {old} : {perm[r]})")
        out[b + (...,)] = np.array(perm, dtype=object)
    return [Sym(out, eqn.outvars[0].aval.dtype)]


def triangular_solve(walker, eqn, ins) -> list[Sym]:
    a, b = ins
    _check(walker, eqn, a)
    p = eqn.params
    if p["conjugate_a"] and not _is_float(a.dtype):
        raise walker.unsupported(eqn)
    left = bool(p["left_side"])
    # Solve M Z = B with M = a or a^T, reading only a's own triangle: X = Z (left) or Z^T.
    a_transposed = bool(p["transpose_a"]) == left
    lower = bool(p["lower"]) != a_transposed
    s = _Scalars(walker.em, a.dtype)
    out = b.elems.copy()
    for batch in np.ndindex(a.shape[:-2]):
        mat = a.elems[batch].T if a_transposed else a.elems[batch]
        rhs = b.elems[batch] if left else b.elems[batch].T
        z = _substitute(s, mat, rhs, lower, bool(p["unit_diagonal"]))
        out[batch + (...,)] = z if left else z.T
    return [Sym(out, b.dtype)]


def _substitute(s: _Scalars, mat: np.ndarray, rhs: np.ndarray, lower: bool, unit: bool):
    n = mat.shape[0]
    z = rhs.copy()
    order = range(n) if lower else range(n - 1, -1, -1)
    for c in range(rhs.shape[1]):
        for i in order:
            acc = rhs[i, c]
            for j in range(i) if lower else range(i + 1, n):
                if _is_zero(mat[i, j]) or _is_zero(z[j, c]):
                    continue
                acc = s.op("({} - {} * {})", acc, mat[i, j], z[j, c])
            if not unit and not _is_zero(acc):
                acc = s.op("({} / {})", acc, mat[i, i])
            z[i, c] = acc
    return z


def custom_linear_solve(walker, eqn, ins) -> list[Sym]:
    lengths, jaxprs = eqn.params["const_lengths"], eqn.params["jaxprs"]
    start = lengths.matvec + lengths.vecmat
    n_consts = start + lengths.solve + lengths.transpose_solve
    consts = ins[start : start + lengths.solve]
    return walker.run_closed(jaxprs.solve, [*consts, *ins[n_consts:]])
