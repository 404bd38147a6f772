"""Ensembles split across devices with jax.shard_map: each device solves its own trajectories.

shoal has no SPMD partitioning rule of its own: under plain jit with sharded inputs XLA would
gather the ensemble onto every device. shard_map is the supported way to spread an ensemble
over several devices (GPUs, or CPU devices here): the solve runs once per shard on that shard's
trajectories, and the result equals the unsharded solve bit for bit. Runs in a fresh process
with two host CPU devices (XLA_FLAGS must be set before JAX starts).
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import jax, jax.numpy as jnp, numpy as np
    jax.config.update("jax_enable_x64", True)
    from jax.sharding import Mesh, PartitionSpec as P
    import shoal
    from ode_problems import lorenz
    from stiff_problems import robertson

    assert len(jax.devices()) == 2, jax.devices()
    mesh = Mesh(np.array(jax.devices()), ("traj",))
    rng = np.random.default_rng(0)
    t = jnp.linspace(0.0, 1.0, 4)
    cases = [
        (lorenz, "tsit5", rng.uniform(-10, 10, (64, 3)),
         np.tile([10.0, 28.0, 8.0 / 3.0], (64, 1)) * rng.uniform(0.9, 1.1, (64, 1))),
        (robertson, "rodas5p", np.tile([1.0, 0.0, 0.0], (64, 1)),
         np.tile([0.04, 3e7, 1e4], (64, 1)) * rng.uniform(0.5, 2.0, (64, 1))),
    ]
    for f, method, y0, p in cases:
        def solve(y0, p):
            return shoal.ode.solve(f, y0, t, p, method=method, return_stats=True)
        # check_vma=False: shoal's primitive does not declare varying manual axes, which
        # shard_map's default type check needs for differentiation (the forward pass works
        # either way).
        sharded = jax.jit(jax.shard_map(solve, mesh=mesh, in_specs=(P("traj"), P("traj")),
                                        out_specs=(P("traj"), P("traj")), check_vma=False))
        (ys, st) = sharded(jnp.asarray(y0), jnp.asarray(p))
        assert len(ys.sharding.device_set) == 2
        (ref, ref_st) = jax.jit(solve)(jnp.asarray(y0), jnp.asarray(p))
        np.testing.assert_array_equal(np.asarray(ys), np.asarray(ref))
        np.testing.assert_array_equal(np.asarray(st["accepted"]), np.asarray(ref_st["accepted"]))
        # The gradient through the sharded solve equals the unsharded one.
        def loss(p, solver):
            return jnp.sum(solver(jnp.asarray(y0), p)[0][:, -1] ** 2)
        g = jax.grad(loss)(jnp.asarray(p), sharded)
        g_ref = jax.grad(loss)(jnp.asarray(p), jax.jit(solve))
        np.testing.assert_allclose(np.asarray(g), np.asarray(g_ref), rtol=1e-12, atol=0)
    print("ok")
""")


def test_shard_map_splits_the_ensemble_across_devices():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2",
               JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests"),
                                           os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          env=env, timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.strip().endswith("ok")
