"""Parameter pytrees: which leaves each trajectory owns, which the ensemble shares, and the one
flat parameter vector the compiled model reads.

``params`` may be any pytree (dict, tuple, NamedTuple, dataclass, a registered class such as a
spline). The compiled model reads ``p = [own leaves..., shared leaves..., closure values...]``:
its own leaves travel as rows ``(N, n_own)``, its shared ones once per call (the trailing
``n_shared`` of ``p``, ``shoal/ode/model_traits.hpp``). ``f`` receives the user's structure back:
:meth:`ParamLayout.unflatten` slices and reshapes ``p`` while ``f`` is traced, which the code
generator turns into plain reads of ``p[k]`` (no code at run time).

Which leaves are per-trajectory: a leaf whose leading axis has the ensemble's length N
(``y0``'s rows) is one row per trajectory where the model's functions accept it so, and is
refused where a vector ``(N,)`` or a leaf with N among its other axes could be either
(``_param_reading``); any other leaf is shared.
``params_axes`` (a pytree prefix of ``params`` of ``0`` or ``None``, like :func:`jax.vmap`'s
``in_axes``) says it explicitly. A bare ``(N,)`` array follows the same rule; other bare arrays
keep their meaning from before pytrees: ``(n_params,)`` for all trajectories, ``(N, n_params)``
one row each. Function leaves (an equinox module's activation) are static.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from shoal.ode import _param_reading


@dataclass(frozen=True)
class LeafSlot:
    """One leaf: the shape and dtype ``f`` sees, where it lives, and its offset there; or, for
    a function leaf (an ``equinox`` module's activation), the function itself (``static``),
    compiled in like a closure and never an input."""

    shape: tuple[int, ...]
    dtype: np.dtype
    per_trajectory: bool
    offset: int
    static: Any = None

    @property
    def size(self) -> int:
        return 0 if self.static is not None else math.prod(self.shape)


@dataclass(frozen=True)
class ParamLayout:
    """Where every leaf of a parameter pytree lives in the model's flat ``p`` (hashable: it keys
    the trace cache, so two calls with the same structure and shapes share one model)."""

    treedef: jax.tree_util.PyTreeDef
    slots: tuple[LeafSlot, ...]
    n_own: int
    n_shared: int

    @classmethod
    def flat(cls, n_params: int, dtype) -> ParamLayout:
        """The layout of a bare array ``(n_params,)`` owned by each trajectory."""
        treedef = jax.tree_util.tree_structure(0)
        return cls(treedef, (LeafSlot((n_params,), np.dtype(dtype), True, 0),), n_params, 0)

    @property
    def n_params(self) -> int:
        return self.n_own + self.n_shared

    def unflatten(self, p):
        """The pytree ``f`` receives, read from the flat vector ``p`` (own, then shared)."""
        leaves = []
        for slot in self.slots:
            if slot.static is not None:
                leaves.append(slot.static)
                continue
            start = slot.offset + (0 if slot.per_trajectory else self.n_own)
            leaf = p[start:start + slot.size].reshape(slot.shape)
            leaves.append(leaf if leaf.dtype == slot.dtype else leaf.astype(slot.dtype))
        return jax.tree_util.tree_unflatten(self.treedef, leaves)


@dataclass(frozen=True)
class SplitParams:
    """A call's parameters: the layout, own rows ``(N|1, n_own)``, shared ``(n_shared,)``, and
    the ensemble size the per-trajectory leaves imply (1 when they imply none)."""

    layout: ParamLayout
    own: jax.Array
    shared: jax.Array
    n_traj: int
    reading: _param_reading.Reading | None = None  # None: a bare array read the seed's way


def _float_leaf(path: str, leaf, dtype):
    try:
        arr = jnp.asarray(leaf)
    except TypeError as err:
        raise TypeError(f"params{path} must be an array of numbers or a function (functions are "
                        "compiled in); for other objects, pass only the arrays, e.g. "
                        f"equinox.partition(params, equinox.is_array)[0]: {err}") from err
    except (ValueError, OverflowError) as err:  # None, strings, ragged lists, ints beyond int64
        raise ValueError(f"params{path} must be an array of numbers; got {leaf!r:.80}: {err}"
                         ) from err
    if jnp.issubdtype(arr.dtype, jnp.complexfloating):
        raise TypeError(f"params{path} must be real; got dtype {arr.dtype}")
    return arr


def _axes_per_leaf(params, params_axes) -> list:
    """params_axes (a prefix of params: 0 or None per subtree) broadcast to one entry per leaf."""
    def expand(axis, subtree):
        if axis not in (0, None):
            raise ValueError(f"params_axes entries must be 0 (per trajectory) or None (shared); "
                             f"got {axis!r}")
        return [axis] * len(jax.tree_util.tree_leaves(subtree))
    try:
        per_subtree = jax.tree_util.tree_map(expand, params_axes, params,
                                             is_leaf=lambda x: x is None)
    except ValueError as err:
        if "params_axes entries" in str(err):
            raise
        raise ValueError(f"params_axes must be a prefix of params' structure: {err}") from None
    return [a for group in jax.tree_util.tree_leaves(per_subtree, is_leaf=lambda x:
                                                     isinstance(x, list)) for a in group]


def split(params, params_axes, n_y0: int | None, dtype, accepts=None, reads=None
          ) -> SplitParams:
    """Sort ``params``' leaves into own and shared (see the module docstring).

    n_y0 is y0's number of rows, or None for a single state ``(n,)``. ``accepts(layout)``
    (optional) says whether f traces with a reading of the leaves (None) or why not (a
    message), ``reads(layout, i)`` whether f reads leaf i at all: with them, a leaf whose
    leading axis has length N is read the one way f accepts, and refused when f reads it and
    accepts both (``_param_reading``).
    """
    dtype = np.dtype(dtype)
    if params is None:
        params = jnp.zeros((0,), dtype)
    bare = isinstance(params, (jax.Array, np.ndarray)) or _numbers(params)
    if bare and params_axes is None:
        arr = _float_leaf("", params, dtype)
        # A bare (N,) array is a leaf like any other: one entry per member or one shared
        # vector, whichever f accepts. Every other bare array keeps the seed's reading.
        if not (accepts is not None and arr.ndim == 1 and (n_y0 or 0) > 1
                and arr.shape[0] == n_y0):
            return _split_bare(arr, dtype)
        params = arr

    paths_leaves, treedef = jax.tree_util.tree_flatten_with_path(params)
    paths = [jax.tree_util.keystr(path) for path, _ in paths_leaves]
    leaves = [leaf if _is_function(leaf) else _float_leaf(path, leaf, dtype)
              for path, (_, leaf) in zip(paths, paths_leaves, strict=True)]
    if params_axes is not None:
        axes = [None if _is_function(leaf) else axis
                for leaf, axis in zip(leaves, _axes_per_leaf(params, params_axes), strict=True)]
    else:
        axes = [0 if n_y0 is not None and not _is_function(leaf) and leaf.ndim >= 1
                and leaf.shape[0] == n_y0 else None for leaf in leaves]
        if accepts is not None and (n_y0 or 0) > 1 and any(a == 0 for a in axes):
            axes = _param_reading.resolve(
                paths, treedef, axes, n_y0,
                lambda axes: accepts(_layout(treedef, paths, leaves, axes, dtype)),
                lambda axes, i: reads(_layout(treedef, paths, leaves, axes, dtype), i),
                [np.shape(leaf) for leaf in leaves])
    n_traj = _ensemble_size(paths, leaves, axes, n_y0)
    layout = _layout(treedef, paths, leaves, axes, dtype)
    own = [leaf.reshape(leaf.shape[0], -1).astype(dtype) for leaf, axis in
           zip(leaves, axes, strict=True) if axis == 0]
    shared = [leaf.reshape(-1).astype(dtype) for leaf, axis in zip(leaves, axes, strict=True)
              if axis != 0 and not _is_function(leaf)]
    rows = n_traj if any(a == 0 for a in axes) else 1
    own_rows = [jnp.broadcast_to(o, (rows, o.shape[1])) for o in own]
    own_arr = jnp.concatenate(own_rows, axis=1) if own_rows else jnp.zeros((1, 0), dtype)
    shared_arr = jnp.concatenate(shared) if shared else jnp.zeros((0,), dtype)
    reading = _param_reading.Reading(paths, treedef, tuple(axes),
                                     tuple(() if _is_function(leaf) else tuple(leaf.shape)
                                           for leaf in leaves))
    return SplitParams(layout, own_arr, shared_arr, n_traj, reading)


def _layout(treedef, paths, leaves, axes, dtype) -> ParamLayout:
    """Where each leaf lives in p when ``axes`` says which are per trajectory."""
    slots = []
    n_own = n_shared = 0
    for path, leaf, axis in zip(paths, leaves, axes, strict=True):
        if _is_function(leaf):
            slots.append(LeafSlot((), np.dtype(object), False, n_shared, static=leaf))
        elif axis == 0:
            if leaf.ndim == 0:
                raise ValueError(f"params{path} is a scalar; a per-trajectory leaf needs a "
                                 "leading axis of length N")
            row_shape = tuple(leaf.shape[1:])
            slots.append(LeafSlot(row_shape, np.dtype(leaf.dtype), True, n_own))
            n_own += math.prod(row_shape)
        else:
            slots.append(LeafSlot(tuple(leaf.shape), np.dtype(leaf.dtype), False, n_shared))
            n_shared += leaf.size
    return ParamLayout(treedef, tuple(slots), n_own, n_shared)


def _is_function(leaf) -> bool:
    """A leaf that is a function rather than numbers (``equinox.nn.MLP``'s activation): static,
    as ``equinox.filter_jit`` treats it."""
    return callable(leaf) and not isinstance(leaf, (jax.Array, np.ndarray))


def _numbers(x) -> bool:
    """A number, or a plain list/tuple of numbers (nested): an array written in Python, as
    before pytrees (a NamedTuple or a list holding arrays is a pytree)."""
    if type(x) in (list, tuple):
        return all(_numbers(e) for e in x)
    return isinstance(x, (int, float, bool, np.number, np.bool_))


def _split_bare(arr, dtype) -> SplitParams:
    if not jnp.issubdtype(arr.dtype, jnp.floating):
        arr = arr.astype(dtype)
    arr = arr.astype(dtype)
    if arr.ndim not in (1, 2):
        raise ValueError(f"params must have shape (n_params,) or (N, n_params), or be a pytree; "
                         f"got an array of shape {arr.shape}")
    rows = arr.reshape(arr.shape[0] if arr.ndim == 2 else 1, arr.shape[-1])  # k may be 0
    layout = ParamLayout.flat(arr.shape[-1], dtype)
    return SplitParams(layout, rows, jnp.zeros((0,), dtype), rows.shape[0])


def _ensemble_size(paths, leaves, axes, n_y0) -> int:
    """N as the per-trajectory leaves give it (each N or 1), checked against y0's rows."""
    sizes = {path: leaf.shape[0] for path, leaf, axis in zip(paths, leaves, axes, strict=True)
             if axis == 0 and leaf.ndim >= 1}
    candidates = {s for s in sizes.values() if s != 1}
    if n_y0 is not None and n_y0 != 1:
        candidates.add(n_y0)
    if len(candidates) > 1:
        shown = ", ".join(f"params{p}: {s}" for p, s in sizes.items())
        raise ValueError(f"per-trajectory params leaves and y0 disagree on the ensemble size "
                         f"(y0: {n_y0} rows; {shown}); each must be N or 1")
    return candidates.pop() if candidates else 1
