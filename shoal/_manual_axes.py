"""How a shoal primitive types its results: the mesh, the batch sharding and the varying manual
axes of its operands.

Inside ``jax.shard_map`` (default ``check_vma=True``) every value records the manual mesh axes it
varies over, and differentiation checks that a primal and its tangent agree. A primitive's
result varies wherever one of its operands does (every trajectory, every matrix depends on its own
inputs only), so the abstract evaluation gives each result the union of its operands' axes. JAX
0.10 keeps them in ``aval.manual_axis_type.varying``, other versions in ``aval.vma``: both are
read.
"""

from __future__ import annotations

from jax.sharding import PartitionSpec

try:  # what ffi_call's abstract evaluation uses when the operand has no mesh (internal)
    from jax._src.core import get_cur_mesh_sharding as _current_mesh_sharding
except ImportError:  # pragma: no cover - depends on the JAX version
    _current_mesh_sharding = None


def varying_axes(avals) -> frozenset:
    """The union of the operands' varying manual axes."""
    axes = frozenset()
    for aval in avals:
        mat = getattr(aval, "manual_axis_type", None)
        vma = mat.varying if mat is not None else getattr(aval, "vma", None)
        axes |= frozenset(vma or ())
    return axes


def result_aval(template, shape, dtype, varying: frozenset, batch_dims: int):
    """A result of ``shape`` and ``dtype`` whose first ``batch_dims`` dimensions are the
    template operand's batch dimensions: on the template's mesh, with the template's (explicit)
    sharding there and none elsewhere, varying over ``varying``."""
    sharding = template.sharding
    if sharding.mesh.empty:
        if _current_mesh_sharding is not None:
            sharding = _current_mesh_sharding()
    else:
        spec = tuple(sharding.spec) + (None,) * template.ndim
        sharding = sharding.update(spec=PartitionSpec(
            *spec[:batch_dims], *(None,) * (len(shape) - batch_dims)))
    mat = getattr(template, "manual_axis_type", None)
    if mat is not None:
        return template.update(shape=shape, dtype=dtype, weak_type=False, sharding=sharding,
                               manual_axis_type=mat.update(varying=varying))
    return template.update(shape=shape, dtype=dtype, weak_type=False, sharding=sharding,
                           vma=varying)  # pragma: no cover - JAX versions with aval.vma
