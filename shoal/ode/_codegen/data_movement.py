"""Data-movement primitives (slice, gather, reshape, concatenate, ...) emit no code.

Every data element gets a distinct id, JAX itself moves the ids with the equation's own
parameters (or NumPy, where it moves them the same way: numpy_eval.py), and the ids are mapped
back to elements: the semantics are JAX's by construction.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from shoal.ode._codegen import numpy_eval
from shoal.ode._codegen.cpp import is_float
from shoal.ode._codegen.elementwise import elementwise
from shoal.ode._codegen.jax_internals import eager
from shoal.ode._codegen.values import Sym

# Positions of operands that carry data (the rest must be constant indices); None: all of them.
DATA_OPERANDS = {
    "slice": (0,),
    "squeeze": (0,),
    "expand_dims": (0,),
    "reshape": (0,),
    "broadcast_in_dim": (0,),
    "transpose": (0,),
    "rev": (0,),
    "copy": (0,),
    "copy_p": (0,),
    "concatenate": None,
    "pad": (0, 1),
    "gather": (0,),
    "dynamic_slice": (0,),
    "dynamic_update_slice": (0, 1),
    "split": (0,),
    "stack": None,
    "select_n": None,
    "tile": (0,),
    "unstack": (0,),
    "stop_gradient": (0,),
}


def _gather_fill(value, dtype):
    """The element an out-of-bounds gather yields: fill_value, else JAX's default for dtype."""
    dtype = np.dtype(dtype)
    if value is not None:
        return np.asarray(value, dtype=dtype).item()
    if is_float(dtype):
        return float("nan")
    if dtype == np.bool_:
        return True
    info = np.iinfo(dtype)
    return int(info.max if jnp.issubdtype(dtype, jnp.unsignedinteger) else info.min)


def move(walker, eqn, ins) -> list[Sym]:
    if eqn.primitive.name == "select_n" and not ins[0].is_const():
        return [elementwise(walker, eqn, ins)]
    ids, pool, _, fill = moved_ids(walker, eqn, ins)
    return elements(ids, eqn.outvars, pool, fill)


def moved_ids(walker, eqn, ins):
    """Where the equation moves each data element: per output, an array of ids into ``pool``
    (the data operands' elements in order; -1 for an out-of-bounds gather's fill), the id of
    each operand's first element (None for a constant index operand), and the fill value."""
    name = eqn.primitive.name
    data_pos = DATA_OPERANDS[name]
    if name == "select_n":
        data_pos = tuple(range(1, len(ins)))
    if data_pos is None:
        data_pos = tuple(range(len(ins)))
    # Give every data element a distinct id, let JAX move the ids, map them back.
    pool: list = []
    bound, starts = [], []
    for i, s in enumerate(ins):
        if i in data_pos:
            ids = np.arange(len(pool), len(pool) + s.elems.size, dtype=np.int32)
            starts.append(len(pool))
            pool.extend(s.elems.flat)
            bound.append(ids.reshape(s.shape))
        else:
            if not s.is_const():
                raise NotImplementedError(
                    f"'{name}' with indices that depend on the state, time or parameters is"
                    f" not supported (at {walker.where(eqn)}); indices must be constants here"
                )
            starts.append(None)
            bound.append(s.const_value())
    params = dict(eqn.params)
    moved = numpy_eval.move(name, params, bound)
    if moved is not None:
        return moved, pool, starts, None
    fill = None
    if "fill_value" in params:
        # Out-of-bounds gathers come back as id -1 and take the user's fill value (or JAX's).
        fill, params["fill_value"] = params["fill_value"], -1
    try:
        with eager():
            out = eqn.primitive.bind(*[jnp.asarray(b) for b in bound], **params)
    except Exception as err:  # noqa: BLE001
        raise NotImplementedError(
            f"shoal cannot translate '{name}' with these parameters (at {walker.where(eqn)}): {err}"
        ) from err
    return [np.asarray(o) for o in (out if eqn.primitive.multiple_results else [out])], pool, \
        starts, fill


def elements(outs, outvars, pool: list, fill) -> list[Sym]:
    """The moved ids mapped back to the elements they stand for (-1: out of bounds)."""
    results = []
    for o, var in zip(outs, outvars, strict=True):
        ids = np.asarray(o)
        elems = np.empty(ids.shape, dtype=object)
        missing = _gather_fill(fill, var.aval.dtype)
        for idx in np.ndindex(ids.shape):
            k = int(ids[idx])
            elems[idx] = pool[k] if 0 <= k < len(pool) else missing
        results.append(Sym(elems, var.aval.dtype))
    return results
