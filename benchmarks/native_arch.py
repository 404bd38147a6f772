"""Host models built with and without -march=native: time and bit-for-bit equality.

Each setting runs in its own process with its own compile cache (SHOAL_NATIVE_ARCH=1 / 0), on
three cases: Lorenz Tsit5 (N = 10⁴), and the stiff Van der Pol ring (64 variables, N = 500) with
Rodas5P dense and sparse. Prints the best of --repeats timed calls per case and whether the two
builds' results are identical (they must be: no contraction, no reassociation).

    PYTHONPATH=. .venv/bin/python benchmarks/native_arch.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CASES = textwrap.dedent("""
    import json, sys, time
    import jax, jax.numpy as jnp, numpy as np
    jax.config.update("jax_enable_x64", True)
    import shoal

    def lorenz(y, t, p):
        return jnp.stack([p[0] * (y[1] - y[0]), y[0] * (p[1] - y[2]) - y[1],
                          y[0] * y[1] - p[2] * y[2]])

    def ring(y, t, p):
        n = y.shape[0] // 2
        x, v = y[:n], y[n:]
        return jnp.concatenate([v, p[0] * (1 - x**2) * v - x
                                + 10.0 * (jnp.roll(x, 1) - 2 * x + jnp.roll(x, -1))])

    repeats, out = int(sys.argv[1]), sys.argv[2]
    rng = np.random.default_rng(0)
    t = jnp.array([0.0, 1.0])
    ly0 = jnp.asarray(rng.uniform(-10, 10, (10000, 3)))
    lp = jnp.tile(jnp.array([10.0, 28.0, 8.0 / 3.0]), (10000, 1))
    ry0 = jnp.concatenate([2 * jnp.ones((500, 32)), jnp.zeros((500, 32))], axis=1)
    rp = jnp.linspace(95, 105, 500)[:, None]
    cases = {
        "lorenz tsit5 N=1e4": (jax.jit(lambda y, p: shoal.ode.solve(
            lorenz, y, t, p, method="tsit5")), ly0, lp),
        "ring64 rodas5p dense N=500": (jax.jit(lambda y, p: shoal.ode.solve(
            ring, y, t, p, rtol=1e-6, atol=1e-8)), ry0, rp),
        "ring64 rodas5p sparse N=500": (jax.jit(lambda y, p: shoal.ode.solve(
            ring, y, t, p, rtol=1e-6, atol=1e-8, sparsity="auto")), ry0, rp),
    }
    times, values = {}, []
    for name, (fn, y, p) in cases.items():
        values.append(np.asarray(fn(y, p)).ravel())
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn(y, p).block_until_ready()
            best = min(best, time.perf_counter() - t0)
        times[name] = best
    np.save(out, np.concatenate(values))
    print(json.dumps(times))
""")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    import numpy as np

    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for native in ("1", "0"):
            out = Path(tmp) / f"values{native}.npy"
            env = dict(os.environ, SHOAL_NATIVE_ARCH=native,
                       SHOAL_CACHE_DIR=str(Path(tmp) / f"cache{native}"),
                       PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
            proc = subprocess.run([sys.executable, "-c", CASES, str(args.repeats), str(out)],
                                  env=env, capture_output=True, text=True, check=True)
            results[native] = (json.loads(proc.stdout.strip().splitlines()[-1]), np.load(out))
    print(f"{'case':32s} {'native':>10s} {'baseline':>10s} {'change':>8s}")
    for name, t_native in results["1"][0].items():
        t_base = results["0"][0][name]
        print(f"{name:32s} {t_native * 1e3:8.1f}ms {t_base * 1e3:8.1f}ms "
              f"{(t_native / t_base - 1) * 100:+7.0f}%")
    same = np.array_equal(results["1"][1], results["0"][1])
    print(f"results bit-identical: {same} ({results['1'][1].size} values)")


if __name__ == "__main__":
    main()
