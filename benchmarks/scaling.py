"""Scale-out: one ensemble on 1 and 2 host devices, and as 2 processes with jax.distributed.

Each configuration runs in fresh processes (XLA_FLAGS and jax.distributed must be set before JAX
starts). Every device's solve gets one shoal worker thread (SHOAL_NUM_THREADS=1), so a device is a
core and the parallel efficiency T(1 device) / (k T(k devices)) measures what sharding costs or
loses; a last row gives one device shoal's own two threads, what one device already does on this
machine. Workloads: a plain solve (Lorenz, Tsit5, the final state) over rho = linspace(0, 28, N),
whose second half takes 2.4x the steps of the first (a block split is unbalanced), and the same
members in a random order; value_and_grad of a loss through a stiff solve (Robertson, Rodas5P,
joint sensitivities; the gradient with respect to every member's rate constants); and the peer,
diffrax's jit(vmap(diffeqsolve)) Tsit5 on N/8 of the shuffled Lorenz members, sharded the same
way (XLA partitions its batched while loop). Every configuration's result is checked against the
first's.

    PYTHONPATH=. .venv/bin/python benchmarks/scaling.py              # ~1 min on 2 idle cores
    PYTHONPATH=. .venv/bin/python benchmarks/scaling.py --quick      # smaller ensembles

Results: benchmarks/results/scaling.md (and .json).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

WORKLOADS = ("lorenz_plain", "lorenz_shuffled", "robertson_grad")


def workloads(args):
    return WORKLOADS + (("diffrax_lorenz",) if args.peer else ())

CONFIGS = [  # (label, processes, devices per process, shoal threads per device)
    ("1 device, 1 thread", 1, 1, 1),
    ("2 devices (1 process), 1 thread each", 1, 2, 1),
    ("2 processes x 1 device, 1 thread each", 2, 1, 1),
    ("1 device, 2 threads (no sharding)", 1, 1, 2),
]


def worker(args) -> None:
    """One process of a configuration: time both workloads, write times (and, from process 0, the
    gathered results) to args.out."""
    import jax

    jax.config.update("jax_enable_x64", True)
    if args.processes > 1:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(coordinator_address=args.coordinator,
                                   num_processes=args.processes, process_id=args.process_id,
                                   initialization_timeout=120)
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import multihost_utils
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    import shoal

    mesh = Mesh(np.array(jax.devices()), ("traj",))
    along_n = NamedSharding(mesh, PartitionSpec("traj"))

    def global_array(host):
        return jax.make_array_from_callback(host.shape, along_n, lambda index: host[index])

    def lorenz(y, t, p):
        return jnp.stack([10.0 * (y[1] - y[0]), y[0] * (p[0] - y[2]) - y[1],
                          y[0] * y[1] - 8.0 / 3.0 * y[2]])

    def robertson(y, t, p):
        return jnp.stack([-p[0] * y[0] + p[2] * y[1] * y[2],
                          p[0] * y[0] - p[1] * y[1] ** 2 - p[2] * y[1] * y[2],
                          p[1] * y[1] ** 2])

    n_l, n_r = args.lorenz_n, args.robertson_n
    rho = np.linspace(0.0, 28.0, n_l)[:, None]
    y0_l = np.tile([1.0, 0.0, 0.0], (n_l, 1))
    k = np.tile([0.04, 3e7, 1e4], (n_r, 1)) * np.linspace(0.5, 2.0, n_r)[:, None]
    y0_r = np.tile([1.0, 0.0, 0.0], (n_r, 1))

    @jax.jit
    def plain(y0, rho):
        return shoal.ode.solve(lorenz, y0, jnp.asarray([0.0, 10.0]), rho, method="tsit5",
                               rtol=1e-8, atol=1e-8)[:, -1]

    def loss(k, y0):
        ys = shoal.ode.solve(robertson, y0, jnp.asarray([0.0, 1.0, 100.0]), k, method="rodas5p",
                             rtol=1e-6, atol=1e-10)
        return jnp.sum(ys[:, -1, 2]) + jnp.sum(ys[:, 1, 0] ** 2)

    grad = jax.jit(jax.value_and_grad(loss))
    # rho sorted gives the second half of the ensemble 2.4x the steps of the first: a block
    # split is unbalanced. The same members in a random order balance it.
    order = np.random.default_rng(0).permutation(n_l)
    workloads = {"lorenz_plain": (plain, (global_array(y0_l), global_array(rho)), None),
                 "lorenz_shuffled": (plain, (global_array(y0_l), global_array(rho[order])),
                                     np.argsort(order)),
                 "robertson_grad": (grad, (global_array(k), global_array(y0_r)), None)}
    if args.peer:
        import diffrax

        n_d = args.lorenz_n // 8
        rho_d = rho[np.random.default_rng(1).permutation(n_l)[:n_d]]

        @jax.jit
        def peer(rho):
            def one(r):
                term = diffrax.ODETerm(lambda t, y, r: lorenz(y, t, r))
                sol = diffrax.diffeqsolve(
                    term, diffrax.Tsit5(), 0.0, 10.0, 1e-6, jnp.asarray([1.0, 0.0, 0.0]), r,
                    stepsize_controller=diffrax.PIDController(rtol=1e-8, atol=1e-8),
                    saveat=diffrax.SaveAt(t1=True), max_steps=100_000)
                return sol.ys[-1]
            return jax.vmap(one)(rho)

        workloads["diffrax_lorenz"] = (peer, (global_array(rho_d),), None)
    record = {}
    for name, (fn, operands, unshuffle) in workloads.items():
        jax.block_until_ready(fn(*operands))  # compile and warm up
        times = []
        for _ in range(args.repeats):
            multihost_utils.sync_global_devices(name)
            start = time.perf_counter()
            jax.block_until_ready(fn(*operands))
            times.append(time.perf_counter() - start)
        result = jax.tree.leaves(fn(*operands))[-1]  # the final states / the gradient
        gathered = np.asarray(multihost_utils.process_allgather(result, tiled=True))
        if unshuffle is not None:
            gathered = gathered[unshuffle]
        record[name] = {"times": times}
        if args.process_id == 0:
            np.save(f"{args.out}.{name}.npy", gathered)
    with open(f"{args.out}.{args.process_id}.json", "w") as fh:
        json.dump(record, fh)
    if args.processes > 1:
        jax.distributed.shutdown()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_config(label, processes, devices, threads, args, tmp):
    env = dict(os.environ, JAX_PLATFORMS="cpu", SHOAL_NUM_THREADS=str(threads),
               XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}",
               PYTHONPATH=os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")]))
    out = os.path.join(tmp, label.replace(" ", "_").replace(",", ""))
    coordinator = f"127.0.0.1:{_free_port()}"
    cmd = [sys.executable, __file__, "--worker", "--processes", str(processes), "--coordinator",
           coordinator, "--out", out, "--repeats", str(args.repeats), "--lorenz-n",
           str(args.lorenz_n), "--robertson-n", str(args.robertson_n)] + \
        ([] if args.peer else ["--no-peer"])
    procs = [subprocess.Popen(cmd + ["--process-id", str(i)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(processes)]
    for p in procs:
        _, err = p.communicate(timeout=1200)
        if p.returncode != 0:
            raise RuntimeError(f"{label}: worker failed\n{err[-3000:]}")
    records = []
    for i in range(processes):
        with open(f"{out}.{i}.json") as fh:
            records.append(json.load(fh))
    return out, records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--processes", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--process-id", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--coordinator", default="", help=argparse.SUPPRESS)
    parser.add_argument("--out", default="", help=argparse.SUPPRESS)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--lorenz-n", type=int, default=16384)
    parser.add_argument("--robertson-n", type=int, default=2048)
    parser.add_argument("--no-peer", dest="peer", action="store_false",
                        help="skip diffrax (jit(vmap(diffeqsolve)) on the same sharding)")
    parser.add_argument("--quick", action="store_true", help="N = 2048 and 256, 3 repeats")
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    if args.quick:
        args.lorenz_n, args.robertson_n, args.repeats = 2048, 256, 3

    import numpy as np
    from _common import RESULTS, header_lines

    rows, reference = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, processes, devices, threads in CONFIGS:
            out, records = run_config(label, processes, devices, threads, args, tmp)
            row = {"config": label, "cores": processes * devices * threads}
            for name in workloads(args):
                # A call ends with its slowest process: the per-repeat maximum, then the median.
                per_repeat = np.max([r[name]["times"] for r in records], axis=0)
                row[f"{name}_s"] = float(np.median(per_repeat))
                result = np.load(f"{out}.{name}.npy")
                reference.setdefault(name.replace("_shuffled", "_plain"), result)
                reference.setdefault(name, reference[name.replace("_shuffled", "_plain")])
                row[f"{name}_max_diff"] = float(np.max(np.abs(result - reference[name])))
            rows.append(row)
            print(row, flush=True)

    base = rows[0]
    lines = [f"- {line}" for line in header_lines()]
    lines += [f"- Lorenz Tsit5 N = {args.lorenz_n} (t to 10, rtol = atol = 1e-8, final state); "
              f"Robertson Rodas5P N = {args.robertson_n}, value_and_grad (rtol 1e-6, atol 1e-10); "
              f"median of {args.repeats} calls after a warm-up; each process's SHOAL_NUM_THREADS "
              "as the row says", "",
              "| configuration | cores | Lorenz, rho sorted (s) | eff. | Lorenz, shuffled (s) | "
              "eff. | Robertson grad (s) | eff. |"
              + (f" diffrax Lorenz N = {args.lorenz_n // 8} (s) | eff. |" if args.peer else "")
              + " shoal: max diff vs row 1 |"
              + (" diffrax: max diff vs row 1 |" if args.peer else ""),
              "|---" * (2 * len(workloads(args)) + 2 + (2 if args.peer else 1)) + "|"]
    for row in rows:
        cells = [row["config"], str(row["cores"])]
        for name in workloads(args):
            efficiency = base[f"{name}_s"] / (row["cores"] * row[f"{name}_s"])
            cells += [f"{row[f'{name}_s']:.3f}", f"{efficiency:.2f}"]
        cells.append(f"{max(row[f'{name}_max_diff'] for name in WORKLOADS):.1e}")
        if args.peer:
            cells.append(f"{row['diffrax_lorenz_max_diff']:.1e}")
        lines.append("| " + " | ".join(cells) + " |")
    text = "\n".join(lines)
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "scaling.md").write_text(text + "\n")
    (RESULTS / "scaling.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
