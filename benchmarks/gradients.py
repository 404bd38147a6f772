"""Gradients through ensemble solves: shoal value_and_grad versus value, and versus diffrax (CPU).

Problem: the Van der Pol ring (issue 4; ANCHORS.md "Stiff Van der Pol ring (mu=100, d=10, w=1)").
n_osc oscillators on a ring, n_vars = 2 n_osc, state y = (x_0, v_0, x_1, v_1, ...):

    x_i' = v_i
    v_i' = mu_i (1 - x_i^2) v_i - w^2 x_i + d_i (x_{i+1} - x_i) - d_{i-1} (x_i - x_{i-1})

(indices mod n_osc; d_i couples oscillators i and i+1; with all mu_i = mu and d_i = d this is
x_i'' = mu (1 - x_i^2) x_i' - x_i + d (x_{i-1} - 2 x_i + x_{i+1})), base values mu = 100, d = 10,
w = 1, y0: x_i(0) = 2 cos(2 pi i / n_osc + 0.4), v_i(0) = 0 (the offset 0.4 keeps every oscillator
off an unstable symmetric point), t in [0, T] with T = 1 by default (--t-end), only the final state
saved, rtol = 1e-6, atol = 1e-8, first step 1e-6 T (both solvers), float64, N = 1000 trajectories.

Parameters are multipliers of the base values, per trajectory, shape (N, n_params):
p[k, j] = 1 + 0.05 sin(2 pi k / N + j). Loss = sum over the ensemble of sum_i y_i(T)^2;
the gradient is taken with respect to all of p (n_sens = n_params sensitivity columns per
trajectory; y0 is not differentiated), which is the per-trajectory case of HMC.

1. Cost ratio versus n_params (1, 2, 4, 8) at n_vars = 8 (4 oscillators). The 8 coefficients
   (mu_0..mu_3, d_0..d_3) are the "slots"; slot s is scaled by p[s * n_params // 8]:
   n_params = 1 scales all mu and d together, 2: all mu / all d, 4: pairs, 8: each its own.
   Both methods on the same problem (over t in [0, 1] the ring is only moderately stiff: Tsit5
   needs a few more steps than Rodas5P, see the step columns).
2. Cost ratio versus n_vars (8, 16, 32, 48 with --ring-sizes), one parameter scaling all mu_i
   (d fixed), Rodas5P (dense LU) and Tsit5 (reported with its step counts; a row shows "failed"
   if a trajectory did not finish within max_steps).
3. shoal value_and_grad versus diffrax value_and_grad (Kvaerno5, PIDController with the same
   rtol/atol and gains (0, 1, 0), dt0 = first step, default RecursiveCheckpointAdjoint,
   jit(value_and_grad(sum of vmap(diffeqsolve)))) on the problem of table 2, at --diffrax-sizes.
   diffrax runs --diffrax-n evenly spaced trajectories of the N (default 100, it is slow); the
   comparison is per trajectory (wall time / trajectories), and the cores each used (process CPU
   time / wall time) are shown. Gradients are compared on those trajectories, together with a
   tight reference (shoal Rodas5P value_and_grad at rtol 1e-10, atol 1e-12).

Timing: jax.jit of everything; each function is called once to compile (that first call's time
is in the CSV), then value and value_and_grad calls are interleaved --repeats times and the
medians are reported (compile excluded). "bg" is the CPU used by *other* processes during the
timed loop (cores, from /proc/stat): on a shared machine the times are only as good as that
column; the ratios are more robust than the absolute times since the calls are interleaved.

The bound printed next to the Rodas5P ratio is the seed's 0.8 (1 + n_sens) (issue 4's goal).

Writes benchmarks/results/gradients_nparams.csv, gradients_nvars.csv, gradients_diffrax.csv.

    PYTHONPATH=. .venv/bin/python benchmarks/gradients.py            # full run
    PYTHONPATH=. .venv/bin/python benchmarks/gradients.py --quick    # smoke run (~N = 100)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import _common  # noqa: I001 - puts the repository root on sys.path before shoal is imported
import jax

jax.config.update("jax_enable_x64", True)

import diffrax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import shoal  # noqa: E402
import shoal.ode  # noqa: E402
from shoal.ode import _ode_ext  # noqa: E402

MU, D, OMEGA = 100.0, 10.0, 1.0
RTOL, ATOL = 1e-6, 1e-8
REF_RTOL, REF_ATOL = 1e-10, 1e-12
MAX_STEPS = 100_000
DIFFRAX_MAX_STEPS = 100_000
GAINS = {"pcoeff": 0.0, "icoeff": 1.0, "dcoeff": 0.0}
METHODS = ("rodas5p", "tsit5")


# -- problem -----------------------------------------------------------------------------------


def make_ring(n_osc: int, slot_param):
    """Right-hand side f(y, t, p) of the ring. slot_param[s] is the index into p scaling slot s;
    slots 0..n_osc-1 are mu_i, slots n_osc..2 n_osc-1 are d_i; None = the base value, unscaled."""
    mu_idx = slot_param[:n_osc]
    d_idx = slot_param[n_osc:]

    def coeff(p, idx, base):
        if all(j is None for j in idx):
            return base
        if len(set(idx)) == 1:  # one parameter for all slots: a scalar
            return base * p[idx[0]]
        return base * jnp.stack([p[j] if j is not None else jnp.ones((), p.dtype) for j in idx])

    def ring(y, t, p):
        x = y[0::2]
        v = y[1::2]
        mu = coeff(p, mu_idx, MU)
        d = coeff(p, d_idx, D)
        flux = d * (jnp.roll(x, -1) - x)  # d_i (x_{i+1} - x_i)
        force = flux - jnp.roll(flux, 1)  # ... - d_{i-1} (x_i - x_{i-1})
        dv = mu * (1.0 - x * x) * v - OMEGA**2 * x + force
        return jnp.stack([v, dv], axis=1).reshape(-1)

    ring.__name__ = f"vdp_ring_{n_osc}"
    return ring


def ring_y0(n_osc: int) -> np.ndarray:
    i = np.arange(n_osc)
    return np.stack([2.0 * np.cos(2 * np.pi * i / n_osc + 0.4), np.zeros(n_osc)], 1).reshape(-1)


def ring_params(n: int, n_params: int) -> np.ndarray:
    k = np.arange(n)[:, None]
    j = np.arange(n_params)[None, :]
    return 1.0 + 0.05 * np.sin(2 * np.pi * k / n + j)


def nparams_problem(n_params: int):
    """8 variables (4 oscillators), slot s (mu_0..3, d_0..3) scaled by p[s * n_params // 8]."""
    n_osc = 4
    slots = [s * n_params // (2 * n_osc) for s in range(2 * n_osc)]
    return make_ring(n_osc, slots), ring_y0(n_osc)


def nvars_problem(n_vars: int):
    """n_vars / 2 oscillators, one parameter scaling every mu_i."""
    n_osc = n_vars // 2
    return make_ring(n_osc, [0] * n_osc + [None] * n_osc), ring_y0(n_osc)


# -- jitted functions --------------------------------------------------------------------------


def shoal_fns(f, y0, t_end, method, rtol=RTOL, atol=ATOL):
    """(value, value_and_grad), jitted: p (N, n_params) -> (loss, [grad,] stats)."""
    t_span = jnp.asarray([0.0, t_end])
    y0 = jnp.asarray(y0)

    def loss(p):
        ys, stats = shoal.ode.solve(f, y0, t_span, p, method=method, rtol=rtol, atol=atol,
                                    first_step=1e-6 * t_end, max_steps=MAX_STEPS,
                                    return_stats=True, **GAINS)
        return jnp.sum(ys[:, -1] ** 2), stats

    return jax.jit(loss), jax.jit(jax.value_and_grad(loss, has_aux=True))


def diffrax_vg(f, y0, t_end):
    """jit(value_and_grad) of the same loss with diffrax Kvaerno5 over vmap of trajectories."""
    term = diffrax.ODETerm(lambda t, y, args: f(y, t, args))
    solver = diffrax.Kvaerno5()
    controller = diffrax.PIDController(rtol=RTOL, atol=ATOL, **GAINS)
    y0 = jnp.asarray(y0)

    def one(p):
        sol = diffrax.diffeqsolve(term, solver, t0=0.0, t1=t_end, dt0=1e-6 * t_end, y0=y0,
                                  args=p, stepsize_controller=controller,
                                  saveat=diffrax.SaveAt(t1=True), max_steps=DIFFRAX_MAX_STEPS)
        return jnp.sum(sol.ys[-1] ** 2), sol.stats["num_accepted_steps"]

    def loss(p):
        values, steps = jax.vmap(one)(p)
        return jnp.sum(values), steps

    return jax.jit(jax.value_and_grad(loss, has_aux=True))


# -- timing ------------------------------------------------------------------------------------


def first_call(fn, *args):
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    return out, time.perf_counter() - t0


def timed(fns: dict, args, repeats: int, max_wait: float) -> dict:
    """Interleaved calls of each fn in fns (already compiled); median wall times, CPU use."""
    _common.wait_for_quiet(max_wait)
    times = {k: [] for k in fns}
    own = {k: 0.0 for k in fns}
    with _common.ForeignLoad() as load:
        for _ in range(repeats):
            for k, fn in fns.items():
                c0, t0 = time.process_time(), time.perf_counter()
                jax.block_until_ready(fn(*args))
                times[k].append(time.perf_counter() - t0)
                own[k] += time.process_time() - c0
    out = {"bg": max(0.0, load.cores)}
    for k in fns:
        out[k] = _common.median(times[k])
        out[k + "_min"] = min(times[k])
        out[k + "_cores"] = own[k] / sum(times[k])
    return out


def steps(stats) -> tuple[float, float, int]:
    return (float(np.mean(stats["accepted"])), float(np.mean(stats["rejected"])),
            int(np.sum(np.asarray(stats["status"]) != 0)))


def bench_ratio(f, y0, t_end, method, p, repeats, max_wait) -> dict:
    """Value and value_and_grad of the loss: times, ratio, steps, first-call times."""
    fv, fg = shoal_fns(f, y0, t_end, method)
    (val, st_v), first_v = first_call(fv, p)
    ((val_g, st_g), grad), first_g = first_call(fg, p)
    t = timed({"v": fv, "vg": fg}, (p,), repeats, max_wait)
    acc_v, rej_v, fail_v = steps(st_v)
    acc_g, rej_g, fail_g = steps(st_g)
    n_sens = p.shape[1]
    return {
        "method": method,
        "N": p.shape[0],
        "n_params": n_sens,
        "value_s": t["v"],
        "value_and_grad_s": t["vg"],
        "ratio": t["vg"] / t["v"],
        "bound_0.8(1+n_sens)": 0.8 * (1 + n_sens),
        "value_min_s": t["v_min"],
        "value_and_grad_min_s": t["vg_min"],
        "value_cores": t["v_cores"],
        "value_and_grad_cores": t["vg_cores"],
        "bg_cores": t["bg"],
        "accepted_value": acc_v,
        "rejected_value": rej_v,
        "accepted_grad": acc_g,
        "rejected_grad": rej_g,
        # cost per step attempt, grad over value: the ratio without the extra steps that
        # sens_error_control=True takes
        "ratio_per_attempt": (t["vg"] / (acc_g + rej_g)) / (t["v"] / (acc_v + rej_v)),
        "failed": fail_v + fail_g,
        "loss_rel_diff": abs(float(val_g) - float(val)) / abs(float(val)),
        "grad_finite": bool(np.all(np.isfinite(np.asarray(grad)))),
        "value_first_call_s": first_v,
        "value_and_grad_first_call_s": first_g,
        "repeats": repeats,
    }


# -- output ------------------------------------------------------------------------------------


def print_ratio_table(rows, key, key_label):
    head = (f"{key_label:>8} | {'method':>7} | {'value':>9} | {'val+grad':>9} | {'ratio':>6} | "
            f"{'bound':>5} | {'ok':>6} | {'ratio/attempt':>13} | {'steps v/g (rej)':>19} | "
            f"{'cores v/g':>9} | {'bg':>4}")
    print(head)
    print("-" * len(head))
    for r in rows:
        ok = ("yes" if r["ratio"] < r["bound_0.8(1+n_sens)"] else "NO") \
            if r["method"] == "rodas5p" else "-"
        if r["failed"]:
            ok = "FAILED"
        cores = f"{r['value_cores']:.1f}/{r['value_and_grad_cores']:.1f}"
        st = (f"{r['accepted_value']:.0f}/{r['accepted_grad']:.0f} "
              f"({r['rejected_value']:.0f}/{r['rejected_grad']:.0f})")
        print(f"{r[key]:>8} | {r['method']:>7} | {_common.fmt_time(r['value_s']):>9} | "
              f"{_common.fmt_time(r['value_and_grad_s']):>9} | {r['ratio']:>6.2f} | "
              f"{r['bound_0.8(1+n_sens)']:>5.1f} | {ok:>6} | {r['ratio_per_attempt']:>13.2f} | "
              f"{st:>19} | {cores:>9} | {r['bg_cores']:>4.2f}")


def print_diffrax_table(rows):
    head = (f"{'n_vars':>6} | {'shoal N':>7} | {'shoal v+g':>9} | {'per traj':>9} | "
            f"{'dfx N':>5} | {'diffrax v+g':>11} | {'per traj':>9} | {'dfx/shoal':>9} | "
            f"{'cores s/d':>9} | {'steps s/d':>9} | {'grad s~d':>8} | {'s~ref':>7} | "
            f"{'d~ref':>7} | {'bg s/d':>9}")
    print(head)
    print("-" * len(head))
    for r in rows:
        cores = f"{r['shoal_cores']:.1f}/{r['diffrax_cores']:.1f}"
        st = f"{r['shoal_accepted']:.0f}/{r['diffrax_accepted']:.0f}"
        print(f"{r['n_vars']:>6} | {r['shoal_N']:>7} | {_common.fmt_time(r['shoal_vg_s']):>9} | "
              f"{_common.fmt_time(r['shoal_per_traj_s']):>9} | {r['diffrax_N']:>5} | "
              f"{_common.fmt_time(r['diffrax_vg_s']):>11} | "
              f"{_common.fmt_time(r['diffrax_per_traj_s']):>9} | "
              f"{r['speedup_per_traj']:>8.1f}x | {cores:>9} | {st:>9} | "
              f"{r['grad_rel_diff_shoal_diffrax']:>8.1e} | "
              f"{r['grad_rel_err_shoal']:>7.1e} | {r['grad_rel_err_diffrax']:>7.1e} | "
              f"{r['shoal_bg_cores']:.2f}/{r['diffrax_bg_cores']:.2f}")


def rel_diff(a, b) -> float:
    """max |a - b| / max |b| (norm-wise, over all trajectories and parameters)."""
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def write_csv(path: Path, rows: list[dict]) -> None:
    if rows:
        _common.write_csv(path, rows)
        shown = path.relative_to(_common.ROOT) if path.is_relative_to(_common.ROOT) else path
        print(f"wrote {shown}")


# -- main --------------------------------------------------------------------------------------


def ints(text: str) -> list[int]:
    return [int(s) for s in text.split(",") if s.strip()]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: N = 100, n_params 1,8, ring 8,16, diffrax 10 trajectories "
                         "at n_vars 8, 2 repeats, T = 0.5")
    ap.add_argument("--n", type=int, default=None, help="trajectories (default 1000; 100 quick)")
    ap.add_argument("--t-end", type=float, default=None, help="T (default 1.0; 0.5 quick)")
    ap.add_argument("--n-params", default=None, help="table 1 (default 1,2,4,8; 1,8 quick)")
    ap.add_argument("--ring-sizes", default=None,
                    help="table 2 n_vars, even (default 8,16,32; 8,16 quick; add 48 if time)")
    ap.add_argument("--methods", default="rodas5p,tsit5", help="for tables 1 and 2")
    ap.add_argument("--diffrax-sizes", default=None,
                    help="table 3 n_vars (default 8,16; 8 quick; empty to skip)")
    ap.add_argument("--diffrax-n", type=int, default=None,
                    help="trajectories diffrax runs (default 100; 10 quick)")
    ap.add_argument("--repeats", type=int, default=None,
                    help="timed calls of each function (default 5; 2 quick; diffrax 3 / 1)")
    ap.add_argument("--max-wait", type=float, default=None,
                    help="seconds to wait for other processes to go quiet before each timed "
                         "loop (default 5; 0 quick)")
    ap.add_argument("--skip", default="",
                    help="comma-separated tables to skip: nparams,nvars,diffrax")
    ap.add_argument("--out-dir", default=str(_common.RESULTS))
    args = ap.parse_args(argv)
    q = args.quick
    n = args.n or (100 if q else 1000)
    t_end = args.t_end or (0.5 if q else 1.0)
    n_params_list = ints(args.n_params or ("1,8" if q else "1,2,4,8"))
    ring_sizes = ints(args.ring_sizes or ("8,16" if q else "8,16,32"))
    dfx_sizes = ints(args.diffrax_sizes if args.diffrax_sizes is not None else
                     ("8" if q else "8,16"))
    dfx_n = min(n, args.diffrax_n or (10 if q else 100))
    repeats = args.repeats or (2 if q else 5)
    dfx_repeats = 1 if q else max(1, min(3, repeats))
    max_wait = args.max_wait if args.max_wait is not None else (0.0 if q else 5.0)
    methods = [m for m in args.methods.split(",") if m]
    skip = set(args.skip.split(","))
    if any(s % 2 or s < 4 for s in ring_sizes + dfx_sizes):
        ap.error("ring sizes must be even and >= 4 (n_vars = 2 n_osc)")
    out_dir = Path(args.out_dir)

    for line in _common.header_lines({
        "versions": f"diffrax {diffrax.__version__}, shoal {getattr(shoal, '__version__', '?')}",
        "shoal threads": str(_ode_ext.num_threads()),
        "problem": f"Van der Pol ring mu={MU:g} d={D:g} w={OMEGA:g}, t in [0, {t_end:g}], "
                   f"rtol={RTOL:g} atol={ATOL:g} float64, first step {1e-6 * t_end:g}, N={n}, "
                   "loss = sum_k sum_i y_i(T)^2, grad w.r.t. per-trajectory params (N, n_params)",
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
    }):
        print(line)
    print(flush=True)

    # -- table 1
    rows1 = []
    if "nparams" not in skip:
        print(f"[1] value_and_grad / value vs n_params at n_vars = 8, N = {n}", flush=True)
        for k in n_params_list:
            f, y0 = nparams_problem(k)
            p = jnp.asarray(ring_params(n, k))
            for method in methods:
                t0 = time.perf_counter()
                r = bench_ratio(f, y0, t_end, method, p, repeats, max_wait)
                r["n_vars"] = 8
                rows1.append(r)
                print(f"  n_params={k} {method}: ratio {r['ratio']:.2f} "
                      f"({time.perf_counter() - t0:.0f} s incl. compile)", flush=True)
        write_csv(out_dir / "gradients_nparams.csv", rows1)

    # -- table 2
    rows2 = []
    vg_cache = {}
    if "nvars" not in skip:
        print(f"[2] value_and_grad / value vs n_vars (one parameter: mu), N = {n}", flush=True)
        for nv in ring_sizes:
            f, y0 = nvars_problem(nv)
            p = jnp.asarray(ring_params(n, 1))
            for method in methods:
                t0 = time.perf_counter()
                r = bench_ratio(f, y0, t_end, method, p, repeats, max_wait)
                r["n_vars"] = nv
                rows2.append(r)
                if method == "rodas5p":
                    vg_cache[nv] = r
                print(f"  n_vars={nv} {method}: ratio {r['ratio']:.2f} "
                      f"({time.perf_counter() - t0:.0f} s incl. compile)", flush=True)
        write_csv(out_dir / "gradients_nvars.csv", rows2)

    # -- table 3
    rows3 = []
    if "diffrax" not in skip and dfx_sizes:
        idx = _common.subsample(n, dfx_n)
        print(f"[3] shoal Rodas5P vs diffrax Kvaerno5 value_and_grad; diffrax on {len(idx)} of "
              f"the {n} trajectories", flush=True)
        for nv in dfx_sizes:
            t0 = time.perf_counter()
            f, y0 = nvars_problem(nv)
            p_all = jnp.asarray(ring_params(n, 1))
            p_sub = p_all[idx]
            _, fg = shoal_fns(f, y0, t_end, "rodas5p")
            ((_, st_s), g_s), _ = first_call(fg, p_all)
            _, fg_ref = shoal_fns(f, y0, t_end, "rodas5p", rtol=REF_RTOL, atol=REF_ATOL)
            ((_, st_ref), g_ref), _ = first_call(fg_ref, p_sub)
            fd = diffrax_vg(f, y0, t_end)
            ((_, dsteps), g_d), d_first = first_call(fd, p_sub)
            if nv in vg_cache:  # shoal at full N, timed in table 2 (same function, same run)
                ts = {"vg": vg_cache[nv]["value_and_grad_s"],
                      "vg_cores": vg_cache[nv]["value_and_grad_cores"],
                      "bg": vg_cache[nv]["bg_cores"]}
            else:
                ts = timed({"vg": fg}, (p_all,), repeats, max_wait)
            td = timed({"vg": fd}, (p_sub,), dfx_repeats, max_wait)
            g_s_sub = np.asarray(g_s)[idx]
            row = {
                "n_vars": nv,
                "shoal_N": n,
                "shoal_vg_s": ts["vg"],
                "shoal_per_traj_s": ts["vg"] / n,
                "shoal_cores": ts["vg_cores"],
                "shoal_bg_cores": ts["bg"],
                "shoal_accepted": float(np.mean(np.asarray(st_s["accepted"])[idx])),
                "diffrax_N": len(idx),
                "diffrax_vg_s": td["vg"],
                "diffrax_per_traj_s": td["vg"] / len(idx),
                "diffrax_cores": td["vg_cores"],
                "diffrax_bg_cores": td["bg"],
                "diffrax_accepted": float(np.mean(np.asarray(dsteps))),
                "diffrax_first_call_s": d_first,
                "diffrax_repeats": dfx_repeats,
                "grad_rel_diff_shoal_diffrax": rel_diff(g_s_sub, g_d),
                "grad_rel_err_shoal": rel_diff(g_s_sub, g_ref),
                "grad_rel_err_diffrax": rel_diff(g_d, g_ref),
                "ref_failed": int(np.sum(np.asarray(st_ref["status"]) != 0)),
            }
            row["speedup_per_traj"] = row["diffrax_per_traj_s"] / row["shoal_per_traj_s"]
            rows3.append(row)
            print(f"  n_vars={nv}: diffrax/shoal {row['speedup_per_traj']:.1f}x per trajectory, "
                  f"grad rel diff {row['grad_rel_diff_shoal_diffrax']:.1e} "
                  f"({time.perf_counter() - t0:.0f} s incl. compile)", flush=True)
        write_csv(out_dir / "gradients_diffrax.csv", rows3)

    # -- report
    print()
    if rows1:
        print(f"Table 1: value_and_grad / value vs n_params, n_vars = 8, N = {n}, T = {t_end:g}")
        print_ratio_table(rows1, "n_params", "n_params")
        print()
    if rows2:
        print(f"Table 2: value_and_grad / value vs n_vars, one parameter (mu), N = {n}, "
              f"T = {t_end:g}")
        print_ratio_table(rows2, "n_vars", "n_vars")
        print()
    if rows1 or rows2:
        print("value, val+grad: median wall time of jit(loss) and jit(value_and_grad(loss)); "
              "ratio = val+grad / value;\nbound = 0.8 (1 + n_sens), the goal for Rodas5P "
              "(n_sens = n_params); ratio/attempt = the same per step attempt (without the extra\n"
              "steps the sensitivities' error control takes); steps: mean accepted steps of the "
              "plain / the joint solve (rejected);\ncores: process CPU time / wall time; bg: "
              "cores used by other processes while timed (a row with bg >> 0 is not clean).")
        print()
    if rows3:
        print(f"Table 3: shoal Rodas5P vs diffrax Kvaerno5 value_and_grad, one parameter (mu), "
              f"T = {t_end:g}")
        print_diffrax_table(rows3)
        print("per traj: wall time / trajectories in the call; dfx/shoal: ratio of those; "
              "cores: CPU time / wall time (shoal, diffrax);\nsteps: mean accepted steps "
              "(shoal joint solve, diffrax); grad s~d: max|g_shoal - g_diffrax| / max|g_diffrax| "
              "on diffrax's trajectories;\ns~ref, d~ref: the same against shoal Rodas5P at "
              f"rtol {REF_RTOL:g}, atol {REF_ATOL:g}; bg: other processes' cores while timed.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
