"""The kernel-call primitive: one FFI call of an eigh target, batch-partitionable under SPMD.

``jax.ffi.ffi_call`` cannot attach attributes to its custom call, and without them XLA has no
partitioning rule for it: under ``jit`` with a batch-sharded input it gathers the whole batch
onto every device. This primitive emits the same call (the same target and ``options``
attribute) plus what ``jax.lax.linalg`` adds to its LAPACK calls: the frontend attribute
``num_batch_dims`` (read by XLA's CustomCallBatchPartitioner, for targets registered with
``jax.ffi.register_ffi_target_as_batch_partitionable``) and, under Shardy, an
``sdy.sharding_rule`` whose leading ``...`` factors are shared by every operand and result.
XLA then reshards the operands to one batch sharding and runs the kernel once per shard.

Every operand is ``batch + (n, n)`` (the same batch); every result is ``batch + core`` with
``core`` given per result. Batching (vmap) is ``ffi_call``'s ``broadcast_all``.
"""

from __future__ import annotations

import functools
import math

import jax
import numpy as np
from jax.extend.core import Primitive
from jax.interpreters import batching, mlir

from shoal._manual_axes import result_aval, varying_axes

try:  # the usual eager implementation of a primitive: compile it alone, cached by parameters
    from jax._src.dispatch import apply_primitive as _apply_primitive
except ImportError:  # pragma: no cover - JAX moved it: jit per call works, uncached
    def _apply_primitive(prim, *args, **params):
        return jax.jit(functools.partial(prim.bind, **params))(*args)

try:  # the parser jax.lax.linalg uses for its own rules
    from jax._src.custom_partitioning_sharding_rule import (
        sdy_sharding_rule_to_mlir,
        str_to_sdy_sharding_rule,
    )
except ImportError:  # pragma: no cover - depends on the JAX version: no Shardy rule
    str_to_sdy_sharding_rule = None

NON_BATCH_DIMS = 2  # every operand is (..., n, n)

eigh_call_p = Primitive("shoal_linalg_eigh_call")
eigh_call_p.multiple_results = True
eigh_call_p.def_impl(functools.partial(_apply_primitive, eigh_call_p))


def register_batch_partitionable(name: str) -> None:
    """Once per target: without it XLA ignores ``num_batch_dims`` and gathers the batch."""
    register = getattr(jax.ffi, "register_ffi_target_as_batch_partitionable", None)
    if register is not None:
        register(name)


@eigh_call_p.def_abstract_eval
def _abstract_eval(*avals, results, **_):
    a = avals[0]
    batch = a.shape[:-NON_BATCH_DIMS]
    varying = varying_axes(avals)
    return [result_aval(a, batch + core, np.dtype(dtype), varying, len(batch))
            for core, dtype in results]


def _batch(args, dims, **params):
    """vmap as ``broadcast_all``: every operand gets the mapped axis in front. b is shared by the
    new batch when vmap does not map it and it was shared (or alone) before; a mapped b is not."""
    size = next(x.shape[d] for x, d in zip(args, dims, strict=True) if d is not None)
    options = params["options"]
    if hasattr(options, "shared_b") and len(args) > 1:
        alone = math.prod(args[1].shape[:-NON_BATCH_DIMS]) == 1
        shared = dims[1] is None and (options.shared_b or alone)
        params = dict(params, options=options.replace(shared_b=shared))
    moved = [jax.numpy.broadcast_to(x, (size, *x.shape)) if d is None
             else jax.numpy.moveaxis(x, d, 0) for x, d in zip(args, dims, strict=True)]
    out = eigh_call_p.bind(*moved, **params)
    return out, [0] * len(out)


batching.primitive_batchers[eigh_call_p] = _batch


def _sharding_rule(ctx, num_batch_dims: int):
    """``... a b, ... c d -> ... e, ...``: the batch factors common to all, the rest private."""
    letters = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")

    def side(avals):
        return ", ".join(
            " ".join(["..."] + [next(letters) for _ in range(len(v.shape) - num_batch_dims)])
            for v in avals)

    rule = str_to_sdy_sharding_rule(f"{side(ctx.avals_in)} -> {side(ctx.avals_out)}")
    types = [mlir.aval_to_ir_type(ctx.module_context, v) for v in (*ctx.avals_in, *ctx.avals_out)]
    return sdy_sharding_rule_to_mlir(rule, types[:len(ctx.avals_in)], types[len(ctx.avals_in):])


def _lowering(ctx, *args, target, results, options, extra, aliases):
    del results  # in ctx.avals_out
    num_batch_dims = len(ctx.avals_in[0].shape) - NON_BATCH_DIMS
    attrs = None
    if num_batch_dims:  # a lone matrix has nothing to partition
        attrs = {"mhlo.frontend_attributes":
                 mlir.ir_attribute({"num_batch_dims": str(num_batch_dims)})}
        if jax.config.jax_use_shardy_partitioner and str_to_sdy_sharding_rule is not None:
            attrs["sdy.sharding_rule"] = _sharding_rule(ctx, num_batch_dims)
    rule = jax.ffi.ffi_lowering(target, operand_output_aliases=dict(aliases) or None,
                                extra_attributes=attrs)
    return rule(ctx, *args, options=options.attribute(), **dict(extra))


mlir.register_lowering(eigh_call_p, _lowering)


def eigh_call(target: str, operands, results, options, *, extra=(), aliases=()):
    """Bind one kernel call. ``results``: (core shape, dtype) per result, after the batch dims
    of ``operands[0]``; ``options``: an ``EighOptions`` (its ``attribute()`` is sent);
    ``extra``: further (name, value) attributes; ``aliases``: (operand, result) pairs."""
    results = tuple((tuple(int(d) for d in core), np.dtype(dtype).name) for core, dtype in results)
    return eigh_call_p.bind(*operands, target=target, results=results, options=options,
                            extra=tuple(extra), aliases=tuple(aliases))
