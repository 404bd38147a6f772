"""Rosenbrock23 and Rodas4 against Rodas5P: time and achieved error over tolerances, same run.

Two stiff problems, N trajectories each, float64, dense LU, lanes as by default:

* Robertson (``robertson_rodas5p.py``'s ensemble: k1 spread ±5 %, 21 log-spaced saves to 1e5,
  first step 1e-6, the integral controller); error: the relative error of the saves where
  |ref| >= 1e-8 against SciPy Radau at rtol 1e-12 on --ref members.
* Van der Pol, μ = 1000 (``y1'' = μ (1 − y1²) y1' − y1``), y0 = (2, 0), μ spread ±10 %, 11 saves
  on [0, 3000] (about 1.5 relaxation periods); error: max |y − ref| / (|ref| + 1e-6) against
  shoal's Rodas5P at rtol 1e-12.

For each rtol (atol = 1e-4 · rtol): the median of --repeats warm calls, the mean accepted steps
per trajectory, the achieved error, and Rodas5P's time over the method's (> 1: the method is
faster at that rtol; compare errors too, since lower orders reach less at the same rtol).
Rosenbrock23 (order 2) is not run at 1e-8, where it needs ~10⁴ steps a trajectory.

    PYTHONPATH=. .venv/bin/python benchmarks/rosenbrock_methods.py [--n 10000] [--repeats 5]
"""

from __future__ import annotations

import argparse

import _common  # noqa: I001 - puts the repository root on sys.path before shoal is imported
import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import robertson_rodas5p as rob  # noqa: E402

from shoal.ode import solve  # noqa: E402

METHODS = ("rodas5p", "rodas4", "rosenbrock23")
RTOLS = (1e-3, 1e-4, 1e-6, 1e-8)
LOOSEST_ONLY = {"rosenbrock23": 1e-6}  # the tightest rtol a method is run at
VDP_T = np.linspace(0.0, 3000.0, 11)


def van_der_pol(y, t, p):
    return jnp.stack([y[1], p[0] * (1.0 - y[0] ** 2) * y[1] - y[0]])


def robertson_case(n: int, n_ref: int):
    k1 = rob.k1_values(n)
    refs = {int(i): rob.reference(float(k1[i])) for i in _common.subsample(n, n_ref)}

    def run(method, rtol):
        fn = _common.jit_solve(rob.robertson, rob.Y0, rob.T_SPAN,
                               lambda ys, st: (ys, st["accepted"]), method=method, rtol=rtol,
                               atol=1e-4 * rtol, first_step=rob.FIRST_STEP,
                               max_steps=rob.MAX_STEPS, **rob.GAINS)
        return lambda: fn(jnp.asarray(k1))

    def error(ys):
        return max(rob.errors(np.asarray(ys[i]), ref)[1] for i, ref in refs.items())

    return run, error


def van_der_pol_case(n: int):
    mu = 1000.0 * (1.0 + 0.1 * np.linspace(-1.0, 1.0, n))[:, None]
    y0 = np.tile([2.0, 0.0], (n, 1))
    ref = np.asarray(solve(van_der_pol, y0, VDP_T, mu, method="rodas5p", rtol=1e-12,
                           atol=1e-12))

    def run(method, rtol):
        fn = jax.jit(lambda mu: solve(van_der_pol, y0, VDP_T, mu, method=method, rtol=rtol,
                                      atol=1e-4 * rtol, return_stats=True))
        return lambda: (lambda out: (out[0], out[1]["accepted"]))(fn(jnp.asarray(mu)))

    def error(ys):
        return float(np.max(np.abs(np.asarray(ys) - ref) / (np.abs(ref) + 1e-6)))

    return run, error


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10000)
    parser.add_argument("--vdp-n", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--ref", type=int, default=8)
    args = parser.parse_args()
    print("\n".join(_common.header_lines()))
    cases = {f"Robertson N={args.n}": robertson_case(args.n, args.ref),
             f"Van der Pol mu=1000 N={args.vdp_n}": van_der_pol_case(args.vdp_n)}
    print(f"{'problem':30} {'rtol':>6} {'method':12} {'median':>10} {'steps':>8} {'error':>9}"
          f" {'rodas5p/method':>15}")
    for name, (run, error) in cases.items():
        for rtol in RTOLS:
            times = {}
            for method in METHODS:
                if rtol < LOOSEST_ONLY.get(method, 0.0):
                    continue
                fn = run(method, rtol)
                ys, steps = jax.block_until_ready(fn())
                times[method] = _common.median(
                    _common.time_calls(lambda fn=fn: jax.block_until_ready(fn()), args.repeats))
                ratio = (f"{times['rodas5p'] / times[method]:15.2f}"
                         if method != "rodas5p" else "")
                print(f"{name:30} {rtol:6.0e} {method:12} {_common.fmt_time(times[method]):>10}"
                      f" {float(np.mean(steps)):8.1f} {error(ys):9.1e} {ratio}", flush=True)


if __name__ == "__main__":
    main()
