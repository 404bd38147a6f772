"""Models that call elementary functions, solved on the scalar path and in SIMD lanes.

Before shoal had its own elementary functions (include/shoal/elementary/), a right-hand side
calling exp, pow or tanh ran one lane at a time through glibc, so shoal solved such a model on
the scalar path by default. Now the lanes compute those functions themselves, with the scalar
path's bits. This times, per model, `lanes=1` against the default (the machine's width) and
checks the two give the same bytes; run it on an older checkout (a worktree of main before the
change) for the "before" column: there the default for these models was the scalar path.

    PYTHONPATH=. .venv/bin/python benchmarks/lane_functions.py [--n 4096]
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np
from _common import best_of, header_lines

from shoal.ode import solve

jax.config.update("jax_enable_x64", True)


def arrhenius(y, t, p):
    """A cooling six-species chain: every rate A exp(−E/T(t)) (the BBN example's rate form)."""
    temp = p[0] / (1.0 + t)
    k = p[1:7] * jnp.exp(-p[7:13] / temp)
    flux = k * y
    return jnp.concatenate([-flux[:1], flux[:-1] - flux[1:]]).at[-1].add(flux[-1])


def hill(y, t, p):
    """A repressilator: three genes repressing each other through Hill functions (pow)."""
    m, q = y[:3], y[3:]
    rep = p[0] / (1.0 + jnp.power(jnp.roll(q, 1) / p[1], p[2])) + p[3]
    return jnp.concatenate([rep - m, p[4] * (m - q)])


def mlp(y, t, p):
    """A tanh network 2-16-16-2 with weights in p (a neural ODE's right-hand side)."""
    w1, w2, w3 = p[:32].reshape(16, 2), p[32:288].reshape(16, 16), p[288:320].reshape(2, 16)
    return w3 @ jnp.tanh(w2 @ jnp.tanh(w1 @ y)) - 0.1 * y


def problems(n: int):
    rng = np.random.default_rng(0)
    p_arr = np.concatenate([np.full((n, 1), 3.0), rng.uniform(1, 10, (n, 6)),
                            rng.uniform(0.5, 5, (n, 6))], 1)
    y_arr = np.tile(np.r_[1.0, np.zeros(5)], (n, 1))
    p_hill = np.stack([rng.uniform(100, 300, n), np.full(n, 10.0), rng.uniform(2.0, 3.0, n),
                       np.full(n, 0.5), np.full(n, 0.3)], 1)
    y_hill = np.tile([1.0, 2.0, 3.0, 10.0, 20.0, 30.0], (n, 1))
    p_mlp = np.tile(rng.normal(0, 0.4, 320), (n, 1))
    y_mlp = rng.normal(0, 1, (n, 2))
    return [
        ("arrhenius (exp)", arrhenius, y_arr, np.linspace(0, 5, 21), p_arr, "rodas5p"),
        ("repressilator (pow)", hill, y_hill, np.linspace(0, 50, 21), p_hill, "tsit5"),
        ("repressilator (pow)", hill, y_hill, np.linspace(0, 50, 21), p_hill, "rodas5p"),
        ("mlp 2-16-16-2 (tanh)", mlp, y_mlp, np.linspace(0, 5, 21), p_mlp, "tsit5"),
    ]



def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4096)
    args = parser.parse_args()
    print("\n".join(header_lines()))
    print(f"N = {args.n}, rtol 1e-8, atol 1e-10; best of 3 warm calls")
    print(f"{'model':<22} {'method':<8} {'lanes=1 [ms]':>12} {'lanes [ms]':>11} {'speed-up':>9}"
          f"  same bytes")
    for name, f, y0, ts, p, method in problems(args.n):
        try:
            times = {}
            outs = {}
            for lanes in (1, 0):
                run = jax.jit(lambda p, f=f, y0=y0, ts=ts, method=method, lanes=lanes: solve(
                    f, y0, ts, p, method=method, rtol=1e-8, atol=1e-10, lanes=lanes))
                times[lanes], out, _ = best_of(lambda run=run, p=p: run(p))
                outs[lanes] = np.asarray(out)
        except Exception as e:  # noqa: BLE001  (a function this checkout cannot compile)
            print(f"{name:<22} {method:<8} failed: {type(e).__name__}: {str(e)[:120]}")
            continue
        same = outs[1].tobytes() == outs[0].tobytes()
        print(f"{name:<22} {method:<8} {1e3 * times[1]:12.1f} {1e3 * times[0]:11.1f} "
              f"{times[1] / times[0]:8.2f}x  {same}")


if __name__ == "__main__":
    main()
