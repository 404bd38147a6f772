"""Batched eigh under plain jax.jit with a batch-sharded input runs shard-local.

The kernel call carries num_batch_dims (and a Shardy rule), and its targets are registered as
batch partitionable: XLA runs the kernel once per shard instead of gathering the batch. Checked
on two host CPU devices in one fresh process (XLA_FLAGS must be set before JAX starts): no
all-gather / all-to-all in the compiled HLO, results bit-identical to the single-device jit,
outputs sharded like the input; gradients; an uneven batch; two batch dims; shard_map with
check_vma=True. Also: the CUDA lowering (lowered here, not run) carries the same attributes.
"""

import textwrap

import jax
import numpy as np

from shoal.linalg import _cuda
from shoal.linalg._options import EighOptions, Problem

from host_devices import run_script

SCRIPT = textwrap.dedent("""
    import jax, jax.numpy as jnp, numpy as np
    jax.config.update("jax_enable_x64", True)
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    from shoal.linalg import eigh, eigh_gen

    assert len(jax.devices()) == 2, jax.devices()
    mesh = Mesh(np.array(jax.devices()), ("b",))
    shard = NamedSharding(mesh, P("b"))
    rng = np.random.default_rng(0)
    N = 6

    def herm(shape, dtype):
        x = rng.standard_normal(shape + (N, N))
        if np.issubdtype(dtype, np.complexfloating):
            x = x + 1j * rng.standard_normal(shape + (N, N))
        return (x + np.conj(np.swapaxes(x, -1, -2))).astype(dtype)

    def spd(shape, dtype):
        x = herm(shape, dtype)
        return (x @ np.conj(np.swapaxes(x, -1, -2)) + N * np.eye(N)).astype(dtype)

    def no_gather(f, *args):
        hlo = f.lower(*args).compile().as_text()
        assert "all-gather" not in hlo and "all-to-all" not in hlo, hlo
        return hlo

    def same(x, ref):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(ref))

    def sharded_like_input(x):
        assert x.sharding.is_equivalent_to(NamedSharding(mesh, P("b")), x.ndim), x.sharding

    # 1. Forward: eigh / eigh_gen, dtypes, vectors on and off, a subset.
    for dtype in (np.float64, np.complex128):
        a, b = herm((4,), dtype), spd((4,), dtype)
        for kw in ({}, {"eigvals_only": True}, {"subset_by_index": (1, 3)}):
            for fn, args in ((eigh, (a,)), (eigh_gen, (a, b))):
                f = jax.jit(lambda *x: fn(*x, **kw))
                xs = [jax.device_put(x, shard) for x in args]
                no_gather(f, *xs)
                out, ref = f(*xs), f(*args)
                for o, r in zip(jax.tree.leaves(out), jax.tree.leaves(ref)):
                    same(o, r)
                    sharded_like_input(o)

    # 2. Gradients: eigenvalues and a gauge-invariant function of the eigenvectors.
    def loss(a, b=None):
        w, v = eigh(a, b)
        return jnp.sum(jnp.sin(w)) + jnp.sum(jnp.abs(v[..., :, 0]) ** 4)

    for dtype in (np.float64, np.complex128):
        a, b = herm((4,), dtype), spd((4,), dtype)
        for args in ((a,), (a, b)):
            g = jax.jit(jax.grad(loss, argnums=tuple(range(len(args)))))
            xs = [jax.device_put(x, shard) for x in args]
            no_gather(g, *xs)  # the scalar loss' all-reduce is allowed (not asserted either way)
            for o, r in zip(g(*xs), g(*args)):
                same(o, r)
                sharded_like_input(o)

    # 3. Uneven batch: B = 5 on 2 devices. A jax.Array cannot be split 3 + 2, so the sharding is
    # a constraint inside jit: XLA pads the batch to 6, each device solves 3 (the padded one
    # discarded), and only the (necessarily replicated) result is gathered.
    a = herm((5,), np.float64)
    f = jax.jit(lambda a: eigh(jax.lax.with_sharding_constraint(a, shard)))
    hlo = f.lower(a).compile().as_text()
    calls = [l for l in hlo.splitlines() if 'custom_call_target="shoal_linalg_eigh_cpu"' in l]
    assert len(calls) == 1 and "f64[3,6,6]" in calls[0], calls
    for o, r in zip(f(a), jax.jit(eigh)(a)):
        same(o, r)

    # 4. Two batch dims (B1, B2, n, n), sharded on the first.
    a, b = herm((4, 3), np.complex128), spd((4, 3), np.complex128)
    for fn, args in ((eigh, (a,)), (eigh_gen, (a, b))):
        f = jax.jit(fn)
        xs = [jax.device_put(x, shard) for x in args]
        no_gather(f, *xs)
        for o, r in zip(f(*xs), f(*args)):
            same(o, r)
            sharded_like_input(o)

    # 5. shard_map with the default check_vma=True: forward and gradient.
    a = herm((4,), np.complex128)
    sm = jax.jit(jax.shard_map(eigh, mesh=mesh, in_specs=P("b"), out_specs=P("b")))
    for o, r in zip(sm(jax.device_put(a, shard)), jax.jit(eigh)(a)):
        same(o, r)
    def sm_loss(a):
        w, v = jax.shard_map(eigh, mesh=mesh, in_specs=P("b"), out_specs=P("b"))(a)
        return jnp.sum(jnp.sin(w)) + jnp.sum(jnp.abs(v[..., :, 0]) ** 4)
    same(jax.jit(jax.grad(sm_loss))(jax.device_put(a, shard)), jax.jit(jax.grad(loss))(a))

    # 6. GSPMD (Shardy off): num_batch_dims alone partitions the call. Under Shardy the sdy rule
    # is needed as well: without it the kernel runs per shard but its results are gathered.
    jax.config.update("jax_use_shardy_partitioner", False)
    f = jax.jit(eigh)
    no_gather(f, jax.device_put(a, shard))
    for o, r in zip(f(jax.device_put(a, shard)), f(a)):
        same(o, r)
        sharded_like_input(o)
    print("ok")
""")


def test_batched_eigh_runs_shard_local():
    run_script(SCRIPT, devices=2, timeout=300)


def _cuda_text(fn, *shapes):
    args = [jax.ShapeDtypeStruct(s, np.float64) for s in shapes]
    return jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()


def test_cuda_lowering_is_batch_partitionable():
    """The cuSOLVER calls, lowered for CUDA without a GPU, carry the same attributes."""
    opts = EighOptions.build(6, problem=Problem.STANDARD, lower=True, eigvals_only=False,
                             subset_by_index=None, subset_by_value=None)
    text = _cuda_text(lambda a: _cuda.call_eigh(a, opts, algorithm=_cuda.Algorithm.JACOBI),
                      (4, 3, 6, 6))
    assert "shoal_linalg_eigh_cuda" in text and 'num_batch_dims = "2"' in text, text
    gen = EighOptions.build(40, problem=Problem.TYPE1, lower=True, eigvals_only=False,
                            subset_by_index=None, subset_by_value=None)
    text = _cuda_text(lambda a, b: _cuda.call_eigh_gen(a, b, gen), (5, 40, 40), (5, 40, 40))
    assert "shoal_linalg_eigh_gen_cuda" in text and 'num_batch_dims = "1"' in text, text
    # A lone matrix: nothing to partition, no attribute.
    text = _cuda_text(lambda a: _cuda.call_eigh(a, opts, algorithm=_cuda.Algorithm.SYEVD),
                      (6, 6))
    assert "num_batch_dims" not in text
