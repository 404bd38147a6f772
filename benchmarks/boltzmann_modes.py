"""Warm solves of a DISCO-EB-sized Einstein-Boltzmann model: shoal dense and sparse, and SciPy BDF.

Issue 26's goal for DISCO-EB's ``model_synchronous`` (3 modes k in {1e-3, 1e-2, 1e-1}/Mpc at
rtol 1e-4 and 1e-8, dense and sparse, >= 2x the warm time of the day it was set) needs a runtime
figure; DISCO-EB itself is not on PyPI, so this runs the model of ``_boltzmann_like.py`` (72
variables, three 256-512-knot splines read by searchsorted, the hierarchies' structure; toy
physics), the one ``compile_latency.py`` compiles. Units are the toy's (H0 = 1): k/H0 =
k[1/Mpc] * 2997.9 Mpc / h with h = 0.67. Each mode runs from tau = 1.1e-4 (a = 1e-6) to tau = 3.2
(a ~ 1), the final state saved; atol = 1e-4 rtol.

Timed (best of --repeats warm calls, after one compiling call):

* shoal Rodas5P on the 3 modes as one ensemble, ``sparsity="dense"`` and the default (which
  picks the sparse solver for this pattern; ``stats["sparse"]`` says so);
* SciPy ``solve_ivp(method="BDF")`` per mode in a loop, with the right-hand side and its
  Jacobian (``jax.jacfwd``) jitted, the way a JAX user would call it.

Achieved error: over the modes, the largest max_i |y_i - ref_i| / max_i |ref_i| of the final
state (the hierarchies' high multipoles are near zero: a component-wise relative error would
measure nothing but them) against shoal at rtol 1e-11 (dense), and SciPy's against the same
reference, which checks the reference too (two independent methods agreeing). The first call
includes the C++ compile unless an earlier run left the model in the cache.

    PYTHONPATH=. .venv/bin/python benchmarks/boltzmann_modes.py [--repeats 3] [--no-scipy]
"""

from __future__ import annotations

import argparse
import time

import _boltzmann_like as model
import _common
import jax
import jax.numpy as jnp
import numpy as np
from scipy.integrate import solve_ivp

from shoal.ode import solve

jax.config.update("jax_enable_x64", True)

K_PER_MPC = np.array([1e-3, 1e-2, 1e-1])
K_TOY = K_PER_MPC * 2997.9 / 0.67
TAU = (model.TAU_SPAN[0], 3.2)
RTOLS = (1e-4, 1e-8)
LANES = 0


def ensemble():
    y0 = np.tile(model.initial_state(), (K_TOY.size, 1))
    p = np.tile(model.PARAMS, (K_TOY.size, 1))
    p[:, 0] = K_TOY
    return y0, p


def shoal_solver(rtol: float, sparsity):
    y0, p = ensemble()
    ts = jnp.asarray(TAU)

    @jax.jit
    def run(y0, p):
        ys, stats = solve(model.rhs, y0, ts, p, method="rodas5p", rtol=rtol, atol=1e-4 * rtol,
                          sparsity=sparsity, max_steps=200_000, lanes=LANES, return_stats=True)
        return ys[:, -1], stats

    return lambda: jax.block_until_ready(run(jnp.asarray(y0), jnp.asarray(p)))


def scipy_solver(rtol: float):
    y0, p = ensemble()
    f = jax.jit(model.rhs)
    jac = jax.jit(jax.jacfwd(model.rhs))

    def run():
        out = []
        for y, q in zip(y0, p, strict=True):
            q = jnp.asarray(q)
            sol = solve_ivp(lambda t, y, q=q: np.asarray(f(jnp.asarray(y), t, q)), TAU, y,
                            method="BDF", rtol=rtol, atol=1e-4 * rtol,
                            jac=lambda t, y, q=q: np.asarray(jac(jnp.asarray(y), t, q)))
            if not sol.success:
                raise RuntimeError(f"SciPy BDF failed: {sol.message}")
            out.append(sol.y[:, -1])
        return np.stack(out)

    return run


def best_of(fn, repeats: int) -> tuple[float, object, float]:
    """(best warm time, last output, first call's time)."""
    t0 = time.perf_counter()
    out = fn()
    first = time.perf_counter() - t0
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out, first


def error(y, ref) -> float:
    y, ref = np.asarray(y), np.asarray(ref)
    return float(np.max(np.max(np.abs(y - ref), axis=1) / np.max(np.abs(ref), axis=1)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-scipy", action="store_true", help="shoal only")
    args = ap.parse_args()
    print("\n".join(_common.header_lines({
        "model": f"_boltzmann_like.py, {model.N_VARS} variables",
        "modes": ", ".join(f"{k:g}/Mpc" for k in K_PER_MPC)})))
    ref, _ = shoal_solver(1e-11, "dense")()
    print(f"{'rtol':>6} | {'solver':<31} | {'warm':>9} | {'first call':>10} | "
          f"{'steps per mode':<16} | error")
    rows = []
    for rtol in RTOLS:
        cases = [("shoal Rodas5P dense", shoal_solver(rtol, "dense")),
                 ("shoal Rodas5P default", shoal_solver(rtol, None))]
        if not args.no_scipy:
            cases.append(("SciPy BDF loop", scipy_solver(rtol)))
        for name, fn in cases:
            t, out, first = best_of(fn, args.repeats if "shoal" in name else 1)
            if isinstance(out, tuple):
                y, stats = out
                steps = "/".join(str(int(s)) for s in np.asarray(stats["accepted"]))
                if bool(np.any(np.asarray(stats["sparse"]))):
                    name += " (sparse)"
            else:
                y, steps = out, "-"
            rows.append({"rtol": rtol, "solver": name, "warm_s": t, "first_s": first,
                         "error": error(y, ref)})
            print(f"{rtol:6.0e} | {name:<31} | {_common.fmt_time(t):>9} | {first:9.2f}s | "
                  f"{steps:<16} | {rows[-1]['error']:.1e}")
    _common.write_csv(_common.RESULTS / "boltzmann_modes.csv", rows)


if __name__ == "__main__":
    main()
