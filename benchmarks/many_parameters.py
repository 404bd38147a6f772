"""A stiff model reading a thousand parameters: shoal Rodas5P against diffrax Kvaerno5, same run.

The kinetics model of tests/codegen/test_param_contractions.py at --n species: rates
w0 exp(−w1 / (1 + y²)) from an n × 3 parameter table, mixed by an n × n parameter matrix, minus
w2 y (3n + n² parameters: 1 120 at n = 32), shared by the ensemble of --members random initial
states, t ∈ [0, 2], 4 saves, rtol 1e-8, atol 1e-10. What it measures is the cost of the
parameters inside Rosenbrock's Jacobian sweeps (one dual-number sweep of f per 16 columns):
shoal reads them in place (include/shoal/ad/param_reads.hpp) instead of copying all of them into
dual numbers for every sweep. Timed: the value, and `jax.jvp` along one direction of all the
parameters (forward sensitivities along a direction, one column). The error is against SciPy's
DOP853 at rtol 1e-12 on 4 members; best of 3 warm calls.

    PYTHONPATH=. .venv/bin/python benchmarks/many_parameters.py [--n 32] [--members 512]
"""

from __future__ import annotations

import argparse

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
from _common import best_of, header_lines
from scipy.integrate import solve_ivp

from shoal.ode import solve

jax.config.update("jax_enable_x64", True)

RTOL, ATOL = 1e-8, 1e-10


def kinetics(y, t, p):
    w = p["w"]
    rates = w[:, 0] * jnp.exp(-w[:, 1] / (1.0 + y**2))
    return p["s"] @ rates - w[:, 2] * y


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=32)
    parser.add_argument("--members", type=int, default=512)
    parser.add_argument("--peer-members", type=int, default=64,
                        help="diffrax is timed on this many members and scaled")
    args = parser.parse_args()
    n = args.n
    rng = np.random.default_rng(0)
    params = {"w": jnp.asarray(rng.uniform(0.5, 1.5, (n, 3))),
              "s": jnp.asarray(rng.normal(size=(n, n)) / n)}
    y0 = jnp.asarray(rng.normal(size=(args.members, n)))
    ts = jnp.linspace(0.0, 2.0, 4)
    direction = jax.tree_util.tree_map(lambda x: jnp.full_like(x, 1e-2), params)

    # Shared, said explicitly: at --members equal to --n the shapes alone would be ambiguous.
    shared = {"w": None, "s": None}
    value = jax.jit(lambda p, y0: solve(kinetics, y0, ts, p, method="rodas5p", rtol=RTOL,
                                        atol=ATOL, params_axes=shared))
    tangent = jax.jit(lambda p, y0: jax.jvp(lambda q: value(q, y0), (p,), (direction,)))

    @jax.jit
    def peer(p, y0):
        def one(y):
            return diffrax.diffeqsolve(
                diffrax.ODETerm(lambda t, y, p: kinetics(y, t, p)), diffrax.Kvaerno5(), 0.0, 2.0,
                1e-3, y, args=p, saveat=diffrax.SaveAt(ts=ts),
                stepsize_controller=diffrax.PIDController(rtol=RTOL, atol=ATOL),
                max_steps=100_000).ys
        return jax.vmap(one)(y0)

    members = [0, 1, args.members // 2, args.members - 1]
    ref = np.stack([
        solve_ivp(lambda t, y: np.asarray(kinetics(jnp.asarray(y), t, params)), (0.0, 2.0),
                  np.asarray(y0[m]), t_eval=np.asarray(ts), method="DOP853", rtol=1e-12,
                  atol=1e-13).y.T for m in members])

    def error(ys):
        return float(np.max(np.abs(np.asarray(ys)[members] - ref)))

    print("\n".join(header_lines()))
    print(f"kinetics, {n} species, {3 * n + n * n} shared parameters, N = {args.members}, "
          f"rtol {RTOL:g}, atol {ATOL:g}; best of 3 warm calls")
    t_value, ys, first = best_of(lambda: value(params, y0))
    print(f"shoal Rodas5P value      {1e3 * t_value:9.1f} ms   first call {first:6.2f} s   "
          f"error {error(ys):.1e}")
    t_jvp, (ys_jvp, _), first = best_of(lambda: tangent(params, y0))
    print(f"shoal Rodas5P jvp        {1e3 * t_jvp:9.1f} ms   first call {first:6.2f} s   "
          f"({t_jvp / t_value:.2f}x the value)")
    k = min(args.peer_members, args.members)
    t_peer, ys_peer, first = best_of(lambda: peer(params, y0[:k]))
    t_peer *= args.members / k
    peer_error = float(np.max(np.abs(np.asarray(ys_peer)[[0, 1]] - ref[:2])))
    print(f"diffrax Kvaerno5 value   {1e3 * t_peer:9.1f} ms   (timed on {k} members, scaled)   "
          f"error {peer_error:.1e}   shoal {t_peer / t_value:.1f}x faster")


if __name__ == "__main__":
    main()
