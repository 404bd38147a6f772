"""Where Rodas5P's sparse solver beats the dense one: the crossover behind ``sparsity=None``.

Models of the kind systems biology brings (PEtab-like mass-action networks): n species, about
1.5 n reactions (A -> B, A + B -> C, degradations), rate constants spread over four decades so
the network is stiff, random but seeded. For each n, Rodas5P on N members at rtol 1e-8 with
``sparsity="dense"`` and ``sparsity="auto"``, warm, best of 3, in the same run; printed with
the pattern's figures (nonzeros of J, colours of its column-intersection graph, nonzeros of
L + U after ordering) and what the default (``sparsity=None``) picks.

    PYTHONPATH=. .venv/bin/python benchmarks/sparse_crossover.py [--n-members 512]
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np
from _common import best_of, header_lines

from shoal.ode import solve
from shoal.ode._model import default_sparsity_choice, detect_pattern
from shoal.ode._sparse import analyze

jax.config.update("jax_enable_x64", True)


def network(n: int, seed: int = 0):
    """(f, n_params): a mass-action network on n species with ~1.5 n reactions."""
    rng = np.random.default_rng(seed)
    reactions = []
    for i in range(n):  # a chain keeps every species connected
        reactions.append(((i,), ((i + 1) % n,)))
    for _ in range(n // 2):
        a, b, c = rng.choice(n, 3, replace=False)
        reactions.append(((int(a), int(b)), (int(c),)))
    for i in rng.choice(n, max(1, n // 4), replace=False):
        reactions.append(((int(i),), ()))
    n_params = len(reactions)

    def f(y, t, p):
        dy = [0.0] * n
        for k, (reactants, products) in enumerate(reactions):
            rate = p[k]
            for r in reactants:
                rate = rate * y[r]
            for r in reactants:
                dy[r] = dy[r] - rate
            for q in products:
                dy[q] = dy[q] + rate
        return jnp.stack([jnp.asarray(d, dtype=y.dtype) + 0.0 * y[0] for d in dy])

    rates = 10.0 ** rng.uniform(-2, 2, n_params)
    return f, rates



def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-members", type=int, default=512)
    parser.add_argument("--sizes", default="4,6,8,10,12,16,20,25,33,48")
    args = parser.parse_args()
    print("\n".join(header_lines()))
    print(f"Rodas5P, N = {args.n_members}, rtol 1e-8, atol 1e-10, t in [0, 10], 11 saves")
    print(f"{'n':>3} {'nnz J':>6} {'colours':>7} {'nnz LU':>7} {'dense ms':>9} {'sparse ms':>9}"
          f" {'dense/sparse':>12}  default")
    ts = np.linspace(0, 10, 11)
    for n in (int(s) for s in args.sizes.split(",")):
        f, rates = network(n)
        p = np.tile(rates, (args.n_members, 1)) * np.linspace(0.5, 2, args.n_members)[:, None]
        y0 = np.tile(np.linspace(1.0, 2.0, n), (args.n_members, 1))
        pattern = detect_pattern(f, n, len(rates), np.float64) | np.eye(n, dtype=bool)
        s = analyze(pattern)
        times = {}
        for sparsity in ("dense", "auto"):
            run = jax.jit(lambda p, sparsity=sparsity, f=f, y0=y0: solve(
                f, y0, ts, p, method="rodas5p", rtol=1e-8, atol=1e-10, sparsity=sparsity))
            times[sparsity] = best_of(lambda run=run, p=p: run(p))[0]
        pick = "sparse" if default_sparsity_choice(pattern) else "dense"
        print(f"{n:3d} {int(pattern.sum()):6d} {s.n_colours:7d} {s.nnz:7d} "
              f"{1e3 * times['dense']:9.1f} {1e3 * times['auto']:9.1f} "
              f"{times['dense'] / times['auto']:11.2f}x  {pick}")


if __name__ == "__main__":
    main()
