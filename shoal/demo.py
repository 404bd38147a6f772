"""``make demo``: a Lorenz ensemble swept over rho, solved with Tsit5, summarised and plotted.

Run with ``python -m shoal.demo [--n 20000] [--out demo_output]``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np


def lorenz(y, t, p):
    sigma, rho, beta = p[0], p[1], p[2]
    return jnp.stack([sigma * (y[1] - y[0]), y[0] * (rho - y[2]) - y[1], y[0] * y[1] - beta * y[2]])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=20_000, help="ensemble size")
    parser.add_argument("--out", default="demo_output", help="directory for the plot")
    args = parser.parse_args(argv)
    jax.config.update("jax_enable_x64", True)
    from scipy.integrate import solve_ivp

    from shoal.ode import Status, _ode_ext
    from shoal.ode.tsit5 import solve

    n = args.n
    rho = np.linspace(0.0, 50.0, n)
    params = np.stack([np.full(n, 10.0), rho, np.full(n, 8.0 / 3.0)], axis=1)
    y0 = jnp.array([1.0, 1.0, 1.0])
    t_span = jnp.linspace(0.0, 10.0, 201)
    run = jax.jit(lambda p: solve(lorenz, y0, t_span, p, rtol=1e-8, atol=1e-8,
                                  return_stats=True))

    start = time.perf_counter()
    jax.block_until_ready(run(params))  # traces, compiles the model (or loads it from cache)
    first = time.perf_counter() - start
    start = time.perf_counter()
    ys, stats = jax.block_until_ready(run(params))
    warm = time.perf_counter() - start

    ys = np.asarray(ys)
    status = np.asarray(stats["status"])
    steps = np.asarray(stats["accepted"])
    check = np.searchsorted(rho, np.linspace(0.0, 20.0, 5))  # non-chaotic range
    worst = 0.0
    for m in check:
        ref = solve_ivp(lambda t, y, p=params[m]: np.asarray(lorenz(y, t, p)), (0.0, 10.0),
                        np.asarray(y0), method="DOP853", rtol=1e-12, atol=1e-12,
                        t_eval=np.asarray(t_span)).y.T
        worst = max(worst, float(np.max(np.abs(ys[m] - ref) / (1.0 + np.abs(ref)))))

    print(f"shoal demo: Lorenz ensemble, {n} trajectories, rho in [0, 50], t in [0, 10], "
          f"201 saves, Tsit5 rtol=atol=1e-8, float64, {_ode_ext.num_threads()} threads")
    print(f"  first call (trace + compile or cache load + solve): {first:8.3f} s")
    print(f"  warm call:                                          {warm:8.3f} s "
          f"({warm / n * 1e6:.1f} us per trajectory)")
    print(f"  accepted steps per trajectory: min {steps.min()}, median {int(np.median(steps))}, "
          f"max {steps.max()}; rejected total {int(np.asarray(stats['rejected']).sum())}")
    codes, counts = np.unique(status, return_counts=True)
    summary = ", ".join(f"{Status(s).name}={int(c)}" for s, c in zip(codes, counts, strict=True))
    print(f"  statuses: {summary}")
    print(f"  max relative deviation from SciPy DOP853 (rtol 1e-12), 5 trajectories with "
          f"rho <= 20 (not chaotic), all saves: {worst:.2e}")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(12, 4.5))
    late = ys[:, 100:, 2]  # z over t in [5, 10]
    sub = np.linspace(0, n - 1, min(n, 2000)).astype(int)
    ax0.plot(np.repeat(rho[sub], late.shape[1]), late[sub].ravel(), ",k", alpha=0.3)
    ax0.set(xlabel="rho", ylabel="z(t), t in [5, 10]", title="Lorenz: z against rho")
    # A finely saved re-solve of three members for the phase portrait (saves are free: they are
    # interpolated, never extra steps).
    picks = np.linspace(0, n - 1, 4).astype(int)[1:]
    fine = np.asarray(solve(lorenz, y0, jnp.linspace(0.0, 10.0, 4001), params[picks], rtol=1e-8,
                            atol=1e-8))
    for k, m in enumerate(picks):
        ax1.plot(fine[k, :, 0], fine[k, :, 2], lw=0.6, label=f"rho = {rho[m]:.1f}")
    ax1.set(xlabel="x", ylabel="z", title="trajectories")
    ax1.legend()
    fig.tight_layout()
    fig.savefig(out / "lorenz_ensemble.png", dpi=120)
    print(f"  plot: {out / 'lorenz_ensemble.png'}")


if __name__ == "__main__":
    main()
