"""Order-dependent array operations over constant axes: cumulative scans, argmax/argmin, sort.

All three are unrolled over the (small, fixed) axis: a scan is one running combine per element, an
argmax a running (best, index) pair, a sort a stable bubble network of compare-exchanges done with
``select`` so that dual numbers keep the chosen element's tangent and the sparsity tracer joins
both candidates. Comparisons use primal values and order floats as XLA's CPU sort does
(measured): -inf < … < inf < NaN, with -0 == +0 and every NaN (either sign) equal, so the stable
network keeps them in input order; in argmax/argmin a NaN wins, the first occurrence first.
"""

from __future__ import annotations

import numpy as np

from shoal.ode._codegen.cpp import ctype as _ctype
from shoal.ode._codegen.cpp import is_float as _is_float
from shoal.ode._codegen.elementwise import INT_BINARY
from shoal.ode._codegen.values import Sym

CUMULATIVE = ("cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp")
ARG_REDUCTIONS = ("argmax", "argmin")
MAX_SORTED = 64  # elements per sorted row: the network has n (n - 1) / 2 compare-exchanges


def _lanes(elems: np.ndarray, axis: int):
    """(index tuples of each lane along ``axis``) for an object array."""
    moved = np.moveaxis(np.arange(elems.size).reshape(elems.shape), axis, -1)
    return moved.reshape(-1, elems.shape[axis]) if elems.size else np.zeros((0, 0), int)


def cumulative(walker, eqn, x: Sym) -> Sym:
    em, name = walker.em, eqn.primitive.name
    if name == "cumlogsumexp":
        raise walker.unsupported(eqn)
    axis, reverse = int(eqn.params["axis"]), bool(eqn.params["reverse"])
    ctype, is_float = _ctype(x.dtype), _is_float(x.dtype)
    combine = {
        "cumsum": "({0} + {1})",
        "cumprod": "({0} * {1})",
        "cummax": "max({0}, {1})" if is_float else INT_BINARY["max"],
        "cummin": "min({0}, {1})" if is_float else INT_BINARY["min"],
    }[name]
    flat = x.elems.reshape(-1)
    out = np.empty(flat.shape, dtype=object)
    for lane in _lanes(x.elems, axis):
        order = lane[::-1] if reverse else lane
        acc = None
        for i in order:
            acc = flat[i] if acc is None else em.assign(
                ctype, combine.format(em.render(acc, x.dtype), em.render(flat[i], x.dtype)))
            out[i] = acc
    return Sym(out.reshape(x.shape), x.dtype)


def _primal(em, elem, dtype) -> str:
    """A name holding the primal value of a float element (the element itself for integers)."""
    text = em.render(elem, dtype)
    return em.assign("auto", f"primal({text})") if _is_float(dtype) else text


def _less(em, a: str, b: str, is_float: bool) -> str:
    """Whether a sorts before b (primal values, names from _primal): NaN last."""
    if not is_float:
        return em.assign("bool", f"({a} < {b})")
    return em.assign("bool", f"({a} < {b} || ({b} != {b} && {a} == {a}))")


def arg_reduction(walker, eqn, x: Sym) -> Sym:
    em, name = walker.em, eqn.primitive.name
    axes = tuple(eqn.params["axes"])
    if len(axes) != 1:
        raise walker.unsupported(eqn)
    index_dtype = np.dtype(eqn.params["index_dtype"])
    itype, is_float = _ctype(index_dtype), _is_float(x.dtype)
    flat = x.elems.reshape(-1)
    lanes = _lanes(x.elems, axes[0])
    out_shape = tuple(s for d, s in enumerate(x.shape) if d != axes[0])
    out = np.empty(len(lanes), dtype=object)
    for k, lane in enumerate(lanes):
        best, index = _primal(em, flat[lane[0]], x.dtype), 0
        for j, i in enumerate(lane[1:], start=1):
            v = _primal(em, flat[i], x.dtype)
            better = f"({v} > {best})" if name == "argmax" else f"({v} < {best})"
            if is_float:  # the first NaN wins and stays
                better = f"({v} != {v} ? {best} == {best} : ({best} == {best} && {better}))"
            take = em.assign("bool", better)
            best = em.assign("auto", f"({take} ? {v} : {best})")
            index = em.assign(
                itype, f"({take} ? {itype}({j}) : {itype}({em.render(index, index_dtype)}))")
        out[k] = index
    return Sym(out.reshape(out_shape), index_dtype)


def sort(walker, eqn, ins: list[Sym]) -> list[Sym]:
    em = walker.em
    dimension, num_keys = int(eqn.params["dimension"]), int(eqn.params["num_keys"])
    n = ins[0].shape[dimension] if ins[0].shape else 1
    if n > MAX_SORTED:
        raise NotImplementedError(
            f"shoal sorts at most {MAX_SORTED} elements per row inside f (a network of "
            f"compare-exchanges); got {n} (at {walker.where(eqn)}); sort a shorter array, or "
            "compute what you need from the values without sorting")
    flats = [s.elems.reshape(-1).copy() for s in ins]
    for lane in _lanes(ins[0].elems, dimension):
        # A stable bubble network: neighbours swap only when the later one is strictly smaller.
        for sweep in range(n - 1):
            for j in range(n - 1 - sweep):
                a, b = lane[j], lane[j + 1]
                swap = _lexicographic_less(em, ins, flats, num_keys, b, a)
                for s, flat in zip(ins, flats, strict=True):
                    lo, hi = flat[a], flat[b]
                    if lo is hi or (not isinstance(lo, str) and not isinstance(hi, str)
                                    and lo == hi):
                        continue
                    ctype = _ctype(s.dtype)
                    pick = "select({}, {}, {})" if _is_float(s.dtype) else "({} ? {} : {})"
                    lo_s, hi_s = em.render(lo, s.dtype), em.render(hi, s.dtype)
                    flat[a] = em.assign(ctype, pick.format(swap, hi_s, lo_s))
                    flat[b] = em.assign(ctype, pick.format(swap, lo_s, hi_s))
    return [Sym(flat.reshape(s.shape), s.dtype) for s, flat in zip(ins, flats, strict=True)]


def _lexicographic_less(em, ins, flats, num_keys: int, i: int, j: int) -> str:
    """Whether element i sorts strictly before element j on the first num_keys operands."""
    result = None
    for key in range(num_keys - 1, -1, -1):
        dtype, is_float = ins[key].dtype, _is_float(ins[key].dtype)
        a, b = _primal(em, flats[key][i], dtype), _primal(em, flats[key][j], dtype)
        less = _less(em, a, b, is_float)
        if result is None:
            result = less
        else:
            greater = _less(em, b, a, is_float)
            result = em.assign("bool", f"({less} || (!{greater} && {result}))")
    return result
