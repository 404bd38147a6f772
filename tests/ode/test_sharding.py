"""Ensembles split across devices: plain jit over sharded operands, and jax.shard_map.

The solve's lowering partitions along the ensemble (and vmap) axes (``shoal/ode/_partitioning.py``):
with y0/params sharded along N, each device solves its own trajectories, the compiled HLO moves no
part of the ensemble between devices, the outputs keep the input's sharding, and everything, the
gradients included, equals the unsharded solve bit for bit. Inside shard_map the primitive types
its outputs as varying over the manual axes, so differentiation works with the default
``check_vma=True``. Runs in a fresh process with two host CPU devices (XLA_FLAGS must be set
before JAX starts).
"""

import textwrap

import pytest

from host_devices import run_script

SCRIPT = textwrap.dedent("""
    from functools import partial
    import jax, jax.numpy as jnp, numpy as np
    jax.config.update("jax_enable_x64", True)
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    import shoal
    from ode_problems import lorenz
    from stiff_problems import robertson

    assert len(jax.devices()) == 2, jax.devices()
    mesh = Mesh(np.array(jax.devices()), ("traj",))
    along_n = NamedSharding(mesh, P("traj"))
    rng = np.random.default_rng(0)
    t = jnp.linspace(0.0, 1.0, 4)
    N = 16

    def moves_ensemble(compiled):
        # Collectives that would move trajectories between devices (an all-reduce of a scalar
        # loss is fine).
        text = compiled.as_text()
        return [op for op in ("all-gather", "all-to-all", "collective-permute") if op in text]

    def local_calls(compiled, target="shoal_ode_solve_cpu"):
        # The leading size of every kernel call's first operand in the partitioned HLO.
        lines = [l for l in compiled.as_text().splitlines() if target in l and "custom-call(" in l]
        return sorted({int(l.split("= (f64[")[1].split(",")[0]) for l in lines})

    def same(a, b):
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))

    y0_l = jnp.asarray(rng.uniform(-10, 10, (N, 3)))
    p_l = jnp.asarray(np.tile([10.0, 28.0, 8.0 / 3.0], (N, 1)) * rng.uniform(0.9, 1.1, (N, 1)))
    y0_r = jnp.asarray(np.tile([1.0, 0.0, 0.0], (N, 1)))
    p_r = jnp.asarray(np.tile([0.04, 3e7, 1e4], (N, 1)) * rng.uniform(0.5, 2.0, (N, 1)))
    cases = [("lorenz", lorenz, "tsit5", y0_l, p_l), ("robertson", robertson, "rodas5p", y0_r, p_r)]

    for name, f, method, y0, p in cases:
        def solve(y0, p):
            return shoal.ode.solve(f, y0, t, p, method=method, return_stats=True)

        def loss(p, y0):
            return jnp.sum(solve(y0, p)[0][:, -1] ** 2)

        y0_s, p_s = jax.device_put(y0, along_n), jax.device_put(p, along_n)
        # 1. plain jit over sharded operands: shard-local, sharded outputs, bit-identical.
        run = jax.jit(solve)
        compiled = run.lower(y0_s, p_s).compile()
        assert moves_ensemble(compiled) == [], (name, moves_ensemble(compiled))
        assert local_calls(compiled) == [N // 2], local_calls(compiled)
        out = run(y0_s, p_s)
        ref = jax.jit(solve)(y0, p)
        same(out, ref)
        for leaf in jax.tree.leaves(out):
            assert leaf.sharding.is_equivalent_to(
                NamedSharding(mesh, P("traj", *[None] * (leaf.ndim - 1))), leaf.ndim), leaf.sharding
        # eagerly, too
        same(solve(y0_s, p_s), ref)
        # 2. gradients (the joint sensitivity solves): shard-local and bit-identical.
        grad = jax.jit(jax.grad(loss))
        compiled = grad.lower(p_s, y0_s).compile()
        assert moves_ensemble(compiled) == [], (name, moves_ensemble(compiled))
        g = grad(p_s, y0_s)
        same(g, jax.jit(jax.grad(loss))(p, y0))
        assert g.sharding.is_equivalent_to(NamedSharding(mesh, P("traj", None)), 2), g.sharding
        same(jax.jit(jax.jacfwd(lambda y0: solve(y0, p_s)[0][:, -1]))(y0_s),
             jax.jit(jax.jacfwd(lambda y0: solve(y0, p)[0][:, -1]))(y0))
        # 3. shard_map with the default check_vma=True, forward and gradient.
        mapped = jax.jit(jax.shard_map(solve, mesh=mesh, in_specs=(P("traj"), P("traj")),
                                       out_specs=(P("traj"), P("traj"))))
        same(mapped(y0_s, p_s), ref)
        g_map = jax.grad(lambda p: jnp.sum(mapped(y0_s, p)[0][:, -1] ** 2))(p_s)
        same(g_map, g)

    # 4. Uneven N (7 on 2 devices): XLA pads the last shard; a jax.Array cannot be returned
    # unevenly sharded, so the reductions happen inside jit and nothing is gathered.
    y0, p = y0_l[:7], p_l[:7]
    pin = lambda x: jax.lax.with_sharding_constraint(x, along_n)
    def chi2(scale, y0, p, pin=pin):
        ys = shoal.ode.solve(lorenz, pin(y0), t, pin(p * scale), method="tsit5")
        return jnp.sum(ys[:, -1] ** 2)
    uneven = jax.jit(jax.value_and_grad(chi2))
    compiled = uneven.lower(1.0, y0, p).compile()
    assert local_calls(compiled) == [4], local_calls(compiled)
    assert moves_ensemble(compiled) == [], moves_ensemble(compiled)
    value, g = uneven(1.0, y0, p)
    ref_value, ref_g = jax.jit(jax.value_and_grad(partial(chi2, pin=lambda x: x)))(1.0, y0, p)
    # The sums over the ensemble add per-device partial sums: the same terms in another order.
    np.testing.assert_allclose([value, g], [ref_value, ref_g], rtol=1e-13)

    # 5. vmap over an outer axis, sharded along N (the second axis), and per-member time windows.
    across = NamedSharding(mesh, P(None, "traj"))
    y0_b = jnp.stack([y0_l, y0_l[::-1]])
    p_b = jnp.stack([p_l, p_l])
    batched = jax.jit(jax.vmap(lambda y0, p: shoal.ode.solve(lorenz, y0, t, p, method="tsit5")))
    y0_bs, p_bs = jax.device_put(y0_b, across), jax.device_put(p_b, across)
    assert moves_ensemble(batched.lower(y0_bs, p_bs).compile()) == []
    same(batched(y0_bs, p_bs), batched(y0_b, p_b))
    windows = jnp.asarray(np.linspace(0.0, 1.0, 4)[None, :] * rng.uniform(0.5, 1.5, (N, 1)))
    own_t = jax.jit(lambda y0, p, w: shoal.ode.solve(lorenz, y0, w, p, method="tsit5"))
    args = (jax.device_put(y0_l, along_n), jax.device_put(p_l, along_n),
            jax.device_put(windows, along_n))
    assert moves_ensemble(own_t.lower(*args).compile()) == []
    same(own_t(*args), own_t(y0_l, p_l, windows))

    # 6. More than 64 differentiated entries (a shared table): the tangent solves take the
    # directional path; its kernel calls are shard-local too.
    knots = jnp.linspace(0.0, 1.0, 80)
    def decay(y, t, p):
        return -jnp.interp(t, knots, p["rate"]) * y * p["scale"]
    def tabled(table, scale):
        ys = shoal.ode.solve(decay, jnp.ones((N, 1)), t, {"rate": table, "scale": scale},
                             method="rodas5p", params_axes={"rate": None, "scale": 0})
        return jnp.sum(ys[:, -1, 0] * scale[:, 0])
    table = jnp.asarray(1.0 + 0.5 * np.sin(np.linspace(0.0, 3.0, 80)))
    scale = jnp.asarray(rng.uniform(0.5, 1.5, (N, 1)))
    tgrad = jax.jit(jax.grad(tabled))
    compiled = tgrad.lower(table, jax.device_put(scale, along_n)).compile()
    assert moves_ensemble(compiled) == [], moves_ensemble(compiled)
    # The shared table's gradient sums over the ensemble: per-device partial sums, then an
    # all-reduce, so the same terms are added in another order. Each member's tangent is exact.
    np.testing.assert_allclose(tgrad(table, jax.device_put(scale, along_n)), tgrad(table, scale),
                               rtol=1e-14, atol=0)
    def tangents(table, scale):
        return jax.jvp(lambda tab: shoal.ode.solve(
            decay, jnp.ones((N, 1)), t, {"rate": tab, "scale": scale}, method="rodas5p",
            params_axes={"rate": None, "scale": 0}), (table,), (jnp.cos(knots),))[1]
    same(jax.jit(tangents)(table, jax.device_put(scale, along_n)), jax.jit(tangents)(table, scale))

    # 7. jax.export of a sharded solve: one call (custom_partitioning's callbacks cannot be
    # serialized), still the same result.
    spec = jax.ShapeDtypeStruct((N, 3), jnp.float64, sharding=along_n)
    plain = jax.jit(lambda y0, p: shoal.ode.solve(lorenz, y0, t, p, method="tsit5"))
    exported = jax.export.export(plain, disabled_checks=[
        jax.export.DisabledSafetyCheck.custom_call("shoal_ode_solve_cpu")])(spec, spec)
    same(exported.call(jax.device_put(y0_l, along_n), jax.device_put(p_l, along_n)),
         plain(y0_l, p_l))

    # 8. Live progress: the slot operand (placed on one device by its io_callback) is
    # replicated, and both devices count into it.
    seen = []
    counted = jax.jit(lambda y0, p: shoal.ode.solve(lorenz, y0, t, p, method="tsit5",
                                                   progress=lambda d, n: seen.append((d, n))))
    same(counted(jax.device_put(y0_l, along_n), jax.device_put(p_l, along_n)),
         jax.jit(lambda y0, p: shoal.ode.solve(lorenz, y0, t, p, method="tsit5"))(y0_l, p_l))
    assert seen[-1] == (N, N), seen
    print("ok")
""")


def test_sharded_ensembles_run_shard_local_and_equal_the_unsharded_solve():
    run_script(SCRIPT, devices=2, timeout=900)


MESH_2D = textwrap.dedent("""
    import sys
    import jax, jax.numpy as jnp, numpy as np
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_use_shardy_partitioner", sys.argv[1] == "shardy")
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    import shoal
    from ode_problems import oscillator

    mesh = Mesh(np.array(jax.devices()).reshape(2, 2), ("a", "b"))
    N = 8
    y0 = jnp.asarray(np.tile([1.0, 0.0], (N, 1)))
    w = jnp.asarray(np.random.default_rng(0).uniform(1.0, 3.0, (N, 1)))
    event = shoal.ode.Event(lambda y, t, p: y[0], terminal=True, direction=-1)

    def solve(y0, w):
        return shoal.ode.solve(oscillator, y0, jnp.linspace(0.0, 3.0, 5), w, event=event,
                               return_stats=True)

    def event_times(w, y0):
        return jnp.sum(solve(y0, w)[1]["event_time"] ** 2)

    def same(a, b):
        for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))

    ref, ref_grad = jax.jit(solve)(y0, w), jax.jit(jax.grad(event_times))(w, y0)
    for spec in (P(("a", "b")), P("a")):  # over all 4 devices; over "a", replicated over "b"
        s = NamedSharding(mesh, spec)
        args = (jax.device_put(y0, s), jax.device_put(w, s))
        compiled = jax.jit(solve).lower(*args).compile()
        assert "all-gather" not in compiled.as_text() and "all-to-all" not in compiled.as_text()
        out = jax.jit(solve)(*args)
        same(out, ref)
        assert out[0].sharding.spec[0] == spec[0], out[0].sharding
        same(jax.jit(jax.grad(event_times))(args[1], args[0]), ref_grad)
    # shard_map manual over "a" only: each "b" group solves its shard whole (correct, redundant).
    part = jax.jit(jax.shard_map(lambda y0, w: solve(y0, w)[0], mesh=mesh,
                                 in_specs=(P("a"), P("a")), out_specs=P("a"), axis_names={"a"}))
    s = NamedSharding(mesh, P("a"))
    same(part(jax.device_put(y0, s), jax.device_put(w, s)), ref[0])
    print("ok")
""")


@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"])
def test_two_dimensional_meshes_events_and_both_partitioners(partitioner):
    run_script(MESH_2D.replace("sys.argv[1]", repr(partitioner)), devices=4, timeout=600)
