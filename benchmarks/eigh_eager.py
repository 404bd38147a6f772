"""Eager (outside jit) shoal.linalg.eigh calls on SCF-sized problems, against the same call
jitted and against scipy.linalg.eigh, in one process, float64.

An SCF loop calls eigh(F, S) once per iteration on 7-18 orbitals, often outside jit. Printed:
medians of --repeats calls (µs), all variants timed round-robin; "overhead" is eager − jitted.

    .venv/bin/python benchmarks/eigh_eager.py [--sizes 7,12,18] [--repeats 2000]
"""

from __future__ import annotations

import argparse
import statistics
import time

import _common  # noqa: F401  (puts the checkout on sys.path)
import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg as sl

from shoal.linalg import eigh

jax.config.update("jax_enable_x64", True)


def _medians(fns: dict, repeats: int) -> dict:
    times = {k: [] for k in fns}
    for f in fns.values():
        jax.block_until_ready(f())  # compile, warm caches
    for _ in range(repeats):
        for k, f in fns.items():
            t = time.perf_counter()
            jax.block_until_ready(f())
            times[k].append(time.perf_counter() - t)
    return {k: 1e6 * statistics.median(v) for k, v in times.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="7,12,18")
    p.add_argument("--repeats", type=int, default=2000)
    args = p.parse_args()
    rng = np.random.default_rng(0)
    jitted = jax.jit(eigh)
    print(f"jax {jax.__version__}; medians of {args.repeats} calls, µs")
    for n in (int(s) for s in args.sizes.split(",")):
        x, y = rng.normal(size=(n, n)), rng.normal(size=(n, n))
        f, s = x + x.T, y @ y.T + n * np.eye(n)
        jf, js = jnp.asarray(f), jnp.asarray(s)
        t = _medians(
            {
                "eager (numpy in)": lambda f=f, s=s: eigh(f, s),
                "eager (jax in)": lambda jf=jf, js=js: eigh(jf, js),
                "jitted": lambda jf=jf, js=js: jitted(jf, js),
                "scipy": lambda f=f, s=s: sl.eigh(f, s),
            },
            args.repeats,
        )
        row = " | ".join(f"{k} {v:7.1f}" for k, v in t.items())
        eager = t["eager (jax in)"]
        ratio = eager / t["scipy"]
        print(f"n={n:3d} | {row} | overhead {eager - t['jitted']:5.1f} | eager/scipy {ratio:.2f}x")


if __name__ == "__main__":
    main()
