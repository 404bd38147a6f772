"""Stiff Robertson ensemble: shoal Rodas5P versus diffrax Kvaerno5 and SUNDIALS CVODE (CPU).

Problem (issue 3):
    y1' = -k1 y1 + k3 y2 y3,   y3' = k2 y2^2,   y2' = -y1' - y3',
    k1 = 0.04 * (1 + 0.05 * linspace(-1, 1, N))  (k1 = 0.04 for N = 1),  k2 = 3e7,  k3 = 1e4,
    y0 = (1, 0, 0),  t_span = [0, logspace(-6, 5, 20)]  (21 saves: t = 0 and 20 log-spaced),
    rtol = 1e-6, atol = 1e-10, float64, initial step 1e-6 for all three solvers.

* shoal:   jax.jit of shoal.ode.solve(..., method="rodas5p", first_step=1e-6), PID gains
           (pcoeff, icoeff, dcoeff) = (0, 1, 0) (the integral controller), with lu_precision
           "fp64" and "fp32"; it runs on shoal.ode._ode_ext.num_threads() threads.
* diffrax: jax.jit(jax.vmap(diffeqsolve)) with Kvaerno5, PIDController(rtol, atol, pcoeff=0,
           icoeff=1, dcoeff=0), dt0 = 1e-6, SaveAt(ts=t_span), max_steps = 1e6, diffrax's
           default root finder.
* CVODE:   benchmarks/cvode_robertson.cc, compiled by this script against the installed
           SUNDIALS (Debian: apt-get install libsundials-dev), BDF with Newton iteration, dense
           linear solver, analytic Jacobian, initial step 1e-6, the trajectories one after another
           on one core (CVodeReInit between them). Skipped, with a message, where it cannot be
           compiled.

Timing: wall-clock median of --repeats calls after one warm-up call (that pays for tracing and
compilation); at small N more calls are made (up to 1000) so that each solver runs >= 0.5 s.
shoal fp64 and fp32 calls are interleaved. diffrax gets at most --diffrax-budget seconds of timed
calls per size (at least one). CVODE times whole passes over the ensemble inside the harness.
The CPU time used by *other* processes during each timed section is recorded ("bg", in cores):
on a shared machine the times are only as good as that column.

Per trajectory per core: shoal time * min(threads, N) / N (the cores it keeps busy), CVODE
time / N (one core). The ratio CVODE/shoal of these is the per-core speed-up. Because that
assumes each solver had its cores to itself, the CPU time actually consumed per trajectory is
also reported (process CPU time during shoal's calls; CLOCK_PROCESS_CPUTIME_ID in the harness)
with the same ratio from it, "(CPU)": on a loaded machine it is the more trustworthy figure.

Accuracy: SciPy Radau (rtol 1e-12, atol (1e-16, 1e-20, 1e-16), analytic Jacobian, restarted at
each save time so that no dense output is involved; self-consistent to ~1e-11 in the metric
below) on --ref-trajectories evenly spaced trajectories (all if N is smaller), the same ones
for every solver. Error metric ("err"):
    max over the 20 saves after t = 0 and the 3 components of |y_i - ref_i| / (|ref_i| + 1e-10),
i.e. the relative error with a floor at atol (y2 is 4e-8..4e-5, y3 is ~1e-14 at t = 1e-6).
Also reported: "rel. err where |ref| >= 1e-8" = the plain relative error, over the saves and
components whose reference value is at least 1e-8 (100 atol), and "end err" =
max_i |y_i(1e5) - ref_i(1e5)| / |ref_i(1e5)|.

Writes benchmarks/results/robertson_rodas5p.csv and robertson_rodas5p.png.

    PYTHONPATH=. .venv/bin/python benchmarks/robertson_rodas5p.py            # N = 1, 100, 1e4
    PYTHONPATH=. .venv/bin/python benchmarks/robertson_rodas5p.py --quick    # smoke run
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common  # noqa: I001 - puts the repository root on sys.path before shoal is imported
import jax

jax.config.update("jax_enable_x64", True)

import diffrax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from scipy.integrate import solve_ivp  # noqa: E402

import shoal  # noqa: E402
import shoal.ode  # noqa: E402
from shoal.ode import _ode_ext  # noqa: E402

HARNESS_SRC = _common.ROOT / "benchmarks" / "cvode_robertson.cc"
K1, K2, K3 = 0.04, 3e7, 1e4
K1_SPREAD = 0.05
RTOL, ATOL = 1e-6, 1e-10
ERR_FLOOR = ATOL
BIG_FLOOR = 1e-8  # 'rel. err where |ref| >= 1e-8': values at least 100 atol
FIRST_STEP = 1e-6
MAX_STEPS = 1_000_000
T_SPAN = np.concatenate([[0.0], np.logspace(-6.0, 5.0, 20)])
Y0 = np.array([1.0, 0.0, 0.0])
GAINS = {"pcoeff": 0.0, "icoeff": 1.0, "dcoeff": 0.0}
REF_RTOL = 1e-12
REF_ATOL = np.array([1e-16, 1e-20, 1e-16])


def k1_values(n: int) -> np.ndarray:
    if n == 1:
        return np.array([K1])
    return K1 * (1.0 + K1_SPREAD * np.linspace(-1.0, 1.0, n))


def robertson(y, t, p):
    """The right-hand side, shared verbatim by shoal and diffrax. p = (k1,)."""
    r1 = p[0] * y[0]
    r2 = K2 * y[1] * y[1]
    r3 = K3 * y[1] * y[2]
    return jnp.stack([-r1 + r3, r1 - r2 - r3, r2])


# -- shoal -------------------------------------------------------------------------------------


def make_shoal(lu_precision: str):
    """jax.jit: k1 (N,) -> (ys (N, 21, 3), accepted (N,), rejected (N,), status (N,))."""

    def select(ys, stats):
        return ys, stats["accepted"], stats["rejected"], stats["status"]

    return _common.jit_solve(robertson, Y0, T_SPAN, select, method="rodas5p", rtol=RTOL,
                             atol=ATOL, first_step=FIRST_STEP, max_steps=MAX_STEPS,
                             lu_precision=lu_precision, **GAINS)


# -- diffrax -----------------------------------------------------------------------------------


def make_diffrax():
    """jit(vmap(diffeqsolve)) with Kvaerno5: k1 (N,) -> (ys, accepted, rejected, failed)."""
    term = diffrax.ODETerm(lambda t, y, args: robertson(y, t, args))
    solver = diffrax.Kvaerno5()
    controller = diffrax.PIDController(rtol=RTOL, atol=ATOL, **GAINS)
    t_span = jnp.asarray(T_SPAN)
    y0 = jnp.asarray(Y0)

    def one(k1):
        sol = diffrax.diffeqsolve(
            term,
            solver,
            t0=float(T_SPAN[0]),
            t1=float(T_SPAN[-1]),
            dt0=FIRST_STEP,
            y0=y0,
            args=k1[None],
            stepsize_controller=controller,
            saveat=diffrax.SaveAt(ts=t_span),
            max_steps=MAX_STEPS,
            throw=False,
        )
        failed = sol.result != diffrax.RESULTS.successful
        return sol.ys, sol.stats["num_accepted_steps"], sol.stats["num_rejected_steps"], failed

    return jax.jit(jax.vmap(one))


# -- CVODE -------------------------------------------------------------------------------------


def build_cvode(build_dir: Path, ida: bool = False) -> tuple[Path | None, str]:
    """Compile the harness (``ida``: its IDA build, the DAE form); (path, note) or (None, why
    not)."""
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        return None, "no C++ compiler (g++/c++) found"
    extra = []
    prefix = os.environ.get("SUNDIALS_DIR")
    if prefix:
        extra = [f"-I{prefix}/include", f"-L{prefix}/lib", f"-Wl,-rpath,{prefix}/lib"]
    exe = build_dir / ("ida_robertson" if ida else "cvode_robertson")
    if ida:
        extra.append("-DROBERTSON_IDA")
    base = [
        "-lsundials_ida" if ida else "-lsundials_cvode",
        "-lsundials_nvecserial",
        "-lsundials_sunlinsoldense",
        "-lsundials_sunmatrixdense",
    ]
    errors = []
    # SUNDIALS 6 may want libsundials_generic, SUNDIALS 7 libsundials_core; try each.
    for libs in (base, base + ["-lsundials_generic"], base + ["-lsundials_core"]):
        cmd = [cxx, "-O2", "-std=c++17", "-o", str(exe), str(HARNESS_SRC), *extra, *libs, "-lm"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode == 0:
            return exe, " ".join(Path(c).name if i == 0 else c for i, c in enumerate(cmd))
        lines = proc.stderr.strip().splitlines()
        hits = [x for x in lines if "error" in x.lower() or "cannot find" in x]
        errors.append((hits or lines or [f"{Path(cxx).name} exited with {proc.returncode}"])[0])
    return None, (
        "could not compile benchmarks/cvode_robertson.cc against SUNDIALS "
        f"(install libsundials-dev, or set SUNDIALS_DIR): {errors[0]}"
    )


def run_cvode(exe: Path, k1: np.ndarray, repeats: int, rtol: float = RTOL,
              atol: float = ATOL) -> dict:
    n, n_save = len(k1), len(T_SPAN)
    with tempfile.TemporaryDirectory(prefix="shoal-cvode-") as tmp:
        k1_path, ts_path, out_path = (os.path.join(tmp, x) for x in ("k1.bin", "ts.bin", "o"))
        np.asarray(k1, "<f8").tofile(k1_path)
        np.asarray(T_SPAN, "<f8").tofile(ts_path)
        cmd = [
            str(exe),
            k1_path,
            ts_path,
            out_path,
            repr(rtol),
            repr(atol),
            repr(FIRST_STEP),
            str(repeats),
        ]
        with _common.ForeignLoad(children=True) as load:
            proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"CVODE harness failed ({proc.returncode}): {proc.stderr}")
        result = next(
            json.loads(line[7:]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")
        )
        raw = np.fromfile(out_path, dtype="<f8", count=n * n_save * 3)
        ints = np.fromfile(out_path, dtype="<i8", offset=raw.nbytes)
    result.update(
        ys=raw.reshape(n, n_save, 3),
        steps=ints[:n],
        fails=ints[n : 2 * n],
        flags=ints[2 * n : 3 * n],
        bg=load.cores,
        cores=load.own_s / load.wall_s,
    )
    return result


# -- reference and errors ----------------------------------------------------------------------

_REF_CACHE: dict[float, np.ndarray] = {}


def reference(k1: float) -> np.ndarray:
    """Saves (21, 3) by SciPy Radau, rtol 1e-12, restarted at every save time."""
    if k1 not in _REF_CACHE:

        def f(t, y):
            r1, r2, r3 = k1 * y[0], K2 * y[1] * y[1], K3 * y[1] * y[2]
            return [-r1 + r3, r1 - r2 - r3, r2]

        def jac(t, y):
            return [
                [-k1, K3 * y[2], K3 * y[1]],
                [k1, -K3 * y[2] - 2 * K2 * y[1], -K3 * y[1]],
                [0.0, 2 * K2 * y[1], 0.0],
            ]

        out = [Y0.copy()]
        for a, b in zip(T_SPAN[:-1], T_SPAN[1:], strict=True):
            sol = solve_ivp(
                f,
                (a, b),
                out[-1],
                method="Radau",
                rtol=REF_RTOL,
                atol=REF_ATOL,
                jac=jac,
                first_step=min(1e-10, (b - a) / 10),
            )
            if not sol.success:
                raise RuntimeError(f"reference failed for k1={k1}: {sol.message}")
            out.append(sol.y[:, -1])
        _REF_CACHE[k1] = np.array(out)
    return _REF_CACHE[k1]


def errors(ys: np.ndarray, ref: np.ndarray) -> tuple[float, float, float]:
    """(max mixed relative error over saves t > 0, max relative error where |ref| >= 1e-8,
    max relative error at t_end); a NaN (failed trajectory) counts as an infinite error."""
    ys, ref = np.asarray(ys)[:, 1:], ref[:, 1:]
    err = np.abs(ys - ref)
    err = np.where(np.isnan(err), np.inf, err)
    mixed = err / (np.abs(ref) + ERR_FLOOR)
    big = np.where(np.abs(ref) >= BIG_FLOOR, err / np.maximum(np.abs(ref), BIG_FLOOR), 0.0)
    end = err[:, -1] / np.abs(ref[:, -1])
    return float(np.max(mixed)), float(np.max(big)), float(np.max(end))


# -- one ensemble size -------------------------------------------------------------------------


def time_loop(fns: dict, arg, repeats: int) -> tuple[dict, dict, float]:
    """Interleaved timed calls: ({name: [wall s]}, {name: own CPU s}, foreign load in cores)."""
    times = {k: [] for k in fns}
    cpu = {k: 0.0 for k in fns}
    with _common.ForeignLoad(children=True) as load:
        for _ in range(repeats):
            for name, fn in fns.items():
                c0, t0 = time.process_time(), time.perf_counter()
                jax.block_until_ready(fn(arg))
                times[name].append(time.perf_counter() - t0)
                cpu[name] += time.process_time() - c0
    return times, cpu, load.cores


def bench_size(n, args, shoal_fns, diffrax_fn, cvode_exe, threads) -> dict:
    k1_np = k1_values(n)
    k1 = jnp.asarray(k1_np)
    row = {"N": n}
    idx = _common.subsample(n, args.ref_trajectories)
    t0 = time.perf_counter()
    refs = np.stack([reference(float(k)) for k in k1_np[idx]])
    print(
        f"  N={n}: reference ({len(idx)} Radau solves) {time.perf_counter() - t0:.1f} s", flush=True
    )

    # -- shoal, fp64 and fp32 LU, interleaved
    outs, first = {}, {}
    for name, fn in shoal_fns.items():
        t0 = time.perf_counter()
        outs[name] = jax.block_until_ready(fn(k1))
        first[name] = time.perf_counter() - t0
    one_call = min(min(time_loop({k: f}, k1, 1)[0][k]) for k, f in shoal_fns.items())
    reps = max(args.repeats, min(1000, int(0.5 / max(one_call, 1e-9))))
    _common.wait_for_quiet(args.max_wait, window_s=0.5)
    times, cpu, bg = time_loop(shoal_fns, k1, reps)
    for name in shoal_fns:
        ys, acc, rej, status = (np.asarray(x) for x in outs[name])
        err, err_big, end = errors(ys[idx], refs)
        med = statistics.median(times[name])
        row.update(
            {
                f"shoal_{name}_s": med,
                f"shoal_{name}_min_s": min(times[name]),
                f"shoal_{name}_per_traj_core_s": med * min(threads, n) / n,
                f"shoal_{name}_err": err,
                f"shoal_{name}_end_err": end,
                f"shoal_{name}_relbig_err": err_big,
                f"shoal_{name}_accepted_mean": float(acc.mean()),
                f"shoal_{name}_rejected_mean": float(rej.mean()),
                f"shoal_{name}_failed": int(np.sum(status != 0)),
                f"shoal_{name}_cpu_per_traj_s": cpu[name] / reps / n,
                f"shoal_{name}_cpu_cores": cpu[name] / sum(times[name]),
                f"shoal_{name}_first_call_s": first[name],
            }
        )
    row.update({"shoal_repeats": reps, "shoal_bg_cores": bg})

    # -- diffrax
    if diffrax_fn is not None and n <= args.diffrax_max_n:
        t0 = time.perf_counter()
        d_out = jax.block_until_ready(diffrax_fn(k1))
        d_first = time.perf_counter() - t0
        # the first timed call also sizes the loop (at N = 1e4 one call takes about a minute)
        _common.wait_for_quiet(args.max_wait, window_s=0.5)
        d_times, d_cpu, d_bg = time_loop({"d": diffrax_fn}, k1, 1)
        single = d_times["d"][0]
        d_reps = max(args.repeats, min(1000, int(0.5 / max(single, 1e-9))))
        d_reps = max(1, min(d_reps, int(args.diffrax_budget / single)))
        if d_reps > 1:
            more_times, more_cpu, more_bg = time_loop({"d": diffrax_fn}, k1, d_reps - 1)
            d_bg = (d_bg * single + more_bg * sum(more_times["d"])) / (
                single + sum(more_times["d"])
            )
            d_times["d"] += more_times["d"]
            d_cpu["d"] += more_cpu["d"]
        ys, acc, rej, failed = (np.asarray(x) for x in d_out)
        err, err_big, end = errors(ys[idx], refs)
        row.update(
            {
                "diffrax_s": statistics.median(d_times["d"]),
                "diffrax_min_s": min(d_times["d"]),
                "diffrax_extrapolated": False,
                "diffrax_err": err,
                "diffrax_end_err": end,
                "diffrax_relbig_err": err_big,
                "diffrax_accepted_mean": float(acc.mean()),
                "diffrax_rejected_mean": float(rej.mean()),
                "diffrax_failed": int(np.sum(failed)),
                "diffrax_repeats": d_reps,
                "diffrax_cpu_per_traj_s": d_cpu["d"] / d_reps / n,
                "diffrax_cpu_cores": d_cpu["d"] / sum(d_times["d"]),
                "diffrax_bg_cores": d_bg,
                "diffrax_first_call_s": d_first,
            }
        )
    else:
        row.update({"diffrax_s": math.nan, "diffrax_extrapolated": False})

    # -- CVODE
    c = None
    if cvode_exe is not None:
        # >= 0.5 s of timed passes at small N (CVODE takes ~1 ms per trajectory), capped at 1000
        c_reps = max(1, min(args.repeats, int(args.cvode_budget / (n * 1.5e-3))))
        c_reps = max(c_reps, min(1000, int(0.5 / (n * 1e-3))))
        _common.wait_for_quiet(args.max_wait, window_s=0.5)
        try:
            c = run_cvode(cvode_exe, k1_np, c_reps)
        except (OSError, RuntimeError, StopIteration, ValueError) as exc:
            print(f"  NOTE: N={n}: CVODE harness did not run, skipped: {exc}", flush=True)
            c = None
    if c is not None:
        err, err_big, end = errors(c["ys"][idx], refs)
        med = statistics.median(c["pass_s"])
        row.update(
            {
                "cvode_s": med,
                "cvode_min_s": min(c["pass_s"]),
                "cvode_per_traj_core_s": med / n,
                "cvode_cpu_per_traj_s": statistics.median(c["pass_cpu_s"]) / n,
                "cvode_err": err,
                "cvode_end_err": end,
                "cvode_relbig_err": err_big,
                "cvode_steps_mean": float(c["steps"].mean()),
                "cvode_failed_steps_mean": float(c["fails"].mean()),
                "cvode_failed": int(np.sum(c["flags"] != 0)),
                "cvode_repeats": c_reps,
                "cvode_bg_cores": c["bg"],
                "sundials_version": c.get("sundials_version", "?"),
            }
        )
    else:
        row.update(
            {
                "cvode_s": math.nan,
                "cvode_per_traj_core_s": math.nan,
                "cvode_cpu_per_traj_s": math.nan,
            }
        )

    s64 = row["shoal_fp64_s"]
    row["ratio_diffrax_over_shoal"] = row["diffrax_s"] / s64
    row["ratio_cvode_over_shoal_per_core"] = (
        row["cvode_per_traj_core_s"] / row["shoal_fp64_per_traj_core_s"]
    )
    row["ratio_cvode_over_shoal_cpu"] = (
        row["cvode_cpu_per_traj_s"] / row["shoal_fp64_cpu_per_traj_s"]
    )
    row["ref_trajectories"] = len(idx)
    return row


def extrapolate_diffrax(rows: list[dict]) -> None:
    """Sizes above --diffrax-max-n: linear in N from the largest measured size, labelled so."""
    measured = [r for r in rows if math.isfinite(r["diffrax_s"]) and not r["diffrax_extrapolated"]]
    if not measured:
        return
    base = max(measured, key=lambda r: r["N"])
    if base["N"] < 100:
        return
    for r in rows:
        if not math.isfinite(r["diffrax_s"]) and r["N"] > base["N"]:
            r["diffrax_s"] = base["diffrax_s"] * r["N"] / base["N"]
            r["diffrax_extrapolated"] = True
            r["diffrax_err"] = math.nan  # not measured
            r["ratio_diffrax_over_shoal"] = r["diffrax_s"] / r["shoal_fp64_s"]


# -- output ------------------------------------------------------------------------------------


def print_table(rows: list[dict]) -> None:
    def e(r, k):
        v = r.get(k, math.nan)
        return f"{v:.1e}" if math.isfinite(v) else "n/a"

    def t(r, k):
        s = _common.fmt_time(r.get(k, math.nan))
        return s + ("*" if k == "diffrax_s" and r.get("diffrax_extrapolated") else "")

    head = (
        f"{'N':>6} | {'shoal fp64':>10} | {'shoal fp32':>10} | {'diffrax':>10} | "
        f"{'CVODE':>10} | {'dfx/shoal':>9} | {'CVODE/shoal':>11} | {'(CPU)':>6} | "
        f"{'err shoal':>9} | {'err fp32':>8} | {'err dfx':>7} | {'err CVODE':>9} | "
        f"{'steps s/d/C':>13} | "
        f"{'bg s/d/C':>14}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        ratio_d = r["ratio_diffrax_over_shoal"]
        ratio_c = r["ratio_cvode_over_shoal_per_core"]
        ratio_cpu = r["ratio_cvode_over_shoal_cpu"]
        steps = "/".join(
            f"{r[k]:.0f}" if math.isfinite(r.get(k, math.nan)) else "-"
            for k in ("shoal_fp64_accepted_mean", "diffrax_accepted_mean", "cvode_steps_mean")
        )
        bg = "/".join(
            f"{r[k]:.2f}" if math.isfinite(r.get(k, math.nan)) else "-"
            for k in ("shoal_bg_cores", "diffrax_bg_cores", "cvode_bg_cores")
        )
        print(
            f"{r['N']:>6} | {t(r, 'shoal_fp64_s'):>10} | {t(r, 'shoal_fp32_s'):>10} | "
            f"{t(r, 'diffrax_s'):>10} | {t(r, 'cvode_s'):>10} | "
            f"{(f'{ratio_d:.1f}x' if math.isfinite(ratio_d) else 'n/a'):>9} | "
            f"{(f'{ratio_c:.1f}x' if math.isfinite(ratio_c) else 'n/a'):>11} | "
            f"{(f'{ratio_cpu:.1f}x' if math.isfinite(ratio_cpu) else 'n/a'):>6} | "
            f"{e(r, 'shoal_fp64_err'):>9} | {e(r, 'shoal_fp32_err'):>8} | "
            f"{e(r, 'diffrax_err'):>7} | {e(r, 'cvode_err'):>9} | {steps:>13} | {bg:>14}"
        )


def print_details(rows: list[dict], threads: int) -> None:
    def t(r, k):
        return _common.fmt_time(r.get(k, math.nan))

    def e(r, k):
        v = r.get(k, math.nan)
        return f"{v:.1e}" if math.isfinite(v) else "n/a"

    def f(r, k):
        v = r.get(k, math.nan)
        return f"{v:.1f}" if math.isfinite(v) else "n/a"

    print()
    print(
        f"Per trajectory: 'wall/core' = wall time * cores / N (shoal: min({threads} threads, N) "
        "cores; CVODE: 1);\n'CPU' = CPU time actually consumed / N (process CPU time; less "
        "sensitive to other load)."
    )
    for r in rows:
        failed = sum(
            r.get(k, 0)
            for k in ("shoal_fp64_failed", "shoal_fp32_failed", "diffrax_failed", "cvode_failed")
        )
        print(
            f"  N={r['N']}: wall/core shoal fp64 {t(r, 'shoal_fp64_per_traj_core_s')}, fp32 "
            f"{t(r, 'shoal_fp32_per_traj_core_s')}, CVODE {t(r, 'cvode_per_traj_core_s')} | CPU "
            f"shoal fp64 {t(r, 'shoal_fp64_cpu_per_traj_s')}, fp32 "
            f"{t(r, 'shoal_fp32_cpu_per_traj_s')}, diffrax {t(r, 'diffrax_cpu_per_traj_s')}, "
            f"CVODE {t(r, 'cvode_cpu_per_traj_s')}\n"
            f"    rel. err where |ref| >= 1e-8: shoal {e(r, 'shoal_fp64_relbig_err')} / fp32 "
            f"{e(r, 'shoal_fp32_relbig_err')} / diffrax {e(r, 'diffrax_relbig_err')} / CVODE "
            f"{e(r, 'cvode_relbig_err')}\n"
            f"    end-time rel. err shoal {e(r, 'shoal_fp64_end_err')} / fp32 "
            f"{e(r, 'shoal_fp32_end_err')} / diffrax {e(r, 'diffrax_end_err')} / CVODE "
            f"{e(r, 'cvode_end_err')}; rejected steps shoal {f(r, 'shoal_fp64_rejected_mean')} / "
            f"diffrax {f(r, 'diffrax_rejected_mean')} / CVODE {f(r, 'cvode_failed_steps_mean')}; "
            f"failed trajectories {failed}"
        )



def plot(rows: list[dict], path: Path, threads: int) -> None:
    fig, (ax, bx) = _common.subplots(1, 2, figsize=(11, 4.5))
    ns = np.array([r["N"] for r in rows])
    series = [
        ("shoal_fp64_s", "o-", "C0", "shoal Rodas5P (fp64 LU)"),
        ("shoal_fp32_s", "^--", "C1", "shoal Rodas5P (fp32 LU)"),
        ("diffrax_s", "s-", "C2", "diffrax Kvaerno5 jit(vmap)"),
        ("cvode_s", "d-", "C3", "CVODE BDF, 1 core, sequential"),
    ]
    for key, style, color, label in series:
        ys = np.array(
            [
                math.nan
                if key == "diffrax_s" and r.get("diffrax_extrapolated")
                else r.get(key, math.nan)
                for r in rows
            ]
        )
        ok = np.isfinite(ys)
        if ok.any():
            ax.loglog(ns[ok], ys[ok], style, color=color, label=label)
        if key == "diffrax_s":
            ex = [r for r in rows if r.get("diffrax_extrapolated")]
            if ex:
                ax.loglog(
                    [r["N"] for r in ex],
                    [r["diffrax_s"] for r in ex],
                    "s",
                    mfc="none",
                    color="gray",
                    label="diffrax, extrapolated",
                )
    ax.set_xlabel("ensemble size N")
    ax.set_ylabel("wall time per solve [s] (median)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("time vs N", fontsize=9)

    big = max(rows, key=lambda r: r["N"])
    pts = [
        ("shoal fp64", "o", "C0", "shoal_fp64_cpu_per_traj_s", "shoal_fp64_err"),
        ("shoal fp32 LU", "^", "C1", "shoal_fp32_cpu_per_traj_s", "shoal_fp32_err"),
        ("diffrax Kvaerno5", "s", "C2", "diffrax_cpu_per_traj_s", "diffrax_err"),
        ("CVODE", "d", "C3", "cvode_cpu_per_traj_s", "cvode_err"),
    ]
    for label, marker, color, t_key, e_key in pts:
        tt, err = big.get(t_key, math.nan), big.get(e_key, math.nan)
        if math.isfinite(tt) and math.isfinite(err):
            bx.loglog([err], [tt], marker, color=color, ms=9, label=label)
    bx.set_xlabel("achieved error (max |y-ref| / (|ref| + 1e-10))")
    bx.set_ylabel("CPU time per trajectory [s]")
    bx.grid(True, which="both", alpha=0.3)
    bx.legend(fontsize=8)
    bx.set_title(f"work vs precision at N = {big['N']}", fontsize=9)
    fig.suptitle(
        f"Robertson ensemble, rtol={RTOL:g}, atol={ATOL:g}, float64; {_common.cpu_model()}, "
        f"{_common.usable_cpus()} CPUs, shoal {threads} threads",
        fontsize=9,
    )
    _common.save_figure(fig, path)


# -- main --------------------------------------------------------------------------------------


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--sizes",
        default=None,
        help="comma-separated ensemble sizes (default 1,100,10000; --quick 1,100,1000)",
    )
    ap.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="timed calls per solver and size (default 7; 3 with --quick); more at "
        "small N, fewer for diffrax beyond --diffrax-budget",
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: sizes 1,100,1000, 3 repeats, 5 reference trajectories",
    )
    ap.add_argument(
        "--ref-trajectories",
        type=int,
        default=None,
        help="trajectories compared with the Radau reference (default 20; 5 quick)",
    )
    ap.add_argument(
        "--diffrax-budget",
        type=float,
        default=None,
        help="seconds of timed diffrax calls per size, at least one call (default 120; 20 quick)",
    )
    ap.add_argument(
        "--diffrax-max-n",
        type=int,
        default=10**9,
        help="skip diffrax above this N and extrapolate linearly from the largest "
        "measured N >= 100 (labelled '*' / diffrax_extrapolated)",
    )
    ap.add_argument(
        "--cvode-budget",
        type=float,
        default=60.0,
        help="approximate seconds of timed CVODE passes per size (default 60)",
    )
    ap.add_argument("--no-cvode", action="store_true", help="skip CVODE")
    ap.add_argument("--no-diffrax", action="store_true", help="skip diffrax")
    ap.add_argument(
        "--max-wait",
        type=float,
        default=None,
        help="before each timed section wait up to this many seconds for other "
        "processes to leave the CPUs idle (default 10; 2 quick)",
    )
    ap.add_argument("--out-dir", default=str(_common.RESULTS), help="where results are written")
    args = ap.parse_args(argv)

    sizes_text = args.sizes or ("1,100,1000" if args.quick else "1,100,10000")
    sizes = [int(float(s)) for s in sizes_text.split(",") if s.strip()]
    args.repeats = args.repeats or (3 if args.quick else 7)
    args.ref_trajectories = args.ref_trajectories or (5 if args.quick else 20)
    args.diffrax_budget = (
        args.diffrax_budget if args.diffrax_budget is not None else (20.0 if args.quick else 120.0)
    )
    args.max_wait = args.max_wait if args.max_wait is not None else (2.0 if args.quick else 10.0)
    if args.repeats < 1 or any(n < 1 for n in sizes) or args.ref_trajectories < 1:
        ap.error("--repeats, --ref-trajectories and every size must be >= 1")
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    threads = int(_ode_ext.num_threads())

    cvode_exe, cvode_note = None, "skipped (--no-cvode)"
    if not args.no_cvode:
        cvode_exe, cvode_note = build_cvode(out_dir)
        if cvode_exe is None:
            print(f"NOTE: CVODE skipped: {cvode_note}", flush=True)

    info = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": f"{_common.cpu_model()}, {os.cpu_count()} logical CPUs "
        f"({_common.usable_cpus()} usable)",
        "load average at start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "versions": f"python {platform.python_version()}, jax {jax.__version__}, diffrax "
        f"{diffrax.__version__}, shoal {getattr(shoal, '__version__', '?')}",
        "shoal threads": str(threads),
        "CVODE": cvode_note if cvode_exe is None else f"built: {cvode_note}",
        "problem": f"Robertson k1=0.04*(1+0.05*linspace(-1,1,N)) k2=3e7 k3=1e4 y0=(1,0,0), "
        f"t_span=[0, logspace(-6,5,20)], rtol={RTOL:g} atol={ATOL:g} float64, "
        f"initial step {FIRST_STEP:g} (all solvers), PI gains (0,1,0)",
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
    }
    print("Robertson ensemble: shoal Rodas5P vs diffrax Kvaerno5 vs SUNDIALS CVODE (CPU)")
    width = max(len(k) for k in info)
    for k, v in info.items():
        print(f"{k:<{width}} : {v}")
    print(flush=True)

    shoal_fns = {"fp64": make_shoal("fp64"), "fp32": make_shoal("fp32")}
    diffrax_fn = None if args.no_diffrax else make_diffrax()
    rows = []
    for n in sizes:
        t0 = time.perf_counter()
        row = bench_size(n, args, shoal_fns, diffrax_fn, cvode_exe, threads)
        rows.append(row)
        print(f"  N={n}: done in {time.perf_counter() - t0:.1f} s", flush=True)
    extrapolate_diffrax(rows)

    print()
    print_table(rows)
    print(
        "times: median wall time per call (* = extrapolated linearly in N, not measured); "
        "dfx/shoal: diffrax / shoal fp64 wall time;\nCVODE/shoal: per trajectory per core "
        "(wall time x cores / N), (CPU): the same ratio from CPU time consumed; "
        "err: max over saves t>0 and components of |y-ref|/(|ref|+1e-10) on the reference "
        "trajectories;\nsteps: mean accepted steps shoal fp64 / diffrax / CVODE; bg: cores "
        "used by other processes while shoal / diffrax / CVODE were timed"
    )
    print_details(rows, threads)
    versions = {r["sundials_version"] for r in rows if "sundials_version" in r}
    if versions:
        print(f"  SUNDIALS version (from the harness): {', '.join(sorted(versions))}")

    csv_path, png_path = out_dir / "robertson_rodas5p.csv", out_dir / "robertson_rodas5p.png"
    _common.write_csv(csv_path, rows)
    plot(rows, png_path, threads)
    root = _common.ROOT
    print(f"\nwrote {csv_path.relative_to(root) if csv_path.is_relative_to(root) else csv_path}"
          f" and {png_path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
