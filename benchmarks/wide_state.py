"""Wide states in SIMD lanes: a 64-variable Tsit5 system, shoal's lanes and scalar path against
diffrax, same run.

The problem: a ring of 32 Duffing oscillators coupled to their neighbours (x'' = k (x_{i-1} −
2 x_i + x_{i+1}) − 0.1 x' − x³, 64 variables), k spread over the ensemble, y0 random, t in
[0, 10], 5 saves, rtol 1e-8, atol 1e-10, Tsit5. It is what the lanes engine found hardest: the
right-hand side is array code that the compiler already vectorises across the 64 components on
the scalar path, so what the lanes gain or lose is the engine's own per-step work on the whole
state (the error norm, moving y in and out of the lanes), which scales with n.

Prints the best of --repeats warm calls for diffrax (vmap of diffeqsolve, PIDController with the
same tolerances), shoal lanes=0 (one register of lanes) and lanes=1 (scalar), the ratios, and
each one's largest deviation from SciPy's DOP853 at rtol 1e-12 on --ref members.

    PYTHONPATH=. .venv/bin/python benchmarks/wide_state.py [--n 2048] [--repeats 5]
"""

from __future__ import annotations

import argparse
import time

import _common  # noqa: I001 - puts the repository root on sys.path before shoal is imported
import jax

jax.config.update("jax_enable_x64", True)

import diffrax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from scipy.integrate import solve_ivp  # noqa: E402

from shoal.ode import solve  # noqa: E402

N_VARS = 64
T_SPAN = np.linspace(0.0, 10.0, 5)
RTOL, ATOL = 1e-8, 1e-10


def chain(y, t, p):
    """The coupled Duffing ring; p[0] is the coupling k."""
    half = N_VARS // 2
    x, v = y[:half], y[half:]
    coupling = jnp.roll(x, 1) - 2 * x + jnp.roll(x, -1)
    return jnp.concatenate([v, p[0] * coupling - 0.1 * v - x * x * x])


def problem(n: int):
    """(y0 (n, 64), k (n, 1)): the ensemble."""
    y0 = 0.5 * np.random.default_rng(0).standard_normal((n, N_VARS))
    k = np.linspace(0.5, 2.0, n)[:, None]
    return y0, k


def shoal_fn(lanes: int):
    ts = jnp.asarray(T_SPAN)
    return jax.jit(lambda y0, k: solve(chain, y0, ts, k, method="tsit5", rtol=RTOL, atol=ATOL,
                                       lanes=lanes))


def diffrax_fn():
    ts = jnp.asarray(T_SPAN)

    def one(y0, k):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(lambda t, y, p: chain(y, t, p)), diffrax.Tsit5(), T_SPAN[0],
            T_SPAN[-1], 1e-6 * (T_SPAN[-1] - T_SPAN[0]), y0, args=k,
            saveat=diffrax.SaveAt(ts=ts), max_steps=100_000,
            stepsize_controller=diffrax.PIDController(rtol=RTOL, atol=ATOL))
        return sol.ys

    return jax.jit(jax.vmap(one))


def reference(y0, k):
    def rhs(t, y):
        return np.asarray(chain(jnp.asarray(y), t, jnp.asarray(k)))

    sol = solve_ivp(rhs, (T_SPAN[0], T_SPAN[-1]), y0, method="DOP853", t_eval=T_SPAN,
                    rtol=1e-12, atol=1e-14)
    return sol.y.T


def best_of(fn, args, repeats):
    out = jax.block_until_ready(fn(*args))
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - t0)
    return best, np.asarray(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2048)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--ref", type=int, default=4, help="members checked against DOP853")
    args = ap.parse_args()
    y0, k = problem(args.n)
    members = _common.subsample(args.n, args.ref)
    refs = {int(m): reference(y0[m], k[m]) for m in members}

    def error(ys):
        return max(float(np.max(np.abs(ys[m] - refs[int(m)]))) for m in members)

    print("\n".join(_common.header_lines()))
    print(f"{N_VARS}-variable Duffing ring, Tsit5, N = {args.n}, rtol {RTOL:g}, atol {ATOL:g}, "
          f"{len(T_SPAN)} saves; best of {args.repeats} warm calls")
    t_peer, ys_peer = best_of(diffrax_fn(), (jnp.asarray(y0), jnp.asarray(k)), args.repeats)
    print(f"diffrax            {1e3 * t_peer:9.1f} ms   max error vs DOP853 {error(ys_peer):.1e}")
    for lanes in (0, 1):
        t, ys = best_of(shoal_fn(lanes), (jnp.asarray(y0), jnp.asarray(k)), args.repeats)
        print(f"shoal lanes={lanes}      {1e3 * t:9.1f} ms   max error vs DOP853 {error(ys):.1e}"
              f"   {t_peer / t:5.2f}x diffrax")


if __name__ == "__main__":
    main()
