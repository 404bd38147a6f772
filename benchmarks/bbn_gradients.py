"""Gradients through a nucleosynthesis network whose y0 depends on the parameter: shoal vs diffrax.

The 5-species network of tests/ode/test_sensitivity_tolerances.py (n, p, d, He3, He4) from
t = 1 to 10⁴ with the deuterium started on its fast equilibrium, y0 = y0(η): the y0 column of
the deuterium decays at 1.6e16 /s at t = 1, the case that made shoal's gradient NaN before
issue 14. An ensemble of N baryon densities η ∈ [4, 7]; loss = Σ Y_He4(t_end); gradient with
respect to every η (through y0 and the rates).

shoal: ``jax.value_and_grad`` of the ensemble solve (Rodas5P, forward sensitivities), rtol 1e-8,
atol 1e-16, jitted. diffrax: Kvaerno5 with a PID controller at the same tolerances, vmapped,
``jax.value_and_grad`` through its default adjoint (discretise-then-optimise). Reference: a plain
shoal solve of the tangent system [y, s], s' = J_y s + J_η (written with ``jax.jvp``, so shoal's
sensitivity code is not involved), rtol 1e-11, first step 1e-10, s(0) = η dy0/dη. Printed: times,
the largest relative gradient error of each against the reference, and statuses.

    PYTHONPATH=. .venv/bin/python benchmarks/bbn_gradients.py [--n 64] [--smoke]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import _common  # noqa: I001 - puts the repository root on sys.path before shoal is imported
import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from shoal.ode import solve  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "ode"))
from test_sensitivity_tolerances import TS, bbn, y0_of  # noqa: E402

RTOL, ATOL, TAU_N = 1e-8, 1e-16, 900.0


def params_of(eta):
    return jnp.stack([eta, jnp.full_like(eta, TAU_N)], axis=-1)


def shoal_loss(eta):
    p = params_of(eta)
    ys, st = solve(bbn, jax.vmap(y0_of)(p), TS, p, rtol=RTOL, atol=ATOL, return_stats=True)
    return jnp.sum(ys[:, -1, 4]), st


def tangent_system(z, t, p):
    """[y, s]' = [f, J_y s + J_η η]: s = η ∂y/∂η, with p = (η, τ_n)."""
    y, s = z[:5], z[5:]
    f, df = jax.jvp(lambda yy, pp: bbn(yy, t, pp), (y, p), (s, jnp.array([p[0], 0.0])))
    return jnp.concatenate([f, df])


def reference_gradient(eta):
    p = params_of(eta)
    y0, dy0 = jax.vmap(lambda q: jax.jvp(y0_of, (q,), (jnp.array([q[0], 0.0]),)))(p)
    ys, st = solve(tangent_system, jnp.concatenate([y0, dy0], axis=1), TS, p, rtol=1e-11,
                   atol=1e-18, first_step=1e-10, return_stats=True)
    assert np.all(np.asarray(st["status"]) == 0)
    return np.asarray(ys[:, -1, 9] / eta)


def diffrax_loss(eta):
    import diffrax

    def one(e):
        p = jnp.stack([e, TAU_N])
        term = diffrax.ODETerm(lambda t, y, args: bbn(y, t, args))
        sol = diffrax.diffeqsolve(
            term, diffrax.Kvaerno5(), t0=TS[0], t1=TS[-1], dt0=None, y0=y0_of(p), args=p,
            saveat=diffrax.SaveAt(t1=True),
            stepsize_controller=diffrax.PIDController(rtol=RTOL, atol=ATOL),
            max_steps=200_000, throw=False)
        return sol.ys[-1, 4], sol.result == diffrax.RESULTS.successful

    values, ok = jax.vmap(one)(eta)
    return jnp.sum(values), ok


def timed(fn, eta, repeats):
    out = jax.block_until_ready(fn(eta))  # compile
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn(eta))
        times.append(time.perf_counter() - t0)
    return out, min(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="4 members, 1 repeat")
    args = ap.parse_args()
    n, repeats = (4, 1) if args.smoke else (args.n, args.repeats)
    eta = jnp.linspace(4.0, 7.0, n)
    for line in _common.header_lines():
        print(line)
    ref = reference_gradient(eta)
    rows = []
    ((_, st), g), t_shoal = timed(jax.jit(jax.value_and_grad(shoal_loss, has_aux=True)), eta,
                                  repeats)
    rows.append(("shoal Rodas5P", t_shoal, np.max(np.abs(np.asarray(g) / ref - 1)),
                 f"status 0: {int(np.sum(np.asarray(st['status']) == 0))}/{n}"))
    try:
        ((_, ok), g), t_dfx = timed(jax.jit(jax.value_and_grad(diffrax_loss, has_aux=True)),
                                    eta, repeats)
        rows.append(("diffrax Kvaerno5", t_dfx, np.max(np.abs(np.asarray(g) / ref - 1)),
                     f"successful: {int(np.sum(np.asarray(ok)))}/{n}"))
    except Exception as err:  # noqa: BLE001 - report the peer's failure, keep shoal's row
        rows.append(("diffrax Kvaerno5", float("nan"), float("nan"), f"failed: {err}"[:80]))
    print(f"\nBBN network, N = {n}, rtol {RTOL:g}, atol {ATOL:g}: value_and_grad of Σ Y_He4(t_end)"
          " with respect to η (y0 = y0(η))")
    print(f"{'solver':<18} {'time':>10} {'max rel. grad error':>20}  outcome")
    for name, t, err, outcome in rows:
        print(f"{name:<18} {_common.fmt_time(t):>10} {err:>20.2e}  {outcome}")
    if len(rows) == 2 and np.isfinite(rows[1][1]):
        print(f"shoal is {rows[1][1] / rows[0][1]:.1f}x faster than diffrax")


if __name__ == "__main__":
    main()
