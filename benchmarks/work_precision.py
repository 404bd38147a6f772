"""Work against precision for every method: time and achieved error over tolerances, same run.

For each problem and rtol, every method that suits the problem is timed (median of --repeats
warm calls) and its error measured against an independent reference; ``docs/work_precision.md``
is written from this script's output. Float64, dense LU unless the problem says otherwise, lanes
as by default.

* Lorenz (``lorenz_tsit5.py``'s ensemble: rho = linspace(0, 21, N), y(1) from (1, 0, 0)), not
  stiff: every method (rtol down to 1e-12 for the explicit ones); error: max |y(1) − ref| /
  (|ref| + 1e-8) against SciPy DOP853 at rtol = atol = 2.3e-14 on --ref members.
* Van der Pol ring (``vdp_ring_sparse.py``: 64 variables, coupling range 1, mu = linspace(95, 105,
  N), y(1)), mildly stiff: every method, the Rosenbrock ones with sparsity="auto"; error: max
  |y − ref| over each component's largest |ref|, against shoal's Rodas5P at rtol 1e-12.
* Big-Bang nucleosynthesis (``examples/bbn``: n, p, D, 4He with tabulated weak rates and
  Arrhenius-like nuclear rates, from T = 12.9 MeV to 8.6 keV; a grid of --bbn-n universes over
  (eta_10, N_eff)), stiff: the Rosenbrock methods, atol = 1e-7 · rtol (the example's 1e-13 at its
  rtol 1e-6: D/H is 2.5e-5); error: the largest relative error of Y_p and D/H against Rodas5P at
  rtol 1e-11, atol 1e-18 (which the example checks against SciPy Radau to 9 digits) on --ref
  universes.
* Robertson (``robertson_rodas5p.py``'s ensemble: k1 spread ±5 %, 21 log-spaced saves to 1e5,
  first step 1e-6, the integral controller), stiff: the Rosenbrock methods (Tsit5 would need
  ~10⁸ steps); error: the relative error of the saves where |ref| >= 1e-8 against SciPy Radau
  at rtol 1e-12 on --ref members.
* Robertson as a DAE (``dae_robertson.py``: the third equation replaced by the conservation law
  y1 + y2 + y3 = 1, ``mass=diag(1, 1, 0)``), the same ensemble, saves and error as Robertson's:
  the Rosenbrock methods (the explicit ones take no singular mass).
* Van der Pol, mu = 1000 (``y1'' = mu (1 − y1²) y1' − y1``), y0 = (2, 0), mu spread ±10 %, 11
  saves on [0, 3000] (about 1.5 relaxation periods), stiff: the Rosenbrock methods; error: max
  |y − ref| over each component's largest |ref| (a pointwise relative error near the jumps'
  zero crossings measures phase), against shoal's Rodas5P at rtol 1e-12.

atol = 1e-4 · rtol elsewhere. Rosenbrock23 (order 2) is not run below 1e-6, where it needs ~10⁴
steps a trajectory. Columns: the median time, the mean accepted steps per trajectory, the
achieved error, and the time of the problem's fastest method at that rtol over this one's (1.00:
the fastest; compare errors too, since the orders reach different errors at the same rtol). After
each problem, the matched-error summary: for each error target, each method's fastest run that
reached it.

    PYTHONPATH=. .venv/bin/python benchmarks/work_precision.py [--n 10000] [--repeats 5]
    ... --problems lorenz,robertson   # a subset
"""

from __future__ import annotations

import argparse
import importlib.util
import math

import _common  # noqa: I001 - puts the repository root on sys.path before shoal is imported
import jax

jax.config.update("jax_enable_x64", True)

import dae_robertson as dae  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import lorenz_tsit5 as lor  # noqa: E402
import numpy as np  # noqa: E402
import robertson_rodas5p as rob  # noqa: E402
import vdp_ring_sparse as ring  # noqa: E402

from shoal.ode import solve  # noqa: E402

EXPLICIT = ("tsit5", "vern7", "vern9")
STIFF = ("rodas5p", "rodas4", "rosenbrock23")
ALL = EXPLICIT + STIFF
# The tightest rtol a method is run at (Lorenz's 1e-12 is for the high-order explicit pairs).
TIGHTEST = {"rosenbrock23": 1e-6, "rodas4": 1e-10, "rodas5p": 1e-10}
VDP_T = np.linspace(0.0, 3000.0, 11)
RING_VARS = 64
MATCHED_ERRORS = (1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 1e-11, 1e-12)


def _scaled_error(ref):
    """max |y − ref| relative to each component's largest |ref| over the ensemble and the saves:
    near a zero crossing a pointwise relative error measures the phase, not the accuracy."""
    scale = np.max(np.abs(ref), axis=tuple(range(ref.ndim - 1)))

    def error(ys):
        return float(np.max(np.abs(np.asarray(ys) - ref) / scale))

    return error


def _steps_of(out):
    ys, stats = out
    return ys, stats["accepted"]


def lorenz_case(n: int, n_ref: int):
    rho = np.linspace(0.0, lor.RHO_MAX, n)
    refs = {int(i): lor.reference(float(rho[i])) for i in _common.subsample(n, n_ref)}

    def run(method, rtol):
        fn = _common.jit_solve(lor.lorenz, lor.Y0, [lor.T0, lor.T1],
                               lambda ys, st: (ys[:, -1], st["accepted"]), method=method,
                               rtol=rtol, atol=1e-4 * rtol, max_steps=lor.MAX_STEPS)
        return lambda: fn(jnp.asarray(rho))

    def error(ys):
        ys = np.asarray(ys)
        return max(float(np.max(np.abs(ys[i] - ref) / (np.abs(ref) + 1e-8)))
                   for i, ref in refs.items())

    return run, error


def ring_case(n: int):
    f = ring.make_ring(1)
    y0 = ring.y0_of(RING_VARS)
    mu = np.linspace(ring.MU_LO, ring.MU_HI, n)
    ref = np.asarray(solve(f, y0, ring.T_SPAN, mu[:, None], method="rodas5p", rtol=1e-12,
                           atol=1e-12))[:, -1]

    def run(method, rtol):
        sparse = {} if method in EXPLICIT else {"sparsity": "auto"}
        fn = _common.jit_solve(f, y0, ring.T_SPAN, lambda ys, st: (ys[:, -1], st["accepted"]),
                               method=method, rtol=rtol, atol=1e-4 * rtol,
                               max_steps=ring.MAX_STEPS, **sparse)
        return lambda: fn(jnp.asarray(mu))

    return run, _scaled_error(ref)


def _bbn_example():
    spec = importlib.util.spec_from_file_location("bbn_example",
                                                  _common.ROOT / "examples" / "bbn" / "main.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bbn_case(n: int, n_ref: int):
    bbn = _bbn_example()
    side = max(2, math.isqrt(n))
    log_eta, n_eff = np.meshgrid(np.linspace(np.log10(3.0), 1.0, side), np.linspace(1.5, 5.0, side),
                                 indexing="ij")
    params = np.stack([10.0 ** log_eta.ravel(), n_eff.ravel()], axis=1)
    subset = _common.subsample(len(params), n_ref)
    ref = bbn.observables(np.asarray(bbn.shoal_final(jnp.asarray(params[subset]), bbn.REF_RTOL,
                                                     bbn.REF_ATOL)[0]))

    def run(method, rtol):
        fn = jax.jit(lambda p: _steps_of(bbn.shoal_final(p, rtol, 1e-7 * rtol, method=method)))
        return lambda: fn(jnp.asarray(params))

    def error(ys):
        got = bbn.observables(np.asarray(ys)[subset])
        return max(float(np.max(np.abs(np.asarray(g) / np.asarray(r) - 1.0)))
                   for g, r in zip(got, ref, strict=True))

    return run, error


def robertson_case(n: int, n_ref: int, dae_form: bool = False):
    k1 = rob.k1_values(n)
    subset = _common.subsample(n, n_ref)
    refs = np.stack([rob.reference(float(k1[i])) for i in subset])  # (members, saves, 3)
    f, form = (dae.robertson_dae, {"mass": dae.MASS}) if dae_form else (rob.robertson, {})

    def run(method, rtol):
        fn = _common.jit_solve(f, rob.Y0, rob.T_SPAN,
                               lambda ys, st: (ys, st["accepted"]), method=method, rtol=rtol,
                               atol=1e-4 * rtol, first_step=rob.FIRST_STEP,
                               max_steps=rob.MAX_STEPS, **rob.GAINS, **form)
        return lambda: fn(jnp.asarray(k1))

    def error(ys):
        # errors() takes (members, saves, 3): it drops the saves at t = 0.
        return rob.errors(np.asarray(ys)[subset], refs)[1]

    return run, error


def van_der_pol(y, t, p):
    return jnp.stack([y[1], p[0] * (1.0 - y[0] ** 2) * y[1] - y[0]])


def van_der_pol_case(n: int):
    mu = 1000.0 * (1.0 + 0.1 * np.linspace(-1.0, 1.0, n))[:, None]
    y0 = np.tile([2.0, 0.0], (n, 1))
    ref = np.asarray(solve(van_der_pol, y0, VDP_T, mu, method="rodas5p", rtol=1e-12,
                           atol=1e-12))

    def run(method, rtol):
        fn = jax.jit(lambda mu: _steps_of(solve(van_der_pol, y0, VDP_T, mu, method=method,
                                                rtol=rtol, atol=1e-4 * rtol,
                                                return_stats=True)))
        return lambda: fn(jnp.asarray(mu))

    return run, _scaled_error(ref)


def cases(args):
    """name -> (methods, rtols, run, error), built only for the problems asked for."""
    make = {
        "lorenz": lambda: (f"Lorenz N={args.n}", ALL, (1e-4, 1e-6, 1e-8, 1e-10, 1e-12),
                           *lorenz_case(args.n, args.ref)),
        "ring": lambda: (f"VdP ring {RING_VARS} vars N={args.ring_n}", ALL, (1e-4, 1e-6, 1e-8),
                         *ring_case(args.ring_n)),
        "bbn": lambda: (f"BBN N={args.bbn_n}", STIFF, (1e-4, 1e-6, 1e-8),
                        *bbn_case(args.bbn_n, args.ref)),
        "robertson": lambda: (f"Robertson N={args.n}", STIFF, (1e-3, 1e-4, 1e-6, 1e-8),
                              *robertson_case(args.n, args.ref)),
        "robertson_dae": lambda: (f"Robertson DAE N={args.n}", STIFF, (1e-3, 1e-4, 1e-6, 1e-8),
                                  *robertson_case(args.n, args.ref, dae_form=True)),
        "vdp": lambda: (f"Van der Pol mu=1000 N={args.vdp_n}", STIFF, (1e-3, 1e-4, 1e-6, 1e-8),
                        *van_der_pol_case(args.vdp_n)),
    }
    for key in args.problems.split(","):
        if key not in make:
            raise SystemExit(f"--problems: unknown problem {key!r}; choose from {sorted(make)}")
        yield make[key]()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10000, help="Lorenz and Robertson ensembles")
    parser.add_argument("--ring-n", type=int, default=1000)
    parser.add_argument("--vdp-n", type=int, default=1000)
    parser.add_argument("--bbn-n", type=int, default=1024, help="rounded down to a square")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--ref", type=int, default=8)
    parser.add_argument("--problems", default="lorenz,ring,bbn,robertson,robertson_dae,vdp")
    args = parser.parse_args()
    print("\n".join(_common.header_lines()))
    print(f"{'problem':30} {'rtol':>6} {'method':12} {'median':>10} {'steps':>8} {'error':>9}"
          f" {'fastest/this':>13}")
    for name, methods, rtols, run, error in cases(args):
        runs = []  # (method, seconds, error) of every run of this problem
        for rtol in rtols:
            rows = []
            for method in methods:
                if rtol < TIGHTEST.get(method, 0.0):
                    continue
                fn = run(method, rtol)
                ys, steps = jax.block_until_ready(fn())
                seconds = _common.median(
                    _common.time_calls(lambda fn=fn: jax.block_until_ready(fn()), args.repeats))
                rows.append((method, seconds, float(np.mean(steps)), error(ys)))
            fastest = min(seconds for _, seconds, _, _ in rows)
            for method, seconds, steps, err in rows:
                print(f"{name:30} {rtol:6.0e} {method:12} {_common.fmt_time(seconds):>10}"
                      f" {steps:8.1f} {err:9.1e} {fastest / seconds:13.2f}", flush=True)
                runs.append((method, seconds, err))
        print_matched(name, methods, runs)


def print_matched(name: str, methods, runs) -> None:
    """For each error target, each method's fastest run with error <= target ("-": none)."""
    print(f"{name}: fastest run reaching each error")
    print(f"  {'error <=':>9}" + "".join(f" {m:>13}" for m in methods))
    for target in MATCHED_ERRORS:
        cells = []
        for method in methods:
            times = [s for m, s, e in runs if m == method and e <= target]
            cells.append(_common.fmt_time(min(times)) if times else "-")
        if any(c != "-" for c in cells):
            print(f"  {target:9.0e}" + "".join(f" {c:>13}" for c in cells), flush=True)


if __name__ == "__main__":
    main()
