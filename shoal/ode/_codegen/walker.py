"""Symbolic evaluation of a jaxpr: variables to values, equation by equation.

Call-like equations are inlined; an equation whose inputs are all constant is folded by JAX;
every other equation goes to the rule its primitive maps to in ``rules``.
"""

from __future__ import annotations

import contextlib

import jax
import jax.extend.core as jex_core
import jax.numpy as jnp
import numpy as np

from shoal.ode._codegen import numpy_eval
from shoal.ode._codegen.emitter import Emitter
from shoal.ode._codegen.jax_internals import eager, source_location
from shoal.ode._codegen.rules import NAMED_CALLS, RULES
from shoal.ode._codegen.scattered import Scattered, keep, materialize
from shoal.ode._codegen.tracing import CALL_LIKE, call_body
from shoal.ode._codegen.values import const_sym

# What to write instead of a primitive that is not translated, where there is an equivalent.
_DECOMPOSITION = (
    ": small dense matrices may use jnp.linalg.solve, inv, det and slogdet (LU) inside f; for"
    " a decomposition of a matrix that does not depend on y, t or p, compute it outside f and"
    " close over the result"
)
_INSTEAD = {
    **dict.fromkeys(
        ("cholesky", "eigh", "eig", "svd", "qr", "geqrf", "householder_product", "schur"),
        _DECOMPOSITION,
    ),
    "tridiagonal_solve": " (a tridiagonal solve): use jnp.linalg.solve of the dense matrix",
    "cumlogsumexp": ": write jnp.log(jnp.cumsum(jnp.exp(x - m))) + m with m = x.max()",
    "top_k": ": use jnp.sort (rows of up to 64 elements) and slice",
    "fft": ": write the DFT of a small array as a product with a constant matrix",
}
# For every other primitive.
_OTHERWISE = "; write it with the supported operations, or compute it outside f and pass it in p"


class Walker:
    def __init__(self, emitter: Emitter):
        self.em = emitter
        self.calls: list = []  # enclosing call-like and control-flow equations, innermost last
        self._read: set = set()  # variables that an equation or a jaxpr's result reads

    def is_read(self, var) -> bool:
        """Whether a variable of a jaxpr being run is read (a scan need not store unread ys)."""
        return var in self._read

    def where(self, eqn) -> str:
        # Equations inside library functions (jnp.cumsum is a jit) carry no user frame; the
        # nearest enclosing call that does is the line in f that the user can act on.
        for e in (eqn, *reversed(self.calls)):
            loc = source_location(e)
            if loc:
                return loc
        return "<unknown location>"

    @contextlib.contextmanager
    def inside(self, eqn):
        """Translate nested jaxprs of ``eqn`` with it as their enclosing equation."""
        self.calls.append(eqn)
        try:
            yield
        finally:
            self.calls.pop()

    def unsupported(self, eqn) -> NotImplementedError:
        name = eqn.primitive.name
        hint = _INSTEAD.get(name, _OTHERWISE)
        return NotImplementedError(
            f"shoal cannot translate primitive '{name}' (at {self.where(eqn)}){hint}; "
            "supported: arithmetic, elementary functions, comparisons, select, cond, loops "
            "(scan, fori_loop, while_loop), indexing and writes (x[i], x.at[i].set/add/..., "
            "dynamic_slice and dynamic_update_slice, at computed indices too), searchsorted, "
            "reductions, cumulative scans, argmax/argmin, sorts of small rows, contractions and "
            "small dense linear algebra (jnp.linalg.solve, inv, det, slogdet)"
        )

    def run(self, jaxpr, consts, args):
        env = {}

        def read(v):
            if isinstance(v, jex_core.Literal):
                return const_sym(np.asarray(v.val, dtype=v.aval.dtype))
            return env[v]

        self._read.update(v for e in jaxpr.eqns for v in e.invars if isinstance(v, jex_core.Var))
        self._read.update(v for v in jaxpr.outvars if isinstance(v, jex_core.Var))
        for var, val in zip(jaxpr.constvars, consts, strict=True):
            env[var] = val
        for var, val in zip(jaxpr.invars, args, strict=True):
            env[var] = val
        for eqn in jaxpr.eqns:
            ins = [read(v) for v in eqn.invars]
            outs = self.eqn(eqn, ins)
            for var, val in zip(eqn.outvars, outs, strict=True):
                if not isinstance(var, jex_core.DropVar):
                    env[var] = val
        return [read(v) for v in jaxpr.outvars]

    def run_closed(self, closed, args):
        """A nested jaxpr (a loop's body, a branch): its results as plain values."""
        outs = self.run(closed.jaxpr, [const_sym(c) for c in closed.consts], list(args))
        return [materialize(self.em, o) for o in outs]

    def eqn(self, eqn, ins):
        name = eqn.primitive.name
        if name in CALL_LIKE:
            return self.inline(eqn, ins)
        if any(isinstance(s, Scattered) for s in ins):
            outs = keep(self, eqn, ins)
            if outs is not None:
                return outs
            ins = [materialize(self.em, s) for s in ins]
        if all(s.is_const() for s in ins):
            folded = self.fold(eqn, ins)
            if folded is not None:
                return folded
        return self.apply(eqn, ins)

    def apply(self, eqn, ins):
        """The translation rule of the equation's primitive."""
        rule = RULES.get(eqn.primitive.name)
        if rule is None:
            raise self.unsupported(eqn)
        return rule(self, eqn, ins)

    def inline(self, eqn, ins):
        named = NAMED_CALLS.get(eqn.params.get("name"))
        if named is not None:
            ins = [materialize(self.em, s) for s in ins]
            with self.inside(eqn):
                outs = named(self, eqn, ins)
            if outs is not None:
                return outs
        body = call_body(eqn)
        if body is None:
            raise NotImplementedError(
                f"shoal cannot translate primitive '{eqn.primitive.name}' (at {self.where(eqn)})"
            )
        consts, jaxpr = body
        # custom_jvp/vjp calls may receive their consts as leading operands.
        with self.inside(eqn):
            return self.run(
                jaxpr, [const_sym(c) for c in consts], ins[len(ins) - len(jaxpr.invars) :]
            )

    def fold(self, eqn, ins):
        """Evaluate an equation with constant inputs, in NumPy where it gives JAX's exact result
        (numpy_eval.py), else using JAX itself; None if JAX cannot."""
        values = [s.const_value() for s in ins]
        outs = numpy_eval.fold(eqn.primitive.name, eqn.params, values)
        if outs is not None:
            return [const_sym(np.array(o)) for o in outs]
        try:
            with eager():
                out = eqn.primitive.bind(*[jnp.asarray(s.const_value()) for s in ins], **eqn.params)
        except Exception:  # noqa: BLE001 - fall back to symbolic translation
            return None
        outs = out if eqn.primitive.multiple_results else [out]
        if any(jnp.issubdtype(o.dtype, jax.dtypes.extended) for o in outs):
            # A PRNG key (jax.random in f) has no NumPy value: name it rather than fail there.
            raise NotImplementedError(
                f"shoal cannot translate random numbers (primitive '{eqn.primitive.name}' makes a "
                f"{outs[0].dtype} at {self.where(eqn)}): draw them outside f and pass them in p"
            )
        return [const_sym(np.asarray(o)) for o in outs]
