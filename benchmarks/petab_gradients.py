"""Gradients of a fit on the PEtab-sized networks of ``petab_like.py``: forward sensitivities
against the adjoint, both against the value.

Issue 27's goal for forward mode where it is chosen: ``value_and_grad`` within 0.8 (1 + m) x the
value on PEtab-sized models (m = 13-20 parameters, Hill kinetics, Rodas5P). Each network of
``petab_like.network`` (a stimulus switched down at t = 20, given as ``tstops``; every rate
constant differentiated: m = 21, 23, 63 at 8, 9, 25 states), N parameter sets, 20 saves on
[0, 100], rtol 1e-8, atol 1e-10, loss a log-normal likelihood's sum of ``log(y + 1e-3)`` over
the saves: ``value_and_grad`` with respect to all rate constants of all members by forward
sensitivities (``adjoint=False``) and by the adjoint (``adjoint=True``), best of 3 warm calls,
each gradient's largest error relative to its largest entry against the adjoint's at rtol 1e-11.

    PYTHONPATH=. .venv/bin/python benchmarks/petab_gradients.py [--n 200] [--sizes 8,9,25]
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np
from _common import best_of, header_lines
from petab_like import N_SAVES, T_END, T_SWITCH, jax_rhs, network

from shoal.ode import solve

jax.config.update("jax_enable_x64", True)



def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--sizes", default="8,9,25")
    args = parser.parse_args()
    ts = jnp.linspace(0.0, T_END, N_SAVES)
    print("\n".join(header_lines()))
    print(f"N = {args.n}, 20 saves on [0, {T_END:g}], rtol 1e-8, atol 1e-10, Rodas5P; "
          "value_and_grad time, and its ratio to the value's")
    print(f"{'states':>6} {'m':>4} {'value':>10} {'forward':>10} {'ratio':>7} {'error':>8} "
          f"{'adjoint':>10} {'ratio':>7} {'error':>8} {'goal 0.8(1+m)':>14}")
    for n in (int(x) for x in args.sizes.split(",")):
        species, reactions, k, y0 = network(n)
        names = list(k)
        f = jax_rhs(species, reactions, names)
        rng = np.random.default_rng(1)
        base = np.array([k[name] for name in names])
        P = jnp.asarray(base * np.exp(0.3 * rng.standard_normal((args.n, len(names)))))
        Y0 = jnp.asarray(np.tile(y0, (args.n, 1)))

        def loss(p, adjoint, rtol=1e-8, f=f, Y0=Y0):
            ys = solve(f, Y0, ts, p, tstops=jnp.array([T_SWITCH]), rtol=rtol, atol=1e-2 * rtol,
                       adjoint=adjoint)
            return jnp.sum(jnp.log(ys[:, 1:] + 1e-3))

        reference = jax.jit(jax.grad(lambda p, loss=loss: loss(p, True, 1e-11)))(P)
        t_value = best_of(jax.jit(lambda loss=loss, P=P: loss(P, False)))[0]
        row = f"{n:>6} {len(names):>4} {1e3 * t_value:8.1f}ms"
        for adjoint in (False, True):
            grad = jax.jit(jax.value_and_grad(lambda p, a=adjoint, loss=loss: loss(p, a)))
            t_grad = best_of(lambda grad=grad, P=P: grad(P))[0]
            g = grad(P)[1]
            error = float(jnp.max(jnp.abs(g - reference)) / jnp.max(jnp.abs(reference)))
            row += f" {1e3 * t_grad:8.1f}ms {t_grad / t_value:6.1f}x {error:8.1e}"
        print(row + f" {0.8 * (1 + len(names)):13.1f}x", flush=True)


if __name__ == "__main__":
    main()
