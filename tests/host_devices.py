"""Run a test script in a fresh Python with several host CPU devices (XLA_FLAGS must be set before
JAX starts, so multi-device cases live in a child process)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def environment(devices: int, *paths) -> dict:
    """The child's environment: CPU only, ``devices`` host devices, the repository and tests/ (and
    ``paths``) importable."""
    path = [str(ROOT), str(ROOT / "tests"), *map(str, paths), os.environ.get("PYTHONPATH", "")]
    return dict(os.environ, XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} "
                f"--xla_force_host_platform_device_count={devices}",
                JAX_PLATFORMS="cpu", PYTHONPATH=os.pathsep.join(path))


def run_script(script: str, devices: int = 2, timeout: float = 900) -> None:
    """Run ``script`` with ``devices`` host devices; it must exit 0 and end by printing ok."""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=environment(devices), timeout=timeout, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.strip().endswith("ok"), proc.stdout[-2000:]
