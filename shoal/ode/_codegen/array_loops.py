"""Elementwise equations over large arrays as one C++ loop instead of a statement per element.

Straight-line code grows the generated source and, above all, the compile time with the array's
length: a 300-variable hierarchy is 3 000 statements, and its dual-number instantiation took g++
-O3 over 30 s. A loop computes the same expression per element, in the same order, so results
are bit-identical. Each operand becomes an expression of the loop index ``i``: the element itself
when it is the same for all (a broadcast scalar), a read of a constant table, a contiguous or
evenly strided run of an existing array (``y``, ``p`` or an earlier loop's result), or else a local
array of its elements. Operands made of a few contiguous runs (``jnp.roll``, ``concatenate``, a
shifted slice) split the loop at the runs' ends instead, so that no local array is copied: one
loop per stretch where every operand is one run. A loop whose array only the next loop reads is
then computed inside that one (:func:`fuse_chains`).
"""

from __future__ import annotations

import re

import numpy as np

from shoal.ode._codegen.cpp import ctype as _ctype
from shoal.ode._codegen.cpp import double, is_float

# Arrays at least this long are computed by a loop (shorter ones stay straight-line code).
LOOP_MIN_SIZE = 32

# Runs of at least this many consecutive array elements are copied by a loop.
COPY_MIN_RUN = 8

# At most this many loops, one per stretch where each operand is one contiguous run (a rolled
# operand makes two, each shifted or concatenated piece one); beyond it, local arrays.
MAX_SEGMENTS = 8

_ELEMENT = re.compile(r"([A-Za-z_]\w*)\[(\d+)\]\Z")


def _indexed(base: str, start: int) -> str:
    return f"{base}[{start} + i]" if start else f"{base}[i]"


def _runs(elems: list) -> list[tuple[int, int, str | None, int]]:
    """(first position, length, base, start): maximal runs of elements base[start], base[start+1],
    ...; an element that is no array element is a run of length 1 with base None."""
    runs: list[tuple[int, int, str | None, int]] = []
    for pos, e in enumerate(elems):
        m = _ELEMENT.match(e) if isinstance(e, str) else None
        base, index = (m.group(1), int(m.group(2))) if m else (None, -1)
        if runs and base is not None and runs[-1][2] == base and (
                runs[-1][3] + runs[-1][1] == index):
            first, length, _, start = runs[-1]
            runs[-1] = (first, length + 1, base, start)
        else:
            runs.append((pos, 1, base, index))
    return runs


def copy_lines(target: str, elems: list, render) -> list[str]:
    """Statements ``target[k] = elems[k]`` for all k, a loop for each long contiguous run (g++
    takes seconds to vectorise hundreds of straight-line dual-number copies) and for each long
    run of one constant (the zeros of a transposed gather: a cotangent the size of a table)."""
    lines = []
    pending = []  # positions written one statement each, unless they make a run of a constant

    def flush():
        k = 0
        while k < len(pending):
            pos, e = pending[k], elems[pending[k]]
            end = k + 1
            while (end < len(pending) and not isinstance(e, str)
                   and pending[end] == pos + end - k
                   and type(elems[pending[end]]) is type(e) and elems[pending[end]] == e):
                end += 1
            if end - k >= COPY_MIN_RUN:
                lines.append(f"for (int i = 0; i < {end - k}; ++i) "
                             f"{_indexed(target, pos)} = {render(e)};")
            else:
                lines.extend(f"{target}[{j}] = {render(elems[j])};" for j in pending[k:end])
            k = end
        pending.clear()

    for first, length, base, start in _runs(elems):
        if base is not None and length >= COPY_MIN_RUN:
            flush()
            lines.append(f"for (int i = 0; i < {length}; ++i) "
                         f"{_indexed(target, first)} = {_indexed(base, start)};")
        else:
            pending.extend(range(first, first + length))
    flush()
    return lines


def accumulate_lines(target: str, elems: list, render, offset: int) -> list[str]:
    """Statements ``target[offset + k] += elems[k]`` for the elements that are not constant
    zeros, a loop for each long contiguous run of an array's elements."""
    lines = []
    for first, length, base, start in _runs(elems):
        if base is not None and length >= COPY_MIN_RUN:
            lines.append(f"for (int i = 0; i < {length}; ++i) "
                         f"{_indexed(target, offset + first)} += {_indexed(base, start)};")
            continue
        for k in range(first, first + length):
            e = elems[k]
            if isinstance(e, str) or e != 0:
                lines.append(f"{target}[{offset + k}] += {render(e)};")
    return lines


def _contiguous(elems: list) -> str | None:
    """``base[k + i]`` if the elements are base[k], base[k+1], ...; else None."""
    runs = _runs(elems)
    if len(runs) == 1 and runs[0][2] is not None:
        return _indexed(runs[0][2], runs[0][3])
    return None


def _strided(elems: list) -> str | None:
    """``base[k + i * s]`` if the elements are base[k], base[k + s], base[k + 2s], ... (a column
    of a parameter matrix, say); else None."""
    matches = [_ELEMENT.match(e) if isinstance(e, str) else None for e in elems]
    if len(elems) < 2 or any(m is None or m.group(1) != matches[0].group(1) for m in matches):
        return None
    k, stride = int(matches[0].group(2)), int(matches[1].group(2)) - int(matches[0].group(2))
    if stride <= 0 or any(int(m.group(2)) != k + n * stride for n, m in enumerate(matches)):
        return None
    return f"{matches[0].group(1)}[{k} + i * {stride}]"


def _whole(em, elems: list, dtype) -> str | None:
    """An expression of the loop index i for all of one operand's elements without copying
    them (the same element, a constant table, one contiguous or strided run), else None."""
    first = elems[0]
    if all(type(e) is type(first) and e == first for e in elems):
        return em.render(first, dtype)
    if not any(isinstance(e, str) for e in elems):
        if is_float(dtype):  # a double table read as T, as the literal T(x) would be
            return f"T(tab::{em.table('double', [double(e) for e in elems])}[i])"
        return f"tab::{em.table(_ctype(dtype), [em.render(e, dtype) for e in elems])}[i]"
    return _contiguous(elems) or _strided(elems)


def _operand(em, elems: list, dtype) -> str:
    """An expression of the loop index i for one operand's elements."""
    whole = _whole(em, elems, dtype)
    if whole is not None:
        return whole
    name = em.fresh("local")
    em.lines += [f"{_ctype(dtype)} {name}[{len(elems)}];",
                 *copy_lines(name, elems, lambda e: em.render(e, dtype))]
    return f"{name}[i]"


def _segments(em, flat: list, dtypes: list, size: int):
    """The loop split where the operands' contiguous runs end: (bounds, per operand its whole
    expression or its runs), or None where the stretches would be more than MAX_SEGMENTS. An
    element that is no array's (a scalar, a constant: a zero padded on) is a run of its own."""
    bounds, forms = {0, size}, []
    for elems, dt in zip(flat, dtypes, strict=True):
        whole = _whole(em, elems, dt)
        if whole is not None:
            forms.append(whole)
            continue
        runs = _runs(elems)
        bounds.update(first for first, _, _, _ in runs)
        if len(bounds) - 1 > MAX_SEGMENTS:
            return None
        forms.append([(first, length, base, start if base is not None
                       else em.render(elems[first], dt)) for first, length, base, start in runs])
    return sorted(bounds), forms


def loop(em, fmt: str, ctype: str, arrays: list, dtypes: list, shape) -> np.ndarray:
    """Emit ``ctype v[size]; for i: v[i] = fmt(operands at i);`` and return its elements."""
    flat = [a.reshape(-1).tolist() for a in arrays]
    size = len(flat[0]) if flat else int(np.prod(shape))
    name = em.fresh()
    split = _segments(em, flat, dtypes, size) if flat else None
    if split is None:
        operands = [_operand(em, elems, dt) for elems, dt in zip(flat, dtypes, strict=True)]
        em.lines += [
            f"{ctype} {name}[{size}];",
            f"for (int i = 0; i < {size}; ++i) {name}[i] = {fmt.format(*operands)};",
        ]
    else:
        # The same expression per element as one loop, stretch by stretch: the same bits.
        bounds, forms = split
        em.lines.append(f"{ctype} {name}[{size}];")
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            operands = []
            for form in forms:
                if isinstance(form, str):
                    operands.append(form)
                    continue
                first, _, base, start = next(r for r in form if r[0] <= lo < r[0] + r[1])
                if base is None:  # one element, rendered
                    operands.append(start)
                    continue
                shift = start - first  # element i of the operand is base[i + shift]
                operands.append(f"{base}[i - {-shift}]" if shift < 0 else _indexed(base, shift))
            em.lines.append(f"for (int i = {lo}; i < {hi}; ++i) "
                            f"{name}[i] = {fmt.format(*operands)};")
    out = np.empty(size, dtype=object)
    for k in range(size):
        ref = f"{name}[{k}]"
        out[k] = ref
        if ctype == "T":
            em.floats.add(ref)
        else:  # an integer read at this index must depend on the floats it came from
            em.index_deps[ref] = em.deps_of(
                " ".join(em.render(elems[k], dt) for elems, dt in zip(flat, dtypes, strict=True)))
    return out.reshape(shape)


_DECLARED = re.compile(r"T (v\d+)\[(\d+)\];")
_ELEMENTWISE = re.compile(r"for \(int i = (\d+); i < (\d+); \+\+i\) (v\d+)\[i\] = (.+);")


def _array_at(lines: list[str], at: int):
    """(name, size, [(lo, hi, expression)], end) for a T array declared at ``lines[at]`` and
    written whole by the elementwise loops that follow it, else None."""
    declared = _DECLARED.fullmatch(lines[at]) if at < len(lines) else None
    if declared is None:
        return None
    name, size = declared.group(1), int(declared.group(2))
    loops, end = [], at + 1
    while end < len(lines) and (m := _ELEMENTWISE.fullmatch(lines[end])) and m.group(3) == name:
        lo, hi = int(m.group(1)), int(m.group(2))
        if lo != (loops[-1][1] if loops else 0):
            return None
        loops.append((lo, hi, m.group(4)))
        end += 1
    if not loops or loops[-1][1] != size:
        return None
    return name, size, loops, end


def _as_t(expression: str) -> str:
    """``T(expression)``, without doubling the parentheses of one already enclosed in a pair."""
    if expression.startswith("(") and expression.endswith(")"):
        depth = 0
        for k, c in enumerate(expression):
            depth += (c == "(") - (c == ")")
            if depth == 0 and k < len(expression) - 1:
                break
        else:
            return f"T{expression}"
    return f"T({expression})"


def fuse_chains(lines: list[str]) -> list[str]:
    """An elementwise loop's array read only by the next one, at its own index, once per
    element (``a = x - y; b = a * z``), is computed inside that loop instead of stored and read
    back: one loop and no array instead of two. Each element is the same expression, converted
    to T as the store did (``T(...)``), so the same bits; the loops' stretches (a rolled operand
    splits them) are intersected, up to MAX_SEGMENTS."""
    lines = list(lines)
    at = 0
    while at < len(lines):
        producer = _array_at(lines, at)
        consumer = producer and _array_at(lines, producer[3])
        if not consumer:
            at += 1
            continue
        name, _, made, end = producer
        read = re.compile(rf"\b{name}\[i\]")
        reads = sum(len(re.findall(rf"\b{name}\[", line)) for line in lines[end:])
        target, size, uses, after = consumer
        if (reads != len(uses) or any(len(read.findall(e)) != 1 for _, _, e in uses)
                or len({lo for lo, _, _ in made} | {lo for lo, _, _ in uses}) > MAX_SEGMENTS):
            at += 1
            continue
        fused = [f"T {target}[{size}];"]
        for lo, hi, expression in uses:
            for a, b, inner in made:
                if max(lo, a) < min(hi, b):
                    value = read.sub(lambda _, inner=inner: _as_t(inner), expression)
                    fused.append(f"for (int i = {max(lo, a)}; i < {min(hi, b)}; ++i) "
                                 f"{target}[i] = {value};")
        lines[at:after] = fused
    return lines
