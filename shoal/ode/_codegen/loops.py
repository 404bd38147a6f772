"""Loops emitted as C++ loops: a ``while`` whose condition is only known at run time, and a
``scan`` (``fori_loop`` with constant bounds) too long to unroll.

Every carry element becomes a mutable local declared before the loop (``T c = init;``) and the
body is translated once, inside the loop's block, with those locals as its inputs; at its end the
carries take their new values. A scan reads its ``xs`` at the loop counter from a static table
(constant ``xs``) or a local array, and writes its ``ys`` into local arrays.

A while loop keeps JAX's semantics: no cap on the number of iterations (a condition that never
turns false loops forever, as in JAX). Dual numbers compare primal values, so the iterations are
those of the plain evaluation and the tangents flow through them. The sparsity tracer has no
values to test: ``shoal::math::ControlFlow`` (math.hpp, specialised in sparsity_tracer.hpp) makes
it iterate while the carries' dependency sets grow, which yields the union over every trip count.
A ``cond`` whose branches hold while loops runs only the branch taken (a loop in another branch
might never end), its outputs mutable locals too; the tracer takes every branch.

An integer (or bool) carry computed from floats has no dependencies in the tracer; the emitter
records an integer's source floats in ``index_deps`` by name, and a name declared in the body is
out of scope after it. Such a carry therefore gets a float accumulator beside it, joined at every
iteration with what the new value was computed from, and it stands for the carry's dependencies.
"""

from __future__ import annotations

import jax.extend.core as jex_core
import numpy as np

from shoal.ode._codegen.cpp import ctype as _ctype
from shoal.ode._codegen.cpp import is_float as _is_float
from shoal.ode._codegen.indexing import _array as array_of
from shoal.ode._codegen.tracing import call_body
from shoal.ode._codegen.values import Sym

# A loop whose unrolled form would emit more statements than this becomes a C++ loop. Unrolled,
# a statement costs about 1 ms of g++ -O2 (measured on a scan, double and float instantiated: a
# 1 000-step scan of 5 statements took 7.6 s, 64 steps 0.75 s, 10 steps 0.48 s, and the 10 000-step
# loop 0.61 s); as a loop the body is compiled once, and what the loop adds at run time (a counter,
# a branch, table loads instead of folded constants) is about what a body of a few statements
# costs. So short loops stay unrolled, and none adds more than about a quarter second.
MAX_UNROLLED_STATEMENTS = 256

# Tests conditions and assigns, or for the sparsity tracer takes every path and joins (math.hpp).
CONTROL_FLOW = "shoal::math::ControlFlow<T>"


def statements(jaxpr) -> int:
    """About how many statements translating ``jaxpr`` (a Jaxpr) unrolled emits."""
    total = 0
    for eqn in jaxpr.eqns:
        name, p = eqn.primitive.name, eqn.params
        if name == "scan":
            body = statements(p["jaxpr"].jaxpr)
            unrolled = int(p["length"]) * body
            total += unrolled if unrolled <= MAX_UNROLLED_STATEMENTS else body
        elif name == "while":
            total += statements(p["cond_jaxpr"].jaxpr) + statements(p["body_jaxpr"].jaxpr)
        elif name == "cond":
            total += sum(statements(b.jaxpr) for b in p["branches"])
        elif (inner := call_body(eqn)) is not None:
            total += statements(inner[1])
        else:
            total += sum(max(1, int(np.prod(v.aval.shape))) for v in eqn.outvars)
    return total


def reaches(jaxpr, marked: list[bool], *, from_floats: bool) -> list[bool]:
    """Which outputs of ``jaxpr`` may be computed from a marked input (or, ``from_floats``,
    from any float value)."""
    hit: dict = dict(zip(jaxpr.invars, marked, strict=True))

    def of(v) -> bool:
        if isinstance(v, jex_core.Literal):
            return False
        return hit.get(v, False) or (from_floats and _is_float(v.aval.dtype))

    for eqn in jaxpr.eqns:
        h = any(of(v) for v in eqn.invars)
        for o in eqn.outvars:
            hit[o] = h
    return [of(v) for v in jaxpr.outvars]


def holds_while(jaxpr) -> bool:
    """Whether a Jaxpr holds a while loop, in nested jaxprs too."""
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "while":
            return True
        for value in eqn.params.values():
            for inner in value if isinstance(value, (tuple, list)) else (value,):
                if isinstance(inner, jex_core.ClosedJaxpr):
                    inner = inner.jaxpr
                if isinstance(inner, jex_core.Jaxpr) and holds_while(inner):
                    return True
    return False


def _has_deps(em, s: Sym) -> bool:
    """Whether an integer or bool value was computed from floats (has index_deps)."""
    return not _is_float(s.dtype) and any(
        em.deps_of(e) for e in s.elems.flat if isinstance(e, str)
    )


def _from_floats(em, body, consts, carry, xs) -> tuple[list[bool], list[bool]]:
    """(for each carry, for each other output of the body) whether it may be an integer
    computed from floats in some iteration: a fixed point over the loop."""
    nk = len(carry)
    marked = [_has_deps(em, c) for c in carry]
    while True:
        ins = [_has_deps(em, s) for s in consts] + marked + [_has_deps(em, x) for x in xs]
        outs = reaches(body.jaxpr, ins, from_floats=True)
        new = [a or b for a, b in zip(marked, outs[:nk], strict=True)]
        if new == marked:
            return marked, outs[nk:]
        marked = new


class _Accumulator:
    """A float local that collects, for the sparsity tracer, what an integer variable (a carry,
    the ys of a scan) was computed from in any iteration."""

    def __init__(self, em, initial: frozenset):
        args = ", ".join(sorted(initial))
        self.name = em.variable("T", f"indexed(T(0), {args})" if args else "T(0)")

    def joined(self, em, exprs) -> str | None:
        """Its new value after joining the sources of ``exprs`` (None if they add nothing)."""
        deps = set()
        for e in exprs:
            deps |= em.deps_of(e)
        deps.discard(self.name)
        return f"indexed({self.name}, {', '.join(sorted(deps))})" if deps else None


class _Carries:
    """The mutable locals holding a loop's carries."""

    def __init__(self, em, carry: list[Sym], from_floats: list[bool]):
        self.syms: list[Sym] = []
        self.accumulators: list[_Accumulator | None] = []
        for s, marked in zip(carry, from_floats, strict=True):
            ctype, acc = _ctype(s.dtype), None
            if marked and not _is_float(s.dtype):
                initial = frozenset().union(
                    *(em.deps_of(e) for e in s.elems.flat if isinstance(e, str)))
                acc = _Accumulator(em, initial)
            elems = np.empty(s.shape, dtype=object)
            for idx in np.ndindex(s.shape):
                elems[idx] = em.variable(ctype, em.render(s.elems[idx], s.dtype))
                if acc is not None:
                    em.index_deps[elems[idx]] = frozenset([acc.name])
            self.syms.append(Sym(elems, s.dtype))
            self.accumulators.append(acc)

    def update(self, em, outs: list[Sym], assign_float: str):
        """Assign the body's outputs to the carries at the end of the body; ``assign_float``
        formats a float (variable, new value) assignment."""
        names = {e for s in self.syms for e in s.elems.flat}
        staged = []
        # Accumulators first: they read the sources of the new values, which may be carries.
        for acc, out in zip(self.accumulators, outs, strict=True):
            if acc is not None:
                new = acc.joined(em, [e for e in out.elems.flat if isinstance(e, str)])
                if new is not None:
                    staged.append((acc.name, new, "T"))
        for sym, out in zip(self.syms, outs, strict=True):
            ctype = _ctype(sym.dtype)
            for var, new in zip(sym.elems.flat, out.elems.flat, strict=True):
                if new == var:
                    continue
                text = em.render(new, out.dtype)
                if text in names:  # another carry: read it before any carry changes
                    tmp = em.fresh()
                    em.lines.append(f"const {ctype} {tmp} = {text};")
                    text = tmp
                staged.append((var, text, ctype))
        for var, text, ctype in staged:
            em.lines.append(assign_float.format(var, text) if ctype == "T" else f"{var} = {text};")


def while_loop(walker, eqn, cond_consts, body_consts, carry) -> list[Sym]:
    """``for (bool grew = true;;) { cond; if (!test(cond, grew)) break; body; carries = new; }``"""
    em, p = walker.em, eqn.params
    marked, _ = _from_floats(em, p["body_jaxpr"], body_consts, carry, [])
    carries = _Carries(em, carry, marked)
    grew = em.fresh("grew")
    loop = CONTROL_FLOW
    with em.block(f"for (bool {grew} = true;;)"):
        (go,) = walker.run_closed(p["cond_jaxpr"], [*cond_consts, *carries.syms])
        em.lines.append(f"if (!{loop}::test({em.render(go.elems[()], go.dtype)}, {grew})) break;")
        em.lines.append(f"{grew} = false;")
        outs = walker.run_closed(p["body_jaxpr"], [*body_consts, *carries.syms])
        carries.update(em, outs, f"{grew} |= {loop}::update({{}}, {{}});")
    return carries.syms


def guarded_cond(walker, eqn, index: str, ops) -> list[Sym]:
    """A cond whose branches hold while loops runs only the branch taken, as JAX does: a loop in
    another branch might never end for these operands (Newton's method outside its domain).
    ``if (test(index == k, true)) { branch k; outputs = its values; }``; the sparsity tracer
    takes every branch and joins their outputs."""
    em, branches = walker.em, eqn.params["branches"]
    marked, ins = [False] * len(eqn.outvars), [_has_deps(em, s) for s in ops]
    for b in branches:
        outs = reaches(b.jaxpr, ins, from_floats=True)
        marked = [m or o for m, o in zip(marked, outs, strict=True)]
    zeros = [Sym(np.zeros(tuple(v.aval.shape), dtype=object), v.aval.dtype) for v in eqn.outvars]
    outputs = _Carries(em, zeros, marked)
    for k, branch in enumerate(branches):
        with em.block(f"if ({CONTROL_FLOW}::test({index} == {k}, true))"):
            values = walker.run_closed(branch, ops)
            outputs.update(em, values, f"{CONTROL_FLOW}::update({{}}, {{}});")
    return outputs.syms


def scan_loop(walker, eqn, consts, carry, xs) -> list[Sym]:
    """``for (int64_t i = 0; i < length; ++i) { x = xs[i]; body; ys[i] = y; carries = new; }``"""
    em, p = walker.em, eqn.params
    length, nk = int(p["length"]), int(p["num_carry"])
    marked, ys_marked = _from_floats(em, p["jaxpr"], consts, carry, xs)
    carries = _Carries(em, carry, marked)
    sources = [_Source(em, x) for x in xs]
    ys = [
        _Ys(em, var.aval, length, from_floats) if walker.is_read(var) else None
        for var, from_floats in zip(eqn.outvars[nk:], ys_marked, strict=True)
    ]
    i = em.fresh("i")
    with em.block(f"for (int64_t {i} = 0; {i} < {length}; ++{i})"):
        k = em.assign("int64_t", f"{length - 1} - {i}") if p["reverse"] else i
        x_k = [s.read(k) for s in sources]
        outs = walker.run_closed(p["jaxpr"], [*consts, *carries.syms, *x_k])
        for y, out in zip(ys, outs[nk:], strict=True):
            if y is not None:  # before the carries change: a y may be a carry
                y.write(em, k, out)
        carries.update(em, outs[:nk], "{} = {};")
    unread = [Sym(np.zeros(tuple(v.aval.shape), dtype=object), v.aval.dtype)
              for v in eqn.outvars[nk:]]
    return carries.syms + [
        y.sym(em) if y is not None else u for y, u in zip(ys, unread, strict=True)
    ]


def _at(k: str, per: int, j: int) -> str:
    """Where element j of slice k of an array of slices of ``per`` elements sits."""
    return f"{k} * {per} + {j}" if per > 1 else k


class _Source:
    """A scan's xs, read at the loop's counter: a static table if constant, else a local array."""

    def __init__(self, em, x: Sym):
        self.em, self.x = em, x
        self.array = array_of(em, x)
        self.per = int(np.prod(x.shape[1:], dtype=np.int64))
        # An integer read at the counter may be any entry of its column: their sources.
        columns = x.elems.reshape(x.shape[0], self.per)
        self.deps = [
            frozenset().union(*(em.deps_of(e) for e in columns[:, j] if isinstance(e, str)))
            for j in range(self.per)
        ]

    def read(self, k: str) -> Sym:
        em, x = self.em, self.x
        ctype, out = _ctype(x.dtype), np.empty(self.per, dtype=object)
        for j in range(self.per):
            element = f"{self.array}[{_at(k, self.per, j)}]"
            if _is_float(x.dtype) and x.is_const():
                element = f"T({element})"
            out[j] = em.assign(ctype, element)
            if not _is_float(x.dtype):
                em.index_deps[out[j]] = self.deps[j]
        return Sym(out.reshape(x.shape[1:]), x.dtype)


class _Ys:
    """A local array collecting a scan's ys, one slice per iteration."""

    def __init__(self, em, aval, length: int, from_floats: bool):
        self.dtype, self.shape = np.dtype(aval.dtype), tuple(aval.shape)
        self.per = int(np.prod(self.shape[1:], dtype=np.int64))
        self.name = em.fresh("ys")
        ctype = _ctype(self.dtype)
        em.lines.append(f"{ctype} {self.name}[{max(length * self.per, 1)}];")
        self.acc = _Accumulator(em, frozenset()) if from_floats and ctype != "T" else None

    def write(self, em, k: str, out: Sym):
        for j, e in enumerate(out.elems.flat):
            em.lines.append(f"{self.name}[{_at(k, self.per, j)}] = {em.render(e, self.dtype)};")
        if self.acc is not None:
            new = self.acc.joined(em, [e for e in out.elems.flat if isinstance(e, str)])
            if new is not None:
                em.lines.append(f"{self.acc.name} = {new};")

    def sym(self, em) -> Sym:
        elems = np.empty(int(np.prod(self.shape, dtype=np.int64)), dtype=object)
        for m in range(elems.size):
            elems[m] = f"{self.name}[{m}]"
            if _is_float(self.dtype):
                em.floats.add(elems[m])
            else:
                em.index_deps[elems[m]] = frozenset([self.acc.name] if self.acc else [])
        return Sym(elems.reshape(self.shape), self.dtype)
