"""A neural ODE's forward solve: shoal against diffrax, same run.

diffrax's neural-ODE example in its shape: an MLP 2-64-64-2 with tanh (the weights shared by the
whole ensemble, passed as a params pytree), N trajectories, Tsit5, 20 saves on [0, 1]. shoal runs
it in SIMD lanes now that tanh is its own (elementary/) and the network's elementwise loops run
lane-wide; `lanes=1` (the scalar path) is timed beside it. Achieved agreement with diffrax is
printed with the times (both at rtol 1e-6, atol 1e-8), and each one's first call (tracing and
compiling; shoal compiles into an empty temporary cache, so its figure is a cold compile).

    PYTHONPATH=. .venv/bin/python benchmarks/neural_ode.py [--n 1000] [--width 64]
"""

from __future__ import annotations

import argparse
import os
import tempfile

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
from _common import best_of, header_lines

from shoal.ode import solve

jax.config.update("jax_enable_x64", True)


def make_params(width: int, seed: int = 0):
    keys = jax.random.split(jax.random.PRNGKey(seed), 3)
    def layer(key, n_out, n_in):
        return jax.random.normal(key, (n_out, n_in)) / jnp.sqrt(n_in)
    return {"w1": layer(keys[0], width, 2), "b1": jnp.zeros(width),
            "w2": layer(keys[1], width, width), "b2": jnp.zeros(width),
            "w3": layer(keys[2], 2, width)}


def field(y, t, p):
    h = jnp.tanh(p["w1"] @ y + p["b1"])
    h = jnp.tanh(p["w2"] @ h + p["b2"])
    return p["w3"] @ h



def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--width", type=int, default=64)
    args = parser.parse_args()
    os.environ["SHOAL_CACHE_DIR"] = tempfile.mkdtemp(prefix="shoal-neural-ode-")
    params = make_params(args.width)
    y0 = jax.random.normal(jax.random.PRNGKey(1), (args.n, 2))
    ts = jnp.linspace(0.0, 1.0, 20)
    rtol, atol = 1e-6, 1e-8

    @jax.jit
    def peer(params, y0):
        def one(y):
            sol = diffrax.diffeqsolve(
                diffrax.ODETerm(lambda t, y, p: field(y, t, p)), diffrax.Tsit5(), 0.0, 1.0, 0.01,
                y, args=params, saveat=diffrax.SaveAt(ts=ts),
                stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol))
            return sol.ys
        return jax.vmap(one)(y0)

    def ours(lanes):
        return jax.jit(lambda params, y0: solve(field, y0, ts, params, method="tsit5", rtol=rtol,
                                                atol=atol, lanes=lanes))

    print("\n".join(header_lines()))
    print(f"MLP 2-{args.width}-{args.width}-2 (tanh), N = {args.n}, Tsit5, 20 saves, "
          f"rtol {rtol:g}, atol {atol:g}; best of 3 warm calls")
    t_peer, y_peer, first = best_of(lambda: peer(params, y0))
    print(f"diffrax               {1e3 * t_peer:9.1f} ms   first call {first:6.2f} s")
    for lanes in (1, 0):
        fn = ours(lanes)
        t, y, first = best_of(lambda fn=fn: fn(params, y0))
        print(f"shoal lanes={lanes:<2}         {1e3 * t:9.1f} ms   first call {first:6.2f} s   "
              f"{t_peer / t:5.2f}x diffrax   max |shoal - diffrax| = "
              f"{np.max(np.abs(y - y_peer)):.1e}")


if __name__ == "__main__":
    main()
