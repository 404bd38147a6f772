"""Helpers shared by the benchmark scripts: machine header, timing, CSV output, the jitted shoal
ensemble solve.

Importing this module puts the repository root on ``sys.path`` so that a benchmark runs from a
checkout both as ``PYTHONPATH=. python benchmarks/x.py`` and as ``python benchmarks/x.py``.
"""

from __future__ import annotations

import csv
import datetime
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def header_lines(extra: dict[str, str] | None = None) -> list[str]:
    """Where and when a benchmark ran, one 'key: value' line each."""
    import jax

    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    info = {
        "date": now,
        "cpu": f"{cpu_model()}, {os.cpu_count()} logical CPUs ({usable_cpus()} usable)",
        "load average (1/5/15 min) at start": load_average(),
        "python": platform.python_version(),
        "jax": f"{jax.__version__} (backend {jax.default_backend()})",
    }
    info.update(extra or {})
    width = max(len(k) for k in info)
    return [f"{k:<{width}} : {v}" for k, v in info.items()]


class ForeignLoad:
    """CPU time used by *other* processes while a block runs, in cores (Linux /proc/stat).

    Busy jiffies of the whole machine minus this process's own CPU time, over the wall time. On a
    shared 2-core machine a concurrent build or test run shows up here; a benchmark should report
    it next to its times. ``cores`` is >= 0 (rounding can make the difference negative), NaN where
    /proc/stat is unavailable. ``children=True`` counts the CPU time of the child processes waited
    for in the block as this process's own (a benchmark that times a subprocess).
    """

    def __init__(self, children: bool = False):
        self._own = _own_and_children_cpu_s if children else time.process_time

    def __enter__(self):
        self._start = (_machine_busy_s(), self._own(), time.perf_counter())
        return self

    def __exit__(self, *exc):
        busy, own, wall = _machine_busy_s(), self._own(), time.perf_counter()
        self.wall_s = wall - self._start[2]
        self.own_s = own - self._start[1]  # this process's CPU time (all its threads)
        self.foreign_s = busy - self._start[0] - self.own_s
        cores = self.foreign_s / max(self.wall_s, 1e-9)
        self.cores = cores if math.isnan(cores) else max(0.0, cores)
        return False


def _own_and_children_cpu_s() -> float:
    """CPU seconds of this process and of its waited-for children."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _machine_busy_s() -> float:
    try:
        with open("/proc/stat") as fh:
            fields = fh.readline().split()[1:]
    except OSError:
        return float("nan")
    values = [int(x) for x in fields]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    # guest time is already counted in user/nice: only the first 8 fields
    return (sum(values[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def wait_for_quiet(max_wait_s: float, threshold_cores: float = 0.25, window_s: float = 1.0):
    """Wait (up to max_wait_s) until other processes use less than threshold_cores.

    Returns the foreign load of the last window (cores)."""
    deadline = time.perf_counter() + max_wait_s
    while True:
        with ForeignLoad() as load:
            time.sleep(window_s)
        if not load.cores >= threshold_cores or time.perf_counter() >= deadline:
            return load.cores


def time_calls(fn, repeats: int) -> list[float]:
    """Wall times (s) of ``repeats`` calls of ``fn()``; fn must block until its result is ready."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def best_of(fn, repeats: int = 3):
    """(best warm seconds, output, first call's seconds) of ``fn()``, each call blocked until its
    JAX result is ready."""
    import jax

    t0 = time.perf_counter()
    out = jax.block_until_ready(fn())
    first = time.perf_counter() - t0
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - t0)
    return best, out, first


def median(xs) -> float:
    return float(statistics.median(xs))


def subsample(n: int, k: int):
    """Indices of k evenly spaced items of n (all n if k >= n), as a NumPy int64 array."""
    import numpy as np

    if n <= k:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, k).round().astype(np.int64))


def jit_solve(f, y0, t_span, select, **solve_kw):
    """``jax.jit`` of ``p (N,) -> select(ys, stats)`` where ``ys, stats = shoal.ode.solve(f, y0,
    t_span, p[:, None], return_stats=True, **solve_kw)``: one parameter per trajectory, y0 and
    t_span (float64) shared by the ensemble."""
    import jax
    import jax.numpy as jnp

    import shoal.ode

    y0, t_span = jnp.asarray(y0), jnp.asarray(t_span, jnp.float64)

    def run(p):
        ys, stats = shoal.ode.solve(f, y0, t_span, p[:, None], return_stats=True, **solve_kw)
        return select(ys, stats)

    return jax.jit(run)


def subplots(*args, **kwargs):
    """``matplotlib.pyplot.subplots`` on the non-interactive Agg backend: ``(fig, axes)``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(*args, **kwargs)


def save_figure(fig, path) -> None:
    """Lay out, write (120 dpi) and close a figure from :func:`subplots`."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_csv(path: Path, rows: list[dict]) -> None:
    """One row per dict; the columns are every key of any row, in order of first appearance."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
        writer.writeheader()
        writer.writerows(rows)


def fmt_time(seconds: float, compact: bool = False) -> str:
    """'12.34 ms' ('n/a' if not finite); compact: one digit fewer and no space, '12.3ms'."""
    if not math.isfinite(seconds):
        return "n/a"
    if seconds < 1e-3:
        value, unit, digits = seconds * 1e6, "us", 1
    elif seconds < 1:
        value, unit, digits = seconds * 1e3, "ms", 2
    else:
        value, unit, digits = seconds, "s", 3
    if compact:
        return f"{value:.{digits - 1}f}{unit}"
    return f"{value:.{digits}f} {unit}"
