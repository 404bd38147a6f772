"""The kernels' choice of BLAS threads: a lone large matrix gets the idle cores plus its own
(src/linalg/idle_cores.hpp), so cores that other processes keep busy never meet spinning BLAS
threads. Checked through the extension with the cores made busy."""

import os
import subprocess
import sys
import time

from shoal.linalg import _ffi


def test_idle_cores_sees_busy_cores():
    ext = _ffi._linalg_ext
    idle_cores = ext.idle_cores
    if not os.path.exists("/proc/loadavg"):
        assert idle_cores() == -1 and ext.lone_matrix_blas_threads() == 0
        return
    cpus = len(os.sched_getaffinity(0))
    assert idle_cores() <= cpus
    assert 1 <= ext.lone_matrix_blas_threads() <= cpus
    spin = [sys.executable, "-c", "while True: pass"]
    spinners = [subprocess.Popen(spin) for _ in range(cpus + 2)]
    try:
        time.sleep(0.5)
        seen = [idle_cores() for _ in range(5)]
        threads = [ext.lone_matrix_blas_threads() for _ in range(5)]
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    assert max(seen) < 1  # more spinners than cores: no core is idle
    assert max(threads) == 1
