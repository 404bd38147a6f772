"""Two checkouts of shoal, one session: are the benchmarks' results bit-identical, and the times?

For a refactor that must not change behaviour: runs only shoal's solves of the benchmarks below,
with the configuration each benchmark uses, in two checkouts ("before", e.g. old main in a
``git worktree``, and "after"), and compares them.

* Lorenz, Tsit5 (``lorenz_tsit5.py``): rho = linspace(0, 21, N), N = --lorenz-n.
* Robertson, Rodas5P (``robertson_rodas5p.py``), lu_precision "fp64" and "fp32", N = --robertson-n.
* Van der Pol ring (``vdp_ring_sparse.py``), r = 1, --ring-vars variables, N = --ring-n,
  Rodas5P dense (sparsity=None) and sparse (sparsity="auto").
* Gradients (``gradients.py``, table 1): the 8-variable ring with 1 and 8 parameters, N =
  --grad-n, T = --grad-t-end, Rodas5P and Tsit5; jit(loss) and jit(value_and_grad(loss)) with
  loss = sum_k sum_i y_i(T)^2, differentiated with respect to the parameters (N, n_params).
* Wide state (``wide_state.py``): the 64-variable Duffing ring, Tsit5, lanes=0 and lanes=1,
  N = --wide-n (a checkout older than that module needs a copy of it in its benchmarks/).

The problem definitions (right-hand sides, y0, save times, parameters, tolerances, gains) are
imported from each checkout's own benchmark module, so each side solves what its benchmark
solves; the solve itself is written here, with the public ``shoal.ode.solve`` only, so that it is
the same call on both sides. The peers (diffrax, CVODE, SciPy) are not run.

Each checkout runs in its own worker process (this script with ``--worker``, ``sys.path`` set to
that checkout, ``SHOAL_CACHE_DIR`` shared by default: cache keys hash the generated source and
the headers). Each worker compiles and calls every case once (excluded from the times; its
outputs, ys or loss and gradient plus the stats, are saved as .npz), then the two workers are
timed in rounds, interleaved: in every round each case is called on one side, then on the other,
the order alternating between rounds and cases, so that a change of load on the machine hits both
alike. A request is as many calls as make ~0.25 s (the same count on both sides). Reported: median
and minimum of the per-call wall times and their ratios after/before, the ratio of the workers'
median CPU time per call (steadier than wall time on a loaded machine), the CPU used by other
processes during the timed requests ("bg", cores, from /proc/stat), and whether the outputs are
identical bit for bit (same dtype, shape and bytes; otherwise the largest absolute difference).
Each worker also checks that its last timed call returned what its first did (repeatability).

Writes benchmarks/results/compare_revisions.md (the table), compare_revisions.json and the
outputs ``compare_outputs_{before,after}.npz``.

    PYTHONPATH=. .venv/bin/python benchmarks/compare_revisions.py --before /work/old --after .
    ... --quick    # small sizes, 3 rounds: a smoke run
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
TAG = "@@compare_revisions@@ "
SIDES = ("before", "after")
PROBLEMS = ("lorenz", "robertson", "ring", "gradients", "wide")
TARGET_REQUEST_S = 0.25  # calls per timed request: as many as take about this long
MAX_CALLS_PER_REQUEST = 50


# -- worker: one checkout ----------------------------------------------------------------------


def _worker_path(checkout: Path) -> None:
    """Import shoal and the benchmark modules from ``checkout``, never from this script's tree."""
    here = str(HERE)
    sys.path[:] = [p for p in sys.path if p and str(Path(p).resolve()) != here]
    sys.path[:0] = [str(checkout / "benchmarks"), str(checkout)]


def _solve_fn(f, y0, t_span, **kw):
    """jit: params (N, n_params) -> {"ys", "stats_*"} of shoal.ode.solve(f, y0, t_span, params)."""
    import jax
    import jax.numpy as jnp

    import shoal.ode

    y0, t_span = jnp.asarray(y0), jnp.asarray(t_span, jnp.float64)

    def run(p):
        ys, stats = shoal.ode.solve(f, y0, t_span, p, return_stats=True, **kw)
        return {"ys": ys, **{f"stats_{k}": v for k, v in stats.items()}}

    return jax.jit(run)


def _grad_fns(m, method: str, n_params: int, n: int, t_end: float):
    """gradients.py's loss on its n_params problem: (jit(loss), jit(value_and_grad(loss)), p)."""
    import jax
    import jax.numpy as jnp

    import shoal.ode

    f, y0 = m.nparams_problem(n_params)
    y0, t_span = jnp.asarray(y0), jnp.asarray([0.0, t_end])

    def loss(p):
        ys, stats = shoal.ode.solve(f, y0, t_span, p, method=method, rtol=m.RTOL, atol=m.ATOL,
                                    first_step=1e-6 * t_end, max_steps=m.MAX_STEPS,
                                    return_stats=True, **m.GAINS)
        return jnp.sum(ys[:, -1] ** 2), {f"stats_{k}": v for k, v in stats.items()}

    def value(p):
        val, stats = loss(p)
        return {"loss": val, **stats}

    def value_and_grad(p):
        (val, stats), grad = jax.value_and_grad(loss, has_aux=True)(p)
        return {"loss": val, "grad": grad, **stats}

    return jax.jit(value), jax.jit(value_and_grad), jnp.asarray(m.ring_params(n, n_params))


def build_cases(cfg: dict) -> dict:
    """{case id: (label, jitted fn, its argument)} for the problems in cfg["problems"]."""
    import jax.numpy as jnp

    cases = {}
    if "lorenz" in cfg["problems"]:
        import lorenz_tsit5 as m

        n = cfg["lorenz_n"]
        rho = jnp.asarray(np.linspace(0.0, m.RHO_MAX, n)[:, None])
        fn = _solve_fn(m.lorenz, m.Y0, [m.T0, m.T1], method="tsit5", rtol=m.RTOL, atol=m.ATOL,
                       first_step=m.FIRST_STEP, max_steps=m.MAX_STEPS, **m.GAINS)
        cases["lorenz"] = (f"Lorenz Tsit5, N={n}", fn, rho)
    if "robertson" in cfg["problems"]:
        import robertson_rodas5p as m

        n = cfg["robertson_n"]
        k1 = jnp.asarray(m.k1_values(n)[:, None])
        for lu in ("fp64", "fp32"):
            fn = _solve_fn(m.robertson, m.Y0, m.T_SPAN, method="rodas5p", rtol=m.RTOL,
                           atol=m.ATOL, first_step=m.FIRST_STEP, max_steps=m.MAX_STEPS,
                           lu_precision=lu, **m.GAINS)
            cases[f"robertson_{lu}"] = (f"Robertson Rodas5P {lu} LU, N={n}", fn, k1)
    if "ring" in cfg["problems"]:
        import vdp_ring_sparse as m

        n, n_vars = cfg["ring_n"], cfg["ring_vars"]
        mu = jnp.asarray(np.linspace(m.MU_LO, m.MU_HI, n)[:, None])
        f = m.make_ring(1)
        for name, sparsity in (("dense", None), ("sparse", "auto")):
            fn = _solve_fn(f, m.y0_of(n_vars), m.T_SPAN, method="rodas5p", rtol=m.RTOL,
                           atol=m.ATOL, first_step=m.FIRST_STEP, max_steps=m.MAX_STEPS,
                           sparsity=sparsity)
            label = f"VdP ring {n_vars} vars Rodas5P {name}, N={n}"
            cases[f"ring_{name}"] = (label, fn, mu)
    if "gradients" in cfg["problems"]:
        import gradients as m

        n, t_end = cfg["grad_n"], cfg["grad_t_end"]
        for method in ("rodas5p", "tsit5"):
            for k in (1, 8):
                fv, fg, p = _grad_fns(m, method, k, n, t_end)
                what = f"gradients {method} {k} param{'s' if k > 1 else ''}"
                cases[f"grad_{method}_p{k}_value"] = (f"{what} value, N={n}", fv, p)
                cases[f"grad_{method}_p{k}_vg"] = (f"{what} value_and_grad, N={n}", fg, p)
    if "wide" in cfg["problems"]:
        import wide_state as m

        n = cfg["wide_n"]
        y0, k = m.problem(n)
        for lanes in (0, 1):
            fn = _solve_fn(m.chain, y0, m.T_SPAN, method="tsit5", rtol=m.RTOL, atol=m.ATOL,
                           lanes=lanes)
            label = f"{m.N_VARS}-var Duffing ring Tsit5 lanes={lanes}, N={n}"
            cases[f"wide_lanes{lanes}"] = (label, fn, jnp.asarray(k))
    return cases


def _host(out) -> dict:
    return {k: np.asarray(v) for k, v in out.items()}


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and a[k].tobytes() == b[k].tobytes()
        for k in a
    )


def worker(checkout: Path) -> int:
    """Serve the parent: one JSON command per stdin line, one tagged JSON answer per command."""
    _worker_path(checkout)
    import jax

    jax.config.update("jax_enable_x64", True)
    import shoal

    shoal_dir = Path(shoal.__file__).resolve().parent
    if not shoal_dir.is_relative_to(checkout):
        raise RuntimeError(f"shoal imported from {shoal_dir}, not from {checkout}")
    cases, first, last = {}, {}, {}

    def answer(obj) -> None:
        sys.stdout.write(TAG + json.dumps(obj) + "\n")
        sys.stdout.flush()

    for line in sys.stdin:
        cmd = json.loads(line)
        try:
            if cmd["cmd"] == "setup":
                cases = build_cases(cmd["config"])
                first_call = {}
                for cid, (_, fn, arg) in cases.items():
                    t0 = time.perf_counter()
                    first[cid] = _host(jax.block_until_ready(fn(arg)))
                    first_call[cid] = time.perf_counter() - t0
                np.savez(cmd["outputs"], **{f"{c}__{k}": v for c, o in first.items()
                                            for k, v in o.items()})
                answer({"labels": {c: v[0] for c, v in cases.items()}, "first_call": first_call,
                        "shoal": str(shoal_dir), "version": getattr(shoal, "__version__", "?"),
                        "jax": jax.__version__, "python": platform.python_version()})
            elif cmd["cmd"] == "time":
                _, fn, arg = cases[cmd["case"]]
                times = []
                c0 = time.process_time()
                for _ in range(cmd["calls"]):
                    t0 = time.perf_counter()
                    out = jax.block_until_ready(fn(arg))
                    times.append(time.perf_counter() - t0)
                cpu = time.process_time() - c0
                last[cmd["case"]] = out
                answer({"times": times, "cpu_s": cpu})
            elif cmd["cmd"] == "repeatable":  # did the last timed call return the first's output?
                answer({"changed": [c for c in last if not _same(first[c], _host(last[c]))]})
            elif cmd["cmd"] == "quit":
                answer({})
                return 0
        except Exception:  # the parent reports it and stops
            answer({"error": traceback.format_exc()})
    return 0


# -- parent: the two workers, interleaved ------------------------------------------------------


class Worker:
    """A worker process on one checkout; its stderr and untagged stdout go to a log file."""

    def __init__(self, side: str, checkout: Path, cache_dir: Path, log_path: Path):
        self.side, self.checkout, self.log_path = side, checkout, log_path
        venv_python = checkout / ".venv" / "bin" / "python"
        python = str(venv_python) if venv_python.exists() else sys.executable
        env = dict(os.environ, PYTHONPATH=str(checkout), SHOAL_CACHE_DIR=str(cache_dir))
        self.log = open(log_path, "w")  # closed in close()
        self.proc = subprocess.Popen(
            [python, str(Path(__file__).resolve()), "--worker", str(checkout)],
            cwd=checkout, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self.log, text=True, bufsize=1,
        )

    def ask(self, **cmd) -> dict:
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"{self.side} worker died; its log: {self.log_path}\n"
                                   + self._log_tail())
            if line.startswith(TAG):
                reply = json.loads(line[len(TAG):])
                if "error" in reply:
                    raise RuntimeError(f"{self.side} worker ({self.checkout}):\n{reply['error']}")
                return reply
            self.log.write(line)

    def _log_tail(self) -> str:
        self.log.flush()
        return "".join(self.log_path.read_text().splitlines(True)[-30:])

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.ask(cmd="quit")
                self.proc.wait(timeout=30)
            except (OSError, RuntimeError, subprocess.TimeoutExpired):
                self.proc.kill()
        self.log.close()


def git_describe(checkout: Path) -> str:
    def git(*args) -> str:
        return subprocess.run(["git", "-C", str(checkout), *args], capture_output=True,
                              text=True).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "?"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return head + (" + uncommitted changes" if dirty else "")


def stale_build(checkout: Path) -> str | None:
    """Why the checkout's compiled extensions may not match its C++ sources, or None."""
    libs = list((checkout / "shoal").rglob("*.so"))
    if not libs:
        return "no compiled extension under shoal/: build it first"
    built = min(p.stat().st_mtime for p in libs)
    newer = [p for d in ("src", "include") for p in sorted((checkout / d).rglob("*"))
             if p.is_file() and p.stat().st_mtime > built]
    if newer:
        return (f"{len(newer)} file(s) under src/ or include/ newer than its extension "
                f"(e.g. {newer[0].relative_to(checkout)}): rebuild it?")
    return None


def compare_outputs(a: dict, b: dict) -> tuple[bool, str]:
    """(bit-identical, what differs) of two {field: array} dicts: per differing field the largest
    absolute difference (inf where only one side is NaN)."""
    if a.keys() != b.keys():
        return False, f"fields differ: {sorted(a)} vs {sorted(b)}"
    notes = []
    for k in sorted(a):
        x, y = a[k], b[k]
        if x.dtype != y.dtype or x.shape != y.shape:
            notes.append(f"{k}: {x.dtype}{list(x.shape)} vs {y.dtype}{list(y.shape)}")
        elif x.tobytes() == y.tobytes():
            continue
        elif np.array_equal(x, y, equal_nan=True):
            notes.append(f"{k}: equal values, other bits (signed zeros or NaN payloads)")
        else:
            xf, yf = x.astype(np.float64), y.astype(np.float64)
            diff = np.where(np.isnan(xf) & np.isnan(yf), 0.0, np.abs(xf - yf))
            diff = np.where(np.isnan(diff), np.inf, diff)
            notes.append(f"{k}: max abs diff {float(diff.max()):.3g} in "
                         f"{int(np.count_nonzero(diff))} of {diff.size}")
    return not notes, "; ".join(notes)


def load_outputs(path: Path) -> dict:
    out: dict[str, dict] = {}
    with np.load(path) as data:
        for key in data.files:
            case, field = key.split("__", 1)
            out.setdefault(case, {})[field] = data[key]
    return out


def fmt_ratio(x: float) -> str:
    return f"{x:.3f}" if math.isfinite(x) else "n/a"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", type=Path, help="checkout of the old revision (required)")
    ap.add_argument("--after", type=Path, help="checkout of the new revision (required)")
    ap.add_argument("--problems", default=",".join(PROBLEMS),
                    help=f"comma-separated subset of {','.join(PROBLEMS)} (default all)")
    ap.add_argument("--rounds", type=int, default=None,
                    help="timed rounds, each one request per case and side (default 5; 3 quick)")
    ap.add_argument("--lorenz-n", type=int, default=None, help="default 10000 (1000 quick)")
    ap.add_argument("--robertson-n", type=int, default=None, help="default 10000 (1000 quick)")
    ap.add_argument("--ring-n", type=int, default=None, help="default 1000 (100 quick)")
    ap.add_argument("--ring-vars", type=int, default=None, help="even; default 64 (16 quick)")
    ap.add_argument("--grad-n", type=int, default=None, help="default 1000 (100 quick)")
    ap.add_argument("--grad-t-end", type=float, default=None,
                    help="T of the gradient problems (default 1.0, gradients.py's; 0.5 quick)")
    ap.add_argument("--wide-n", type=int, default=None, help="default 2048 (256 quick)")
    ap.add_argument("--quick", action="store_true", help="small sizes and 3 rounds: smoke run")
    ap.add_argument("--max-wait", type=float, default=0.0,
                    help="before each round wait up to this many seconds for other processes "
                         "to leave the CPUs idle (default 0)")
    ap.add_argument("--cache-dir", type=Path, default=None,
                    help="SHOAL_CACHE_DIR of both workers (default benchmarks/results/"
                         "compare_cache)")
    ap.add_argument("--separate-caches", action="store_true",
                    help="give each side its own subfolder of --cache-dir")
    ap.add_argument("--out-dir", type=Path, default=HERE / "results")
    ap.add_argument("--worker", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker is not None:
        return worker(args.worker.resolve())
    if args.before is None or args.after is None:
        ap.error("--before and --after are required")

    import _common  # this tree's helpers; the workers never import them

    q = args.quick
    cfg = {
        "problems": [p for p in args.problems.split(",") if p],
        "lorenz_n": args.lorenz_n or (1000 if q else 10_000),
        "robertson_n": args.robertson_n or (1000 if q else 10_000),
        "ring_n": args.ring_n or (100 if q else 1000),
        "ring_vars": args.ring_vars or (16 if q else 64),
        "grad_n": args.grad_n or (100 if q else 1000),
        "grad_t_end": args.grad_t_end or (0.5 if q else 1.0),
        "wide_n": args.wide_n or (256 if q else 2048),
    }
    rounds = args.rounds or (3 if q else 5)
    if unknown := set(cfg["problems"]) - set(PROBLEMS):
        ap.error(f"unknown problems {sorted(unknown)}; choose from {', '.join(PROBLEMS)}")
    if cfg["ring_vars"] < 4 or cfg["ring_vars"] % 2 or rounds < 1:
        ap.error("--ring-vars must be even and >= 4, --rounds >= 1")
    checkouts = {"before": args.before.resolve(), "after": args.after.resolve()}
    for side, path in checkouts.items():
        if not (path / "shoal" / "__init__.py").is_file():
            ap.error(f"--{side} {path}: not a shoal checkout")
    warnings = [f"{s} ({p}): {why}" for s, p in checkouts.items() if (why := stale_build(p))]
    for w in warnings:
        print(f"WARNING: {w}", flush=True)
    out_dir = args.out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    cache = (args.cache_dir or out_dir / "compare_cache").resolve()
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load_start = _common.load_average()
    print(f"compare_revisions: {started}, load average {load_start}", flush=True)

    workers = {}
    try:
        # -- set up one side after the other (compiles; sharing the cache, not the CPUs)
        info = {}
        for side in SIDES:
            cache_dir = cache / side if args.separate_caches else cache
            workers[side] = Worker(side, checkouts[side], cache_dir,
                                   out_dir / f"compare_worker_{side}.log")
            t0 = time.perf_counter()
            info[side] = workers[side].ask(cmd="setup", config=cfg,
                                           outputs=str(out_dir / f"compare_outputs_{side}.npz"))
            print(f"  {side} ({checkouts[side]}, {git_describe(checkouts[side])}): "
                  f"compiled and called {len(info[side]['labels'])} cases in "
                  f"{time.perf_counter() - t0:.0f} s", flush=True)
        labels = info["before"]["labels"]
        if labels.keys() != info["after"]["labels"].keys():
            raise RuntimeError("the two sides built different cases")

        samples = {c: {s: [] for s in SIDES} for c in labels}  # per request: wall s per call
        cpu = {c: {s: [] for s in SIDES} for c in labels}  # per request: the worker's CPU s / call
        load = {c: {s: [0.0, 0.0] for s in SIDES} for c in labels}  # foreign CPU s, wall s

        def request(side: str, case: str, calls: int) -> list[float]:
            busy0, own0, t0 = _common._machine_busy_s(), time.process_time(), time.perf_counter()
            reply = workers[side].ask(cmd="time", case=case, calls=calls)
            wall = time.perf_counter() - t0
            foreign = (_common._machine_busy_s() - busy0 - reply["cpu_s"]
                       - (time.process_time() - own0))
            load[case][side][0] += foreign
            load[case][side][1] += wall
            cpu[case][side].append(reply["cpu_s"] / calls)
            return reply["times"]

        # -- calls per request, from one call on each side (not counted)
        calls = {}
        for case in labels:
            one = [request(s, case, 1)[0] for s in SIDES]
            calls[case] = max(1, min(MAX_CALLS_PER_REQUEST,
                                     math.ceil(TARGET_REQUEST_S / max(statistics.mean(one), 1e-9))))
        for case in labels:  # the calibration calls do not count
            load[case].update({s: [0.0, 0.0] for s in SIDES})
            cpu[case].update({s: [] for s in SIDES})

        # -- interleaved rounds
        t_rounds = time.perf_counter()
        for r in range(rounds):
            if args.max_wait > 0:
                _common.wait_for_quiet(args.max_wait)
            for i, case in enumerate(labels):
                order = SIDES if (r + i) % 2 == 0 else SIDES[::-1]
                for side in order:
                    samples[case][side].append(request(side, case, calls[case]))
            print(f"  round {r + 1}/{rounds} done ({time.perf_counter() - t_rounds:.0f} s)",
                  flush=True)
        changed = {s: workers[s].ask(cmd="repeatable")["changed"] for s in SIDES}
    finally:
        for w in workers.values():
            w.close()

    # -- compare and report
    outputs = {s: load_outputs(out_dir / f"compare_outputs_{s}.npz") for s in SIDES}
    rows = []
    for case, label in labels.items():
        same, note = compare_outputs(outputs["before"][case], outputs["after"][case])
        for s in SIDES:
            if case in changed[s]:
                note = (note + "; " if note else "") + f"{s} not repeatable run to run"
        every = {s: [t for req in samples[case][s] for t in req] for s in SIDES}
        med = {s: statistics.median(every[s]) for s in SIDES}
        low = {s: min(every[s]) for s in SIDES}
        per_round = [statistics.median(a) / statistics.median(b)
                     for a, b in zip(samples[case]["after"], samples[case]["before"], strict=True)]
        bg = max(load[case][s][0] / load[case][s][1] for s in SIDES)
        rows.append({
            "case": case, "problem": label, "identical": same, "note": note,
            "calls": len(every["before"]),
            "before_median_s": med["before"], "after_median_s": med["after"],
            "ratio_median": med["after"] / med["before"],
            "ratio_rounds_lo": min(per_round), "ratio_rounds_hi": max(per_round),
            "before_min_s": low["before"], "after_min_s": low["after"],
            "ratio_min": low["after"] / low["before"],
            "ratio_cpu": statistics.median(cpu[case]["after"])
            / statistics.median(cpu[case]["before"]),
            "bg_cores": max(0.0, bg),
            "first_call_before_s": info["before"]["first_call"][case],
            "first_call_after_s": info["after"]["first_call"][case],
        })

    fmt = _common.fmt_time
    lines = [
        "# shoal: before vs after, one session",
        "",
        f"- date: {started}; machine: {_common.cpu_model()}, {os.cpu_count()} logical CPUs "
        f"({_common.usable_cpus()} usable); load average at start {load_start}, "
        f"at end {_common.load_average()}",
    ]
    for s in SIDES:
        i = info[s]
        lines.append(f"- {s}: `{checkouts[s]}` at {git_describe(checkouts[s])} (shoal "
                     f"{i['version']} from `{i['shoal']}`; jax {i['jax']}, python {i['python']})")
    lines += [
        f"- sizes: {json.dumps({k: v for k, v in cfg.items() if k != 'problems'})}; {rounds} "
        "rounds, before and after interleaved; SHOAL_CACHE_DIR "
        f"`{cache}`{' (one subfolder per side)' if args.separate_caches else ' (shared)'}",
        f"- command: `{' '.join([os.path.basename(sys.executable), *sys.argv])}`",
        *(f"- **WARNING**: {w}" for w in warnings),
        "",
        "| problem | before median | after median | after/before | before min | after min "
        "| min after/before | CPU after/before | bg | bit-identical |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        ident = "yes" if r["identical"] else "NO"
        if r["note"]:
            ident += f" ({r['note']})"
        lines.append(
            f"| {r['problem']} | {fmt(r['before_median_s'])} | {fmt(r['after_median_s'])} | "
            f"{fmt_ratio(r['ratio_median'])} ({r['ratio_rounds_lo']:.2f}-"
            f"{r['ratio_rounds_hi']:.2f}) | {fmt(r['before_min_s'])} | "
            f"{fmt(r['after_min_s'])} | {fmt_ratio(r['ratio_min'])} | "
            f"{fmt_ratio(r['ratio_cpu'])} | {r['bg_cores']:.2f} | "
            f"{ident} |"
        )
    ratios = [r["ratio_median"] for r in rows]
    all_same = all(r["identical"] for r in rows)
    lines += [
        "",
        f"Per-call wall times over {rounds} rounds ({min(r['calls'] for r in rows)}"
        f"-{max(r['calls'] for r in rows)} calls per case and side), compile and first call "
        "excluded. after/before: ratio of the medians; in brackets the lowest and highest ratio "
        "of one round's medians, a measure of the noise. CPU after/before: the same for the "
        "median CPU time per call of the worker process (all its threads), which other load "
        "disturbs less than wall time. bg: cores used by other processes "
        "during the timed calls (the larger of the two sides; a row with bg well above 0 is a "
        "noisy measurement). bit-identical: every output (ys or loss and gradient, and the "
        "accepted/rejected/status stats) has the same dtype, shape and bytes.",
        "",
        f"**Summary: {'all' if all_same else 'NOT all'} outputs bit-identical; after/before "
        f"median time ratios {min(ratios):.3f} to {max(ratios):.3f} "
        f"(geometric mean {math.exp(statistics.mean(math.log(x) for x in ratios)):.3f}).**",
    ]
    text = "\n".join(lines) + "\n"
    print()
    print(text)
    (out_dir / "compare_revisions.md").write_text(text)
    (out_dir / "compare_revisions.json").write_text(json.dumps(
        {"config": cfg, "rounds": rounds, "checkouts": {s: str(p) for s, p in checkouts.items()},
         "workers": info, "rows": rows, "wall_s_per_call": samples,
         "cpu_s_per_call": cpu}, indent=1))
    print(f"wrote {out_dir / 'compare_revisions.md'} and compare_revisions.json")
    return 0 if all_same else 1


if __name__ == "__main__":
    sys.exit(main())
