"""GPU ensembles: shoal (Tsit5, Rodas5P fp64/fp32 LU) versus diffrax on the same device.

Cases (``--problem seed``, the default: the ODE seed's published GPU benchmark, so its figures
in /work/shared/ANCHORS.md can be set beside ours; rtol 1e-6, atol 1e-8, first step 1e-4):

* Lorenz, Tsit5: σ = 10, ρ = 0.5, β = 8/3 for every trajectory, y0 = (1000, −500, 500),
  t ∈ [0, 5], saves at t = 0 and 5. diffrax: Tsit5.
* Robertson, Rodas5P with lu_precision "fp64" and "fp32": y1' = −k1 y1 + k3 y2 y3,
  y3' = k2 y2², k = (k1, k2, k3) = (0.04, 3e7, 1e4) (the seed's p = [0.04, 1e4, 3e7] in its own
  order), y0 = (0.891, 0.1, 0.009), saves at 0, 1e-6, 1e-2, 1e2, 1e5. diffrax: Kvaerno5.

``--problem repo`` runs the CPU benchmarks' problems instead (benchmarks/lorenz_tsit5.py: ρ =
linspace(0, 21, N), y0 = (1, 0, 0), t ∈ [0, 1], rtol = atol = 1e-8, first step 1e-6;
benchmarks/robertson_rodas5p.py: k1 = 0.04·(1 ± 5 %), y0 = (1, 0, 0), 21 saves to 1e5, rtol 1e-6,
atol 1e-10, first step 1e-6); the seed's figures do not apply to those.

Both solvers get the same right-hand side (one jax.numpy function), the same per-trajectory
parameter array (N, 3), tolerances, first step, PID gains (0, 1, 0: the integral controller) and
step-attempt limit. shoal: ``jax.jit(shoal.ode.solve)`` over the ensemble; diffrax:
``jax.jit(jax.vmap(diffeqsolve))`` with ``PIDController`` and ``SaveAt(ts=t_span)``. Inputs are
committed to the device beforehand. Time = median (and min) of --repeats calls after one warm-up
call (whose time, "first", includes tracing and compilation: NVRTC for shoal on a GPU, XLA for
diffrax), each call timed with time.perf_counter around the call and jax.block_until_ready.

Budget: diffrax at a size is skipped when its warm-up plus one timed call, extrapolated linearly
in N from the previous size, would exceed --budget seconds (and its repeats are cut to fit); the
output says so. --deadline stops starting new measurements after that many seconds in total.

Accuracy ("err"): max over the saves after t0 and the 3 components of |y − ref| / (|ref| + atol)
("abs err": of |y − ref|; the seed Lorenz case ends near 1e-4 after starting at 1e3, so there
"err" is large while "abs err" is ~1e-9 of the initial scale) on --ref-trajectories evenly
spaced trajectories (the same ones for both solvers); ref from SciPy
(DOP853 at rtol = atol = 1e-13 for Lorenz; Radau at rtol 1e-12 with the analytic Jacobian,
restarted at every save, for Robertson). A failed trajectory counts as an infinite error.

Prints a table per case, and at the end one line per (case, variant) at the largest size run,
starting with ``HEADLINE`` (scripts/gpu_check.sh copies those into its summary). Writes
benchmarks/results/gpu_bench.csv (or --out-dir).

    python3 benchmarks/gpu_bench.py                               # GPU, N = 1e3, 1e4, 1e5
    python3 benchmarks/gpu_bench.py --sizes 1000,10000 --skip-diffrax
    PYTHONPATH=. .venv/bin/python benchmarks/gpu_bench.py --device cpu --sizes 100 --repeats 2
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import _common  # noqa: I001 - puts the repository root on sys.path before shoal is imported
import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from scipy.integrate import solve_ivp  # noqa: E402

import shoal.ode  # noqa: E402

GAINS = {"pcoeff": 0.0, "icoeff": 1.0, "dcoeff": 0.0}
MAX_STEPS = 100_000

# The seed's own figures (ms; NVIDIA RTX 4070 SUPER; /work/shared/ANCHORS.md), by N.
SEED_MS = {
    ("lorenz", "tsit5"): {1000: 3.25, 10_000: 10.4, 100_000: 86.3},
    ("robertson", "fp32"): {1000: 1.30, 10_000: 4.07, 100_000: 36.0},
    ("robertson", "fp64"): {1000: 1.87, 10_000: 4.97, 100_000: 45.6},
}
SEED_DIFFRAX_MS = {
    "lorenz": {1000: 105.0, 10_000: 136.0, 100_000: 453.0},
    "robertson": {1000: 925.0, 10_000: 1241.0, 100_000: 4695.0},
}


def lorenz(y, t, p):
    """p = (σ, ρ, β)."""
    return jnp.stack([p[0] * (y[1] - y[0]), y[0] * (p[1] - y[2]) - y[1], y[0] * y[1] - p[2] * y[2]])


def robertson(y, t, p):
    """p = (k1, k2, k3): y1' = −k1 y1 + k3 y2 y3, y3' = k2 y2², y2' = −y1' − y3'."""
    r1 = p[0] * y[0]
    r2 = p[1] * y[1] * y[1]
    r3 = p[2] * y[1] * y[2]
    return jnp.stack([-r1 + r3, r1 - r2 - r3, r2])


def _lorenz_np(p):
    def f(t, y):
        return [p[0] * (y[1] - y[0]), y[0] * (p[1] - y[2]) - y[1], y[0] * y[1] - p[2] * y[2]]
    return f


def _robertson_np(p):
    k1, k2, k3 = p

    def f(t, y):
        r1, r2, r3 = k1 * y[0], k2 * y[1] * y[1], k3 * y[1] * y[2]
        return [-r1 + r3, r1 - r2 - r3, r2]

    def jac(t, y):
        return [[-k1, k3 * y[2], k3 * y[1]],
                [k1, -k3 * y[2] - 2 * k2 * y[1], -k3 * y[1]],
                [0.0, 2 * k2 * y[1], 0.0]]

    return f, jac


@dataclass
class Case:
    name: str  # "lorenz" | "robertson"
    rhs: object
    y0: np.ndarray
    t_span: np.ndarray
    rtol: float
    atol: float
    first_step: float
    params: object  # N -> (N, 3)
    variants: list[str]  # shoal: "tsit5" | "fp64" | "fp32"
    diffrax_solver: str
    description: str
    _ref: dict = field(default_factory=dict)

    def reference(self, p: np.ndarray) -> np.ndarray:
        key = tuple(p.tolist())
        if key in self._ref:
            return self._ref[key]
        if self.name == "lorenz":
            sol = solve_ivp(_lorenz_np(p), (self.t_span[0], self.t_span[-1]), self.y0,
                            method="DOP853", rtol=1e-13, atol=1e-13, t_eval=self.t_span)
            if not sol.success:
                raise RuntimeError(f"reference failed: {sol.message}")
            ref = sol.y.T
        else:
            f, jac = _robertson_np(p)
            out = [self.y0.copy()]
            for a, b in zip(self.t_span[:-1], self.t_span[1:], strict=True):
                sol = solve_ivp(f, (a, b), out[-1], method="Radau", rtol=1e-12,
                                atol=[1e-16, 1e-20, 1e-16], jac=jac,
                                first_step=min(1e-10, (b - a) / 10))
                if not sol.success:
                    raise RuntimeError(f"reference failed: {sol.message}")
                out.append(sol.y[:, -1])
            ref = np.array(out)
        self._ref[key] = ref
        return ref


def make_cases(problem: str) -> dict[str, Case]:
    if problem == "seed":
        return {
            "lorenz": Case(
                "lorenz", lorenz, np.array([1000.0, -500.0, 500.0]), np.array([0.0, 5.0]),
                1e-6, 1e-8, 1e-4, lambda n: np.tile([10.0, 0.5, 8.0 / 3.0], (n, 1)),
                ["tsit5"], "Tsit5",
                "seed Lorenz: sigma 10, rho 0.5, beta 8/3, y0 (1000,-500,500), t [0,5], "
                "rtol 1e-6, atol 1e-8, first step 1e-4"),
            "robertson": Case(
                "robertson", robertson, np.array([0.891, 0.1, 0.009]),
                np.array([0.0, 1e-6, 1e-2, 1e2, 1e5]), 1e-6, 1e-8, 1e-4,
                lambda n: np.tile([0.04, 3e7, 1e4], (n, 1)), ["fp64", "fp32"], "Kvaerno5",
                "seed Robertson: k (0.04, 3e7, 1e4), y0 (0.891,0.1,0.009), saves 0,1e-6,1e-2,"
                "1e2,1e5, rtol 1e-6, atol 1e-8, first step 1e-4"),
        }
    if problem == "repo":
        def lorenz_p(n):
            return np.stack([np.full(n, 10.0), np.linspace(0.0, 21.0, n),
                             np.full(n, 8.0 / 3.0)], axis=1)

        def robertson_p(n):
            k1 = np.array([0.04]) if n == 1 else 0.04 * (1.0 + 0.05 * np.linspace(-1, 1, n))
            return np.stack([k1, np.full(n, 3e7), np.full(n, 1e4)], axis=1)

        return {
            "lorenz": Case(
                "lorenz", lorenz, np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0]), 1e-8, 1e-8,
                1e-6, lorenz_p, ["tsit5"], "Tsit5",
                "repo Lorenz (benchmarks/lorenz_tsit5.py): rho linspace(0,21,N), t [0,1], "
                "rtol = atol = 1e-8"),
            "robertson": Case(
                "robertson", robertson, np.array([1.0, 0.0, 0.0]),
                np.concatenate([[0.0], np.logspace(-6.0, 5.0, 20)]), 1e-6, 1e-10, 1e-6,
                robertson_p, ["fp64", "fp32"], "Kvaerno5",
                "repo Robertson (benchmarks/robertson_rodas5p.py): k1 0.04 +-5 %, 21 saves, "
                "rtol 1e-6, atol 1e-10"),
        }
    raise ValueError(f"unknown problem {problem!r}")


# -- solvers -----------------------------------------------------------------------------------


def make_shoal(case: Case, variant: str):
    """jit: (y0 (3,), t_span, p (N, 3)) -> (ys (N, n_save, 3), attempts (N,), status (N,))."""
    method = "tsit5" if variant == "tsit5" else "rodas5p"
    extra = {} if variant == "tsit5" else {"lu_precision": variant}

    def run(y0, t_span, p):
        ys, stats = shoal.ode.solve(case.rhs, y0, t_span, p, method=method, rtol=case.rtol,
                                    atol=case.atol, first_step=case.first_step,
                                    max_steps=MAX_STEPS, return_stats=True, **GAINS, **extra)
        return ys, stats["accepted"] + stats["rejected"], stats["status"]

    return jax.jit(run)


def make_diffrax(case: Case):
    import diffrax

    term = diffrax.ODETerm(lambda t, y, args: case.rhs(y, t, args))
    solver = getattr(diffrax, case.diffrax_solver)()
    controller = diffrax.PIDController(rtol=case.rtol, atol=case.atol, **GAINS)
    t0, t1 = float(case.t_span[0]), float(case.t_span[-1])

    def one(y0, t_span, p):
        sol = diffrax.diffeqsolve(term, solver, t0=t0, t1=t1, dt0=case.first_step, y0=y0,
                                  args=p, stepsize_controller=controller,
                                  saveat=diffrax.SaveAt(ts=t_span), max_steps=MAX_STEPS,
                                  throw=False)
        failed = (sol.result != diffrax.RESULTS.successful).astype(jnp.int32)
        return sol.ys, sol.stats["num_steps"], failed

    return jax.jit(jax.vmap(one, in_axes=(None, None, 0)))


# -- measurement -------------------------------------------------------------------------------


def error_of(case: Case, ys: np.ndarray, params: np.ndarray, idx: np.ndarray):
    """(max |y - ref| / (|ref| + atol), max |y - ref|) over saves after t0, components and the
    sampled trajectories; NaN counts as infinite."""
    worst, worst_abs = 0.0, 0.0
    for m in idx:
        ref = case.reference(params[m])
        diff = np.abs(ys[m, 1:] - ref[1:])
        diff = np.where(np.isnan(diff), np.inf, diff)
        worst = max(worst, float(np.max(diff / (np.abs(ref[1:]) + case.atol))))
        worst_abs = max(worst_abs, float(np.max(diff)))
    return worst, worst_abs


def measure(fn, args, repeats: int) -> dict:
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    first = time.perf_counter() - t0
    times = _common.time_calls(lambda: jax.block_until_ready(fn(*args)), repeats)
    return {"first_s": first, "median_s": _common.median(times), "min_s": min(times),
            "repeats": repeats, "out": jax.tree.map(np.asarray, out)}


def fmt_ms(seconds) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "-"
    return f"{seconds * 1e3:.3g}"


def pick_device(kind: str):
    if kind == "cpu":
        return jax.devices("cpu")[0]
    for backend in ("cuda", "gpu"):
        try:
            return jax.devices(backend)[0]
        except RuntimeError:
            continue
    sys.exit("gpu_bench: no GPU visible to JAX (jax.devices('cuda') is empty); use --device cpu "
             "for a plumbing run")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=["gpu", "cpu"], default="gpu")
    ap.add_argument("--problem", choices=["seed", "repo"], default="seed")
    ap.add_argument("--cases", default="lorenz,robertson")
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--skip-diffrax", action="store_true")
    ap.add_argument("--budget", type=float, default=30.0,
                    help="seconds allowed for diffrax per size (warm-up + timed calls)")
    ap.add_argument("--deadline", type=float, default=math.inf,
                    help="start no new measurement after this many seconds")
    ap.add_argument("--ref-trajectories", type=int, default=4)
    ap.add_argument("--out-dir", type=Path, default=_common.RESULTS)
    args = ap.parse_args(argv)

    start = time.perf_counter()
    device = pick_device(args.device)
    sizes = [int(float(s)) for s in args.sizes.split(",") if s]
    cases = make_cases(args.problem)
    names = [c for c in args.cases.split(",") if c]
    for name in names:
        if name not in cases:
            ap.error(f"unknown case {name!r}; choose from {', '.join(cases)}")

    extra = {"device": f"{device} ({device.device_kind})", "problem": args.problem,
             "sizes": ",".join(map(str, sizes)), "repeats": str(args.repeats)}
    try:
        import diffrax
        extra["diffrax"] = diffrax.__version__
    except ImportError:
        extra["diffrax"] = "not installed (skipped)"
        args.skip_diffrax = True
    for line in _common.header_lines(extra):
        print(line)
    print(flush=True)

    rows: list[dict] = []
    notes: list[str] = []
    # Sizes outer, cases inner: when --deadline cuts the run short, every case has its smaller
    # sizes measured.
    for name in names:
        print(f"{name}: {cases[name].description}")
    hdr = (f"{'case':<10} {'N':>7} {'solver':<16} {'first ms':>9} {'median ms':>10} "
           f"{'min ms':>9} {'steps':>7} {'fail':>5} {'err':>9} {'abs err':>9} "
           f"{'diffrax/shoal':>13} {'seed ms':>8}")
    print()
    print(hdr)
    print("-" * len(hdr), flush=True)
    shoal_fns = {name: {v: make_shoal(cases[name], v) for v in cases[name].variants}
                 for name in names}
    diffrax_fns = {name: None if args.skip_diffrax else make_diffrax(cases[name])
                   for name in names}
    prev_diffrax: dict[str, tuple] = {}  # case -> (N, first_s, median_s) at the previous size
    for n in sizes:
        for name in names:
            case = cases[name]
            if time.perf_counter() - start > args.deadline:
                note = f"{name} N={n}: not run (--deadline {args.deadline:g} s reached)"
                notes.append(note)
                print(f"{name:<10} {n:>7} not run: --deadline {args.deadline:g} s reached",
                      flush=True)
                continue
            params = case.params(n)
            dev_args = jax.device_put((case.y0, case.t_span, params), device)
            idx = _common.subsample(n, args.ref_trajectories)
            with jax.default_device(device):
                results = {variant: measure(fn, dev_args, args.repeats)
                           for variant, fn in shoal_fns[name].items()}
                d_res, d_note = None, None
                if diffrax_fns[name] is not None:
                    repeats = args.repeats
                    skip = False
                    if name in prev_diffrax:
                        n0, first0, med0 = prev_diffrax[name]
                        per_call = med0 * n / n0
                        warm = max(first0 - med0, 0.0) + per_call
                        if warm + per_call > args.budget:
                            skip = True
                            d_note = (f"diffrax {name} skipped at N={n}: warm-up + 1 call "
                                      f"estimated {warm + per_call:.1f} s > --budget "
                                      f"{args.budget:g} s (linear extrapolation from N={n0}: "
                                      f"{med0 * 1e3:.3g} ms per call)")
                        elif int((args.budget - warm) / per_call) < repeats:
                            repeats = max(int((args.budget - warm) / per_call), 1)
                            d_note = (f"diffrax {name} at N={n}: {repeats} timed call(s) "
                                      f"instead of {args.repeats} to stay within --budget "
                                      f"{args.budget:g} s (extrapolated from N={n0})")
                    if not skip:
                        d_res = measure(diffrax_fns[name], dev_args, repeats)
                        prev_diffrax[name] = (n, d_res["first_s"], d_res["median_s"])
                    if d_note:
                        notes.append(d_note)
            new_rows = []
            for variant, res in results.items():
                ys, attempts, status = res["out"]
                seed = SEED_MS.get((name, variant), {}).get(n) if args.problem == "seed" else None
                new_rows.append({
                    "case": name, "problem": args.problem, "n": n, "solver": f"shoal {variant}",
                    "first_ms": res["first_s"] * 1e3, "median_ms": res["median_s"] * 1e3,
                    "min_ms": res["min_s"] * 1e3, "repeats": res["repeats"],
                    "mean_steps": float(np.mean(attempts)),
                    "failed": int(np.sum(status != 0)),
                    **dict(zip(("err", "abs_err"), error_of(case, ys, params, idx),
                               strict=True)),
                    "diffrax_over_shoal": (d_res["median_s"] / res["median_s"]) if d_res
                    else float("nan"),
                    "seed_ms": seed if seed is not None else float("nan"),
                    "device": str(device),
                })
            if d_res is not None:
                ys, steps, failed = d_res["out"]
                seed = SEED_DIFFRAX_MS.get(name, {}).get(n) if args.problem == "seed" else None
                new_rows.append({
                    "case": name, "problem": args.problem, "n": n,
                    "solver": f"diffrax {case.diffrax_solver}",
                    "first_ms": d_res["first_s"] * 1e3, "median_ms": d_res["median_s"] * 1e3,
                    "min_ms": d_res["min_s"] * 1e3, "repeats": d_res["repeats"],
                    "mean_steps": float(np.mean(steps)), "failed": int(np.sum(failed)),
                    **dict(zip(("err", "abs_err"), error_of(case, ys, params, idx),
                               strict=True)),
                    "diffrax_over_shoal": float("nan"),
                    "seed_ms": seed if seed is not None else float("nan"),
                    "device": str(device),
                })
            rows += new_rows
            for row in new_rows:
                ratio = row["diffrax_over_shoal"]
                print(f"{name:<10} {n:>7} {row['solver']:<16} "
                      f"{fmt_ms(row['first_ms'] / 1e3):>9} "
                      f"{fmt_ms(row['median_ms'] / 1e3):>10} {fmt_ms(row['min_ms'] / 1e3):>9} "
                      f"{row['mean_steps']:>7.1f} {row['failed']:>5} {row['err']:>9.2e} "
                      f"{row['abs_err']:>9.2e} "
                      f"{(f'{ratio:.1f}x' if math.isfinite(ratio) else '-'):>13} "
                      f"{fmt_ms(row['seed_ms'] / 1e3):>8}", flush=True)
            if d_note:
                print(f"{'':<10} note: {d_note}", flush=True)
            if args.out_dir:  # written after every size: a killed run keeps what it measured
                _common.write_csv(args.out_dir / "gpu_bench.csv", rows)
    print()

    if args.problem == "seed":
        print("seed ms: the seed's published times on an NVIDIA RTX 4070 SUPER (different "
              "hardware; /work/shared/ANCHORS.md); its diffrax rows are the seed's diffrax runs.")
    print("first ms: the warm-up call (tracing + compilation; shoal's model compile is cached "
          "on disk, so only a cold cache pays it).")
    for note in notes:
        print(f"note: {note}")
    # One headline per (case, variant) at the largest N measured; where diffrax did not run
    # there, its ratio at the largest N where it did.
    for name in names:
        case_rows = [r for r in rows if r["case"] == name and r["solver"].startswith("shoal")]
        if not case_rows:
            continue
        n_max = max(r["n"] for r in case_rows)
        for r in (r for r in case_rows if r["n"] == n_max):
            line = (f"HEADLINE {name} {r['solver']} N={n_max}: {r['median_ms']:.3g} ms, "
                    f"err {r['err']:.1e} (abs {r['abs_err']:.1e}), fail {r['failed']}")
            both = [q for q in case_rows if q["solver"] == r["solver"]
                    and math.isfinite(q["diffrax_over_shoal"])]
            if both:
                q = max(both, key=lambda q: q["n"])
                d = next(x for x in rows if x["case"] == name and x["n"] == q["n"]
                         and x["solver"].startswith("diffrax"))
                at = "" if q["n"] == n_max else f" at N={q['n']} (not run at N={n_max})"
                line += (f"; diffrax {d['median_ms']:.4g} ms{at} (err {d['err']:.1e}), "
                         f"diffrax/shoal {q['diffrax_over_shoal']:.1f}x")
            else:
                line += "; diffrax not run"
            if math.isfinite(r["seed_ms"]):
                line += f"; seed {r['seed_ms']:g} ms (RTX 4070 SUPER)"
            print(line + f" [{device.platform}]")
    print(f"total {time.perf_counter() - start:.1f} s; CSV: {args.out_dir / 'gpu_bench.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
