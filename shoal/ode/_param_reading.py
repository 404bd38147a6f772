"""Which parameter leaves are per member when their shape alone does not say.

A leaf whose leading axis has the ensemble's length N can mean two things: one entry (or row)
per member, or one array that every member shares and that happens to have N entries (a table,
a vector of rates per state). Read the wrong way it still runs, and answers the wrong question:
``-p["rates"] * y`` with two rates and two members decays member i at ``rates[i]`` in every
state. So the reading is decided by ``f`` itself: each such leaf is traced both ways, and

- the one reading under which ``f`` returns y's shape is taken;
- if ``f`` accepts both and the leaf is in doubt, the call is refused, naming the leaves and the
  ``params_axes`` that settles it. In doubt: a vector ``(N,)`` (a rate per member, or a vector of
  N entries that every member reads whole), and a leaf with N among its other axes too (an
  ``(N, N)`` matrix: ``s @ rates`` reads a row per member as readily as the whole matrix, and a
  row times a vector is a scalar that broadcasts to y's shape). Any other leaf with more axes
  ``(N, K, ...)`` that f accepts both ways (a schedule it reduces over) is per member, as its
  rows suggest;
- if it accepts neither, the per-member reading's trace error is raised, with the reading
  spelled out as ``params_axes`` (``Reading.describe``);
- a leaf no function reads (a dict carried over from another solve) is read per member: it
  means the same either way.

``params_axes`` given by the user is never second-guessed. Tracing is abstract (shapes only)
and happens once per parameter structure while the model is traced anyway.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import jax


@dataclass(frozen=True)
class Reading:
    """How a call's parameter leaves were read: 0 (per member) or None (shared) per leaf."""

    paths: list
    treedef: jax.tree_util.PyTreeDef
    axes: tuple
    shapes: tuple

    def as_params_axes(self, axes=None) -> str:
        """The ``params_axes`` argument that gives this reading (or ``axes``), as source."""
        axes = self.axes if axes is None else axes
        if self.treedef.num_leaves == 1 and self.paths == [""]:
            return repr(axes[0])
        return repr(jax.tree_util.tree_unflatten(self.treedef, list(axes)))

    def describe(self) -> str:
        """A sentence for a trace error: the reading taken, and how to ask for another."""
        shown = "; ".join(
            f"params{path or ''} {list(shape)} {'per member' if a == 0 else 'shared'}"
            for path, shape, a in zip(self.paths, self.shapes, self.axes, strict=True)
            if len(shape) >= 1)
        if not shown:
            return ""
        flipped = [None if a == 0 else 0 if len(s) >= 1 else a
                   for a, s in zip(self.axes, self.shapes, strict=True)]
        return (f"params was read as params_axes={self.as_params_axes()} ({shown}; 0: one row "
                "per member along the leading axis, None: the whole array shared by every "
                "member). If f expects another reading, pass params_axes, e.g. "
                f"params_axes={self.as_params_axes(flipped)}")


def resolve(paths, treedef, axes, n_traj: int, accepts: Callable, reads: Callable,
            shapes) -> list:
    """The axes to read the leaves with. ``axes``: the shape rule's reading (0 for every leaf
    with leading length N); ``accepts(axes)``: None when f traces under that reading, else
    why not; ``reads(axes, i)``: whether f reads leaf i at all (one it never reads means the
    same either way); ``shapes``: each leaf's shape."""
    candidates = [i for i, a in enumerate(axes) if a == 0]

    def flipped(chosen):
        return [None if i in chosen else a for i, a in enumerate(axes)]

    def in_doubt(i):  # a vector (N,), or a leaf with N among its other axes
        return len(shapes[i]) == 1 or n_traj in tuple(shapes[i])[1:]

    per_member_error = accepts(axes)
    # Where the per-member reading works, only leaves in doubt are questioned: a matrix with N
    # rows that f reads whole and row by row alike (a schedule it reduces over) stays per member.
    also_shared = [i for i in candidates
                   if (per_member_error is not None or (in_doubt(i) and reads(axes, i)))
                   and accepts(flipped({i})) is None]
    if per_member_error is None and not also_shared:
        return list(axes)
    if per_member_error is None or len(also_shared) > 1:
        _refuse(paths, treedef, axes, n_traj, also_shared or candidates)
    if also_shared:  # f accepts exactly one of the leaves as shared ...
        chosen = set(also_shared)
        # ... and, beside it, none in doubt that it also accepts shared.
        doubtful = [i for i in candidates if i not in chosen and in_doubt(i)
                    and reads(flipped(chosen), i) and accepts(flipped(chosen | {i})) is None]
        if doubtful:
            _refuse(paths, treedef, flipped(chosen), n_traj, doubtful)
        return flipped(chosen)
    everything_shared = flipped(set(candidates))
    if len(candidates) > 1 and accepts(everything_shared) is None:
        return everything_shared
    return list(axes)  # neither: the per-member reading's error says what f returned


def _refuse(paths, treedef, axes, n_traj, ambiguous):
    names = ", ".join(f"params{paths[i]}" for i in ambiguous)
    per_member = Reading(paths, treedef, tuple(axes), ()).as_params_axes()
    shared = Reading(paths, treedef, tuple(None if i in ambiguous else a
                                           for i, a in enumerate(axes)), ()).as_params_axes()
    raise ValueError(
        f"{names}: leading axis of length {n_traj}, the number of members (y0's rows), and f "
        "accepts it both ways: as one entry per member and as one array shared by every "
        "member. Say which: params_axes=" + per_member + " (per member) or params_axes="
        + shared + " (shared)")
