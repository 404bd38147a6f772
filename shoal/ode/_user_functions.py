"""The user's functions of (y, t, p) as closure-free JAX functions of the model's own p.

The kernel reads a model's p as [own, shared, closure]: the arrays f (or an event function...)
closes over while an outer transformation traces them are trailing shared parameters
(``_codegen.generate``). The derivative rules that need f or an event function in JAX (the
tangent of a save time, of the start time, of an event) evaluate them the same way: traced again,
with those closed-over tracers replaced by the matching slices of p, so a rule never closes over
another transformation's tracers and agrees with the kernel by construction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import jax
import numpy as np

from shoal.ode._codegen import ModelFunction
from shoal.ode._codegen.tracing import OUTPUT_SHAPES, trace
from shoal.ode._params import ParamLayout


@dataclass(frozen=True)
class UserFunctions:
    """f and the extra model functions of one solve (hashable: functions by identity)."""

    f: Callable
    extras: tuple[ModelFunction, ...]
    n_vars: int
    layout: ParamLayout
    dtype: str

    def evaluator(self, kind: str) -> Callable:
        """``pure(kind)``, traced on its first call (a rule that never runs traces nothing)."""
        cache = []

        def evaluate(y, t, p):
            if not cache:
                cache.append(self.pure(kind))
            return cache[0](y, t, p)

        return evaluate

    def pure(self, kind: str) -> Callable:
        """``fn(y, t, p) -> out`` for ``kind`` ("rhs", "jump", "save", "event") with p the
        model's full parameter vector of one trajectory (own, shared, closure)."""
        dtype = np.dtype(self.dtype)
        offset = self.layout.n_params
        for this_kind, fn in [("rhs", self.f), *((e.kind, e.fn) for e in self.extras)]:
            closed = trace(fn, self.n_vars, self.layout, dtype, name=this_kind,
                           shape=OUTPUT_SHAPES[this_kind])
            slots = []
            for c in closed.consts:
                if isinstance(c, jax.core.Tracer):
                    size = int(np.prod(c.shape))
                    slots.append((offset, size, c.shape))
                    offset += size
                else:
                    slots.append(None)
            if this_kind == kind:
                return _evaluator(closed, slots, self.layout.n_params)
        raise KeyError(kind)


def _evaluator(closed, slots, n_layout: int) -> Callable:
    def evaluate(y, t, p):
        consts = [c if slot is None else p[slot[0]:slot[0] + slot[1]].reshape(slot[2])
                  for c, slot in zip(closed.consts, slots, strict=True)]
        (out,) = jax.core.eval_jaxpr(closed.jaxpr, consts, y, t, p[:n_layout])
        return out

    return evaluate
