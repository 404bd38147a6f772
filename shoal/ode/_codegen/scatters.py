"""Writes into arrays: ``scatter`` (``x.at[...].set/add/multiply/min/max``) and
``dynamic_update_slice``, at constant or run-time indices.

An update window at constant start indices is moved at trace time: ``.set`` emits no code at
all, the combining scatters one statement per element. At a run-time start, every operand element
the window could cover becomes ``select(start == s, new, old)`` over the possible starts ``s``, so
the code is linear in (operand size x update size). Out-of-range starts behave as JAX on CPU
(measured): ``mode='clip'`` and ``dynamic_update_slice`` clamp the start to ``[0, dim - size]``;
the default (fill/drop) and ``promise_in_bounds`` drop a window that does not fit entirely.
Updates apply in order, so with duplicate indices ``.set`` keeps the last one, as XLA on CPU does.

Where the emitter allows indexed writes (``Emitter.indexed_writes``: the adjoint's vector-Jacobian
products), a scatter of single elements at run-time indices into an operand of at least
``array_loops.LOOP_MIN_SIZE`` elements writes at the computed index instead: a scatter-add records
the addition (a ``Scattered`` value, scattered.py: a gather's transpose, a scatter-add into zeros
the size of a table, then costs one statement where it is finally added up, not one per entry), any
other scatter writes a local array (``if (in range) a[i] = u;``). Either way the source does not
grow with the table.
"""

from __future__ import annotations

import itertools

import numpy as np
from jax.lax import GatherScatterMode

from shoal.ode._codegen.array_loops import LOOP_MIN_SIZE
from shoal.ode._codegen.cpp import clamped_index
from shoal.ode._codegen.cpp import ctype as _ctype
from shoal.ode._codegen.cpp import is_float as _is_float
from shoal.ode._codegen.data_movement import move
from shoal.ode._codegen.elementwise import FLOAT_BINARY, INT_BINARY
from shoal.ode._codegen.scattered import Addition, Scattered, addition_line, local_copy
from shoal.ode._codegen.values import Sym

# How each scatter combines the old element {0} with the update {1}; None: replaces it.
_COMBINE = {
    "scatter": None,
    "scatter-add": "add",
    "scatter-sub": "sub",
    "scatter-mul": "mul",
    "scatter-min": "min",
    "scatter-max": "max",
}
PRIMITIVES = tuple(_COMBINE)
_ARITHMETIC = {"add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})"}


def _combine_format(walker, eqn, dtype) -> str | None:
    op = _COMBINE[eqn.primitive.name]
    if op is None:
        return None
    if dtype == np.bool_:
        raise walker.unsupported(eqn)
    if op in _ARITHMETIC:
        return _ARITHMETIC[op]
    return FLOAT_BINARY[op] if _is_float(dtype) else INT_BINARY[op]


def scatter(walker, eqn, ins) -> list[Sym]:
    operand, indices, updates = ins
    p = eqn.params
    dn, mode = p["dimension_numbers"], p["mode"]
    if dn.operand_batching_dims or mode not in (
        GatherScatterMode.CLIP,
        GatherScatterMode.FILL_OR_DROP,
        GatherScatterMode.PROMISE_IN_BOUNDS,
    ):
        raise NotImplementedError(
            f"'{eqn.primitive.name}' with batching dimensions or mode {mode} is not supported "
            f"(at {walker.where(eqn)}); write each batch member separately, with mode 'clip', "
            "'drop' or 'promise_in_bounds'"
        )
    combine = _combine_format(walker, eqn, operand.dtype)
    rank = len(operand.shape)
    window_dims = [d for d in range(rank) if d not in dn.inserted_window_dims]
    sizes = [1] * rank
    for j, d in enumerate(window_dims):
        sizes[d] = updates.shape[dn.update_window_dims[j]]
    batch_dims = [d for d in range(len(updates.shape)) if d not in dn.update_window_dims]
    writer = _Writer(walker.em, operand, combine)
    for b in np.ndindex(indices.shape[:-1]):
        starts = [0] * rank
        for k, d in enumerate(dn.scatter_dims_to_operand_dims):
            starts[d] = (indices.elems[b + (k,)], indices.dtype)
        window = np.empty(tuple(sizes), dtype=object)
        for w in np.ndindex(window.shape):
            pos = [0] * len(updates.shape)
            for j, d in enumerate(batch_dims):
                pos[d] = b[j]
            for j, d in enumerate(window_dims):
                pos[dn.update_window_dims[j]] = w[d]
            window[w] = updates.elems[tuple(pos)]
        writer.write(starts, window, clip=mode == GatherScatterMode.CLIP)
    return [writer.result()]


def dynamic_update_slice(walker, eqn, ins) -> list[Sym]:
    operand, update, starts = ins[0], ins[1], ins[2:]
    if all(s.is_const() for s in starts):
        return move(walker, eqn, ins)
    writer = _Writer(walker.em, operand, None)
    writer.write([(s.elems[()], s.dtype) for s in starts], update.elems, clip=True)
    return [writer.result()]


class _Writer:
    """The operand's elements, updated window by window in order."""

    def __init__(self, em, operand, combine: str | None):
        self.em, self.dtype, self.combine = em, operand.dtype, combine
        # A scattered operand (only a scatter-add's: the walker materialises it for others)
        # keeps its additions, and more join them.
        self._additions = list(operand.additions) if isinstance(operand, Scattered) else []
        base = operand.base if isinstance(operand, Scattered) else operand
        self.out = base.elems.copy()
        self._hits: dict[tuple, str] = {}
        self._array: str | None = None  # the local array, once writes are indexed

    def result(self):
        out = Sym(self.out, self.dtype)
        return Scattered(out, self._additions) if self._additions else out

    def write(self, starts, window: np.ndarray, clip: bool):
        """Apply ``window`` at ``starts`` (per dimension: the int 0, or an element and its
        dtype), clamped when ``clip`` and otherwise dropped unless it fits."""
        em = self.em
        runtime = any(s != 0 and isinstance(s[0], str) for s in starts)
        indexed = (em.indexed_writes and runtime and window.size == 1
                   and self.out.size >= LOOP_MIN_SIZE)
        # Adding, or setting into zeros where nothing was added yet (a dynamic slice's
        # transpose): an addition at the index, kept for later (scattered.py).
        into_zeros = self.combine is None and not self._additions and all(
            not isinstance(e, str) and e == 0 for e in self.out.flat)
        if self._array is None and indexed and (self.combine == _ARITHMETIC["add"] or into_zeros):
            at = self._flat_index(starts, clip)
            if at is not None:
                self._additions.append(Addition(at[0], window.reshape(-1)[0], at[1]))
            return
        if self._array is not None or indexed:
            self._indexed_write(starts, window.reshape(-1)[0], clip)
            return
        choices = []  # per dimension: (run-time start or None, the starts it can take)
        for d, s in enumerate(starts):
            hi = self.out.shape[d] - window.shape[d]
            elem = s if s == 0 else s[0]
            if not isinstance(elem, str):
                v = int(elem)
                if clip:
                    v = min(max(v, 0), hi)
                elif not 0 <= v <= hi:
                    return  # the whole window is out of range: dropped
                choices.append((None, [v]))
                continue
            i = em.assign("int64_t", f"static_cast<int64_t>({elem})")
            if clip:
                i = em.assign("int64_t", clamped_index(i, hi))
            choices.append((i, range(hi + 1)))
        for at in itertools.product(*(c[1] for c in choices)):
            hit = self._hit([(c[0], s) for c, s in zip(choices, at, strict=True) if c[0]])
            for w in np.ndindex(window.shape):
                dest = tuple(s + o for s, o in zip(at, w, strict=True))
                self.out[dest] = self._update(self.out[dest], window[w], hit)

    def _indexed_write(self, starts, elem, clip: bool):
        """One element written at a run-time flat index of a local array (made on first use)."""
        em = self.em
        if self._array is None:
            self._array, self.out = local_copy(em, self.out, self.dtype)
            em.lines += [addition_line(em, self._array, a, self.dtype) for a in self._additions]
            self._additions = []
        at = self._flat_index(starts, clip)
        if at is None:
            return  # dropped
        index, inside = at
        slot = f"{self._array}[{index}]"
        new = em.render(elem, self.dtype)
        value = self.combine.format(slot, new) if self.combine is not None else new
        statement = f"{slot} = {value};"
        em.lines.append(f"if ({inside}) {statement}" if inside else statement)

    def _flat_index(self, starts, clip: bool) -> tuple[str, str | None] | None:
        """The flat index of one element at ``starts`` and the condition for it to be in range
        (None: always, clamped when ``clip``); None if a constant start drops it."""
        em, shape = self.em, self.out.shape
        index, inside = [], []
        for d, s in enumerate(starts):
            elem_d = s if s == 0 else s[0]
            hi = shape[d] - 1
            if not isinstance(elem_d, str):
                v = int(elem_d)
                if clip:
                    v = min(max(v, 0), hi)
                elif not 0 <= v <= hi:
                    return None
                index.append(str(v))
                continue
            i = em.assign("int64_t", f"static_cast<int64_t>({elem_d})")
            if clip:
                i = em.assign("int64_t", clamped_index(i, hi))
            else:
                inside.append(f"{i} >= 0 && {i} <= {hi}")
            index.append(i)
        strides = np.cumprod((1,) + shape[::-1])[:-1][::-1]
        flat_index = " + ".join(f"{i} * {int(st)}" if st != 1 else i
                                for i, st in zip(index, strides, strict=True))
        if len(index) > 1:
            flat_index = em.assign("int64_t", f"({flat_index})")
        return flat_index, " && ".join(inside) or None

    def _hit(self, tests) -> str | None:
        """A bool local: every run-time start equals its value (None when all are constant)."""
        if not tests:
            return None
        key = tuple(tests)
        if key not in self._hits:
            conj = " && ".join(f"{i} == {s}" for i, s in tests)
            self._hits[key] = self.em.assign("bool", f"({conj})")
        return self._hits[key]

    def _update(self, old, new, hit: str | None):
        em, dtype = self.em, self.dtype
        ctype = _ctype(dtype)
        old_s, new_s = em.render(old, dtype), em.render(new, dtype)
        if self.combine is not None:
            new_s = em.assign(ctype, self.combine.format(old_s, new_s))
        elif hit is None:
            return new  # a write at a constant index moves the element: no code
        if hit is None:
            return new_s
        if not _is_float(dtype):  # integer locals track what the hit was computed from
            return em.assign(ctype, f"({hit} ? {new_s} : {old_s})")
        picked = f"select({hit}, {new_s}, {old_s})"
        # The sparsity tracer: which element was written depends on the index's floats too.
        deps = sorted(em.deps_of(hit))
        if deps:
            picked = f"indexed({picked}, {', '.join(deps)})"
        return em.assign(ctype, picked)

