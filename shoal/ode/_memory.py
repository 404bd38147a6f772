"""Refusing a CPU solve whose outputs cannot fit in memory, before anything is compiled or run.

The kernel's outputs (``ys``: N x n_save x n_saved numbers, plus the statistics and event rows)
are allocated in full by XLA when the solve runs; one that cannot fit would otherwise end in the
kernel being killed by the system, or swapping for minutes, long after the call. Their shapes are
static (also under ``jit``, ``vmap`` and differentiation, whose joint solve saves the
sensitivities too), so the CPU lowering checks them against the memory available now and raises
a ``MemoryError`` naming the size and what to change. GPU solves are left to XLA's allocator,
which reports an out-of-memory error of its own.
"""

from __future__ import annotations

import math
import os

import numpy as np

GB = 1e9


def available_bytes() -> int | None:
    """Memory the system could give this process now: MemAvailable (free memory plus what the
    kernel can reclaim), else the physical memory; None where neither is known."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def _readable(nbytes: float) -> str:
    for unit, size in (("GB", GB), ("MB", 1e6)):
        if nbytes >= size:
            return f"{nbytes / size:.1f} {unit}"
    return f"{nbytes / 1e3:.1f} kB"


def _nbytes(aval) -> int:
    return math.prod(aval.shape) * np.dtype(aval.dtype).itemsize


def check_outputs_fit(avals_out, *, joint: bool, available: int | None = None):
    """MemoryError if the solve's outputs (abstract values; ys first, (..., n_save, n_saved))
    need more than ``available`` bytes (default: ``available_bytes()``)."""
    available = available_bytes() if available is None else available
    needed = sum(_nbytes(a) for a in avals_out)
    if available is None or needed <= available:
        return
    ys = avals_out[0]
    *lead, n_save, n_saved = ys.shape
    what = "the solution and its sensitivities" if joint else "the solution"
    raise MemoryError(
        f"shoal.ode.solve: {what} would need {_readable(needed)} ({math.prod(lead)} trajectories "
        f"x {n_save} saves x {n_saved} numbers x {np.dtype(ys.dtype).itemsize} bytes), more than "
        f"the {_readable(available)} of memory available; save fewer times (a shorter t_span), "
        "record less per save with save_fn= (a function of the state), or solve the ensemble in "
        "parts")


def check_adjoint_fits(avals_out, *, n_traj: int, n_params: int, adjoint="auto",
                       available: int | None = None):
    """MemoryError if a gradient by the adjoint needs more than ``available`` bytes: its results
    (the solution, which its kernel writes again, and the cotangents) and the kernel's working
    rows, one cotangent of every parameter per trajectory (src/ode/ode_ffi_cpu.cc), which the
    shared parameters' sums are taken from. ``adjoint``: the solve's option, which the message
    names (with "auto" the user did not ask for the adjoint, and the way out differs)."""
    available = available_bytes() if available is None else available
    itemsize = np.dtype(avals_out[0].dtype).itemsize
    rows = n_traj * n_params * itemsize
    needed = sum(_nbytes(a) for a in avals_out) + rows
    if available is None or needed <= available:
        return
    chosen = ("adjoint=True" if adjoint is True else
              f"adjoint={adjoint!r}, which chose the adjoint for this many differentiated entries")
    raise MemoryError(
        f"shoal.ode.solve({chosen}): the gradient would need {_readable(needed)}, of which "
        f"{_readable(rows)} are the parameters' cotangents ({n_traj} trajectories x {n_params} "
        f"parameters x {itemsize} bytes), more than the {_readable(available)} of memory "
        "available; differentiate the ensemble in parts (a loss summed over slices of it), or "
        "with few differentiated parameters use adjoint=False (forward sensitivities)")
