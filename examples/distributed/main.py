"""A chi-squared scan over many processes: fit a damped, driven oscillator to noisy data by
solving one ODE per grid point, with the gradient of chi-squared at every point.

Each process owns a contiguous block of the grid (its rows), builds its part of one global,
sharded ensemble with ``jax.make_array_from_process_local_data``, and the whole scan is one
``jax.jit``: shoal's solve runs shard-local on every device; the reductions (the best point)
are XLA's collectives.

Run it
* on one machine, as N local processes (each with its own CPU device):
      PYTHONPATH=. python examples/distributed/main.py --local 2
* under SLURM, one process per task (``jax.distributed.initialize()`` reads the job's
  environment; see slurm.sbatch):
      srun python examples/distributed/main.py
* ``--smoke``: a small grid, for the test suite.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time

TRUE = (0.3, 1.7)  # damping, driving frequency


def parse():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--local", type=int, default=0, metavar="P",
                        help="start P processes on this machine and wait for them")
    parser.add_argument("--smoke", action="store_true",
                        help="a 12 x 21 grid (default 120 x 201), for the test suite")
    return parser.parse_args()


def launch_local(processes: int, options) -> int:
    """Start ``processes`` copies of this script as one jax.distributed job on localhost."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = ["--smoke"] if options.smoke else []
    children = []
    for rank in range(processes):
        env = dict(os.environ, JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}",
                   SHOAL_EXAMPLE_PROCESSES=str(processes), SHOAL_EXAMPLE_RANK=str(rank),
                   JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"))
        children.append(subprocess.Popen([sys.executable, __file__, *args], env=env))
    # A process that fails leaves the others waiting for it at their next collective: stop them.
    while any(child.poll() is None for child in children):
        if any(child.poll() not in (None, 0) for child in children):
            for child in children:
                child.kill()
        time.sleep(0.2)
    return max(child.returncode for child in children)


def main() -> None:
    options = parse()
    if options.local:
        sys.exit(launch_local(options.local, options))

    import jax

    jax.config.update("jax_enable_x64", True)
    if "SHOAL_EXAMPLE_RANK" in os.environ:  # started by --local
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(num_processes=int(os.environ["SHOAL_EXAMPLE_PROCESSES"]),
                                   process_id=int(os.environ["SHOAL_EXAMPLE_RANK"]))
    elif "SLURM_JOB_ID" in os.environ:  # srun: everything comes from the job's environment
        if jax.default_backend() == "cpu":
            jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize()

    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    import shoal

    def oscillator(y, t, p):
        damping, omega = p[0], p[1]
        return jnp.stack([y[1], -damping * y[1] - y[0] + jnp.cos(omega * t)])

    t_data = jnp.linspace(0.0, 20.0, 41)
    rng = np.random.default_rng(0)
    clean = shoal.ode.solve(oscillator, jnp.zeros(2), t_data, jnp.asarray(TRUE), rtol=1e-10,
                            atol=1e-12)[0, :, 0]
    data = clean + 0.01 * rng.standard_normal(clean.shape)

    # Steps of 0.05 (smoke) or 0.005: the true point is on the grid.
    shape = (12, 21) if options.smoke else (120, 201)
    damping, omega = np.meshgrid(np.linspace(0.6 / shape[0], 0.6, shape[0]),
                                 np.linspace(1.2, 2.2, shape[1]), indexing="ij")
    grid = np.stack([damping.ravel(), omega.ravel()], axis=1)  # (points, 2), global
    if grid.shape[0] % jax.device_count():
        raise SystemExit(f"{grid.shape[0]} grid points do not split evenly over "
                         f"{jax.device_count()} devices: pad the grid")
    mesh = Mesh(np.array(jax.devices()), ("grid",))
    along = NamedSharding(mesh, PartitionSpec("grid"))

    # This process's rows: its devices' blocks of the global grid (here computed, in a real scan
    # read from disk). make_array_from_process_local_data assembles the global array.
    rows = grid.shape[0] // jax.process_count()
    mine = grid[jax.process_index() * rows:(jax.process_index() + 1) * rows]
    params = jax.make_array_from_process_local_data(along, mine, grid.shape)

    def chi2(p):
        ys = shoal.ode.solve(oscillator, jnp.zeros((p.shape[0], 2)), t_data, p, rtol=1e-8,
                             atol=1e-10)
        return jnp.sum(((ys[:, :, 0] - data) / 0.01) ** 2, axis=1)

    @jax.jit
    def scan(p):
        # chi2 per point and its gradient: the gradient of the sum is each point's own gradient.
        values, pullback = jax.vjp(chi2, p)
        (gradients,) = pullback(jnp.ones_like(values))
        best = jnp.argmin(values)
        # The gradient at the best point against central differences of chi2 there.
        step = 1e-6 * jnp.eye(2)
        probes = jnp.concatenate([p[best] + step, p[best] - step])
        ends = chi2(probes)
        central = (ends[:2] - ends[2:]) / 2e-6
        error = jnp.max(jnp.abs(gradients[best] - central)) / jnp.max(jnp.abs(central))
        return values, gradients, values[best], p[best], jnp.all(jnp.isfinite(gradients)), error

    # Every process runs the same jitted program (an op on a global array that only one process
    # runs would wait for the others forever).
    values, gradients, best_value, best_p, finite, error = scan(params)
    if jax.process_index() == 0:
        print(f"processes {jax.process_count()}, devices {jax.device_count()}, "
              f"grid {shape[0]} x {shape[1]}")
        print(f"best chi2 {float(best_value):.2f} at damping {float(best_p[0]):.4f}, "
              f"omega {float(best_p[1]):.4f} (true {TRUE})")
        print(f"CHECK best_damping {float(best_p[0]):.6f}")
        print(f"CHECK best_omega {float(best_p[1]):.6f}")
        print(f"CHECK sharded_over {len(values.sharding.device_set)}")
        print(f"CHECK gradients_finite {int(finite)}")
        print(f"CHECK gradient_vs_central_difference {float(error):.3e}")
    if jax.process_count() > 1:
        jax.distributed.shutdown()


if __name__ == "__main__":
    main()
