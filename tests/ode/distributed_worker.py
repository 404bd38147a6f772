"""One process of test_distributed.py: a global ensemble over 2 processes x 2 host devices.

Usage: distributed_worker.py COORDINATOR PROCESS_ID NUM_PROCESSES OUT_DIR. Writes
OUT_DIR/shards-<id>.npz: this process's shards of ys, status and the gradient, each with the
ensemble rows it holds, and the (replicated) loss.
"""

import sys

import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_cpu_collectives_implementation", "gloo")  # cross-process all-reduce

coordinator, process_id, num_processes, out_dir = sys.argv[1:5]
jax.distributed.initialize(coordinator_address=coordinator, num_processes=int(num_processes),
                           process_id=int(process_id), initialization_timeout=120)

import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402

import shoal  # noqa: E402

from distributed_problem import ensemble, loss_of, rhs, save_times  # noqa: E402

assert jax.process_count() == int(num_processes)
mesh = Mesh(np.array(jax.devices()), ("traj",))  # every process's devices, in global order
along_n = NamedSharding(mesh, PartitionSpec("traj"))
y0, params = ensemble()  # every process knows the whole ensemble here; a real run would load
# only its rows (jax.make_array_from_process_local_data)


def global_array(host):
    return jax.make_array_from_callback(host.shape, along_n, lambda index: host[index])


def solve(y0, params):
    return shoal.ode.solve(rhs, y0, save_times(), params, method="rodas5p", return_stats=True)


ys, stats = jax.jit(solve)(global_array(y0), global_array(params))
loss, grad = jax.jit(jax.value_and_grad(loss_of(solve)))(global_array(params), global_array(y0))
assert ys.sharding.is_equivalent_to(NamedSharding(mesh, PartitionSpec("traj", None, None)), 3)

record = {"loss": np.asarray(loss.addressable_data(0))}
for name, array in (("ys", ys), ("status", stats["status"]), ("grad", grad)):
    for k, shard in enumerate(array.addressable_shards):
        rows = shard.index[0]
        record[f"{name}_{k}_rows"] = np.arange(rows.start or 0, rows.stop or array.shape[0])
        record[f"{name}_{k}"] = np.asarray(shard.data)
np.savez(f"{out_dir}/shards-{process_id}.npz", **record)
jax.distributed.shutdown()
print("ok")
