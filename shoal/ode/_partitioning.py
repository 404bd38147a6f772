"""The ensemble solve under SPMD: shard-local along the ensemble axis.

Under ``jax.jit`` with operands sharded over several devices, XLA's partitioner knows nothing of
a custom call and would gather every operand onto every device. The solve is embarrassingly
parallel along its leading (ensemble and vmap) dimensions, so its lowering, when the module
spans several devices and is not already manual (``shard_map``), goes through
``jax.experimental.custom_partitioning``:

* a Shardy sharding rule says that every leading dimension is one factor shared by all operands
  and results, except where an operand has size 1 there (the shared rows: ``shared``, one
  ``t_span`` or ``tstops`` row for the whole ensemble, the progress slot), and that no trailing
  dimension may be sharded (the state, the saves, the parameters of one trajectory);
* the partition callback keeps the leading dimensions sharded as the results are (what Shardy
  propagated from the operands), replicates the rest, and lowers one plain kernel call on each
  device's shard.

Why not XLA's batch-partitionable custom calls (``jax.ffi.register_ffi_target_as_batch_
partitionable``, which the eigensolver uses)? That partitioner shards EVERY operand's leading
dimensions alike: a size-1 row shared by the ensemble would be split too, and the second
device would read padding. Broadcasting those rows to the ensemble size instead would copy the
shared parameters (tables) once per trajectory.

An uneven split (N not divisible by the device count) pads the last shard: the padding rows are
solved and dropped, so each device's program has the same shape. Every trajectory depends on its
own row only, so the result equals the unsharded solve bit for bit.
"""

from __future__ import annotations

import jax
import numpy as np
from jax.experimental.custom_partitioning import ArrayMapping, SdyShardingRule, custom_partitioning
from jax.interpreters import mlir
from jax.sharding import Mesh, NamedSharding, PartitionSpec

try:  # where JAX keeps the lowering's device context (internal: imports guarded)
    from jax._src import dispatch as _dispatch
    from jax._src import sharding_impls as _sharding_impls
except ImportError:  # pragma: no cover - JAX moved them: solves lower as one call, gathered
    _dispatch = _sharding_impls = None


def _spans_devices(ctx) -> bool:
    """True when the module is partitioned by XLA over more than one device (plain jit with
    sharded operands), False inside a fully manual ``shard_map`` or on one device."""
    if _sharding_impls is None:  # pragma: no cover
        return False
    context = ctx.module_context.axis_context
    if isinstance(context, _sharding_impls.SPMDAxisContext):
        return set(context.manual_axes) != set(context.mesh.axis_names)
    if isinstance(context, _sharding_impls.ShardingContext):
        # Without the device assignment (a primitive not in require_devices_when_lowering's
        # set lowers it) custom_partitioning cannot run: one gathered call, still correct.
        return context.num_devices > 1 and context.device_assignment is not None
    return False


def _replicated(ctx):
    """Replication over the module's mesh (plain jit), or None (inside a partly manual
    shard_map, whose operands are typed already)."""
    context = ctx.module_context.axis_context
    if not isinstance(context, _sharding_impls.ShardingContext):
        return None
    mesh = context.abstract_mesh
    if mesh is None or mesh.empty:
        devices = np.array(context.device_assignment)
        return NamedSharding(Mesh(devices, ("devices",)), PartitionSpec())
    devices = np.array(context.device_assignment).reshape(mesh.axis_sizes)
    return NamedSharding(Mesh(devices, mesh.axis_names), PartitionSpec())


def _leading_layout(avals_in, avals_out, aligned):
    """Per operand and result, which leading dimensions follow the ensemble (True) or are a
    single row shared by it (False); None when some operand fits neither (it then cannot be
    split with the ensemble, and the solve lowers as one gathered call). ``aligned[k]``: how
    many leading dimensions of operand k line up with the results' leading dimensions."""
    lead = avals_out[1].shape  # accepted: exactly the leading dimensions
    layout_in = []
    for aval, count in zip(avals_in, aligned, strict=True):
        if count > len(lead):
            return None
        pairs = list(zip(aval.shape[:count], lead[:count], strict=True))
        if any(d != n and d != 1 for d, n in pairs):
            return None
        layout_in.append(tuple(d == n and n > 1 for d, n in pairs))
    layout_out = [tuple(n > 1 for n in lead)] * len(avals_out)
    return lead, layout_in, layout_out


def _rule(lead, layout_in, layout_out, avals_in, avals_out) -> SdyShardingRule:
    """Leading dimension i is factor ``n{i}`` where it follows the ensemble; every other
    dimension is a factor of its own that must stay replicated."""
    own = []

    def mapping(follows, ndim):
        names = []
        for d in range(ndim):
            if d < len(follows) and follows[d]:
                names.append(f"n{d}")
            else:
                names.append(f"r{len(own)}")
                own.append(names[-1])
        return ArrayMapping(*names)

    ins = tuple(mapping(f, a.ndim) for f, a in zip(layout_in, avals_in, strict=True))
    outs = tuple(mapping(f, a.ndim) for f, a in zip(layout_out, avals_out, strict=True))
    return SdyShardingRule(ins, outs, need_replication_factors=tuple(own))


def _specs(batch, layouts, ndims):
    """PartitionSpecs: the ensemble's sharding on following leading dimensions, None elsewhere."""
    return [PartitionSpec(*(batch[d] if d < len(follows) and follows[d] else None
                            for d in range(ndim)))
            for follows, ndim in zip(layouts, ndims, strict=True)]


def partitioned(lower_local, bind_local, aligned):
    """Wraps the primitive's lowering ``lower_local(ctx, *args, **params)``: shard-local under
    an SPMD module over several devices (see the module docstring), unchanged otherwise.
    ``bind_local(*operands, **params)`` binds the primitive on one device's shard;
    ``aligned(avals_in)`` says how many leading dimensions of each operand line up with the
    results' (``_leading_layout``)."""

    def lower(ctx, *args, **params):
        layout = (_leading_layout(ctx.avals_in, ctx.avals_out, aligned(ctx.avals_in))
                  if _spans_devices(ctx) else None)
        if layout is None:
            return lower_local(ctx, *args, **params)
        lead, layout_in, layout_out = layout
        avals_in, avals_out = ctx.avals_in, ctx.avals_out

        def partition(mesh, arg_shapes, result_shape):
            ys_spec = tuple(result_shape[0].sharding.spec) + (None,) * len(lead)
            batch = ys_spec[:len(lead)]
            in_specs = _specs(batch, layout_in, [a.ndim for a in avals_in])
            out_specs = _specs(batch, layout_out, [a.ndim for a in avals_out])
            return (mesh, lambda *xs: tuple(bind_local(*xs, **params)),
                    tuple(NamedSharding(mesh, s) for s in out_specs),
                    tuple(NamedSharding(mesh, s) for s in in_specs))

        def infer(mesh, arg_shapes, result_shape):  # the GSPMD partitioner's question
            y0_spec = tuple(arg_shapes[0].sharding.spec) + (None,) * len(lead)
            return tuple(NamedSharding(mesh, s) for s in
                         _specs(y0_spec[:len(lead)], layout_out, [a.ndim for a in avals_out]))

        call = custom_partitioning(lambda *xs: tuple(bind_local(*xs, **params)))
        call.def_partition(
            partition=partition, infer_sharding_from_operands=infer,
            propagate_user_sharding=None,
            sharding_rule=_rule(lead, layout_in, layout_out, avals_in, avals_out))
        replicated = _replicated(ctx)

        def constrained_call(*xs):
            # An operand that does not follow the ensemble (the shared rows, the progress slot)
            # is replicated first: one placed on a single device (io_callback's progress slot
            # is) has a sharding custom_partitioning cannot read.
            if replicated is not None:
                xs = [x if any(follows) else jax.lax.with_sharding_constraint(x, replicated)
                      for x, follows in zip(xs, layout_in, strict=True)]
            return call(*xs)

        return mlir.lower_fun(constrained_call, multiple_results=True)(ctx, *args)

    return lower


def require_devices_when_lowering(primitive) -> None:
    """custom_partitioning needs the device assignment at lowering time; JAX passes it to
    modules whose jaxprs contain a primitive of this set."""
    if _dispatch is not None:
        _dispatch.prim_requires_devices_during_lowering.add(primitive)
