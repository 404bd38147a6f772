"""``dot_general``: scalarised sums of products; when the contraction is large, a loop over a
static table of the nonzeros if one operand is constant, or a loop reading the array itself if
one operand is a block of one C++ array (the parameters: a neural network's weights, a mechanism's
stoichiometry; or an earlier loop's result), so the source grows with neither."""

from __future__ import annotations

import re

import numpy as np

from shoal.ode._codegen.array_loops import LOOP_MIN_SIZE
from shoal.ode._codegen.cpp import ctype as _ctype
from shoal.ode._codegen.cpp import double
from shoal.ode._codegen.values import Sym

# Above this many multiply-adds a contraction with a constant operand becomes a table-driven loop.
DOT_TABLE_THRESHOLD = 512
# Above this many multiply-adds a contraction with a block of one array becomes a loop over it:
# lower than the table's, since the loop does the same arithmetic as the straight-line code
# (there are no structural zeros to skip), while each statement costs compile time, most of it
# in the dual-number instantiations.
DOT_ARRAY_THRESHOLD = 128
# Rows of a block product summed side by side (_dot_block).
ROW_BLOCK = 8


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
    n_terms = nb * nl * nr * nc
    if n_terms > DOT_TABLE_THRESHOLD and (lhs.is_const() or rhs.is_const()):
        return _dot_table(em, L, R, lhs.is_const(), lhs.dtype, rhs.dtype, out_dtype, out_shape)
    if n_terms > DOT_ARRAY_THRESHOLD and _ctype(lhs.dtype) == _ctype(rhs.dtype) == "T":
        # One loop per (batch, column of the other operand), each over the block's rows and
        # the contraction: worth it when a loop replaces at least LOOP_MIN_SIZE terms; the side
        # that makes the fewest loops is the block.
        sides = sorted(((K.shape[1] * nc, is_lhs) for K, is_lhs in ((L, True), (R, False))),
                       reverse=True)
        for size, block_is_lhs in sides:
            block = _affine_block(L if block_is_lhs else R) if size >= LOOP_MIN_SIZE else None
            if block is not None:
                return _dot_block(em, L, R, block_is_lhs, block, lhs.dtype, rhs.dtype,
                                  out_dtype, out_shape)
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
    # One loop per (batch, column of the other operand) over the table's rows (i) and each
    # row's nonzeros (j): indices the same in every SIMD lane, so it runs lane-wide.
    vec = _array_view(V) or em.local_array("T", [em.render(x, vdt) for x in V.flat])
    res = em.fresh("local")
    em.lines.append(f"T {res}[{nb * nk * nv}];")
    rows = f"tab::{table}_rows"
    for b in range(nb):
        for v in range(nv):
            out = f"{res}[{b * nk * nv + v} + i * {nv}]"
            em.lines += [
                f"for (int i = 0; i < {nk}; ++i) {{",
                f"  {out} = T(0);",
                f"  for (int j = {rows}[{b * nk} + i]; j < {rows}[{b * nk} + i + 1]; ++j) "
                f"{out} = {out} + T(tab::{table}_values[j]) * "
                f"{vec}[{(b * nv + v) * nc} + tab::{table}_columns[j]];",
                "}",
            ]
    return _product(em, res, (nb, nk, nv), const_is_lhs, out_dtype, out_shape)


def _product(em, res: str, shape, k_first: bool, out_dtype, out_shape) -> Sym:
    """The elements of a product computed into the array ``res`` laid out as (b, k, v): k the
    free dimension of the table or block operand, first in the result when ``k_first``."""
    nb, nk, nv = shape
    out = np.empty((nb, nk, nv) if k_first else (nb, nv, nk), dtype=object)
    for b in range(nb):
        for k in range(nk):
            for v in range(nv):
                ref = f"{res}[{(b * nk + k) * nv + v}]"
                em.floats.add(ref)
                out[(b, k, v) if k_first else (b, v, k)] = ref
    return Sym(out.reshape(out_shape), out_dtype)


_ELEMENT = re.compile(r"(\w+)\[(\d+)\]")


def _affine_block(operand: np.ndarray) -> tuple[str, int, int, int, int] | None:
    """(array, base, batch, row, column strides) when every element (b, k, c) of a canonical
    operand is array[base + b * batch + k * row + c * column] of one C++ array (a weight matrix
    sliced from p in any layout, or an earlier loop's result), else None."""
    nb, nk, nc = operand.shape
    indices = np.empty(operand.shape, dtype=np.int64)
    array = None
    for idx, elem in np.ndenumerate(operand):
        match = _ELEMENT.fullmatch(elem) if isinstance(elem, str) else None
        if match is None or array not in (None, match.group(1)):
            return None
        array = match.group(1)
        indices[idx] = int(match.group(2))
    base = int(indices[0, 0, 0])
    strides = [int(indices[1, 0, 0] - base) if nb > 1 else 0,
               int(indices[0, 1, 0] - base) if nk > 1 else 0,
               int(indices[0, 0, 1] - base) if nc > 1 else 0]
    b, k, c = np.indices(operand.shape)
    if not np.array_equal(indices, base + b * strides[0] + k * strides[1] + c * strides[2]):
        return None
    return array, base, *strides


def _array_view(operand: np.ndarray) -> str | None:
    """``(a + k)`` when the operand's elements are a[k], a[k + 1], ... of one C++ array (a
    previous loop's result), which the loop can then read in place of a copy."""
    first = _ELEMENT.fullmatch(operand.flat[0]) if isinstance(operand.flat[0], str) else None
    if first is None:
        return None
    name, k = first.group(1), int(first.group(2))
    if list(operand.flat) != [f"{name}[{k + i}]" for i in range(operand.size)]:
        return None
    return f"({name} + {k})" if k else name


def _dot_block(em, L, R, block_is_lhs, block, ldt, rdt, out_dtype, out_shape) -> Sym:
    """Products with a block of one array as loops reading it at affine indices: one row of the
    block per trip of ``i``, the sum over ``j`` in the order the scalarised path adds (first
    term, then each next one), so both give the same bits. The loop indices are the same in every
    SIMD lane, so the loops run lane-wide (model_struct.lane_arithmetic)."""
    K, V = (L, R) if block_is_lhs else (R, L)
    vdt = rdt if block_is_lhs else ldt
    array, base, s_batch, s_row, s_col = block
    nb, nk, nc = K.shape
    nv = V.shape[1]
    vec = _array_view(V)
    if vec is None:
        vec = em.local_array("T", [em.render(x, vdt) for x in V.flat])
    res = em.fresh("local")
    em.lines.append(f"T {res}[{nb * nv * nk}];")

    def factors(weight: str, operand: str) -> str:
        return f"{weight} * {operand}" if block_is_lhs else f"{operand} * {weight}"

    if nc == 1 and em.indexed_writes:
        # An outer product (a weight's cotangent in a vjp, which runs on the scalar path only:
        # lane_arithmetic reads one loop index per loop): each entry is one product, so one loop
        # nest writes the result row by row, contiguously, instead of a loop per column.
        for b in range(nb):
            weight = f"{array}[{base + b * s_batch} + i * {s_row}]"
            em.lines += [
                f"for (int i = 0; i < {nk}; ++i) {{",
                f"  for (int j = 0; j < {nv}; ++j) {res}[{b * nk * nv} + i * {nv} + j] = "
                f"{factors(weight, f'{vec}[{b * nv} + j]')};",
                "}",
            ]
        return _product(em, res, (nb, nk, nv), block_is_lhs, out_dtype, out_shape)

    # Rows go in blocks of ROW_BLOCK, each row's sum in a variable of its own: independent
    # chains of additions, which a core overlaps, where one row at a time waits for each addition
    # to finish. Each sum keeps its order. (Subscripts stay in the forms lane_arithmetic reads.)
    blocked = nk - nk % ROW_BLOCK

    def rows(b: int, v: int, weights=lambda index: f"{array}[{index}]",
             offset: int = 0) -> list[str]:
        first = (b * nv + v) * nc

        def out(r: int) -> str:
            return f"{res}[{b * nk * nv + v + r * nv} + i * {nv}]"

        def term(r: int, later: bool) -> str:  # row i + r's first term, or its j-th
            index = f"{base - offset + b * s_batch + r * s_row} + i * {s_row}"
            if later:
                return factors(weights(f"{index} + j * {s_col}"), f"{vec}[{first} + j]")
            return factors(weights(index), f"{vec}[{first}]")

        lines = []
        if blocked:
            sums = [em.fresh("v") for _ in range(ROW_BLOCK)]
            lines += [
                f"for (int i = 0; i < {blocked}; i += {ROW_BLOCK}) {{",
                *(f"  T {s} = {term(r, False)};" for r, s in enumerate(sums)),
                f"  for (int j = 1; j < {nc}; ++j) {{",
                *(f"    {s} = {s} + {term(r, True)};" for r, s in enumerate(sums)),
                "  }",
                *(f"  {out(r)} = {s};" for r, s in enumerate(sums)),
                "}",
            ]
        if blocked < nk:
            lines += [
                f"for (int i = {blocked}; i < {nk}; ++i) {{",
                f"  {out(0)} = {term(0, False)};",
                f"  for (int j = 1; j < {nc}; ++j) {out(0)} = {out(0)} + {term(0, True)};",
                "}",
            ]
        return lines

    loops = [line for b in range(nb) for v in range(nv) for line in rows(b, v)]
    shared = _shared_weights(em, array, base, (nb, nk, nc), (s_batch, s_row, s_col))
    if shared is not None:
        # In the lanes, while the lane group holds one row of shared parameters, the same loops
        # read the weights from it as scalars (lane_traits.hpp: shared_param_row), each
        # broadcast once, instead of from the lanes' W copies: the same values, so the same bits.
        scalar_loops = [line for b in range(nb) for v in range(nv)
                        for line in rows(b, v, lambda index: f"T(ps[{index}])", shared)]
        loops = ["if (const auto* ps = shoal::shared_param_row<Model, T>()) {",
                 *(f"  {line}" for line in scalar_loops), "} else {",
                 *(f"  {line}" for line in loops), "}"]
    em.lines += loops
    return _product(em, res, (nb, nk, nv), block_is_lhs, out_dtype, out_shape)


def _shared_weights(em, array: str, base: int, shape, strides) -> int | None:
    """The index of the first shared parameter when the block's elements all are shared
    parameters of the function that runs in the lanes (em.shared_params: its [first, end) range
    of p), else None."""
    if array != "p" or em.shared_params is None:
        return None
    low = base + sum(min(0, (n - 1) * s) for n, s in zip(shape, strides, strict=True))
    high = base + sum(max(0, (n - 1) * s) for n, s in zip(shape, strides, strict=True))
    first, end = em.shared_params
    return first if first <= low and high < end else None


_OUTER_DECLARATION = re.compile(r"\s*T (\w+)\[(\d+)\];")
_OUTER_ROW = re.compile(r"\s*for \(int i = 0; i < (\d+); \+\+i\) \{")
_OUTER_ENTRY = re.compile(r"(\s*)for \(int j = 0; j < (\d+); \+\+j\) "
                          r"(\w+)\[0 \+ i \* (\d+) \+ j\] = (.+);")
_ACCUMULATION = re.compile(r"\s*for \(int i = 0; i < (\d+); \+\+i\) (\w+)\[(\d+) \+ i\] \+= "
                           r"(\w+)\[i\];")


def fuse_outer_products(lines: list[str], target: str) -> list[str]:
    """A vjp's weight cotangent is an outer product (``_dot_block``) written into a local array
    and then added to p̄ (``target[k + i] += local[i]``): where that local is read by nothing
    else, the product is added to ``target`` where it is made, without the local (for a 64 × 64
    layer 64 KB a call less to write and read back). ``target[k] += a * b`` rounds as the
    product into a local and the sum did, and no other statement touches those entries, so the
    bits are the same."""
    text = "\n".join(lines)
    for n, line in enumerate(lines):
        acc = _ACCUMULATION.fullmatch(line)
        if not acc or acc.group(2) != target:
            continue
        length, offset, local = int(acc.group(1)), int(acc.group(3)), acc.group(4)
        at = next((k for k in range(n) if (d := _OUTER_DECLARATION.fullmatch(lines[k]))
                   and d.group(1) == local and int(d.group(2)) == length), None)
        if at is None or at + 3 >= len(lines) or lines[at + 3].strip() != "}":
            continue
        row, entry = _OUTER_ROW.fullmatch(lines[at + 1]), _OUTER_ENTRY.fullmatch(lines[at + 2])
        if not (row and entry and entry.group(3) == local and entry.group(2) == entry.group(4)
                and int(row.group(1)) * int(entry.group(2)) == length):
            continue
        # The local is read by these lines alone, and the entries are accumulated once.
        if len(re.findall(rf"\b{local}\b", text)) != 3 or _touches(lines, n, target, offset,
                                                                  length):
            continue
        indent, width, product = entry.group(1), entry.group(2), entry.group(5)
        lines = [*lines[:at],
                 lines[at + 1],
                 f"{indent}for (int j = 0; j < {width}; ++j) "
                 f"{target}[{offset} + i * {width} + j] += {product};",
                 lines[at + 3],
                 *lines[at + 4:n], *lines[n + 1:]]
        return fuse_outer_products(lines, target)
    return lines


def _touches(lines: list[str], skip: int, target: str, offset: int, length: int) -> bool:
    """Whether a line other than ``lines[skip]`` may read or write ``target`` in [offset,
    offset + length): ``target[k]``, or a loop's ``target[k + i]`` counted from k on; any other
    index counts as touching."""
    for k, line in enumerate(lines):
        if k == skip:
            continue
        for index in re.findall(rf"\b{target}\[([^\]]*)\]", line):
            at = re.fullmatch(r"(\d+)( \+ i)?", index)
            if at is None:
                return True
            first = int(at.group(1))
            loop = re.search(r"i < (\d+)", line) if at.group(2) else None
            last = first + (int(loop.group(1)) if loop else 1)
            if first < offset + length and offset < last:
                return True
    return False
