"""Multi-dose pharmacokinetics with short infusions: shoal versus diffrax at matched error.

Problem: a two-compartment model with intravenous infusions, amounts in mg, time in h::

    A1' = R(t) - (CL + Q)/V1 A1 + Q/V2 A2,    A2' = Q/V1 A1 - Q/V2 A2,    C = A1 / V1,

N = 10^4 patients with CL, V1, Q, V2 log-normal around (5 L/h, 50 L, 10 L/h, 100 L), 30 % CV each,
fixed seed; 100 mg infused over 0.1 h every 12 h from t = 0 for 7 days (14 doses, R0 = 1000
mg/h), written in the right-hand side as ``jnp.where(jnp.mod(t, 12) < 0.1, R0, 0)``; 100 save
times over [0, 168 h]; float64; atol = 1e-3 rtol (amounts are ~1-100 mg).

The window boundaries are discontinuities of f in t. Both solvers are told where they are:

* shoal: ``jax.jit`` of ``shoal.ode.solve(f, y0, t_save, params, method=..., rtol, atol,
  tstops=<27 window starts and ends>, return_stats=True)`` over the whole ensemble, Tsit5 (the
  headline: the problem is not stiff) and Rodas5P.
* diffrax: ``jax.jit(jax.vmap(diffeqsolve))`` with ``Tsit5()`` (optionally ``Kvaerno5()``),
  ``ClipStepSizeController(PIDController(rtol, atol, pcoeff=0, icoeff=1, dcoeff=0),
  jump_ts=<the same 27 times>)`` (in diffrax >= 0.7 jump_ts lives on ClipStepSizeController),
  ``SaveAt(ts=t_save)``, dt0 = 1e-6 * 168 h (shoal's default first step), the same step limit.
  rtol and atol are traced arguments, so one compilation serves the whole sweep.

Each is swept over ``--tols``; every call is timed after a compiling first call, the minimum of
``--repeats`` calls interleaved across solvers. Achieved error: the max over ``--ref`` evenly
spaced patients and the saves after t = 0 of |C - C_ref| / C_ref, against SciPy DOP853 at
rtol 1e-12, atol 1e-14 restarted at every window boundary (itself checked against the matrix
exponential of the linear system, printed). Then, at matched achieved error, the time ratio
(diffrax time interpolated in log-log at each shoal point's error, inside diffrax's measured
range). Also printed: the error of both solvers *without* the stops (the 0.1 h windows are
stepped over; see tests/ode/test_pk_dosing.py).

Writes benchmarks/results/pk_dosing.csv.

    PYTHONPATH=. .venv/bin/python benchmarks/pk_dosing.py               # N = 10^4, full sweep
    PYTHONPATH=. .venv/bin/python benchmarks/pk_dosing.py --smoke       # tiny, for CI
    PYTHONPATH=. .venv/bin/python benchmarks/pk_dosing.py --solvers diffrax-tsit5   # no shoal
"""

from __future__ import annotations

import argparse
import math
import os
import time
from pathlib import Path

import _common  # noqa: I001 - puts the repository root on sys.path before shoal is imported
import jax

jax.config.update("jax_enable_x64", True)

import diffrax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import scipy.linalg  # noqa: E402
from scipy.integrate import solve_ivp  # noqa: E402

TAU, TINF, DOSE = 12.0, 0.1, 100.0  # interval (h), infusion duration (h), dose (mg)
R0 = DOSE / TINF
T_END = 7 * 24.0
N_DOSES = int(T_END // TAU)  # 14, at 0, 12, ..., 156 h
TYPICAL = np.array([5.0, 50.0, 10.0, 100.0])  # CL (L/h), V1 (L), Q (L/h), V2 (L)
CV = 0.30
FIRST_STEP = 1e-6 * T_END  # shoal's default first step; diffrax's dt0
MAX_STEPS = 100_000
ATOL_OVER_RTOL = 1e-3
REF_TOL = dict(rtol=1e-12, atol=1e-14)
GAINS = dict(pcoeff=0.0, icoeff=1.0, dcoeff=0.0)  # shoal's default integral controller
SOLVERS = ("shoal-tsit5", "shoal-rodas5p", "diffrax-tsit5", "diffrax-kvaerno5")
BG_OK = 0.25


def rhs(y, t, p):
    """The right-hand side, shared verbatim by shoal and diffrax; p = (CL, V1, Q, V2)."""
    rate = jnp.where(jnp.mod(t, TAU) < TINF, R0, 0.0)
    k10, k12, k21 = p[0] / p[1], p[2] / p[1], p[2] / p[3]
    return jnp.stack([rate - (k10 + k12) * y[0] + k21 * y[1], k12 * y[0] - k21 * y[1]])


def window_stops() -> np.ndarray:
    """Every window start and end inside (0, T_END): 13 starts (t = 0 is the initial time) and
    14 ends."""
    starts = TAU * np.arange(N_DOSES)
    stops = np.concatenate([starts, starts + TINF])
    return np.sort(stops[(stops > 0) & (stops < T_END)])


def patients(n: int, seed: int = 0) -> np.ndarray:
    """(n, 4) log-normal parameters with the given CV and the typical values as medians."""
    sigma = math.sqrt(math.log1p(CV**2))
    rng = np.random.default_rng(seed)
    return TYPICAL * np.exp(sigma * rng.standard_normal((n, 4)))


# -- reference -------------------------------------------------------------------------------


def _segments(t_save):
    edges = np.unique(np.concatenate([[0.0, T_END], window_stops()]))
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        rate = R0 if (0.5 * (a + b)) % TAU < TINF else 0.0
        yield a, b, rate, (t_save > a) & (t_save <= b)


def reference(p, t_save) -> np.ndarray:
    """C at t_save (n_save,) for one patient: DOP853 restarted at every window boundary."""
    cl, v1, q, v2 = p
    k10, k12, k21 = cl / v1, q / v1, q / v2
    y, out = np.zeros(2), np.zeros(t_save.size)
    for a, b, rate, sel in _segments(t_save):

        def f(t, z, rate=rate):
            return [rate - (k10 + k12) * z[0] + k21 * z[1], k12 * z[0] - k21 * z[1]]

        sol = solve_ivp(f, (a, b), y, method="DOP853", dense_output=True, **REF_TOL)
        if sel.any():
            out[sel] = sol.sol(t_save[sel])[0] / v1
        y = sol.y[:, -1]
    return out


def exact(p, t_save) -> np.ndarray:
    """The same by the matrix exponential (the system is linear, the rate piecewise constant)."""
    cl, v1, q, v2 = p
    k10, k12, k21 = cl / v1, q / v1, q / v2
    y, out = np.zeros(2), np.zeros(t_save.size)
    for a, b, rate, sel in _segments(t_save):
        aug = np.array([[-(k10 + k12), k21, rate], [k12, -k21, 0.0], [0.0, 0.0, 0.0]])
        z = np.append(y, 1.0)
        for j in np.flatnonzero(sel):
            out[j] = (scipy.linalg.expm(aug * (t_save[j] - a)) @ z)[0] / v1
        y = (scipy.linalg.expm(aug * (b - a)) @ z)[:2]
    return out


# -- solvers ---------------------------------------------------------------------------------


def make_shoal(method, rtol, t_save, stops):
    """``params (N, 4) -> (C (N, n_save), attempts (N,), status (N,))``, jitted."""
    import shoal.ode

    y0 = jnp.zeros(2)
    t_save = jnp.asarray(t_save)
    kw = {} if stops is None else {"tstops": jnp.asarray(stops)}

    def run(p):
        ys, stats = shoal.ode.solve(
            rhs,
            y0,
            t_save,
            p,
            method=method,
            rtol=rtol,
            atol=ATOL_OVER_RTOL * rtol,
            return_stats=True,
            **GAINS,
            **kw,
        )
        return ys[..., 0] / p[:, 1:2], stats["accepted"] + stats["rejected"], stats["status"]

    return jax.jit(run)


def make_diffrax(name, t_save, stops):
    """``(params (N, 4), rtol, atol) -> (C, attempts, status)``, jitted; rtol/atol traced."""
    solver = {"tsit5": diffrax.Tsit5(), "kvaerno5": diffrax.Kvaerno5()}[name]
    term = diffrax.ODETerm(lambda t, y, p: rhs(y, t, p))
    saveat = diffrax.SaveAt(ts=jnp.asarray(t_save))

    def one(p, rtol, atol):
        ctrl = diffrax.PIDController(rtol=rtol, atol=atol, **GAINS)
        if stops is not None:
            ctrl = diffrax.ClipStepSizeController(ctrl, jump_ts=jnp.asarray(stops))
        sol = diffrax.diffeqsolve(
            term,
            solver,
            0.0,
            T_END,
            FIRST_STEP,
            jnp.zeros(2),
            args=p,
            saveat=saveat,
            stepsize_controller=ctrl,
            max_steps=MAX_STEPS,
            throw=False,
        )
        attempts = sol.stats["num_accepted_steps"] + sol.stats["num_rejected_steps"]
        failed = jnp.where(sol.result == diffrax.RESULTS.successful, 0, 1)
        return sol.ys[:, 0] / p[1], attempts, failed

    return jax.jit(jax.vmap(one, in_axes=(0, None, None)))


def make_call(solver, rtol, t_save, stops, cache):
    """A no-argument callable returning (C, attempts, status) as NumPy, blocking."""
    family, name = solver.split("-", 1)
    if family == "shoal":
        fn = make_shoal(name, rtol, t_save, stops)
        return lambda p: fn(p)
    key = (name, stops is None)
    if key not in cache:
        cache[key] = make_diffrax(name, t_save, stops)
    fn = cache[key]
    return lambda p: fn(p, rtol, ATOL_OVER_RTOL * rtol)


def interp_loglog(x, xs, ys):
    """y at x on the log-log polyline through (xs, ys) (sorted by xs); NaN outside its range."""
    order = np.argsort(xs)
    lx, ly = np.log(np.asarray(xs)[order]), np.log(np.asarray(ys)[order])
    if not lx[0] <= math.log(x) <= lx[-1]:
        return float("nan")
    return float(np.exp(np.interp(math.log(x), lx, ly)))


def print_matched(rows, s, d):
    """Times at matched achieved error: at every measured point of either solver, the other's
    time interpolated (log-log) at that error, where it lies inside the other's measured range
    ('~' marks the interpolated time)."""
    pts = {
        k: [(r["err"], r["min_s"]) for r in rows if r["solver"] == k and r["err"] > 0]
        for k in (s, d)
    }
    if min(len(v) for v in pts.values()) < 2:
        return
    print(f"\nmatched achieved error: {s} vs {d}")
    print(f"{'error':>7} | {'shoal':>11} | {'diffrax':>11} | diffrax/shoal")
    lines = []
    for own, other in ((s, d), (d, s)):
        for e, t in pts[own]:
            t_other = interp_loglog(e, *zip(*pts[other], strict=True))
            if not math.isfinite(t_other):
                continue
            t_s, t_d = (t, t_other) if own == s else (t_other, t)
            mark_s, mark_d = (" ", "~") if own == s else ("~", " ")
            lines.append(
                (
                    e,
                    f"{e:>7.1e} | {mark_s}{_common.fmt_time(t_s):>10} | "
                    f"{mark_d}{_common.fmt_time(t_d):>10} | {t_d / t_s:.1f}x",
                )
            )
    for _, line in sorted(lines, reverse=True):
        print(line)
    if not lines:
        print("  (the two error ranges do not overlap: widen --tols)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000, help="patients (trajectories)")
    ap.add_argument("--saves", type=int, default=100)
    ap.add_argument("--tols", default="1e-5,1e-6,1e-7,1e-8,1e-9,1e-10", help="rtol sweep")
    ap.add_argument("--solvers", default="shoal-tsit5,shoal-rodas5p,diffrax-tsit5")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ref", type=int, default=40, help="patients checked against DOP853")
    ap.add_argument("--no-stops-rtol", type=float, default=1e-8)
    ap.add_argument("--max-wait", type=float, default=10.0, help="s to wait for a quiet machine")
    ap.add_argument("--smoke", action="store_true", help="N = 64, 2 tolerances, 1 repeat")
    ap.add_argument("--out-dir", default=str(_common.RESULTS))
    args = ap.parse_args(argv)
    if args.smoke:
        args.n, args.saves, args.repeats, args.ref = 64, 20, 1, 3
        args.tols, args.max_wait = "1e-6,1e-8", 0.0
    tols = [float(x) for x in args.tols.split(",") if x]
    solvers = [s for s in args.solvers.split(",") if s]
    for s in solvers:
        if s not in SOLVERS:
            raise SystemExit(f"unknown solver {s!r}; choose from {', '.join(SOLVERS)}")

    n = args.n
    t_save = np.linspace(0.0, T_END, args.saves)
    stops = window_stops()
    params = patients(n)
    p_j = jnp.asarray(params)
    for line in _common.header_lines(
        {
            "diffrax": diffrax.__version__,
            "patients": str(n),
            "saves": str(t_save.size),
            "doses": f"{N_DOSES} x {DOSE:g} mg over {TINF:g} h every {TAU:g} h; {stops.size} stops",
            "tolerances": f"rtol {args.tols}, atol = {ATOL_OVER_RTOL:g} rtol",
        }
    ):
        print(line)

    idx = _common.subsample(n, args.ref)
    t0 = time.perf_counter()
    c_ref = np.stack([reference(params[i], t_save) for i in idx])
    ref_s = time.perf_counter() - t0
    k = min(3, idx.size)
    c_exact = np.stack([exact(params[i], t_save) for i in idx[:k]])
    ref_check = float(np.max(np.abs(c_ref[:k, 1:] / c_exact[:, 1:] - 1.0)))
    print(
        f"reference: segmented DOP853 on {idx.size} patients in {ref_s:.2f} s "
        f"({ref_s / idx.size * 1e3:.0f} ms each); against the matrix exponential on {k}: "
        f"max rel diff {ref_check:.1e}",
        flush=True,
    )

    def err(c):
        return float(np.max(np.abs(np.asarray(c)[idx, 1:] / c_ref[:, 1:] - 1.0)))

    cache = {}
    rows = []
    for rtol in tols:
        calls, first = {}, {}
        results = {}
        for s in solvers:
            fn = make_call(s, rtol, t_save, stops, cache)
            t0 = time.perf_counter()
            c, att, status = jax.block_until_ready(fn(p_j))
            first[s] = time.perf_counter() - t0
            failed = int(np.sum(np.asarray(status) != 0))
            att = np.asarray(att)
            results[s] = (err(c), float(np.mean(att)), int(np.max(att)), failed)
            calls[s] = fn
        times = {s: [] for s in solvers}
        bg = _common.wait_for_quiet(args.max_wait) if args.max_wait > 0 else float("nan")
        with _common.ForeignLoad() as load:
            for _ in range(args.repeats):  # interleaved, so a load change hits every solver
                for s in solvers:
                    times[s] += _common.time_calls(
                        lambda f=calls[s]: jax.block_until_ready(f(p_j)), 1
                    )
        for s in solvers:
            e, att, att_max, failed = results[s]
            rows.append(
                {
                    "solver": s,
                    "rtol": rtol,
                    "atol": ATOL_OVER_RTOL * rtol,
                    "N": n,
                    "err": e,
                    "min_s": min(times[s]),
                    "first_call_s": first[s],
                    "attempts_mean": att,
                    "attempts_max": att_max,
                    "failed": failed,
                    "bg_cores": load.cores,
                    "bg_before": bg,
                }
            )
            print(
                f"rtol {rtol:.0e} {s:>16}: {_common.fmt_time(min(times[s])):>10}, err {e:.1e}, "
                f"attempts {att:.0f} (max {att_max}), failed {failed}, "
                f"first call {first[s]:.2f} s, bg {load.cores:.2f}",
                flush=True,
            )

    # Without the stops: the windows are stepped over.
    no_stops = {}
    for s in solvers:
        fn = make_call(s, args.no_stops_rtol, t_save, None, cache)
        c, att, status = jax.block_until_ready(fn(p_j))
        t0 = time.perf_counter()
        jax.block_until_ready(fn(p_j))
        no_stops[s] = (err(c), float(np.mean(np.asarray(att))), time.perf_counter() - t0)
        rows.append(
            {
                "solver": s + " (no stops)",
                "rtol": args.no_stops_rtol,
                "atol": ATOL_OVER_RTOL * args.no_stops_rtol,
                "N": n,
                "err": no_stops[s][0],
                "min_s": no_stops[s][2],
                "attempts_mean": no_stops[s][1],
                "failed": int(np.sum(np.asarray(status) != 0)),
            }
        )

    print(f"\nN = {n}, {t_save.size} saves, {stops.size} stops; min of {args.repeats} calls")
    print(f"{'rtol':>7} | " + " | ".join(f"{s:>27}" for s in solvers))
    print(f"{'':>7} | " + " | ".join(f"{'time':>10} {'err':>7} {'steps':>9}" for _ in solvers))
    print("-" * (10 + 31 * len(solvers)))
    for rtol in tols:
        cells = []
        for s in solvers:
            r = next(r for r in rows if r["solver"] == s and r["rtol"] == rtol)
            steps = f"{r['attempts_mean']:.0f}/{r['attempts_max']}"
            cells.append(f"{_common.fmt_time(r['min_s']):>10} {r['err']:>7.1e} {steps:>9}")
        print(f"{rtol:>7.0e} | " + " | ".join(cells))
    print(
        "err: max over the reference patients and saves of |C - C_ref| / C_ref; "
        "steps: mean/max step attempts per patient"
    )

    print(f"\nwithout tstops/jump_ts (rtol {args.no_stops_rtol:g}):")
    for s, (e, att, t) in no_stops.items():
        print(f"  {s:>16}: err {e:.1e}, attempts {att:.0f}, time {_common.fmt_time(t)}")

    for s in [s for s in solvers if s.startswith("shoal")]:
        for d in [d for d in solvers if d.startswith("diffrax")]:
            print_matched(rows, s, d)
    head_s, head_d = "shoal-tsit5", "diffrax-tsit5"
    if head_s in solvers and head_d in solvers:
        pts_d = [(r["err"], r["min_s"]) for r in rows if r["solver"] == head_d]
        for r in [r for r in rows if r["solver"] == head_s]:
            same = next(x for x in rows if x["solver"] == head_d and x["rtol"] == r["rtol"])
            t_d = interp_loglog(r["err"], *zip(*pts_d, strict=True)) if len(pts_d) > 1 else None
            matched = f"{t_d / r['min_s']:.1f}x" if t_d and math.isfinite(t_d) else "n/a"
            ratio = same["min_s"] / r["min_s"]
            print(
                f"headline rtol {r['rtol']:.0e}: diffrax/shoal Tsit5 {ratio:.1f}x "
                f"at the same rtol (errors {r['err']:.1e} / {same['err']:.1e}), {matched} at "
                f"shoal's achieved error"
            )
    if not any(s.startswith("shoal") for s in solvers):
        print("\n(no shoal solver in --solvers: no matched-error ratios)")

    out = os.path.join(args.out_dir, "pk_dosing.csv")
    _common.write_csv(Path(out), rows)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
