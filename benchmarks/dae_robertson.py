"""Robertson as a DAE (mass matrix diag(1, 1, 0)) against its ODE form, same run.

The ODE form is ``robertson_rodas5p.py``'s ensemble (k1 spread ±5 %, 21 log-spaced saves to 1e5,
first step 1e-6). The DAE form replaces y3' = k2 y2² by the conservation law 0 = y1 + y2 + y3 − 1
and passes ``mass=diag(1, 1, 0)``: the iteration matrix becomes M/(hγ) − J and the stages'
coupling terms are multiplied by M (include/shoal/ode/mass.hpp). Issue 28's goal: the DAE at the
ODE form's cost per step.

For each Rosenbrock method and rtol (atol = 1e-4 rtol): the median wall time of --repeats warm
calls over N trajectories, the mean accepted steps, the time per step attempt, and the largest
relative error of the saves where |ref| >= 1e-8 against SciPy Radau at rtol 1e-12 on the ODE
form (--ref members). No peer solves this DAE in Python: SciPy and diffrax have no mass matrices.

    PYTHONPATH=. .venv/bin/python benchmarks/dae_robertson.py [--n 10000] [--repeats 5]
"""

from __future__ import annotations

import argparse

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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--ref", type=int, default=5, help="members checked against Radau")
    parser.add_argument("--rtols", default="1e-4,1e-6,1e-8")
    parser.add_argument("--methods", default="rodas5p,rodas4,rosenbrock23")
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


if __name__ == "__main__":
    main()
