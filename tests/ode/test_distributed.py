"""Two processes on localhost with jax.distributed, 2 host CPU devices each: one global ensemble
sharded over the 4 devices, solved and differentiated, equals a single-process solve.

The workers (distributed_worker.py) share this session's compile cache: the first to need the
model builds it under the cache's lock, the other loads it (a per-host cache works the same way,
built once per host). Each worker writes its shards; this process, with one device, solves the
same ensemble and compares: the trajectories and the per-member gradient bit for bit, the loss (a
sum over 4 devices' partial sums) to rounding.
"""

import socket
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np

import shoal

from distributed_problem import ensemble, loss_of, rhs, save_times
from host_devices import environment

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TIMEOUT = 300  # seconds for both workers together


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _gather(records, name, n):
    out = None
    for record in records:
        for key in record.files:
            if key.startswith(f"{name}_") and key.endswith("_rows"):
                data = record[key[:-len("_rows")]]
                if out is None:
                    out = np.full((n, *data.shape[1:]), np.nan, data.dtype) \
                        if data.dtype.kind == "f" else np.full((n, *data.shape[1:]), -1, data.dtype)
                out[record[key]] = data
    return out


def test_two_processes_solve_one_global_ensemble(tmp_path):
    env = environment(2, HERE)
    coordinator = f"127.0.0.1:{_free_port()}"
    workers = [subprocess.Popen([sys.executable, str(HERE / "distributed_worker.py"), coordinator,
                                 str(i), "2", str(tmp_path)], env=env, cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for i in range(2)]
    try:
        outputs = [w.communicate(timeout=TIMEOUT) for w in workers]
    finally:
        for w in workers:
            w.kill()
    for w, (out, err) in zip(workers, outputs, strict=True):
        assert w.returncode == 0, err[-4000:]
        assert out.strip().endswith("ok")

    records = [np.load(tmp_path / f"shards-{i}.npz") for i in range(2)]
    y0, params = ensemble()
    n = y0.shape[0]

    def solve(y0, params):
        return shoal.ode.solve(rhs, y0, save_times(), params, method="rodas5p", return_stats=True)

    ys, stats = jax.jit(solve)(y0, params)
    loss, grad = jax.jit(jax.value_and_grad(loss_of(solve)))(params, y0)
    np.testing.assert_array_equal(_gather(records, "ys", n), np.asarray(ys))
    np.testing.assert_array_equal(_gather(records, "status", n), np.asarray(stats["status"]))
    np.testing.assert_array_equal(_gather(records, "grad", n), np.asarray(grad))
    for record in records:
        np.testing.assert_allclose(record["loss"], loss, rtol=1e-13)
