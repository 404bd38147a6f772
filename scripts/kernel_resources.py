"""Registers, stack and NVRTC compile time of every CUDA kernel variant, for one architecture.

Compiles exactly what the CUDA lowering compiles (tests/cuda/test_nvrtc.py's variants: Tsit5,
Rodas5P fp64/fp32 LU, dense and sparse, with sensitivities) with ``-Xptxas=-v``; needs NVRTC,
no GPU.

    PYTHONPATH=. .venv/bin/python scripts/kernel_resources.py [--arch sm_90]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="sm_90")
    args = parser.parse_args()
    import jax

    jax.config.update("jax_enable_x64", True)
    import test_nvrtc as variants

    from shoal import _nvrtc

    print(f"{'variant':22s} {'registers':>9s} {'stack B':>8s} {'spill B':>8s} {'compile':>8s}")
    for name in variants.VARIANTS:
        source, variant = variants._source(name)
        t0 = time.perf_counter()
        _, log = _nvrtc.compile_source(variants._keyed(source), args.arch,
                                       extra=("-Xptxas=-v",))
        seconds = time.perf_counter() - t0
        # The entry's own block of the report (callees such as pow have their own).
        block = log.split(f"Compiling entry function '{variant.entry}'")[-1]
        registers = re.search(r"Used (\d+) registers", block)
        frame = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores", block)
        print(f"{name:22s} {registers.group(1) if registers else '?':>9s} "
              f"{frame.group(1) if frame else '?':>8s} {frame.group(2) if frame else '?':>8s} "
              f"{seconds:7.1f}s")


if __name__ == "__main__":
    main()
