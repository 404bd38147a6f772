"""``dot_general``: scalarised sums of products, or a loop over a static table of the nonzeros
when one operand is constant and the contraction is large."""

from __future__ import annotations

import numpy as np

from shoal.ode._codegen.cpp import ctype as _ctype
from shoal.ode._codegen.cpp import double
from shoal.ode._codegen.values import Sym

# Above this many multiply-adds a contraction with a constant operand becomes a table-driven loop.
DOT_TABLE_THRESHOLD = 512


def dot_general(walker, eqn, lhs: Sym, rhs: Sym) -> Sym:
    em = walker.em
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    out_dtype = np.dtype(eqn.outvars[0].aval.dtype)
    out_shape = tuple(eqn.outvars[0].aval.shape)

    def canon(s: Sym, batch, contract):
        free = [d for d in range(s.elems.ndim) if d not in batch and d not in contract]
        e = np.transpose(s.elems, list(batch) + free + list(contract))
        nb = int(np.prod([s.shape[d] for d in batch], dtype=np.int64))
        nf = int(np.prod([s.shape[d] for d in free], dtype=np.int64))
        nc = int(np.prod([s.shape[d] for d in contract], dtype=np.int64))
        return e.reshape(nb, nf, nc)

    L = canon(lhs, lb, lc)
    R = canon(rhs, rb, rc)
    nb, nl, nc = L.shape
    nr = R.shape[1]
    ctype = _ctype(out_dtype)
    if nb * nl * nr * nc > DOT_TABLE_THRESHOLD and (lhs.is_const() or rhs.is_const()):
        return _dot_table(em, L, R, lhs.is_const(), lhs.dtype, rhs.dtype, out_dtype, out_shape)
    out = np.empty((nb, nl, nr), dtype=object)
    for b in range(nb):
        for i in range(nl):
            for j in range(nr):
                terms = []
                for c in range(nc):
                    x, y = L[b, i, c], R[b, j, c]
                    if (not isinstance(x, str) and x == 0) or (not isinstance(y, str) and y == 0):
                        continue  # a structural zero stays out, so sparsity stays visible
                    terms.append(f"({em.render(x, lhs.dtype)} * {em.render(y, rhs.dtype)})")
                if not terms:
                    out[b, i, j] = 0.0
                    continue
                acc = em.assign(ctype, terms[0])
                for term in terms[1:]:
                    acc = em.assign(ctype, f"({acc} + {term})")
                out[b, i, j] = acc
    return Sym(out.reshape(out_shape), out_dtype)


def _dot_table(em, L, R, const_is_lhs, ldt, rdt, out_dtype, out_shape) -> Sym:
    K, V = (L, R) if const_is_lhs else (R, L)
    vdt = rdt if const_is_lhs else ldt
    nb, nk, nc = K.shape
    nv = V.shape[1]
    # The constant operand is stored by rows (b, k) of its nonzeros only, as the scalarised
    # path skips zeros: the loop then does no work on structural zeros, and the sparsity
    # tracer sees exactly the entries that matter instead of a dense product.
    table = em.fresh("table")
    values, columns, row_start = [], [], [0]
    for row in K.reshape(nb * nk, nc):
        for c, x in enumerate(row):
            if not (x == 0):  # NaN stays: it must propagate
                values.append(double(x))
                columns.append(str(c))
        row_start.append(len(values))
    if not values:  # C++ has no zero-length arrays
        values, columns = ["0.0"], ["0"]
    em.tables += [
        ("double", f"{table}_values", values),
        ("int", f"{table}_columns", columns),
        ("int", f"{table}_rows", list(map(str, row_start))),
    ]
    vec = em.fresh("operand")
    items = ", ".join(em.render(x, vdt) for x in V.flat)
    res = em.fresh("product")
    em.lines += [
        f"const T {vec}[{V.size}] = {{{items}}};",
        f"T {res}[{nb * nk * nv}];",
        f"for (int b = 0; b < {nb}; ++b) for (int k = 0; k < {nk}; ++k) "
        f"for (int v = 0; v < {nv}; ++v) {{",
        "  T acc = T(0);",
        f"  for (int e = tab::{table}_rows[b * {nk} + k]; "
        f"e < tab::{table}_rows[b * {nk} + k + 1]; ++e)",
        f"    acc += T(tab::{table}_values[e]) * "
        f"{vec}[(b * {nv} + v) * {nc} + tab::{table}_columns[e]];",
        f"  {res}[(b * {nk} + k) * {nv} + v] = acc;",
        "}",
    ]
    out = np.empty((nb, nk, nv) if const_is_lhs else (nb, nv, nk), dtype=object)
    for b in range(nb):
        for k in range(nk):
            for v in range(nv):
                ref = f"{res}[{(b * nk + k) * nv + v}]"
                em.floats.add(ref)
                if const_is_lhs:
                    out[b, k, v] = ref
                else:
                    out[b, v, k] = ref
    return Sym(out.reshape(out_shape), out_dtype)
