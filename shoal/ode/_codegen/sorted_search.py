"""``jnp.searchsorted`` into a constant sorted array (one binary search over a static table) or
into a parameter leaf (the same search over the parameters, where they lie).

Every ``method`` of jnp.searchsorted ('scan', 'scan_unrolled', 'sort', 'compare_all') computes
the same thing, and each would otherwise unroll into code that grows with the table (log n
lookups, a sort, or n comparisons). The call is recognised by its jit's name and replaced by
``search_sorted`` (math.hpp) in lax's total order, or, on a constant table that is a uniform or
geometric grid (a linspace, a geomspace), by ``search_sorted_near``: the index computed from the
grid and confirmed by two comparisons, with the same result. Which ``side`` the jit was traced for
is not in its parameters; JAX itself answers it, by evaluating the call at the table's first
entry.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from shoal.ode._codegen.cpp import ctype as _ctype
from shoal.ode._codegen.cpp import double, literal
from shoal.ode._codegen.cpp import is_float as _is_float
from shoal.ode._codegen.indexing import params_offset
from shoal.ode._codegen.jax_internals import eager
from shoal.ode._codegen.linspace import linspace_table
from shoal.ode._codegen.values import Sym


def searchsorted(walker, eqn, ins) -> list[Sym] | None:
    """The translated call, or None to translate its body instead (a table that is not constant)."""
    if len(ins) != 2 or len(eqn.outvars) != 1:
        return None
    table, query = ins
    offset = params_offset(table)
    if query.is_const() or not (table.is_const() or offset is not None) or len(table.shape) != 1:
        return None
    if table.dtype != query.dtype:
        return None
    em = walker.em
    out_dtype = np.dtype(eqn.outvars[0].aval.dtype)
    # JAX itself tells the side: a query equal to the first entry is past it only for 'right'.
    values = table.const_value() if offset is None else np.arange(table.shape[0], dtype=table.dtype)
    out = np.empty(query.shape, dtype=object)
    if values.size == 0:
        out[...] = 0
        return [Sym(out, out_dtype)]
    probe = np.full(query.shape, values[0], dtype=query.dtype)
    with eager():
        found = eqn.primitive.bind(jnp.asarray(values), jnp.asarray(probe), **eqn.params)
    right = "true" if int(np.asarray(found).flat[0]) > 0 else "false"
    if offset is not None:
        name = f"(p + {offset})" if offset else "p"
        key = "primal({})"
    elif _is_float(table.dtype):
        # A linspace's entries are computed (linspace.py): the same bits, no memory reads.
        name = linspace_table(values) or "tab::" + em.table("double", [double(v) for v in values])
        key = "primal({})"
    else:
        name = "tab::" + em.table(_ctype(table.dtype), [literal(v, table.dtype) for v in values])
        key = "static_cast<int64_t>({})"
    ctype = _ctype(out_dtype)
    grid = _grid(values) if offset is None and _is_float(table.dtype) else None
    for idx in np.ndindex(query.shape):
        q = key.format(em.render(query.elems[idx], query.dtype))
        if grid is None:
            call = f"search_sorted({name}, {values.size}, {q}, {right})"
        else:
            spacing, x0, inv_h = grid
            at = f"to_double({q})"
            at = f"log({at})" if spacing == "geometric" else at
            call = (f"search_sorted_near({name}, {values.size}, {q}, {right}, "
                    f"({at} - {double(x0)}) * {double(inv_h)})")
        out[idx] = em.assign(ctype, f"static_cast<{ctype}>({call})")
    return [Sym(out, out_dtype)]


# Below this many entries a binary search is as short as the guess and its checks.
GUESS_MIN_SIZE = 16


def _grid(values: np.ndarray) -> tuple[str, float, float] | None:
    """("uniform", x0, 1/h) when every entry lies within a quarter spacing of x0 + i h (a
    linspace, in any rounding), ("geometric", log x0, 1/log r) when the logs of positive entries
    do (a geomspace): then ``search_sorted_near``'s guess is within one entry. Else None."""
    v = np.asarray(values, dtype=np.float64)
    if v.size < GUESS_MIN_SIZE or not np.all(np.isfinite(v)):
        return None
    candidates = [("uniform", v)]
    if v[0] > 0:
        candidates.append(("geometric", np.log(v)))
    for spacing, u in candidates:
        h = (u[-1] - u[0]) / (u.size - 1)
        if h > 0 and np.isfinite(1.0 / h) and np.max(
                np.abs(u - (u[0] + h * np.arange(u.size)))) <= 0.25 * h:
            return spacing, float(u[0]), float(1.0 / h)
    return None
