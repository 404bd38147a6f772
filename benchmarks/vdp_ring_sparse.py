"""Stiff Van der Pol ring: shoal Rodas5P with a sparse Jacobian ("auto") versus shoal dense versus
diffrax Kvaerno5 (issue 5).

Problem: m = n_vars / 2 oscillators on a ring, y = (x_0, v_0, x_1, v_1, ...),
    x_i' = v_i,
    v_i' = mu (1 - x_i^2) v_i - omega^2 x_i + (d / r) sum_{k=1..r} (x_{i-k} - 2 x_i + x_{i+k}),
periodic, d = 10, omega = 1, coupling range r (1 = nearest neighbours: the issue's ring),
x_i(0) = 2, v_i(0) = 0 (every oscillator starts alike, so the ring stays synchronised and the
coupling term stays 0; its Jacobian entries are there all the same), t in [0, 1], only y(1)
saved, rtol = 1e-6, atol = 1e-8, float64. Ensemble: N = 1000 trajectories with
mu = linspace(95, 105, N) (one mu per trajectory, the same for every oscillator of it).

Solvers (the same right-hand side function for all three):
* shoal sparse: jax.jit of shoal.ode.solve(..., method="rodas5p", sparsity="auto") (pattern
  detected from the model; AMD ordering; sparse direct solver compiled for it).
* shoal dense:  the same with sparsity=None (dense LU).
* diffrax 0.7.2: jax.jit(jax.vmap(diffeqsolve)) with Kvaerno5, PIDController(rtol, atol) (its
  defaults: the integral controller, as shoal's), dt0 = 1e-6 (shoal's default first step),
  SaveAt(t1=True), max_steps = 100_000.

Timing: each solver is first called on a calibration subset (min(N, 32) trajectories evenly
spaced in mu; this call pays tracing and compilation and is reported as "first call"), then
once more to estimate the cost per trajectory. If --repeats calls on all N trajectories fit in
that solver's budget (--budget for shoal, --diffrax-budget for diffrax, seconds of timed calls
per configuration) it runs all N; otherwise it runs as many evenly spaced trajectories as fit
(at least the calibration subset) and its time is scaled linearly to N: such entries are marked
"*" and the CSV has the number actually run. After one more warm-up call on the final subset,
--repeats calls are timed (wall clock around the call and jax.block_until_ready); the median is
reported. Also recorded: this process's CPU time per call ("cpu", all threads; shoal runs on its
own thread pool, diffrax mostly on one XLA thread) and the CPU used by other processes during
each timed loop ("bg", in cores, from /proc/stat). On a shared machine the wall times are only
as good as the bg column; the CPU-time ratios are the steadier figure.

Deviation: max |y(1)| difference between shoal sparse and each other solver, over all components
and the trajectories that solver ran (shoal sparse is rerun on exactly that subset).

Patterns: for each pattern, colours of the column-intersection graph and nnz(L+U) with AMD and
natural ordering, from shoal.ode._sparse.analyze on the detected pattern (diagonal added, as the
solver does).

    PYTHONPATH=. .venv/bin/python benchmarks/vdp_ring_sparse.py           # full run
    PYTHONPATH=. .venv/bin/python benchmarks/vdp_ring_sparse.py --quick   # smoke run

Writes benchmarks/results/vdp_ring_sparse.csv (timings and pattern figures, one row per case).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import time
from pathlib import Path

import _common  # noqa: I001 - puts the repository root on sys.path before shoal is imported
import jax

jax.config.update("jax_enable_x64", True)

import diffrax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from shoal.ode import _ode_ext  # noqa: E402
from shoal.ode._model import detect_pattern  # noqa: E402
from shoal.ode._sparse import analyze  # noqa: E402

MU_LO, MU_HI = 95.0, 105.0
D, OMEGA = 10.0, 1.0
RTOL, ATOL = 1e-6, 1e-8
FIRST_STEP = 1e-6
MAX_STEPS = 100_000
T_SPAN = np.array([0.0, 1.0])
CALIBRATION = 32
SOLVERS = ("sparse", "dense", "diffrax")


def make_ring(r: int):
    """The right-hand side with coupling range r; p = (mu,)."""

    def ring(y, t, p):
        mu = p[0]
        x, v = y[0::2], y[1::2]
        lap = jnp.zeros_like(x)
        for k in range(1, r + 1):
            lap = lap + (jnp.roll(x, k) - 2.0 * x + jnp.roll(x, -k))
        dv = mu * (1.0 - x * x) * v - OMEGA * OMEGA * x + (D / r) * lap
        return jnp.stack([v, dv], axis=1).reshape(-1)

    ring.__name__ = f"vdp_ring_r{r}"
    return ring


def y0_of(n_vars: int) -> np.ndarray:
    return np.tile(np.array([2.0, 0.0]), n_vars // 2)


def fmt_time(seconds: float) -> str:
    return _common.fmt_time(seconds, compact=True)


# -- solvers -----------------------------------------------------------------------------------


def make_shoal(f, n_vars: int, sparsity):
    def select(ys, stats):
        ok = stats["status"] == 0
        return ys[:, -1], stats["accepted"] + stats["rejected"], ok

    return _common.jit_solve(f, y0_of(n_vars), T_SPAN, select, method="rodas5p", rtol=RTOL,
                             atol=ATOL, first_step=FIRST_STEP, max_steps=MAX_STEPS,
                             sparsity=sparsity)


def make_diffrax(f, n_vars: int):
    term = diffrax.ODETerm(lambda t, y, args: f(y, t, args))
    solver = diffrax.Kvaerno5()
    controller = diffrax.PIDController(rtol=RTOL, atol=ATOL)
    y0 = jnp.asarray(y0_of(n_vars))

    def one(mu):
        sol = diffrax.diffeqsolve(term, solver, t0=float(T_SPAN[0]), t1=float(T_SPAN[-1]),
                                  dt0=FIRST_STEP, y0=y0, args=mu[None],
                                  stepsize_controller=controller, saveat=diffrax.SaveAt(t1=True),
                                  max_steps=MAX_STEPS, throw=False)
        steps = sol.stats["num_accepted_steps"] + sol.stats["num_rejected_steps"]
        return sol.ys[-1], steps, sol.result == diffrax.RESULTS.successful

    return jax.jit(jax.vmap(one))


def measure(fn, mus: np.ndarray, budget: float, repeats: int) -> dict:
    """Calibrate, choose the subset, time. Returns times scaled to len(mus) trajectories."""
    n = len(mus)
    cal = _common.subsample(n, CALIBRATION)
    t0 = time.perf_counter()
    jax.block_until_ready(fn(jnp.asarray(mus[cal])))
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    jax.block_until_ready(fn(jnp.asarray(mus[cal])))
    per_traj = (time.perf_counter() - t0) / len(cal)
    fits = int(budget / max(repeats * per_traj, 1e-12))
    if fits >= n:
        idx = np.arange(n)
    else:
        idx = cal if fits < 2 * len(cal) else _common.subsample(n, fits)
    arg = jnp.asarray(mus[idx])
    if len(idx) != len(cal):
        jax.block_until_ready(fn(arg))  # retrace / recompile for the new shape
    walls, cpus = [], []
    with _common.ForeignLoad() as load:
        for _ in range(repeats):
            c0, t0 = time.process_time(), time.perf_counter()
            out = jax.block_until_ready(fn(arg))
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
    y1, steps, ok = (np.asarray(x) for x in out)
    scale = n / len(idx)
    return {
        "idx": idx, "y1": y1, "n_run": len(idx), "scaled": len(idx) < n, "first_call_s": first,
        "wall_s": statistics.median(walls) * scale, "wall_min_s": min(walls) * scale,
        "cpu_s": statistics.median(cpus) * scale, "bg": load.cores,
        "steps": float(np.mean(steps)), "failed": int(np.sum(~ok)),
    }


def pattern_info(f, n_vars: int) -> dict:
    pattern = detect_pattern(f, n_vars, 1, np.float64) | np.eye(n_vars, dtype=bool)
    amd, nat = analyze(pattern, "amd"), analyze(pattern, "natural")
    return {"nnz_J": int(pattern.sum()), "colours": amd.n_colours, "nnz_LU_amd": amd.nnz,
            "nnz_LU_natural": nat.nnz, "colours_natural": nat.n_colours}


def bench(n_vars: int, r: int, args) -> dict:
    f = make_ring(r)
    mus = np.linspace(MU_LO, MU_HI, args.n)
    row = {"n_vars": n_vars, "r": r, "N": args.n}
    info = pattern_info(f, n_vars)
    row.update(info)
    print(f"  n_vars={n_vars} r={r}: nnz(J)={info['nnz_J']} colours={info['colours']} "
          f"nnz(L+U) amd={info['nnz_LU_amd']} natural={info['nnz_LU_natural']}", flush=True)
    fns = {"sparse": make_shoal(f, n_vars, "auto"), "dense": make_shoal(f, n_vars, None)}
    if not args.no_diffrax:
        fns["diffrax"] = make_diffrax(f, n_vars)
    res = {}
    for name, fn in fns.items():
        budget = args.diffrax_budget if name == "diffrax" else args.budget
        res[name] = measure(fn, mus, budget, args.repeats)
        m = res[name]
        print(f"    {name:8s} N run {m['n_run']:5d}{'*' if m['scaled'] else ' '} "
              f"first call {m['first_call_s']:6.1f}s  time(N={args.n}) {fmt_time(m['wall_s'])}  "
              f"cpu {fmt_time(m['cpu_s'])}  steps {m['steps']:.1f}  failed {m['failed']}  "
              f"bg {m['bg']:.2f}", flush=True)
    sparse_fn = fns["sparse"]
    for name, m in res.items():
        row[f"{name}_n_run"] = m["n_run"]
        row[f"{name}_scaled"] = m["scaled"]
        for key in ("wall_s", "wall_min_s", "cpu_s", "first_call_s", "steps", "failed", "bg"):
            row[f"{name}_{key}"] = m[key]
        if name != "sparse":
            ref = np.asarray(sparse_fn(jnp.asarray(mus[m["idx"]]))[0])
            row[f"dev_{name}"] = float(np.max(np.abs(ref - m["y1"])))
            row[f"{name}_over_sparse"] = m["wall_s"] / res["sparse"]["wall_s"]
            row[f"{name}_over_sparse_cpu"] = m["cpu_s"] / res["sparse"]["cpu_s"]
    return row


def print_tables(rows: list[dict], args) -> None:
    have_dx = not args.no_diffrax
    print()
    print(f"Times for N = {args.n} trajectories (median of {args.repeats}; '*' = run on fewer "
          "trajectories and scaled linearly, N run in brackets); ratios on wall time, "
          "(cpu) on process CPU time; dev = max |y(1) - y_sparse(1)|; bg = other processes' "
          "load in cores during sparse/dense/diffrax")
    head = (f"{'n_vars':>6} {'r':>2} | {'sparse':>16} {'dense':>16} "
            + (f"{'diffrax':>16} " if have_dx else "")
            + f"| {'de/sp':>6} {'(cpu)':>6} " + (f"{'dx/sp':>6} {'(cpu)':>6} " if have_dx else "")
            + f"| {'dev dense':>9} " + (f"{'dev dx':>9} " if have_dx else "") + "| bg")
    print(head)
    print("-" * len(head))
    for row in rows:
        cells = []
        for name in SOLVERS if have_dx else SOLVERS[:2]:
            mark = "*" if row[f"{name}_scaled"] else " "
            cells.append(f"{fmt_time(row[f'{name}_wall_s']) + mark:>9}"
                         f"{'(' + str(row[f'{name}_n_run']) + ')':>7}")
        line = f"{row['n_vars']:>6} {row['r']:>2} | " + " ".join(cells) + " | "
        line += f"{row['dense_over_sparse']:>6.1f} {row['dense_over_sparse_cpu']:>6.1f} "
        if have_dx:
            line += f"{row['diffrax_over_sparse']:>6.1f} {row['diffrax_over_sparse_cpu']:>6.1f} "
        line += f"| {row['dev_dense']:>9.1e} "
        if have_dx:
            line += f"{row['dev_diffrax']:>9.1e} "
        bgs = [row[f"{s}_bg"] for s in (SOLVERS if have_dx else SOLVERS[:2])]
        line += "| " + "/".join(f"{b:.1f}" for b in bgs)
        print(line)
    print()
    print("Patterns (detected, diagonal added): colours and nnz(L+U) by ordering")
    head = (f"{'n_vars':>6} {'r':>2} | {'nnz(J)':>7} {'colours':>7} | "
            f"{'nnz(L+U) AMD':>12} {'nnz(L+U) natural':>16} | {'dense n^2':>9}")
    print(head)
    print("-" * len(head))
    for row in rows:
        print(f"{row['n_vars']:>6} {row['r']:>2} | {row['nnz_J']:>7} {row['colours']:>7} | "
              f"{row['nnz_LU_amd']:>12} {row['nnz_LU_natural']:>16} | {row['n_vars'] ** 2:>9}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: n_vars 2, 8, 16; N = 64; 3 repeats; sweep r = 1, 2")
    ap.add_argument("--sizes", default="2,8,16,32,64,128")
    ap.add_argument("--sweep-vars", type=int, default=64)
    ap.add_argument("--ranges", default="1,2,4,8", help="coupling ranges r at --sweep-vars")
    ap.add_argument("--n", type=int, default=1000, help="trajectories")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--budget", type=float, default=15.0,
                    help="seconds of timed calls per shoal solver and configuration")
    ap.add_argument("--diffrax-budget", type=float, default=30.0)
    ap.add_argument("--no-diffrax", action="store_true")
    ap.add_argument("--out-dir", default=str(_common.RESULTS))
    args = ap.parse_args()
    if args.quick:
        args.sizes, args.sweep_vars, args.ranges = "2,8,16", 16, "1,2"
        args.n, args.repeats = 64, 3
        args.budget, args.diffrax_budget = 5.0, 5.0
    sizes = [int(s) for s in args.sizes.split(",")]
    ranges = [int(s) for s in args.ranges.split(",")]
    if any(s < 2 or s % 2 for s in sizes + [args.sweep_vars]):
        ap.error("n_vars must be even (x and v per oscillator)")

    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(f"date        : {now}")
    print(f"cpu         : {_common.cpu_model()}, {os.cpu_count()} logical CPUs; shoal threads "
          f"{_ode_ext.num_threads()}")
    print(f"load avg    : {_common.load_average()} (1/5/15 min) at start")
    print(f"jax {jax.__version__}, diffrax {diffrax.__version__}, python "
          f"{platform.python_version()}")
    print(f"problem     : VdP ring mu = linspace({MU_LO}, {MU_HI}, {args.n}), d = {D}, "
          f"omega = {OMEGA}, x = 2, v = 0, t in [0, 1], rtol {RTOL}, atol {ATOL}")
    print(flush=True)

    configs = [(s, 1) for s in sizes]
    configs += [(args.sweep_vars, r) for r in ranges if (args.sweep_vars, r) not in configs]
    rows = []
    csv_path = Path(args.out_dir) / "vdp_ring_sparse.csv"
    for n_vars, r in configs:
        if 2 * r >= n_vars // 2 and r > 1:
            print(f"  skip n_vars={n_vars} r={r}: range too long for {n_vars // 2} oscillators")
            continue
        rows.append(bench(n_vars, r, args))
        _common.write_csv(csv_path, rows)
    print_tables(rows, args)
    print(f"\nload avg at end: {_common.load_average()}; CSV: {csv_path}")


if __name__ == "__main__":
    main()
