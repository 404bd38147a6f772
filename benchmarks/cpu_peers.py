"""shoal against the CPU peers a Python user picks, in one run: numbalsoda (C++ DOP853 and LSODA
called from numba, ``prange`` over trajectories) and diffrax in its fastest configuration.

Lorenz (sigma 10, beta 8/3, rho = linspace(0, 21, N), y0 = (1, 0, 0), t in [0, 1], the final
state, float64): shoal Tsit5 at rtol = atol = 1e-8 against numbalsoda DOP853 at the same
tolerances and at the tolerance where its achieved error first matches shoal's (errors against
SciPy DOP853 at 1e-13); diffrax Tsit5 in each configuration a diffrax user would try (dt0,
DirectAdjoint / ForwardMode, throw=False), the fastest reported.
Lorenz at tight tolerances (the same ensemble, rtol = atol = 1e-10 and 1e-12, errors against
SciPy DOP853 at its tightest, 2.3e-14, which agrees with Radau at 1e-13 to 7e-14): shoal's
Vern9, Vern7 and Tsit5 against numbalsoda DOP853 over a sweep of tolerances, and for each shoal
method the ratio to the cheapest DOP853 run whose error is at most shoal's (matched error).
Robertson (k1 = 0.04 x U(0.95, 1.05), k2 = 3e7, k3 = 1e4, rtol 1e-6, atol 1e-10, 20 log-spaced
saves to 1e5): shoal Rodas5P against numbalsoda LSODA at the same tolerances (errors against
SciPy Radau at rtol 1e-12).

    PYTHONPATH=. .venv/bin/python benchmarks/cpu_peers.py           # ~3 min on 2 idle cores
    PYTHONPATH=. .venv/bin/python benchmarks/cpu_peers.py --quick   # N = 1000 / 200

Needs numbalsoda (``pip install numbalsoda``, which brings numba). Medians of interleaved calls
after a warm-up; every solver uses both cores (shoal's thread pool, numba's prange, XLA).
"""

from __future__ import annotations

import argparse
import statistics
import time

import _common  # noqa: F401 - puts the repository root on sys.path
import jax
import jax.numpy as jnp
import numpy as np
from scipy.integrate import solve_ivp

jax.config.update("jax_enable_x64", True)

import lane_counts  # noqa: E402

import shoal  # noqa: E402

SIGMA, BETA = 10.0, 8.0 / 3.0


def timed(fn, repeats):
    fn()  # warm-up (compiles)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# -- Lorenz -------------------------------------------------------------------------------------


def lorenz_jax(y, t, p):
    return jnp.stack([SIGMA * (y[1] - y[0]), y[0] * (p[0] - y[2]) - y[1],
                      y[0] * y[1] - BETA * y[2]])


def lorenz_reference(rho, tol=1e-13):
    out = []
    for r in rho:
        sol = solve_ivp(lambda t, y, r=r: [SIGMA * (y[1] - y[0]), y[0] * (r - y[2]) - y[1],
                                           y[0] * y[1] - BETA * y[2]],
                        (0.0, 1.0), [1.0, 0.0, 0.0], method="DOP853", rtol=tol, atol=tol)
        out.append(sol.y[:, -1])
    return np.array(out)


def numbalsoda_lorenz():
    import numba
    from numbalsoda import dop853, lsoda_sig

    @numba.cfunc(lsoda_sig)
    def rhs(t, u, du, p):
        du[0] = SIGMA * (u[1] - u[0])
        du[1] = u[0] * (p[0] - u[2]) - u[1]
        du[2] = u[0] * u[1] - BETA * u[2]

    address = rhs.address

    @numba.njit(parallel=True)
    def ensemble(rho, rtol, atol):
        out = np.empty((rho.shape[0], 3))
        t_eval = np.array([0.0, 1.0])
        for i in numba.prange(rho.shape[0]):
            u0 = np.array([1.0, 0.0, 0.0])
            data = np.array([rho[i]])
            usol, _ = dop853(address, u0, t_eval, data=data, rtol=rtol, atol=atol,
                             mxstep=100_000)
            out[i] = usol[-1]
        return out

    return ensemble


def diffrax_configurations(rho):
    import diffrax

    term = diffrax.ODETerm(lambda t, y, r: lorenz_jax(y, t, r))
    y0 = jnp.asarray([1.0, 0.0, 0.0])
    controller = diffrax.PIDController(rtol=1e-8, atol=1e-8)
    configs = {
        "dt0=1e-6 (shoal's first step)": dict(dt0=1e-6),
        "dt0=1e-3": dict(dt0=1e-3),
        "dt0=None (diffrax's estimate)": dict(dt0=None),
        "dt0=1e-3, DirectAdjoint": dict(dt0=1e-3, adjoint=diffrax.DirectAdjoint()),
        "dt0=1e-3, ForwardMode": dict(dt0=1e-3, adjoint=diffrax.ForwardMode()),
        "dt0=1e-3, ForwardMode, throw=False": dict(dt0=1e-3, adjoint=diffrax.ForwardMode(),
                                                   throw=False),
    }
    made = {}
    for name, kw in configs.items():
        def one(r, kw=kw):
            sol = diffrax.diffeqsolve(term, diffrax.Tsit5(), 0.0, 1.0, y0=y0, args=r[None],
                                      stepsize_controller=controller,
                                      saveat=diffrax.SaveAt(t1=True), max_steps=100_000, **kw)
            return sol.ys[-1]
        made[name] = jax.jit(jax.vmap(one))
    return made


def lane_use(before) -> str:
    """shoal's SIMD lane utilisation since the snapshot `before` (lane_counts.py)."""
    used = lane_counts.utilisation(before, lane_counts.snapshot())
    return "scalar" if used is None else f"lanes {used:.1%} busy"


def lorenz_rows(n, repeats):
    rho = np.linspace(0.0, 21.0, n)
    sample = np.linspace(0, n - 1, min(n, 200)).astype(int)
    ref = lorenz_reference(rho[sample])
    rows = []

    shoal_fn = jax.jit(lambda r: shoal.ode.solve(lorenz_jax, jnp.tile(jnp.asarray([1.0, 0, 0]),
                                                                       (r.shape[0], 1)),
                                                 jnp.asarray([0.0, 1.0]), r[:, None],
                                                 method="tsit5", rtol=1e-8, atol=1e-8)[:, -1])
    rho_j = jnp.asarray(rho)
    out = np.asarray(shoal_fn(rho_j))
    shoal_err = float(np.max(np.abs(out[sample] - ref)))
    before = lane_counts.snapshot()
    shoal_t = timed(lambda: jax.block_until_ready(shoal_fn(rho_j)), repeats)
    rows.append((f"shoal Tsit5, rtol 1e-8 ({lane_use(before)})", shoal_t, shoal_err))

    nb = numbalsoda_lorenz()
    for tol in (1e-8, 1e-9, 1e-10, 1e-11, 1e-12):
        out = nb(rho, tol, tol)
        err = float(np.max(np.abs(out[sample] - ref)))
        rows.append((f"numbalsoda DOP853, rtol {tol:g}",
                     timed(lambda t=tol: nb(rho, t, t), repeats), err))
        if err <= shoal_err:
            break

    for name, fn in diffrax_configurations(rho).items():
        out = np.asarray(fn(rho_j))
        rows.append((f"diffrax Tsit5, {name}",
                     timed(lambda f=fn: jax.block_until_ready(f(rho_j)), max(3, repeats // 2)),
                     float(np.max(np.abs(out[sample] - ref)))))
    return rows


def lorenz_tight_rows(n, repeats, rtol):
    """(rows, summary lines): shoal's explicit methods at rtol against numbalsoda DOP853 over a
    sweep of tolerances, each shoal method's time against DOP853's at matched error."""
    rho = np.linspace(0.0, 21.0, n)
    sample = np.linspace(0, n - 1, min(n, 200)).astype(int)
    ref = lorenz_reference(rho[sample], tol=2.3e-14)
    rho_j = jnp.asarray(rho)
    y0 = jnp.tile(jnp.asarray([1.0, 0.0, 0.0]), (n, 1))
    shoal_rows = []
    for method in ("vern9", "vern7", "tsit5"):
        fn = jax.jit(lambda r, m=method: shoal.ode.solve(lorenz_jax, y0, jnp.asarray([0.0, 1.0]),
                                                         r[:, None], method=m, rtol=rtol,
                                                         atol=rtol)[:, -1])
        err = float(np.max(np.abs(np.asarray(fn(rho_j))[sample] - ref)))
        before = lane_counts.snapshot()
        t = timed(lambda f=fn: jax.block_until_ready(f(rho_j)), repeats)
        shoal_rows.append((f"shoal {method}, rtol {rtol:g} ({lane_use(before)})", t, err))
    nb = numbalsoda_lorenz()
    peer_rows = []
    for tol in sorted({max(2.3e-14, rtol * f) for f in (10, 3, 1, 1 / 3, 1 / 10, 1 / 30, 1 / 100)},
                      reverse=True):
        err = float(np.max(np.abs(nb(rho, tol, tol)[sample] - ref)))
        peer_rows.append((f"numbalsoda DOP853, rtol {tol:.2g}",
                          timed(lambda t=tol: nb(rho, t, t), repeats), err))
    summary = []
    for name, t, err in shoal_rows:
        matched = [row for row in peer_rows if row[2] <= err]
        if matched:
            peer = min(matched, key=lambda row: row[1])
            summary.append(f"- {name.split(' (')[0]}: error {err:.1e}; numbalsoda DOP853 at "
                           f"matched error ({peer[0].split(', ')[1]}, {peer[2]:.1e}) takes "
                           f"{peer[1] / t:.2f}x shoal's time")
        else:
            summary.append(f"- {name.split(' (')[0]}: error {err:.1e}; no DOP853 run in the "
                           "sweep reached it")
    return shoal_rows + peer_rows, summary


# -- Robertson ----------------------------------------------------------------------------------


def robertson_jax(y, t, k):
    return jnp.stack([-k[0] * y[0] + k[2] * y[1] * y[2],
                      k[0] * y[0] - k[1] * y[1] ** 2 - k[2] * y[1] * y[2], k[1] * y[1] ** 2])


def robertson_rows(n, repeats):
    import numba
    from numbalsoda import lsoda, lsoda_sig

    rng = np.random.default_rng(0)
    k = np.tile([0.04, 3e7, 1e4], (n, 1))
    k[:, 0] *= rng.uniform(0.95, 1.05, n)
    t_save = np.concatenate([[0.0], np.logspace(-5, 5, 19)])
    sample = np.linspace(0, n - 1, min(n, 50)).astype(int)
    ref = []
    for i in sample:
        def f(t, y, k1=k[i, 0], k2=k[i, 1], k3=k[i, 2]):
            return [-k1 * y[0] + k3 * y[1] * y[2], k1 * y[0] - k2 * y[1] ** 2 - k3 * y[1] * y[2],
                    k2 * y[1] ** 2]

        sol = solve_ivp(f, (0.0, 1e5), [1.0, 0.0, 0.0],
                        method="Radau", rtol=1e-12, atol=1e-16, t_eval=t_save)
        ref.append(sol.y.T)
    ref = np.array(ref)

    def error(out):
        return float(np.max(np.abs(out[sample] - ref)))

    shoal_fn = jax.jit(lambda k: shoal.ode.solve(
        robertson_jax, jnp.tile(jnp.asarray([1.0, 0.0, 0.0]), (k.shape[0], 1)),
        jnp.asarray(t_save), k, method="rodas5p", rtol=1e-6, atol=1e-10))
    k_j = jnp.asarray(k)
    shoal_err = error(np.asarray(shoal_fn(k_j)))
    before = lane_counts.snapshot()
    shoal_t = timed(lambda: jax.block_until_ready(shoal_fn(k_j)), repeats)
    rows = [(f"shoal Rodas5P ({lane_use(before)})", shoal_t, shoal_err)]

    @numba.cfunc(lsoda_sig)
    def rhs(t, u, du, p):
        du[0] = -p[0] * u[0] + p[2] * u[1] * u[2]
        du[1] = p[0] * u[0] - p[1] * u[1] * u[1] - p[2] * u[1] * u[2]
        du[2] = p[1] * u[1] * u[1]

    address = rhs.address

    @numba.njit(parallel=True)
    def ensemble(k, t_save):
        out = np.empty((k.shape[0], t_save.shape[0], 3))
        for i in numba.prange(k.shape[0]):
            usol, _ = lsoda(address, np.array([1.0, 0.0, 0.0]), t_save, data=k[i].copy(),
                            rtol=1e-6, atol=1e-10, mxstep=100_000)
            out[i] = usol
        return out

    rows.append(("numbalsoda LSODA", timed(lambda: ensemble(k, t_save), repeats),
                 error(ensemble(k, t_save))))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    n_lorenz, n_rob = (1000, 200) if args.quick else (10_000, 2000)
    lines = [f"- {line}" for line in _common.header_lines()]
    sections = [(f"Lorenz, N = {n_lorenz}", lorenz_rows(n_lorenz, args.repeats), [])]
    for rtol in (1e-10, 1e-12):
        rows, summary = lorenz_tight_rows(n_lorenz, args.repeats, rtol)
        sections.append((f"Lorenz, N = {n_lorenz}, rtol {rtol:g}", rows, summary))
    sections.append((f"Robertson, N = {n_rob}", robertson_rows(n_rob, args.repeats), []))
    for title, rows, summary in sections:
        base = rows[0][1]
        table = ["", f"**{title}**", "", "| solver | median (ms) | / first row | max error |",
                 "|---|---|---|---|"]
        table += [f"| {name} | {t * 1e3:.1f} | {t / base:.2f} | {err:.1e} |"
                  for name, t, err in rows]
        table += ([""] + summary) if summary else []
        lines += table
        print("\n".join(table), flush=True)
    _common.RESULTS.mkdir(parents=True, exist_ok=True)
    (_common.RESULTS / "cpu_peers.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
