"""Registers, stack and NVRTC compile time of every CUDA kernel variant, for one architecture.

Compiles exactly what the CUDA lowering compiles (tests/cuda/test_nvrtc.py's variants: Tsit5,
Rodas5P fp64/fp32 LU, dense and sparse, with sensitivities) with ``-Xptxas=-v``; needs NVRTC,
no GPU. ``--real`` adds real-sized models: the DISCO-EB-sized Boltzmann model of
benchmarks/_boltzmann_like.py (72 variables, three spline tables) with Tsit5 and with Rodas5P,
dense and sparse (its detected pattern, AMD ordering), and a 32-variable kinetics model reading
1 120 parameters with Rodas5P (tests/codegen/test_param_contractions.py's, which once failed to
launch on an H200 for its stack). ``--only`` picks cases by name.

Stack and spills are the kernel's with its callees (ptxas's cumulative stack size, spill stores
summed over every function it compiled): device code keeps some functions out of line.

    PYTHONPATH=. .venv/bin/python scripts/kernel_resources.py [--arch sm_90] [--real]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "cuda"))
sys.path.insert(0, str(ROOT))


def _real_cases() -> dict:
    """name -> (f, n_vars, n_params, Variant) for the real-sized models."""
    import jax.numpy as jnp
    import numpy as np

    from benchmarks import _boltzmann_like as boltzmann
    from shoal.ode._kernel_source import Variant
    from shoal.ode._model import detect_pattern
    from shoal.ode._options import Method, Ordering, SparsityPattern

    n, n_params = boltzmann.N_VARS, boltzmann.N_PARAMS
    pattern = detect_pattern(boltzmann.rhs, n, n_params, np.float64) | np.eye(n, dtype=bool)
    sparse = dict(sparsity=SparsityPattern(pattern), ordering=Ordering.AMD)
    def kinetics(y, t, p):  # rates from a 32 × 3 parameter table, mixed by a 32 × 32 matrix
        w, s = p[:96].reshape(32, 3), p[96:].reshape(32, 32)
        return s @ (w[:, 0] * jnp.exp(-w[:, 1] / (1.0 + y**2))) - w[:, 2] * y

    return {
        "kinetics_rodas5p": (kinetics, 32, 96 + 32 * 32, Variant(Method.RODAS5P)),
        "boltzmann_tsit5": (boltzmann.rhs, n, n_params, Variant(Method.TSIT5)),
        "boltzmann_rodas5p": (boltzmann.rhs, n, n_params, Variant(Method.RODAS5P)),
        "boltzmann_sparse": (boltzmann.rhs, n, n_params, Variant(Method.RODAS5P, **sparse)),
    }


def report(log: str, entry: str) -> tuple[str, str, str]:
    """(registers, stack bytes, spill-store bytes) of `entry` from a ptxas -v report."""
    block = log.split(f"Compiling entry function '{entry}'")[-1]
    registers = re.search(r"Used (\d+) registers", block)
    frame = re.search(r"(\d+) bytes stack frame", block)
    cumulative = re.search(r"(\d+) bytes cumulative stack size", block)
    stack = cumulative or frame
    spills = sum(int(s) for s in re.findall(r"(\d+) bytes spill stores", log))
    return (registers.group(1) if registers else "?", stack.group(1) if stack else "?",
            str(spills))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--real", action="store_true", help="add the real-sized models")
    parser.add_argument("--only", default="", help="comma-separated case names")
    args = parser.parse_args()
    import jax
    import numpy as np

    jax.config.update("jax_enable_x64", True)
    import test_nvrtc as variants

    from shoal import _nvrtc
    from shoal.ode import _codegen, _kernel_source

    cases = dict(variants._variants())  # built once: the sparse ones detect their pattern
    if args.real:
        cases.update(_real_cases())
    if args.only:
        cases = {name: cases[name] for name in args.only.split(",")}

    print(f"{'case':22s} {'registers':>9s} {'stack B':>8s} {'spill B':>8s} {'compile':>8s}")
    for name, (f, n_vars, n_params, variant) in cases.items():
        model = _codegen.generate_model(f, n_vars, n_params, np.float64)
        source = _kernel_source.library_source(model, variant, "cuda")
        t0 = time.perf_counter()
        _, log = _nvrtc.compile_source(variants._keyed(source), args.arch,
                                       extra=("-Xptxas=-v",))
        seconds = time.perf_counter() - t0
        registers, stack, spills = report(log, variant.entry)
        print(f"{name:22s} {registers:>9s} {stack:>8s} {spills:>8s} {seconds:7.1f}s", flush=True)


if __name__ == "__main__":
    main()
