"""shoal.linalg.eigh against its peers, float64, CPU, in one process.

Forward (eigenvalues + eigenvectors) and value_and_grad of a loss that uses both, for the
generalized problem with a random SPD B (and the standard problem), on single matrices and batches:

    shoal (LAPACK kernels)     shoal.linalg.eigh(a, b)
    shoal method="jax"         Cholesky reduction + jnp.linalg.eigh, same derivative rule
    eigh (PyPI, the seed)      eigh.eigh_gen / eigh.eigh   (if importable; --eigh-path adds a dir)
    SciPy                      scipy.linalg.eigh (forward only, batches in a Python loop)
    jnp.linalg.eigh            standard problem only (JAX has no generalized solver)

Times are medians of --repeats runs after a warm-up (compile) call, in milliseconds, with all
peers of a case timed round-robin so that a changing machine load affects them alike; "x" columns
are peer time / shoal time (> 1: shoal faster). "err" is the achieved error: max |w - w_scipy| /
max |w_scipy| for the forward pass, and for gradients the relative difference from shoal's
gradient (which the test suite checks against finite differences).

    .venv/bin/python benchmarks/eigh_bench.py [--quick] [--eigh-path DIR]
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import scipy.linalg as sl

jax.config.update("jax_enable_x64", True)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from shoal.linalg import eigh as shoal_eigh  # noqa: E402


def load_seed_package(path: str | None):
    if path:
        sys.path.insert(0, path)
    try:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import eigh as seed  # the PyPI `eigh` package
        return seed
    except ImportError:
        return None


def make_problem(rng, batch, n):
    shape = (batch, n, n) if batch else (n, n)
    x = rng.normal(size=shape)
    a = x + np.swapaxes(x, -1, -2)
    y = rng.normal(size=shape)
    b = y @ np.swapaxes(y, -1, -2) / n + np.eye(n)
    return a, b


def loss_from(w, v):
    # Uses eigenvalues and eigenvectors, independent of eigenvector signs.
    k = w.shape[-1]
    weights = jnp.linspace(0.0, 1.0, k)
    return jnp.sum(w**2 * weights) + jnp.sum((v**2) * weights)


def rel_err(x, ref):
    x, ref = np.asarray(x), np.asarray(ref)
    return float(np.max(np.abs(x - ref)) / max(np.max(np.abs(ref)), 1e-300))


def peers(seed, generalized: bool):
    """name -> (forward fn, loss fn or None); each takes (a, b) and handles a leading batch."""
    out = {}
    if generalized:

        def sh(a, b):
            return shoal_eigh(a, b)

        def shj(a, b):
            return shoal_eigh(a, b, method="jax")
    else:

        def sh(a, b):
            return shoal_eigh(a)

        def shj(a, b):
            return shoal_eigh(a, method="jax")

    out["shoal"] = sh
    out["shoal-jax"] = shj
    if seed is not None:
        if generalized:

            def sd(a, b):
                f = seed.eigh_gen
                return jax.vmap(f)(a, b) if a.ndim == 3 else f(a, b)
        else:

            def sd(a, b):
                f = seed.eigh
                return jax.vmap(f)(a) if a.ndim == 3 else f(a)

        out["eigh(pkg)"] = sd
    if not generalized:
        out["jnp"] = lambda a, b: jnp.linalg.eigh(a)
    return out


def scipy_forward(a, b, generalized):
    if a.ndim == 2:
        return sl.eigh(a, b if generalized else None)
    return [sl.eigh(a[i], b[i] if generalized else None) for i in range(a.shape[0])]


def interleaved_medians(fns: dict, repeats: int) -> dict:
    """Median wall time (ms) of each callable, timed round-robin: on a shared machine whose load
    changes during the run, every peer then sees the same conditions."""
    for fn in fns.values():
        jax.block_until_ready(fn())  # warm-up / compile
    times = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            jax.block_until_ready(fn())
            times[k].append(time.perf_counter() - t0)
    return {k: 1e3 * statistics.median(v) for k, v in times.items()}


def run_case(rng, seed, batch, n, generalized, repeats, rows):
    a, b = make_problem(rng, batch, n)
    aj, bj = jnp.asarray(a), jnp.asarray(b)
    label = f"{batch}x{n}x{n}" if batch else f"{n}x{n}"
    kind = "gen" if generalized else "std"
    ref = scipy_forward(a, b, generalized)
    ref_w = ref[0] if a.ndim == 2 else np.stack([r[0] for r in ref])
    result = {"case": label, "problem": kind}
    timed = {"scipy_fwd": lambda: scipy_forward(a, b, generalized)}
    grads = {}
    for name, fn in peers(seed, generalized).items():
        fwd = jax.jit(fn)
        vg = jax.jit(
            jax.value_and_grad(
                lambda a, b, fn=fn: loss_from(*fn(a, b)), argnums=(0, 1) if generalized else 0
            )
        )
        w, _ = fwd(aj, bj)
        result[f"{name}_err"] = rel_err(w, ref_w)
        timed[f"{name}_fwd"] = lambda fwd=fwd: fwd(aj, bj)
        try:
            _, g = vg(aj, bj)
            grads[name] = g
            timed[f"{name}_vg"] = lambda vg=vg: vg(aj, bj)
        except Exception as exc:  # a peer without a working gradient
            print(f"  {name}: value_and_grad failed: {type(exc).__name__}: {exc}"[:200])
            result[f"{name}_vg"] = float("nan")
    result.update(interleaved_medians(timed, repeats))
    result["load1"] = os.getloadavg()[0]  # other processes on the machine during this case
    base = grads.get("shoal")
    for name, g in grads.items():
        if name != "shoal" and base is not None:
            gs = g if isinstance(g, tuple) else (g,)
            bs = base if isinstance(base, tuple) else (base,)
            result[f"{name}_gerr"] = max(
                rel_err(fold(x), fold(y)) for x, y in zip(gs, bs, strict=True)
            )
    rows.append(result)
    print_row(result)


def fold(g):
    """Gradient w.r.t. a symmetric matrix, folded onto its lower triangle.

    shoal reads only the lower triangle, so its gradient lives there; a peer that reads the whole
    matrix spreads the same information over both triangles.
    """
    g = np.asarray(g)
    diag = np.diagonal(g, axis1=-2, axis2=-1)
    return np.tril(g + np.swapaxes(g, -1, -2)) - diag[..., None] * np.eye(g.shape[-1])


def fmt(x):
    if x != x:
        return "—"
    return f"{x:.3g}" if x < 100 else f"{x:.0f}"


def print_row(r):
    s = r["shoal_fwd"]
    sg = r["shoal_vg"]
    parts = [f"{r['problem']} {r['case']:>14}", f"shoal {fmt(s):>7} / {fmt(sg):>7} ms"]
    parts.append(f"scipy {fmt(r['scipy_fwd']):>7} ({r['scipy_fwd'] / s:4.2f}x)")
    for name in ("eigh(pkg)", "jnp", "shoal-jax"):
        if f"{name}_fwd" in r:
            f, g = r[f"{name}_fwd"], r[f"{name}_vg"]
            ge = r.get(f"{name}_gerr")
            parts.append(
                f"{name} {fmt(f)} ({f / s:4.2f}x) / {fmt(g)} ({g / sg:4.2f}x)"
                + (f" gerr {ge:.1e}" if ge is not None else "")
            )
    parts.append(f"err {r['shoal_err']:.1e}")
    parts.append(f"load {r['load1']:.1f}")
    print(" | ".join(parts), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument(
        "--eigh-path",
        default=os.environ.get("SHOAL_BENCH_EIGH_PATH"),
        help="directory holding the PyPI `eigh` package, if not installed",
    )
    p.add_argument("--sizes", help="single-matrix orders, e.g. 32,1024 (empty: none)")
    p.add_argument("--batches", help="batches as COUNTxN, e.g. 1000x8,100x128 (empty: none)")
    p.add_argument("--problems", default="gen,std", help="gen, std or gen,std")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "eigh_bench.csv"))
    args = p.parse_args()
    seed = load_seed_package(args.eigh_path)
    if seed is None:
        print("note: the PyPI `eigh` package is not importable; its columns are skipped")
    rng = np.random.default_rng(0)
    sizes = [32, 128] if args.quick else [32, 64, 128, 256, 512, 1024]
    batches = [(100, 8), (10, 32)] if args.quick else [(1000, 8), (1000, 32), (100, 128)]
    if args.sizes is not None:
        sizes = [int(x) for x in args.sizes.split(",") if x]
    if args.batches is not None:
        batches = [tuple(int(y) for y in x.split("x")) for x in args.batches.split(",") if x]
    repeats = 2 if args.quick else args.repeats
    blas = os.environ.get("SHOAL_LINALG_BLAS_THREADS", "auto")
    print(
        f"jax {jax.__version__}, {os.cpu_count()} CPUs, SHOAL_LINALG_BLAS_THREADS={blas}; "
        "times: forward / value_and_grad (ms), (peer/shoal)"
    )
    rows = []
    for generalized in [p == "gen" for p in args.problems.split(",")]:
        for n in sizes:
            run_case(
                rng, seed, 0, n, generalized, repeats if n < 1024 else max(3, repeats // 2), rows
            )
        for batch, n in batches:
            run_case(rng, seed, batch, n, generalized, repeats, rows)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    keys = sorted({k for r in rows for k in r}, key=lambda k: (k not in ("problem", "case"), k))
    with out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {out}")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    if not any(r["problem"] == "gen" and r["case"].count("x") == 1 for r in rows):
        return  # the plot shows generalized single matrices only
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, what in zip(axes, ("fwd", "vg"), strict=True):
        single = [
            r
            for r in rows
            if r["problem"] == "gen" and r["case"].count("x") == 1  # "NxN", not "BxNxN"
        ]
        ns = [int(r["case"].split("x")[0]) for r in single]
        for name in ("shoal", "shoal-jax", "eigh(pkg)"):
            if f"{name}_{what}" in single[0]:
                ax.loglog(ns, [r[f"{name}_{what}"] for r in single], "o-", label=name)
        if what == "fwd":
            ax.loglog(ns, [r["scipy_fwd"] for r in single], "s--", label="scipy")
        ax.set_xscale("log", base=2)
        ax.set_xticks(ns, [str(n) for n in ns])
        ax.minorticks_off()
        ax.set_xlabel("n")
        ax.set_ylabel("ms")
        ax.set_title(f"generalized, float64: {'forward' if what == 'fwd' else 'value_and_grad'}")
        ax.legend()
    fig.tight_layout()
    fig.savefig(out.with_suffix(".png"), dpi=120)
    print(f"wrote {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
