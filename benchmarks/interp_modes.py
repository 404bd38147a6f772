"""Mukhanov-Sasaki modes with interpolated background tables: shoal Tsit5 versus diffrax Tsit5.

Problem (issue 12): the inflaton background of V = m^2 phi^2 / 2 (examples/mukhanov_sasaki),
tabulated on a uniform grid of 20 001 e-folds N: epsilon(N), log aH(N), (z''/z)/(aH)^2 (N). Each
trajectory is one comoving mode k (4 real variables: Re/Im u, Re/Im u_N) from k/aH = 100
(Bunch-Davies) for 14 e-folds; N = 10^4 modes leaving the horizon 65 to 40 e-folds before the end;
rtol = 1e-8, atol = 1e-10, first step 1e-4, float64, only the final state saved.

The right-hand side reads the three tables in one of three ways (each is one jax.numpy function
shared verbatim by both solvers):

* ``interp``: three ``jnp.interp`` calls (three binary searches over the 20 001-entry grid per
  evaluation);
* ``search1``: one ``jnp.searchsorted`` and three gathers with the linear interpolation written
  out (one binary search per evaluation);
* ``uniform``: the index computed from the uniform spacing, ``floor((N - N0) / dN)`` (no search).

What is timed: ``jax.jit`` of ``shoal.ode.solve(..., method="tsit5")`` on the whole ensemble, and
``jax.jit(jax.vmap(diffeqsolve))`` with ``Tsit5()`` and ``PIDController(rtol, atol, pcoeff=0,
icoeff=1, dcoeff=0)`` (shoal's default integral controller), the same dt0 and step limit. Warm
times are the minimum of ``--repeats`` calls after one compiling call (whose time is reported as
the cold time, together with shoal's C++ compile in a fresh process with an empty cache). Achieved
error: max relative error of P_R(k) ~ |u|^2 at the end, against SciPy DOP853 at rtol 1e-12 on
``--ref`` evenly spaced modes (the same modes for both solvers).

Writes benchmarks/results/interp_modes.csv.

    PYTHONPATH=. .venv/bin/python benchmarks/interp_modes.py              # full run (~6 min)
    PYTHONPATH=. .venv/bin/python benchmarks/interp_modes.py --quick      # N = 1000 (~1 min)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import _common  # noqa: I001 - puts the repository root on sys.path before shoal is imported
import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, str(_common.ROOT / "examples" / "mukhanov_sasaki"))
import main as ms  # noqa: E402

VARIANTS = ("interp", "search1", "uniform")


def make_rhs(bg, variant):
    """The mode right-hand side of examples/mukhanov_sasaki with the tables read by `variant`."""
    if variant == "interp":
        return ms.make_mode_rhs(bg)
    n_np = np.asarray(bg["N"])
    m = n_np.size
    n0, dn = float(n_np[0]), float(n_np[1] - n_np[0])
    if not np.allclose(np.diff(n_np), dn, rtol=1e-9, atol=0):
        raise ValueError("the background grid is not uniform")
    n_tab = jnp.asarray(n_np)  # jnp constants: NumPy arrays cannot be indexed by tracers
    tabs = jnp.asarray(np.stack([np.asarray(bg[k]) for k in ("eps", "lnaH", "w")]))  # (3, M)

    def lookup(n):
        if variant == "search1":
            i = jnp.clip(jnp.searchsorted(n_tab, n, side="right") - 1, 0, m - 2)
        else:
            i = jnp.clip(jnp.floor((n - n0) / dn).astype(jnp.int32), 0, m - 2)
        lo, hi = tabs[:, i], tabs[:, i + 1]
        frac = (n - n_tab[i]) / (n_tab[i + 1] - n_tab[i])
        return lo + frac * (hi - lo)

    def rhs(y, s, p):
        n = p[0] + s
        eps, lnah, w = lookup(n)
        omega2 = jnp.exp(2.0 * (p[1] - lnah)) - w
        damp = 1.0 - eps
        return jnp.stack([y[2], y[3], -damp * y[2] - omega2 * y[0], -damp * y[3] - omega2 * y[1]])

    return rhs


def cold_compile(variant: str) -> float:
    """The first (tracing + code generation + C++ compile) call of the mode solve, in a fresh
    process with an empty SHOAL_CACHE_DIR (s); the background solve before it is not counted."""
    code = textwrap.dedent(f"""
        import json, sys, time
        sys.path.insert(0, {str(_common.ROOT / "benchmarks")!r})
        import _common, jax
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp, numpy as np
        sys.path.insert(0, {str(_common.ROOT / "examples" / "mukhanov_sasaki")!r})
        import main as ms
        import interp_modes as bm
        bg = ms.background()
        lnk, p, y0 = ms.mode_setup(bg, np.linspace(65.0, 40.0, 4))
        fn = ms.shoal_modes(bm.make_rhs(bg, {variant!r}))
        t0 = time.perf_counter()
        jax.block_until_ready(fn(jnp.asarray(y0), jnp.asarray(p)))
        print(json.dumps({{"first_call_s": time.perf_counter() - t0}}))
    """)
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, SHOAL_CACHE_DIR=cache)
        out = subprocess.run(
            [sys.executable, "-c", code],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            cwd=str(_common.ROOT / "benchmarks"),
        )
    return json.loads(out.stdout.strip().splitlines()[-1])["first_call_s"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000, help="number of modes (trajectories)")
    ap.add_argument("--quick", action="store_true", help="N = 1000, 2 repeats")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ref", type=int, default=40, help="modes checked against DOP853")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--skip-compile", action="store_true")
    ap.add_argument("--out-dir", default=str(_common.RESULTS))
    args = ap.parse_args(argv)
    n = 1000 if args.quick else args.n
    repeats = 2 if args.quick else args.repeats
    variants = [v for v in args.variants.split(",") if v]
    for line in _common.header_lines(
        {"modes": str(n), "table": f"{ms.N_TABLE} points", "rtol/atol": f"{ms.RTOL:g}/{ms.ATOL:g}"}
    ):
        print(line)

    bg = ms.background()
    ln_k, params, y0 = ms.mode_setup(bg, np.linspace(65.0, 40.0, n))
    y0_j, p_j = jnp.asarray(y0), jnp.asarray(params)
    idx = _common.subsample(n, args.ref)
    y_ref = ms.scipy_modes(bg, y0[idx], params[idx], ms.REF_TOL, ms.REF_TOL * 1e-2)
    p_ref = ms.power_spectrum(bg, params[idx], y_ref)

    def err(y):
        return float(
            np.max(np.abs(ms.power_spectrum(bg, params[idx], np.asarray(y)[idx]) / p_ref - 1.0))
        )

    rows = []
    for variant in variants:
        rhs = make_rhs(bg, variant)
        s_fn, d_fn = ms.shoal_modes(rhs), ms.diffrax_modes(rhs)
        t0 = time.perf_counter()
        y_s, att_s, status = jax.block_until_ready(s_fn(y0_j, p_j))
        s_first = time.perf_counter() - t0
        if np.any(np.asarray(status) != 0):
            raise RuntimeError(f"shoal ({variant}): {int(np.sum(np.asarray(status) != 0))} failed")
        t0 = time.perf_counter()
        y_d, att_d = jax.block_until_ready(d_fn(y0_j, p_j))
        d_first = time.perf_counter() - t0
        s_times, d_times = [], []
        with _common.ForeignLoad() as load:
            for _ in range(repeats):  # interleaved, so that a load change hits both
                s_times += _common.time_calls(lambda f=s_fn: jax.block_until_ready(f(y0_j, p_j)), 1)
                d_times += _common.time_calls(lambda f=d_fn: jax.block_until_ready(f(y0_j, p_j)), 1)
        row = {
            "variant": variant,
            "N": n,
            "shoal_min_s": min(s_times),
            "diffrax_min_s": min(d_times),
            "ratio": min(d_times) / min(s_times),
            "shoal_err": err(y_s),
            "diffrax_err": err(y_d),
            "shoal_steps": float(np.mean(att_s)),
            "diffrax_steps": float(np.mean(att_d)),
            "shoal_first_call_s": s_first,
            "diffrax_first_call_s": d_first,
            "bg_cores": load.cores,
        }
        if not args.skip_compile:
            row["shoal_cold_compile_s"] = cold_compile(variant)
        rows.append(row)
        print(
            f"{variant:>8}: shoal {_common.fmt_time(row['shoal_min_s'])}, diffrax "
            f"{_common.fmt_time(row['diffrax_min_s'])}, diffrax/shoal {row['ratio']:.1f}x; "
            f"P_R error {row['shoal_err']:.1e} / {row['diffrax_err']:.1e}; steps "
            f"{row['shoal_steps']:.0f}/{row['diffrax_steps']:.0f}; first call "
            f"{row['shoal_first_call_s']:.2f} s / {row['diffrax_first_call_s']:.2f} s"
            + (
                f"; shoal cold (empty cache) {row['shoal_cold_compile_s']:.2f} s"
                if "shoal_cold_compile_s" in row
                else ""
            )
            + f"; bg {load.cores:.2f} cores",
            flush=True,
        )
    out = os.path.join(args.out_dir, "interp_modes.csv")
    _common.write_csv(Path(out), rows)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
