"""Lane utilisation of shoal's SIMD lanes engine, read from the compiled models in this process.

Every compiled model that solves in SIMD lanes (``lanes`` != 1, shoal/ode/lanes_ensemble.hpp)
exports ``shoal_lane_counts``: its lane count W, the vector step attempts it has made and the lane
step attempts among them (lanes holding a trajectory). ``snapshot()`` reads them from every such
library the process has loaded (found in /proc/self/maps; loading a path again with ctypes returns
the same handle, so the counters are the live ones); ``utilisation(before, after)`` is the share
of lane work between two snapshots that was not idle: lane steps / (W · vector steps).
"""

from __future__ import annotations

import ctypes
from pathlib import Path

from shoal import _jit


def _libraries() -> list[str]:
    """The compiled models this process has mapped (they live in shoal's cache directory)."""
    cache = str(_jit.cache_dir())
    paths = set()
    for line in Path("/proc/self/maps").read_text().splitlines():
        path = line.split()[-1]
        if path.endswith(".so") and path.startswith(cache):
            paths.add(path)
    return sorted(paths)


def snapshot() -> dict[str, tuple[int, int, int]]:
    """{library: (W, vector steps, lane steps)} for every loaded lanes library."""
    counts = {}
    for path in _libraries():
        try:
            lib = ctypes.CDLL(path)
            fn = lib.shoal_lane_counts
        except (OSError, AttributeError):
            continue
        out = (ctypes.c_int64 * 3)()
        fn(out)
        counts[path] = (out[0], out[1], out[2])
    return counts


def utilisation(before: dict, after: dict) -> float | None:
    """Lane steps / (W · vector steps) over what ran between the two snapshots (None if none)."""
    lanes = capacity = 0
    for path, (w, vector, lane) in after.items():
        _, vector0, lane0 = before.get(path, (w, 0, 0))
        lanes += lane - lane0
        capacity += w * (vector - vector0)
    return lanes / capacity if capacity else None
