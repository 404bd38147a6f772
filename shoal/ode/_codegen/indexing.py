"""``gather`` and ``dynamic_slice`` at indices computed at run time (from y, t or p).

A constant operand goes into a static table once and each output element reads it at a computed
offset, so the source does not grow with the table; a symbolic operand (a small array of locals,
say y) becomes a local array. Out-of-range indices behave as in JAX: start indices are clamped
to ``[0, dim - slice_size]`` (dynamic_slice, gather modes clip and promise_in_bounds), and a
fill_or_drop gather yields its fill value for a window whose start is out of range. Constant
indices never get here: data_movement moves elements at trace time.
"""

from __future__ import annotations

import re

import numpy as np
from jax.lax import GatherScatterMode

from shoal.ode._codegen.cpp import clamped_index, double, literal
from shoal.ode._codegen.cpp import ctype as _ctype
from shoal.ode._codegen.cpp import is_float as _is_float
from shoal.ode._codegen.data_movement import _gather_fill, move
from shoal.ode._codegen.linspace import linspace_table
from shoal.ode._codegen.values import Sym


def gather(walker, eqn, ins) -> list[Sym]:
    operand, indices = ins
    if indices.is_const():
        if eqn.params["mode"] != GatherScatterMode.FILL_OR_DROP:
            dn = eqn.params["dimension_numbers"]
            starts = indices.const_value().reshape(-1, indices.shape[-1])
            for k, d in enumerate(dn.start_index_map):
                for v in starts[:, k]:
                    check_input_read(walker, eqn, operand, d, int(v), eqn.params["slice_sizes"][d])
        return move(walker, eqn, ins)
    p = eqn.params
    dn = p["dimension_numbers"]
    mode = p["mode"]
    if mode not in (
        GatherScatterMode.CLIP,
        GatherScatterMode.PROMISE_IN_BOUNDS,
        GatherScatterMode.FILL_OR_DROP,
    ):
        raise NotImplementedError(
            f"'gather' in mode {mode} at run-time indices is not supported (at "
            f"{walker.where(eqn)}); use mode='clip' or mode='fill'"
        )
    fill = None
    if mode == GatherScatterMode.FILL_OR_DROP:
        fill = _gather_fill(p["fill_value"], eqn.outvars[0].aval.dtype)
    sizes = tuple(p["slice_sizes"])
    rank = len(operand.shape)
    collapsed = (*dn.collapsed_slice_dims, *dn.operand_batching_dims)
    window_dims = [d for d in range(rank) if d not in collapsed]
    out_shape = tuple(eqn.outvars[0].aval.shape)
    batch_out = [d for d in range(len(out_shape)) if d not in dn.offset_dims]
    out = np.empty(out_shape, dtype=object)
    for b in np.ndindex(indices.shape[:-1]):
        starts = [0] * rank
        for k, d in enumerate(dn.start_index_map):
            starts[d] = (indices.elems[b + (k,)], indices.dtype)
        # A batched gather (vmap, batched linalg): batch member b reads its own operand slice.
        for d, i in zip(dn.operand_batching_dims, dn.start_indices_batching_dims, strict=True):
            starts[d] = (b[i], indices.dtype)
        window = _Window(walker.em, operand, starts, sizes, fill)
        for w in np.ndindex(tuple(sizes[d] for d in window_dims)):
            offset = [0] * rank
            pos = [0] * len(out_shape)
            for j, d in enumerate(window_dims):
                offset[d] = w[j]
                pos[dn.offset_dims[j]] = w[j]
            for j, d in enumerate(batch_out):
                pos[d] = b[j]
            out[tuple(pos)] = window.read(offset)
    return [Sym(out, eqn.outvars[0].aval.dtype)]


def dynamic_slice(walker, eqn, ins) -> list[Sym]:
    operand, starts = ins[0], ins[1 : 1 + len(ins[0].shape)]
    if all(s.is_const() for s in starts):
        for d, s in enumerate(starts):
            check_input_read(walker, eqn, operand, d, int(s.const_value()),
                             eqn.params["slice_sizes"][d])
        return move(walker, eqn, ins)
    sizes = tuple(eqn.params["slice_sizes"])
    window = _Window(walker.em, operand, [(s.elems[()], s.dtype) for s in starts], sizes, None)
    out = np.empty(sizes, dtype=object)
    for w in np.ndindex(sizes):
        out[w] = window.read(list(w))
    return [Sym(out, operand.dtype)]


class _Window:
    """A slice of ``operand`` at run-time start indices (one per dimension, each an element and
    its dtype or the int 0), clamped or, when ``fill`` is not None, out of range as a whole."""

    def __init__(self, em, operand: Sym, starts, sizes, fill):
        self.em, self.operand, self.fill = em, operand, fill
        shape = operand.shape
        self.strides = [int(np.prod(shape[d + 1 :], dtype=np.int64)) for d in range(len(shape))]
        terms, checks = [], []
        const_base = 0
        for d, s in enumerate(starts):
            hi = shape[d] - sizes[d]
            if s == 0:
                continue
            elem, dtype = s
            if not isinstance(elem, str):
                v = int(elem)
                if fill is not None and not 0 <= v <= hi:
                    checks.append("false")
                const_base += min(max(v, 0), hi) * self.strides[d]
                continue
            i = em.assign("int64_t", f"static_cast<int64_t>({elem})")
            if fill is not None:
                checks.append(f"({i} >= 0 && {i} <= {hi})")
            clamped = em.assign("int64_t", clamped_index(i, hi))
            terms.append(clamped if self.strides[d] == 1 else f"{clamped} * {self.strides[d]}")
        if const_base or not terms:
            terms.append(str(const_base))
        only = terms[0] if len(terms) == 1 else None
        self.base = only if only in em.index_deps else em.assign("int64_t", " + ".join(terms))
        self.in_bounds = em.assign("bool", " && ".join(checks)) if checks else None
        self.array = _array(em, operand)
        self.of_params = params_offset(operand) is not None

    def read(self, offset) -> str:
        em, dtype = self.em, self.operand.dtype
        off = sum(o * s for o, s in zip(offset, self.strides, strict=True))
        at = f"{self.base} + {off}" if off else self.base
        ctype = _ctype(dtype)
        # gather<R>(array, i) is R(array[i]) (math.hpp); SIMD lanes read each lane's own entry.
        element = f"gather<{ctype}>({self.array}, {at})"
        if _is_float(dtype):
            # The sparsity tracer: the read depends on the index and on every element it may read
            # (parameters depend on no state). gather_indexed, not indexed(gather(…), …): for
            # numbers it is the read itself, where indexed() would copy the value (math.hpp).
            elements = () if self.of_params else self.operand.elems.flat
            deps = sorted(em.deps_of(self.base) | {e for e in elements if isinstance(e, str)})
            if deps:
                element = f"gather_indexed<{ctype}>({self.array}, {at}, {', '.join(deps)})"
        if self.in_bounds is not None:
            fill = em.render(self.fill, dtype)
            pick = "select({}, {}, {})" if _is_float(dtype) else "pick({}, {}, {})"
            element = pick.format(self.in_bounds, element, fill)
        name = em.assign(ctype, element)
        if not _is_float(dtype):  # an integer read from state-dependent integers
            deps = em.index_deps[name]
            for e in self.operand.elems.flat:
                if isinstance(e, str):
                    deps |= em.deps_of(e)
            em.index_deps[name] = deps
        return name


def check_input_read(walker, eqn, operand: Sym, axis: int, start: int, size: int) -> None:
    """A constant index past the end of an array of f's parameters (or of y) is an error: JAX
    clamps it, so ``p[2]`` of a 2-entry ``params`` would silently read ``p[1]`` (Lorenz's
    ``p[2]`` became ``p[1]``). Tables that are constants keep JAX's clamping."""
    dim = operand.shape[axis]
    if 0 <= start <= dim - size:
        return
    if params_offset(operand) is not None:
        what, argument = "params (or one of its leaves)", "params"
    elif _state_leaf(operand):
        what, argument = "y", "y0"
    else:
        return
    raise ValueError(
        f"f reads index {start} of an array of {dim} entries from {what} (at "
        f"{walker.where(eqn)}): JAX would clamp the index and silently read entry "
        f"{min(max(start, 0), dim - size)}. Is {argument} too short for f?")


def _state_leaf(operand: Sym) -> bool:
    """Whether ``operand`` is a run of consecutive entries of y."""
    flat = operand.elems.ravel()
    if flat.size == 0 or not isinstance(flat[0], str) or not _STATE.fullmatch(flat[0]):
        return False
    k = int(flat[0][2:-1])
    return list(flat) == [f"y[{k + i}]" for i in range(flat.size)]


_STATE = re.compile(r"y\[\d+\]")


def params_offset(operand: Sym) -> int | None:
    """k when ``operand`` is p[k], p[k + 1], ... in row-major order (a parameter leaf, such as a
    run-time table), else None."""
    flat = operand.elems.ravel()
    if flat.size == 0 or not isinstance(flat[0], str) or not _PARAM.fullmatch(flat[0]):
        return None
    k = int(flat[0][2:-1])
    expected = [f"p[{k + i}]" for i in range(flat.size)]
    return k if list(flat) == expected else None


_PARAM = re.compile(r"p\[\d+\]")


def _array(em, operand: Sym) -> str:
    """A C++ array holding ``operand`` in row-major order: a static table if it is constant, the
    parameters themselves if it is a parameter leaf (so a run-time table costs no code)."""
    dtype = operand.dtype
    k = params_offset(operand)
    if k is not None:
        return f"(p + {k})" if k else "p"
    if operand.is_const():
        values = operand.const_value().ravel()
        if _is_float(dtype):
            grid = linspace_table(values)
            if grid is not None:  # entries computed: the same bits, no memory read
                return grid
            return "tab::" + em.table("double", [double(v) for v in values])
        return "tab::" + em.table(_ctype(dtype), [literal(v, dtype) for v in values])
    return em.local_array(_ctype(dtype), [em.render(e, dtype) for e in operand.elems.flat])
