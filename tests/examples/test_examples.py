"""Smoke runs of the worked applications in examples/: each main.py --smoke in a subprocess.

Each run must exit 0 and print its ``CHECK name value`` lines; the values are held to physical
ranges (BBN abundances, the 21cm absorption trough, n_s against slow roll) and to the accuracy
checks the scripts make (achieved errors against tight references, a gradient against central
differences). SHOAL_CACHE_DIR (and the rest of the environment) is inherited, so a warm cache
skips the C++ compiles.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_smoke(name: str, timeout: float = 240.0, args=()) -> dict[str, float]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env.setdefault("MPLBACKEND", "Agg")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name / "main.py"), "--smoke", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    tail = f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0, f"{name} --smoke failed:\n{tail}"
    checks = {}
    for line in proc.stdout.splitlines():
        if line.startswith("CHECK "):
            _, key, value = line.split()
            checks[key] = float(value)
    return checks


def test_bbn_smoke():
    c = run_smoke("bbn")
    # a 4-species toy near eta_10 = 6.1, N_eff = 3: Y_p ~ 0.24, D/H a few 1e-5
    assert 0.22 < c["Yp_standard"] < 0.26
    assert 1e-5 < c["DH_standard"] < 1e-4
    assert c["shoal_DH_rel_error"] < 1e-4  # rtol 1e-6 against rtol 1e-11
    assert c["grad_rel_error"] < 1e-3  # jax.grad through the solve against central differences


def test_igm_21cm_smoke():
    c = run_smoke("igm_21cm")
    assert -300.0 < c["trough_mK"] < 0.0  # an absorption trough
    assert 10.0 < c["trough_z"] < 30.0
    assert c["dTb_error_mK"] < 0.1


def test_mukhanov_sasaki_smoke():
    c = run_smoke("mukhanov_sasaki")
    assert c["n_s_deviation_from_slow_roll"] < 0.01
    assert 1e-9 < c["P_R_at_pivot"] < 4e-9
    assert c["P_R_rel_error"] < 1e-5


def test_distributed_smoke():
    # Two local processes (jax.distributed), one CPU device each: the scan's best point is the
    # true one (on the grid), the result spans both processes' devices.
    c = run_smoke("distributed", timeout=180.0, args=("--local", "2"))
    assert c["best_damping"] == 0.3 and abs(c["best_omega"] - 1.7) < 1e-12
    assert c["sharded_over"] == 2 and c["gradients_finite"] == 1
    assert c["gradient_vs_central_difference"] < 1e-4
