"""From ``f`` to a flat jaxpr: tracing on one trajectory's shapes, checking the output, and the
bodies of call-like primitives (jit, custom_jvp, remat, ...), which the walker inlines."""

from __future__ import annotations

import jax
import jax.extend.core as jex_core
import jax.numpy as jnp
import numpy as np

from shoal.ode._params import ParamLayout

# Primitives that only wrap a jaxpr: their body is translated in place.
CALL_LIKE = {
    "jit",
    "pjit",
    "closed_call",
    "core_call",
    "custom_jvp_call",
    "custom_vjp_call",
    "custom_vjp_call_jaxpr",
    "remat",
    "remat2",
    "checkpoint",
    "custom_lin",
}


# The output shape each kind of model function must have (None: y's; "any": one array).
OUTPUT_SHAPES = {"rhs": None, "jump": None, "event": (), "save": "any"}


class ModelTraceError(ValueError):
    """``f`` does not have the signature or output a model needs."""


def _wrap(f, layout: ParamLayout):
    """f on the flat parameter vector, returning one array (a tuple/list of scalars is
    stacked)."""

    def wrapped(y, t, p):
        out = f(y, t, layout.unflatten(p))
        if isinstance(out, (tuple, list)):
            out = jnp.stack([jnp.asarray(o) for o in out])
        return out

    return wrapped


def trace(f, n_vars: int, params: int | ParamLayout, dtype, *, name: str = "f",
          shape: tuple[int, ...] | str | None = None):
    """Trace f on one trajectory's shapes; checks its output's shape and dtype.

    ``params`` is the parameters' layout (an int: a flat vector of that many). Arrays that f
    closes over while an outer jit/grad/vmap traces them stay tracers among the consts: the
    model reads them as shared parameters (see ``model_struct``). ``name`` and ``shape`` are
    the function's name in messages and the output shape it must have (default ``(n_vars,)``,
    like y; ``()`` for a scalar; ``"any"``: one array of any shape).
    """
    dtype = np.dtype(dtype)
    layout = params if isinstance(params, ParamLayout) else ParamLayout.flat(params, dtype)
    specs = (
        jax.ShapeDtypeStruct((n_vars,), dtype),
        jax.ShapeDtypeStruct((), dtype),
        jax.ShapeDtypeStruct((layout.n_params,), dtype),
    )
    expected = (n_vars,) if shape is None else shape
    like = "like y" if shape is None else ""
    try:
        closed = jax.make_jaxpr(_wrap(f, layout))(*specs)
    except Exception as err:
        # The user's own error (an IndexError on an empty p, a ZeroDivisionError...) keeps its
        # type; the note says which function raised it and on what it was traced.
        if hasattr(err, "add_note"):
            leaves = ", ".join(f"{np.dtype(s.dtype).name}{list(s.shape)}" for s in layout.slots)
            err.add_note(f"shoal.ode.solve: raised while tracing {name}(y, t, p) with y "
                         f"{dtype.name}[{n_vars}], t a {dtype.name} scalar and p's leaves "
                         f"[{leaves}]")
        raise
    outs = closed.out_avals
    if len(outs) != 1:
        raise ModelTraceError(
            f"{name}(y, t, p) must return one array of shape {expected} {like}; it returned "
            f"{len(outs)} values".replace("  ", " ")
        )
    out = outs[0]
    if shape != "any" and tuple(out.shape) != expected:
        raise ModelTraceError(
            f"{name}(y, t, p) must return shape {expected} {like}; it returned shape "
            f"{tuple(out.shape)}".replace("  ", " ")
        )
    if np.dtype(out.dtype) != dtype:
        raise ModelTraceError(
            f"{name}(y, t, p) must return dtype {dtype.name} like y; it returned "
            f"{np.dtype(out.dtype).name}"
        )
    for c in closed.consts:
        if isinstance(c, jax.core.Tracer) and jnp.issubdtype(c.dtype, jnp.complexfloating):
            raise ModelTraceError(
                f"{name} closes over a traced {c.dtype} array (one that jit/vmap/grad is "
                "transforming); complex values cannot be inputs of a model"
            )
    return _floated_closure(closed, specs, dtype)


def _floated_closure(closed, specs, dtype):
    """``closed`` with its traced integer and boolean closures (a table's int64 indices under
    jit) carried in ``dtype`` and converted back inside the jaxpr, as integer params leaves
    are: the model reads every run-time input from its floating p. Exact for integers up to
    2**53 in float64 (2**24 in float32)."""
    def integral(c):
        return isinstance(c, jax.core.Tracer) and not jnp.issubdtype(c.dtype, jnp.floating)

    if not any(integral(c) for c in closed.consts):
        return closed
    floated = [c.astype(dtype) if integral(c) else c for c in closed.consts]

    def reading_back(y, t, p):
        consts = [x.astype(c.dtype) if integral(c) else c
                  for x, c in zip(floated, closed.consts, strict=True)]
        return jax.core.eval_jaxpr(closed.jaxpr, consts, y, t, p)

    return jax.make_jaxpr(reading_back)(*specs)


def call_body(eqn):
    """``(consts, jaxpr)`` of a call-like equation's body, or None when it carries none. The
    consts are the body's closed-over values (a ClosedJaxpr's), else empty."""
    params = eqn.params
    inner = None
    for key in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
        if key in params:
            inner = params[key]
            break
    if inner is None:
        return None
    if isinstance(inner, jex_core.ClosedJaxpr):
        return list(inner.consts), inner.jaxpr
    return [], inner
