"""``scan`` and ``while``: unrolled when short, else C++ loops (``loops``); ``cond`` evaluates
every branch and selects, unless a branch holds a while loop (then only the branch taken runs).
Each translates its body jaxprs with the walker, inside the equation (whose source line then
names errors in the body)."""

from __future__ import annotations

import numpy as np

from shoal.ode._codegen import loops
from shoal.ode._codegen.cpp import ctype as _ctype
from shoal.ode._codegen.cpp import is_float as _is_float
from shoal.ode._codegen.values import Sym


def scan(walker, eqn, ins) -> list[Sym]:
    """A scan (fori_loop with Python-int bounds, jnp.polyval): its length is static. Unrolled
    up to loops.MAX_UNROLLED_STATEMENTS, else a C++ for loop."""
    p = eqn.params
    length, nc, nk = int(p["length"]), p["num_consts"], p["num_carry"]
    consts, carry, xs = ins[:nc], list(ins[nc : nc + nk]), ins[nc + nk :]
    if length * loops.statements(p["jaxpr"].jaxpr) > loops.MAX_UNROLLED_STATEMENTS:
        return loops.scan_loop(walker, eqn, consts, carry, xs)
    y_avals = [v.aval for v in eqn.outvars[nk:]]
    ys = [[None] * length for _ in y_avals]
    for i in reversed(range(length)) if p["reverse"] else range(length):
        x_i = [Sym(x.elems[i : i + 1].reshape(x.shape[1:]), x.dtype) for x in xs]
        outs = walker.run_closed(p["jaxpr"], [*consts, *carry, *x_i])
        carry = outs[:nk]
        for y, out in zip(ys, outs[nk:], strict=True):
            y[i] = out.elems
    stacked = [
        Sym(np.stack(y) if length else np.empty(tuple(a.shape), dtype=object), a.dtype)
        for y, a in zip(ys, y_avals, strict=True)
    ]
    return carry + stacked


def cond(walker, eqn, ins) -> list[Sym]:
    """lax.cond/switch: every branch is evaluated and the taken one selected (they are pure,
    and a NaN in a branch not taken must not leak, which selecting guarantees)."""
    em = walker.em
    index, ops, branches = ins[0], ins[1:], eqn.params["branches"]
    if index.is_const():
        return walker.run_closed(branches[int(index.const_value())], ops)
    i = em.render(index.elems[()], index.dtype)
    if any(loops.holds_while(b.jaxpr) for b in branches):
        return loops.guarded_cond(walker, eqn, i, ops)
    results = [walker.run_closed(b, ops) for b in branches]
    outs = []
    for j, var in enumerate(eqn.outvars):
        dtype = np.dtype(var.aval.dtype)
        # select() for floats, as for select_n: the sparsity tracer joins every branch.
        pick = "select({}, {}, {})" if _is_float(dtype) else "pick({}, {}, {})"
        out = np.empty(tuple(var.aval.shape), dtype=object)
        for idx in np.ndindex(out.shape):
            cases = [em.render(r[j].elems[idx], dtype) for r in results]
            expr = cases[-1]
            for k in range(len(cases) - 2, -1, -1):
                expr = pick.format(f"{i} == {k}", cases[k], expr)
            out[idx] = em.assign(_ctype(dtype), expr)
        outs.append(Sym(out, dtype))
    return outs


def while_loop(walker, eqn, ins) -> list[Sym]:
    """Unrolled when the condition is a constant at every iteration and the unrolled code stays
    under loops.MAX_UNROLLED_STATEMENTS (a fori_loop with a traced but constant bound); else a
    C++ loop testing the condition at run time."""
    p, em = eqn.params, walker.em
    nc, nb = p["cond_nconsts"], p["body_nconsts"]
    cond_consts, body_consts, carry = ins[:nc], ins[nc : nc + nb], list(ins[nc + nb :])
    mark, unrolled = em.mark(), carry
    for _ in range(loops.MAX_UNROLLED_STATEMENTS):  # iterations that emit nothing count too
        if len(em.lines) - mark[0] > loops.MAX_UNROLLED_STATEMENTS:
            break
        symbolic = [not s.is_const() for s in (*cond_consts, *unrolled)]
        if loops.reaches(p["cond_jaxpr"].jaxpr, symbolic, from_floats=False)[0]:
            break
        (go,) = walker.run_closed(p["cond_jaxpr"], [*cond_consts, *unrolled])
        if not go.is_const():
            break
        if not bool(go.const_value()):
            return unrolled
        unrolled = walker.run_closed(p["body_jaxpr"], [*body_consts, *unrolled])
    em.rewind(mark)
    return loops.while_loop(walker, eqn, cond_consts, body_consts, carry)
