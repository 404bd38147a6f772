"""From ``f`` to a flat jaxpr: tracing on one trajectory's shapes, checking the output, and the
bodies of call-like primitives (jit, custom_jvp, remat, ...), which the walker inlines."""

from __future__ import annotations

import jax
import jax.extend.core as jex_core
import jax.numpy as jnp
import numpy as np

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


class ModelTraceError(ValueError):
    """``f`` does not have the signature or output a model needs."""


def _wrap_output(f):
    """Let f return an array or a tuple/list of scalars (stacked into one array)."""

    def wrapped(y, t, p):
        out = f(y, t, p)
        if isinstance(out, (tuple, list)):
            out = jnp.stack([jnp.asarray(o) for o in out])
        return out

    return wrapped


def trace(f, n_vars: int, n_params: int, dtype):
    """Trace f on one trajectory's shapes; checks its output's shape and dtype."""
    dtype = np.dtype(dtype)
    specs = (
        jax.ShapeDtypeStruct((n_vars,), dtype),
        jax.ShapeDtypeStruct((), dtype),
        jax.ShapeDtypeStruct((n_params,), dtype),
    )
    closed = jax.make_jaxpr(_wrap_output(f))(*specs)
    outs = closed.out_avals
    if len(outs) != 1:
        raise ModelTraceError(
            f"f(y, t, p) must return one array of shape ({n_vars},); it returned {len(outs)} values"
        )
    out = outs[0]
    if tuple(out.shape) != (n_vars,):
        raise ModelTraceError(
            f"f(y, t, p) must return shape ({n_vars},) like y; it returned shape {tuple(out.shape)}"
        )
    if np.dtype(out.dtype) != dtype:
        raise ModelTraceError(
            f"f(y, t, p) must return dtype {dtype.name} like y; it returned "
            f"{np.dtype(out.dtype).name}"
        )
    for c in closed.consts:
        if isinstance(c, jax.core.Tracer):
            raise ModelTraceError(
                "f closes over a traced value (an array that is being "
                "transformed by jit/vmap/grad); pass it through params instead"
            )
    return closed


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
