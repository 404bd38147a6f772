"""The kernels' choice between BLAS threads and one thread: a lone large matrix gets BLAS threads
only while two cores are idle (src/linalg/idle_cores.hpp), so busy cores never meet spinning BLAS
threads. Checked through the extension's idle_cores() with the cores made busy."""

import os
import subprocess
import sys
import time

import pytest

from shoal.linalg import _ffi

pytestmark = pytest.mark.skipif(not _ffi.available(), reason="compiled extension unavailable")


def test_idle_cores_sees_busy_cores():
    idle_cores = _ffi._linalg_ext.idle_cores
    if not os.path.exists("/proc/loadavg"):
        assert idle_cores() == -1
        return
    cpus = len(os.sched_getaffinity(0))
    assert idle_cores() <= cpus
    spin = [sys.executable, "-c", "while True: pass"]
    spinners = [subprocess.Popen(spin) for _ in range(cpus + 2)]
    try:
        time.sleep(0.5)
        seen = [idle_cores() for _ in range(5)]
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    assert max(seen) < 2  # more spinners than cores: no core is idle
