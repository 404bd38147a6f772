"""Robertson as a DAE (mass matrix diag(1, 1, 0)) against its ODE form, same run.

The ODE form is ``robertson_rodas5p.py``'s ensemble (k1 spread ±5 %, 21 log-spaced saves to 1e5,
first step 1e-6). The DAE form replaces y3' = k2 y2² by the conservation law 0 = y1 + y2 + y3 − 1
and passes ``mass=diag(1, 1, 0)``: the iteration matrix becomes M/(hγ) − J and the stages'
coupling terms are multiplied by M (include/shoal/ode/mass.hpp). Issue 28's goal: the DAE at the
ODE form's cost per step.

For each Rosenbrock method and rtol (atol = 1e-4 rtol): the median wall time of --repeats warm
calls over N trajectories, the mean accepted steps, the time per step attempt, and the largest
relative error of the saves where |ref| >= 1e-8 against SciPy Radau at rtol 1e-12 on the ODE
form (--ref members). SciPy and diffrax have no mass matrices; the peer is SUNDIALS IDA (BDF on
the residual form; ``cvode_robertson.cc`` built with -DROBERTSON_IDA, one trajectory after
another on one core, as a user's loop would run it), at the same tolerances and at the tighter
rtol where it reaches shoal Rodas5P's error; skipped, with the reason, where SUNDIALS is not
installed (``apt-get install libsundials-dev``).

    PYTHONPATH=. .venv/bin/python benchmarks/dae_robertson.py [--n 10000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import _common  # noqa: I001 - puts the repository root on sys.path before shoal is imported
import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import robertson_rodas5p as rob  # noqa: E402

MASS = np.diag([1.0, 1.0, 0.0])


def robertson_dae(y, t, p):
    """robertson_rodas5p.robertson with its third row replaced by the conservation law."""
    r1 = p[0] * y[0]
    r2 = rob.K2 * y[1] * y[1]
    r3 = rob.K3 * y[1] * y[2]
    return jnp.stack([-r1 + r3, r1 - r2 - r3, y[0] + y[1] + y[2] - 1.0])


def make(f, method, rtol, mass):
    def select(ys, stats):
        return ys, stats["accepted"], stats["rejected"], stats["status"]

    extra = {} if mass is None else {"mass": mass}
    return _common.jit_solve(f, rob.Y0, rob.T_SPAN, select, method=method, rtol=rtol,
                             atol=1e-4 * rtol, first_step=rob.FIRST_STEP,
                             max_steps=rob.MAX_STEPS, **rob.GAINS, **extra)


def ida_rows(exe, k1, checked, refs, rtols, repeats):
    """IDA at each rtol: (rtol, seconds on one core, mean steps, error)."""
    rows = []
    for rtol in rtols:
        out = rob.run_cvode(exe, k1, repeats, rtol=rtol, atol=1e-4 * rtol)
        assert np.all(out["flags"] == 0), f"IDA failed at rtol {rtol}"
        error = rob.errors(out["ys"][checked], refs)[1]
        rows.append((rtol, _common.median(out["pass_s"]), float(np.mean(out["steps"])), error))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--ref", type=int, default=5, help="members checked against Radau")
    parser.add_argument("--rtols", default="1e-4,1e-6,1e-8")
    parser.add_argument("--methods", default="rodas5p,rodas4,rosenbrock23")
    parser.add_argument("--peer-n", type=int, default=2000,
                        help="trajectories IDA solves (its time is scaled to --n)")
    args = parser.parse_args()
    print("\n".join(_common.header_lines()))
    k1 = jnp.asarray(rob.k1_values(args.n))
    checked = _common.subsample(args.n, args.ref)
    refs = np.stack([rob.reference(float(k1[i])) for i in checked])
    print(f"\nRobertson, N = {args.n}, median of {args.repeats} warm calls; error: max relative "
          "error where |ref| >= 1e-8 against Radau (rtol 1e-12)\n")
    print("| method | rtol | form | time | steps/traj | ns per attempt | error | DAE/ODE time "
          "per step |")
    print("|---|---|---|---|---|---|---|---|")
    shoal_rows = []
    for method in args.methods.split(","):
        for rtol in (float(r) for r in args.rtols.split(",")):
            if method == "rosenbrock23" and rtol < 1e-6:
                continue  # order 2: ~1e4 steps a trajectory
            per_step = {}
            for form, f, mass in (("ODE", rob.robertson, None), ("DAE", robertson_dae, MASS)):
                run = make(f, method, rtol, mass)
                ys, accepted, rejected, status = jax.block_until_ready(run(k1))
                assert np.all(np.asarray(status) == 0), f"{method} {form} rtol {rtol} failed"
                seconds = _common.median(_common.time_calls(
                    lambda run=run: jax.block_until_ready(run(k1)), args.repeats))
                attempts = int(np.sum(accepted) + np.sum(rejected))
                per_step[form] = seconds / attempts
                error = rob.errors(np.asarray(ys)[checked], refs)[1]
                ratio = f"{per_step['DAE'] / per_step['ODE']:.2f}" if form == "DAE" else ""
                print(f"| {method} | {rtol:.0e} | {form} | {_common.fmt_time(seconds)} | "
                      f"{float(np.mean(accepted)):.0f} | {1e9 * per_step[form]:.0f} | "
                      f"{error:.1e} | {ratio} |")
                if method == "rodas5p" and form == "DAE":
                    shoal_rows.append((rtol, seconds, error))
    with tempfile.TemporaryDirectory(prefix="shoal-ida-") as tmp:
        exe, note = rob.build_cvode(Path(tmp), ida=True)
        if exe is None:
            print(f"\nIDA: skipped ({note})")
            return
        peer_k1 = np.asarray(rob.k1_values(args.peer_n))
        peer_checked = _common.subsample(args.peer_n, args.ref)
        peer_refs = np.stack([rob.reference(float(peer_k1[i])) for i in peer_checked])
        rtols = sorted({r for r, _, _ in shoal_rows} | {r / 100 for r, _, _ in shoal_rows})
        peer = ida_rows(exe, peer_k1, peer_checked, peer_refs, rtols, max(1, args.repeats // 2))
    cores = _common.usable_cpus()
    scale = args.n / args.peer_n
    print(f"\nSUNDIALS IDA on the DAE, {args.peer_n} trajectories on one core (times scaled to "
          f"N = {args.n}); shoal Rodas5P on the DAE with {cores} cores. 'per core': IDA's time "
          f"over shoal's times {cores}. Matched: the loosest IDA rtol reaching shoal's error.\n")
    print("| rtol | IDA time, steps/traj, error | shoal Rodas5P time, error | shoal faster, same "
          "rtol (per core) | at matched error (per core) |")
    print("|---|---|---|---|---|")
    for rtol, seconds, error in shoal_rows:
        same = next(r for r in peer if r[0] == rtol)
        matched = next((r for r in sorted(peer, key=lambda r: -r[0]) if r[3] <= error), None)
        ida_s = same[1] * scale
        matched_text = "not reached" if matched is None else (
            f"{matched[1] * scale / (seconds * cores):.1f}x (IDA rtol {matched[0]:.0e})")
        print(f"| {rtol:.0e} | {_common.fmt_time(ida_s)}, {same[2]:.0f}, {same[3]:.1e} | "
              f"{_common.fmt_time(seconds)}, {error:.1e} | {ida_s / seconds:.1f}x "
              f"({ida_s / (seconds * cores):.1f}x) | {matched_text} |")


if __name__ == "__main__":
    main()
