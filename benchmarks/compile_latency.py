"""Cold compile latency of shoal models (issue 12): what a user waits for the first solve.

Each case runs in a fresh Python process with an empty temporary ``SHOAL_CACHE_DIR`` (so nothing
is reused from disk or memory) and makes its first call once; the process reports

* ``codegen``: tracing ``f`` and printing its C++ (``generate_model``, all calls),
* ``compile``: the C++ compiler, summed over the libraries the call builds (a ``sparsity="auto"``
  solve builds two: the sparsity tracer and the solver),
* ``total``: the first call's wall time (trace, codegen, sparse analysis, JAX lowering, compile,
  load and the tiny solve itself; JAX's import and start-up excluded),
* ``lines``: lines of the generated translation units (the core headers not counted), summed,
* ``libs``: how many libraries were compiled,
* ``prelude``: building the precompiled core headers (g++; shoal/_jit.py), which a machine does
  once for its first model; each case's cache holds them before its first call, as a user's
  does after that first model.

Every case is repeated (``--repeats``, default 3) and the minimum of each column is reported: the
development machine is shared, and the minimum is the least-disturbed figure.

    PYTHONPATH=. .venv/bin/python benchmarks/compile_latency.py
    PYTHONPATH=. .venv/bin/python benchmarks/compile_latency.py --cases table --repeats 1
    PYTHONPATH=. .venv/bin/python benchmarks/compile_latency.py --checkout /tmp/base,.  # both

Cases (goals from issues 12 and 26 in brackets):
  lorenz_tsit5, lorenz_rodas5p   3 variables [<= 0.5 s]
  table                          2 variables, a 2 000-entry jnp.interp table, Tsit5 [<= 2 s]
  boltzmann_dense, _sparse       the DISCO-EB-sized model of _boltzmann_like.py, Rodas5P, dense
                                 and sparsity="auto" [issue 26: <= 5 s]
  boltzmann_grad                 jax.grad of a loss through its dense solve, 3 parameters
                                 [issue 26: <= 10 s]
  hierarchy300_sparse            a 300-variable moment hierarchy, sparsity="auto" [< 15 s]
  hierarchy400_dense, _sparse    the same at 400 variables
  mlp64                          a neural ODE, MLP 2-64-64-2 (tanh), its 4 480 weights shared
                                 run-time parameters (benchmarks/neural_ode.py), Tsit5
  mechanism_params               a 10-species, 29-reaction kinetics mechanism whose every
                                 coefficient is a run-time parameter (3 543 of them: rate
                                 constants, stoichiometry, third-body efficiencies, NASA
                                 polynomials), Rodas5P [issue 26: <= 30 s]
  petab<n>                       benchmarks/petab_like.py's n-species network (any n >= 4),
                                 Rodas5P, dense LU

``--split 0,1`` compares one translation unit with the dual-number evaluations compiled apart
(``SHOAL_SPLIT_COMPILE``; shoal/ode/_build.py), e.g. to place EVALUATIONS_APART_MIN_LINES:

    PYTHONPATH=. .venv/bin/python benchmarks/compile_latency.py --split 0,1 \\
        --cases lorenz_rodas5p,petab8,petab25,petab33,boltzmann_dense
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))

TAG = "@@compile_latency@@ "
# Issue 26's goals where it set one (Lorenz, the DISCO-EB-sized model, the mechanism), else
# issue 12's.
GOALS = {"lorenz_tsit5": 0.5, "lorenz_rodas5p": 0.7, "mechanism_params": 30.0, "table": 2.0,
         "boltzmann_dense": 5.0, "boltzmann_sparse": 5.0, "boltzmann_grad": 10.0,
         "hierarchy300_sparse": 15.0}
CASES = ("lorenz_tsit5", "lorenz_rodas5p", "table", "boltzmann_dense", "boltzmann_sparse",
         "boltzmann_grad", "hierarchy300_sparse", "hierarchy400_dense", "hierarchy400_sparse",
         "mlp64", "mechanism_params")


def _case(name: str):
    """A zero-argument callable making the case's first solve (everything imported here)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from shoal.ode import solve

    if name.startswith("lorenz"):
        def lorenz(y, t, p):
            return jnp.stack([10.0 * (y[1] - y[0]), y[0] * (p[0] - y[2]) - y[1],
                              y[0] * y[1] - 8.0 / 3.0 * y[2]])
        method = name.split("_")[1]
        return lambda: solve(lorenz, jnp.array([1.0, 0.0, 0.0]), jnp.array([0.0, 1e-3]),
                             jnp.array([21.0]), method=method)
    if name == "table":
        ts = np.linspace(0.0, 1.0, 2000)
        rate = 1.0 + 0.5 * np.sin(6.0 * ts)

        def decay(y, t, p):
            k = jnp.interp(t, ts, rate)
            return jnp.stack([-k * y[0] + y[1], -p[0] * y[1]])
        return lambda: solve(decay, jnp.array([1.0, 1.0]), jnp.array([0.0, 1e-3]),
                             jnp.array([2.0]), method="tsit5")
    if name.startswith("boltzmann"):
        from benchmarks import _boltzmann_like as model

        y0 = jnp.asarray(model.initial_state())
        t_span = jnp.array(model.TAU_SPAN)
        params = jnp.asarray(model.PARAMS)
        sparsity = "auto" if name.endswith("sparse") else None
        if name.endswith("grad"):
            def loss(p):
                return jnp.sum(solve(model.rhs, y0, t_span, p, rtol=1e-6, atol=1e-10)[-1] ** 2)
            return lambda: jax.grad(loss)(params)
        return lambda: solve(model.rhs, y0, t_span, params, rtol=1e-6, atol=1e-10,
                             sparsity=sparsity)
    if name.startswith("hierarchy"):
        sys.path.insert(0, str(HERE.parent / "tests"))
        from stiff_problems import moment_hierarchy

        n = int(name[len("hierarchy"):].split("_")[0])
        sparsity = "auto" if name.endswith("sparse") else None
        y0 = 1.0 / (1.0 + jnp.arange(n, dtype=jnp.float64))
        return lambda: solve(moment_hierarchy, y0, jnp.array([0.0, 1e-3]), jnp.array([1.0, 0.1]),
                             sparsity=sparsity)
    if name == "mlp64":
        from benchmarks.neural_ode import field, make_params

        return lambda: solve(field, jnp.ones((4, 2)), jnp.array([0.0, 1e-3]), make_params(64),
                             method="tsit5")
    if name == "mechanism_params":
        return _mechanism_case()
    if name.startswith("petab"):  # benchmarks/petab_like.py's networks, Rodas5P, dense LU
        sys.path.insert(0, str(HERE))  # petab_like imports its neighbours as top-level modules
        import petab_like

        species, reactions, k, y0 = petab_like.network(int(name[len("petab"):]))
        f = petab_like.jax_rhs(species, reactions, list(k))
        return lambda: solve(f, jnp.asarray(y0), jnp.array([0.0, 1e-3]),
                             jnp.asarray(list(k.values())), sparsity="dense")
    raise ValueError(f"unknown case {name!r}; the cases are {', '.join(CASES)}")


def _mechanism_case():
    """A gas-phase mechanism the way a kinetics library hands it over: every coefficient an
    entry of params (shapes of a 10-species, 29-reaction H2/O2 mechanism; the values are
    synthetic, the cost is in the structure). Forward rates k = A T^b exp(-Ea/T) with third-body
    enhancement, reverse rates through equilibrium constants from NASA-7 polynomials, mass
    action with stoichiometric matrices; the temperature is a state."""
    import jax.numpy as jnp
    import numpy as np

    from shoal.ode import solve

    n_species, n_reactions = 10, 29
    rng = np.random.default_rng(7)
    reactants = np.zeros((n_reactions, n_species))
    products = np.zeros((n_reactions, n_species))
    for r in range(n_reactions):
        a, b, c = rng.choice(n_species, 3, replace=False)
        reactants[r, [a, b]] = 1.0
        products[r, c] = 1.0 + (r % 2)
    shapes = {"arrhenius": (n_reactions, 3), "reactants": (n_reactions, n_species),
              "products": (n_reactions, n_species), "efficiencies": (n_reactions, n_species),
              "nasa_low": (n_species, 7), "nasa_high": (n_species, 7),
              "troe": (n_reactions, 4), "molar_mass": (n_species,),
              # a kinetics library's per-reaction, per-species tables (orders, reverse
              # orders, sensitivity weights...) that this right-hand side also reads
              "orders": (n_reactions, n_species, 4), "weights": (n_reactions, n_species, 4)}
    params = {k: jnp.asarray(rng.uniform(0.5, 1.5, shape)) for k, shape in shapes.items()}
    params["reactants"], params["products"] = jnp.asarray(reactants), jnp.asarray(products)
    params["arrhenius"] = params["arrhenius"].at[:, 2].multiply(1e3)

    def nasa(coeffs, temperature):
        powers = temperature ** jnp.arange(5.0)
        cp = coeffs[:, :5] @ powers
        h = coeffs[:, :5] @ (powers * temperature / jnp.arange(1.0, 6.0)) + coeffs[:, 5]
        s = (coeffs[:, 0] * jnp.log(temperature)
             + coeffs[:, 1:5] @ (powers[1:] / jnp.arange(1.0, 5.0)) + coeffs[:, 6])
        return cp, h, s

    def rhs(y, t, p):
        c, temperature = y[:n_species], 1000.0 + y[n_species]
        a, b, ea = p["arrhenius"][:, 0], p["arrhenius"][:, 1], p["arrhenius"][:, 2]
        k_forward = a * temperature ** (0.1 * b) * jnp.exp(-ea / temperature)
        third_body = p["efficiencies"] @ c
        pr = k_forward * third_body
        falloff = (pr / (1.0 + pr) * p["troe"][:, 0]
                   + p["troe"][:, 1] * jnp.sum(p["orders"][:, :, 0] * 1e-3, 1))
        low = nasa(p["nasa_low"], temperature)
        high = nasa(p["nasa_high"], temperature)
        cool = temperature < 1000.0
        cp, h, s = (jnp.where(cool, lo, hi) for lo, hi in zip(low, high, strict=True))
        stoich = p["products"] - p["reactants"]
        dg = stoich @ (h - s)
        k_reverse = k_forward * jnp.exp(jnp.clip(dg, -50.0, 50.0) * 1e-3)
        forward = k_forward * falloff * jnp.prod(jnp.where(p["reactants"] > 0, c, 1.0), axis=1)
        reverse = k_reverse * jnp.prod(jnp.where(p["products"] > 0, c, 1.0), axis=1)
        rates = (forward - reverse) * (1.0 + 1e-3 * jnp.sum(p["weights"][:, :, 1], 1))
        dc = stoich.T @ rates
        dtemp = -jnp.dot(h, dc) / (jnp.dot(cp, c) + 1.0) * 1e-3
        return jnp.concatenate([dc * 1e-3 / p["molar_mass"], dtemp[None]])

    y0 = jnp.concatenate([jnp.full(n_species, 0.1), jnp.array([0.0])])
    n_params = sum(int(np.prod(v.shape)) for v in params.values())
    assert 3_500 <= n_params <= 3_700, n_params
    return lambda: solve(rhs, jnp.stack([y0, y0]), jnp.array([0.0, 1e-6]), params)


def _child(name: str) -> None:
    """Run one case in this (fresh) process and print its figures as one tagged JSON line."""
    import jax

    jax.config.update("jax_enable_x64", True)
    from shoal import _jit
    from shoal.ode import _codegen

    figures = {"codegen": 0.0, "compile": 0.0, "lines": 0, "libs": 0}
    generate, build = _codegen.generate, _jit._build_library

    def timed_generate(*args, **kwargs):
        start = time.perf_counter()
        try:
            return generate(*args, **kwargs)
        finally:
            figures["codegen"] += time.perf_counter() - start

    def timed_build(src, output, *args, **kwargs):
        start = time.perf_counter()
        try:
            return build(src, output, *args, **kwargs)
        finally:
            figures["compile"] += time.perf_counter() - start
            figures["lines"] += Path(src).read_text().count("\n")
            figures["libs"] += 1

    _codegen.generate, _jit._build_library = timed_generate, timed_build
    call = _case(name)
    start = time.perf_counter()
    jax.block_until_ready(call())
    figures["total"] = time.perf_counter() - start
    print(TAG + json.dumps(figures), flush=True)


def _prelude_child() -> None:
    """Build the precompiled core headers into the (empty) cache: what the first model ever
    compiled on a machine pays once (shoal/_jit.py: precompiled_prelude)."""
    from shoal import _jit

    start = time.perf_counter()
    built = _jit.uses_precompiled_prelude() and _jit.precompiled_prelude() is not None
    print(TAG + json.dumps({"prelude": time.perf_counter() - start if built else 0.0}),
          flush=True)


def _run_child(args: list[str], env: dict) -> dict:
    proc = subprocess.run([sys.executable, __file__, *args], env=env, capture_output=True,
                          text=True)
    for line in proc.stdout.splitlines():
        if line.startswith(TAG):
            return json.loads(line[len(TAG):])
    raise RuntimeError(f"{' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}")


def measure(name: str, checkout: Path, split: str | None = None) -> dict:
    """One cold run of a case in a fresh process with a new cache directory, importing shoal
    from ``checkout`` (the models come from this script's checkout), with
    ``SHOAL_SPLIT_COMPILE=split`` if given. The cache holds only the precompiled core headers,
    built by a process before (timed as ``prelude``; absent in checkouts before them)."""
    with tempfile.TemporaryDirectory(prefix="shoal-latency-") as cache:
        path = os.pathsep.join(dict.fromkeys([str(checkout), str(HERE.parent)]))
        env = dict(os.environ, SHOAL_CACHE_DIR=cache, PYTHONPATH=path)
        if split is not None:
            env["SHOAL_SPLIT_COMPILE"] = split
        try:
            prelude = _run_child(["--prelude"], env)
        except RuntimeError:  # a checkout without precompiled headers
            prelude = {"prelude": 0.0}
        return {**_run_child(["--child", name], env), **prelude}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated case names")
    parser.add_argument("--repeats", type=int, default=3, help="cold runs per case (min kept)")
    parser.add_argument("--checkout", default=str(HERE.parent),
                        help="comma-separated shoal checkouts to measure, interleaved run by run "
                             "so that a change of load hits all alike (default: this one)")
    parser.add_argument("--split", help="comma-separated SHOAL_SPLIT_COMPILE settings to compare "
                        "(auto, 1, 0), interleaved like checkouts (default: the environment's)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--prelude", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.prelude:
        _prelude_child()
        return
    if args.child:
        _child(args.child)
        return
    checkouts = [Path(c).resolve() for c in args.checkout.split(",")]
    splits = args.split.split(",") if args.split else [None]
    sides = [(c, split) for c in checkouts for split in splits]
    print(f"{'case':<20} | {'checkout':<16} | split | {'codegen':>8} | {'compile':>8} | "
          f"{'total':>8} | {'goal':>5} | {'lines':>7} | libs | prelude (once)")
    print("-" * 122)
    for name in args.cases.split(","):
        runs = {side: [] for side in sides}
        for _ in range(args.repeats):
            for checkout, split in sides:
                runs[checkout, split].append(measure(name, checkout, split))
        goal = GOALS.get(name)
        for (checkout, split), figures in runs.items():
            best = {key: min(run[key] for run in figures) for key in figures[0]}
            print(f"{name:<20} | {str(checkout)[-16:]:<16} | {split or '-':>5} | "
                  f"{best['codegen']:7.2f}s | {best['compile']:7.2f}s | {best['total']:7.2f}s | "
                  f"{f'{goal:g}s' if goal else '-':>5} | {best['lines']:>7} | {best['libs']:>4} | "
                  f"{best['prelude']:7.2f}s", flush=True)


if __name__ == "__main__":
    main()
