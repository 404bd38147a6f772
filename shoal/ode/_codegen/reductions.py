"""Reductions (sum, product, max, min, and, or) over constant axes, folded pairwise in order."""

from __future__ import annotations

import math

import numpy as np

from shoal.ode._codegen.cpp import ctype as _ctype
from shoal.ode._codegen.cpp import is_float as _is_float
from shoal.ode._codegen.elementwise import INT_BINARY
from shoal.ode._codegen.values import Sym

PRIMITIVES = (
    "reduce_sum",
    "reduce_max",
    "reduce_min",
    "reduce_prod",
    "reduce_and",
    "reduce_or",
)


def reduce(walker, eqn, x: Sym) -> Sym:
    em = walker.em
    name = eqn.primitive.name
    axes = tuple(eqn.params["axes"])
    keep = [d for d in range(x.elems.ndim) if d not in axes]
    moved = np.transpose(x.elems, keep + list(axes))
    out_shape = tuple(x.shape[d] for d in keep)
    rows = moved.reshape(out_shape + (-1,))
    ctype = _ctype(x.dtype)
    is_float = _is_float(x.dtype)
    combine = {
        "reduce_sum": "({0} + {1})",
        "reduce_prod": "({0} * {1})",
        "reduce_max": "max({0}, {1})" if is_float else INT_BINARY["max"],
        "reduce_min": "min({0}, {1})" if is_float else INT_BINARY["min"],
        "reduce_and": "({0} && {1})",
        "reduce_or": "({0} || {1})",
    }[name]
    identity = {
        "reduce_sum": 0,
        "reduce_prod": 1,
        "reduce_max": -math.inf,
        "reduce_min": math.inf,
        "reduce_and": True,
        "reduce_or": False,
    }[name]
    out = np.empty(out_shape, dtype=object)
    for idx in np.ndindex(out_shape):
        terms = list(rows[idx])
        if not terms:
            out[idx] = identity
            continue
        acc = terms[0]
        for term in terms[1:]:
            acc = em.assign(
                ctype, combine.format(em.render(acc, x.dtype), em.render(term, x.dtype))
            )
        out[idx] = acc
    return Sym(out, x.dtype)
