"""The worked SCF example (examples/scf/main.py --smoke): published RHF/STO-3G energies, the
nuclear gradient through occupied-only eigh subsets against central differences, and the
optimised H2 bond length."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_scf_example_smoke():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "scf" / "main.py"), "--smoke"],
        env=env, capture_output=True, text=True, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    c = {}
    for line in proc.stdout.splitlines():
        if line.startswith("CHECK "):
            _, key, value = line.split()
            c[key] = float(value)
    assert c["h2_energy_error"] < 5e-5  # Szabo & Ostlund quote -1.1167 (four decimals)
    assert c["heh_energy_error"] < 1e-5  # -2.860662 from six-digit contraction coefficients
    assert c["grad_rel_error"] < 1e-6  # central differences with h = 1e-4
    assert abs(c["h2_bond_bohr"] - 1.346) < 1e-3
    assert c["h3_side_spread"] < 0.1  # moving towards equilateral after 15 steps
