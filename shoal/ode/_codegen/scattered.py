"""A cotangent the size of a table holding a few entries added at run-time indices.

The transpose of a gather at a run-time index (a table read) is a scatter-add into zeros the size
of the table. The adjoint's vector-Jacobian products (vjp.py) meet one per table read at every
stage of every step; written out as arrays, each costs passes over the whole table (zeroing it,
summing cotangents, copying it out): a 2 000-entry table's gradient cost thousands of operations
per stage where the read cost a few.

Where the emitter allows it (``Emitter.indexed_writes``: those products), such a scatter-add
instead yields a ``Scattered`` value: a dense ``base`` (a Sym, mostly constant zeros) plus
``additions`` not yet applied, ``base[index] += value``. It stays so through what transposition
does to cotangents: sums (``add_any``, ``add``), negation, and data movement that puts each element
in at most one place (pad, concatenate, reshape, slice, transpose, ...). A model function's output
accumulates it into its target (``output_lines``): the base's elements that are not constant zeros,
then each addition at its index. Any other operation receives it materialised (a local array, the
additions applied in order).

Additions are applied after the base's sums, so a sum may round differently from JAX's order;
that is within a cotangent's rounding.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from shoal.ode._codegen import array_loops, data_movement
from shoal.ode._codegen.cpp import ctype as _ctype
from shoal.ode._codegen.cpp import is_float as _is_float
from shoal.ode._codegen.values import Sym


@dataclass(frozen=True)
class Addition:
    index: str  # the flat position (a C++ int64 expression)
    value: object  # the element added (a C++ expression or a constant)
    inside: str | None  # when the position is in range (None: always)


class Scattered:
    """``base`` with ``additions`` applied (see the module's doc)."""

    __slots__ = ("base", "additions")

    def __init__(self, base: Sym, additions: list[Addition]):
        self.base, self.additions = base, list(additions)

    @property
    def shape(self):
        return self.base.shape

    @property
    def dtype(self):
        return self.base.dtype

    def is_const(self) -> bool:
        return False


def local_copy(em, elems: np.ndarray, dtype) -> tuple[str, np.ndarray]:
    """A mutable local array holding ``elems``: its name and its elements' references."""
    name = em.fresh("local")
    flat = elems.reshape(-1).tolist()
    em.lines.append(f"{_ctype(dtype)} {name}[{len(flat)}];")
    em.lines += array_loops.copy_lines(name, flat, lambda e: em.render(e, dtype))
    refs = np.array([f"{name}[{k}]" for k in range(len(flat))], dtype=object)
    if _is_float(dtype):
        em.floats.update(refs.tolist())
    return name, refs.reshape(elems.shape)


def addition_line(em, target: str, a: Addition, dtype) -> str:
    value = em.render(a.value, dtype)
    if a.inside is None and not a.index.isdigit():
        # math.hpp: `target[index] += value`; in SIMD lanes each lane adds into its own index.
        return f"scatter_add({target}, {a.index}, {value});"
    statement = f"{target}[{a.index}] += {value};"
    return f"if ({a.inside}) {statement}" if a.inside else statement


def materialize(em, value):
    """A Sym holding a Scattered's value (anything else unchanged)."""
    if not isinstance(value, Scattered):
        return value
    name, refs = local_copy(em, value.base.elems, value.dtype)
    em.lines += [addition_line(em, name, a, value.dtype) for a in value.additions]
    return Sym(refs, value.dtype)


def output_lines(em, value, target: str, written: int) -> list[str]:
    """A function's result into ``target``: its first ``written`` elements assigned, the rest
    added to what ``target`` holds (a vjp's parameter cotangent accumulates: vjp.py)."""
    base = value.base if isinstance(value, Scattered) else value
    elems = list(np.asarray(base.elems, dtype=object).reshape(-1))
    render = lambda e: em.render(e, base.dtype)  # noqa: E731
    lines = array_loops.copy_lines(target, elems[:written], render)
    lines += array_loops.accumulate_lines(target, elems[written:], render, offset=written)
    if isinstance(value, Scattered):
        lines += [addition_line(em, target, a, value.dtype) for a in value.additions]
    return lines


def keep(walker, eqn, ins) -> list | None:
    """The equation's outputs kept scattered, or None: its inputs are to be materialised."""
    name = eqn.primitive.name
    em = walker.em
    if name in ("add", "add_any") and ins[0].shape == ins[1].shape:
        (base,) = walker.eqn(eqn, [_base(s) for s in ins])
        return [Scattered(base, [a for s in ins for a in _additions(s)])]
    if name == "neg":
        (base,) = walker.eqn(eqn, [ins[0].base])
        negated = [Addition(a.index, em.assign(_ctype(ins[0].dtype),
                                               f"(-{em.render(a.value, ins[0].dtype)})"),
                            a.inside) for a in ins[0].additions]
        return [Scattered(base, negated)]
    if name == "convert_element_type" and np.dtype(eqn.params["new_dtype"]) == ins[0].dtype:
        return [ins[0]]
    if name in ("scatter-add", "dynamic_update_slice") and not any(
            isinstance(s, Scattered) for s in ins[1:]):
        return walker.apply(eqn, ins)  # more additions, or materialised there (scatters.py)
    if name in data_movement.DATA_OPERANDS and name not in (
            "gather", "dynamic_slice", "dynamic_update_slice", "select_n"):
        return _moved(walker, eqn, ins)
    return None


def _base(value) -> Sym:
    return value.base if isinstance(value, Scattered) else value


def _additions(value) -> list[Addition]:
    return value.additions if isinstance(value, Scattered) else []


def _moved(walker, eqn, ins) -> list | None:
    """Data movement of scattered operands: the bases moved as usual, each addition's index
    mapped to where the movement puts that element (None if some element goes to two places:
    a broadcast)."""
    em = walker.em
    ids, pool, starts, fill = data_movement.moved_ids(walker, eqn, [_base(s) for s in ins])
    outs = data_movement.elements(ids, eqn.outvars, pool, fill)
    kept = [[] for _ in outs]
    for s, start in zip(ins, starts, strict=True):
        if not isinstance(s, Scattered) or start is None:
            continue
        size = s.base.elems.size
        for k, out_ids in enumerate(ids):
            flat = np.asarray(out_ids).reshape(-1)
            mine = np.flatnonzero((flat >= start) & (flat < start + size))
            if len(np.unique(flat[mine])) != len(mine):
                return None
            where_to = np.full(size, -1, dtype=np.int64)
            where_to[flat[mine] - start] = mine
            remapped = (_remapped(em, a, where_to) for a in s.additions)
            kept[k] += [a for a in remapped if a is not None]
    return [Scattered(o, a) if a else o for o, a in zip(outs, kept, strict=True)]


def _remapped(em, a: Addition, where_to: np.ndarray) -> Addition | None:
    """``a`` at the position ``where_to[a.index]`` (-1: dropped by the movement)."""
    present = np.flatnonzero(where_to >= 0)
    if len(present) == 0:
        return None
    lo, hi = int(present[0]), int(present[-1]) + 1
    shift = int(where_to[lo]) - lo
    if len(present) == hi - lo and np.array_equal(where_to[lo:hi], np.arange(lo, hi) + shift):
        # A contiguous run moved by a constant (pad, concatenate, slice, reshape): arithmetic.
        index = em.assign("int64_t", f"({a.index} + {shift})") if shift else a.index
        tests = [a.inside] if a.inside else []
        if lo > 0:
            tests.append(f"{a.index} >= {lo}")
        if hi < len(where_to):
            tests.append(f"{a.index} < {hi}")
        inside = em.assign("bool", f"({' && '.join(tests)})") if len(tests) > 1 else (
            tests[0] if tests else None)
        return Addition(index, a.value, inside)
    # Any other injective movement (transpose, rev): a table of destinations.
    table = em.table("int64_t", [str(int(v)) for v in where_to])
    read = f"tab::{table}[{a.index}]"
    index = em.assign("int64_t", f"({a.inside} ? {read} : int64_t(-1))" if a.inside else read)
    return Addition(index, a.value, em.assign("bool", f"({index} >= 0)"))
