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

The price of custom_partitioning: its callbacks run inside XLA's compiler, so JAX requires the
devices at lowering time (``require_devices_when_lowering``) and cannot serialize them (an
exported solve is one gathered call; an export with only an AbstractMesh is refused).

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


def _mesh(ctx):
    """The module's mesh when XLA partitions it over several devices of a named mesh (plain jit
    over NamedSharding operands), else None: one device, the device assignment not passed to
    the lowering (a primitive outside require_devices_when_lowering's set), inside
    ``shard_map`` (fully manual: each call is one shard already; partly manual: the ensemble is
    solved whole on each device group of the auto axes, which is correct but redundant),
    operands without a named mesh, or ``jax.export``. None lowers one plain call, gathered by
    XLA, still correct."""
    if _sharding_impls is None:  # pragma: no cover
        return None
    # jax.export cannot serialize custom_partitioning's host callbacks: an exported solve is
    # one call (gathered).
    if getattr(ctx.module_context.lowering_parameters, "for_export", False):
        return None
    context = ctx.module_context.axis_context
    if not isinstance(context, _sharding_impls.ShardingContext):
        return None
    mesh = context.abstract_mesh
    if (context.num_devices < 2 or context.device_assignment is None or mesh is None
            or mesh.empty):
        return None
    return Mesh(np.array(context.device_assignment).reshape(mesh.axis_sizes), mesh.axis_names)


def _batch_spec(shapes, layouts, n_lead: int):
    """The ensemble's sharding: the mesh axes on the leading dimensions of the first of
    ``shapes`` whose following dimensions are sharded (None each where none is)."""
    for shape, follows in zip(shapes, layouts, strict=True):
        spec = getattr(getattr(shape, "sharding", None), "spec", None)
        if spec is None:
            continue
        spec = tuple(spec) + (None,) * n_lead
        batch = tuple(spec[d] if d < len(follows) and follows[d] else None
                      for d in range(n_lead))
        if any(axis is not None for axis in batch):
            return batch
    return (None,) * n_lead


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
        mesh = _mesh(ctx)
        layout = (None if mesh is None else
                  _leading_layout(ctx.avals_in, ctx.avals_out, aligned(ctx.avals_in)))
        if layout is None:
            return lower_local(ctx, *args, **params)
        lead, layout_in, layout_out = layout
        avals_in, avals_out = ctx.avals_in, ctx.avals_out
        ndims_in, ndims_out = [a.ndim for a in avals_in], [a.ndim for a in avals_out]

        # The callbacks run inside XLA's partitioner, where an exception can abort the process:
        # they only read shardings, with replication as the answer to anything unexpected.
        def partition(mesh, arg_shapes, result_shape):
            batch = _batch_spec(list(result_shape) + list(arg_shapes),
                                layout_out + layout_in, len(lead))
            in_specs = _specs(batch, layout_in, ndims_in)
            out_specs = _specs(batch, layout_out, ndims_out)
            return (mesh, lambda *xs: tuple(bind_local(*xs, **params)),
                    tuple(NamedSharding(mesh, s) for s in out_specs),
                    tuple(NamedSharding(mesh, s) for s in in_specs))

        def infer(mesh, arg_shapes, result_shape):  # the GSPMD partitioner's question
            batch = _batch_spec(arg_shapes, layout_in, len(lead))
            return tuple(NamedSharding(mesh, s) for s in _specs(batch, layout_out, ndims_out))

        call = custom_partitioning(lambda *xs: tuple(bind_local(*xs, **params)))
        call.def_partition(
            partition=partition, infer_sharding_from_operands=infer,
            propagate_user_sharding=None,
            sharding_rule=_rule(lead, layout_in, layout_out, avals_in, avals_out))
        replicated = NamedSharding(mesh, PartitionSpec())

        def constrained_call(*xs):
            # An operand that does not follow the ensemble (the shared rows, the progress slot)
            # is replicated first: one placed on a single device (io_callback's progress slot
            # is) has a sharding custom_partitioning cannot read.
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
