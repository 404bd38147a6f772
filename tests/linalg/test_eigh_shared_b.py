"""A b shared by the whole batch (no batch axis of its own, or batch axes of size 1) is factorised
once per kernel thread, not once per element: the results equal SciPy's per element and those of
the same b given per element, for every type, subsets, complex, float32, both triangles, vmap."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg as sl

from shoal.linalg import eigh

jax.config.update("jax_enable_x64", True)


def _problem(rng, n, batch, complex_=False, dtype=np.float64):
    def draw(shape):
        x = rng.normal(size=shape)
        return x + 1j * rng.normal(size=shape) if complex_ else x

    x, y = draw(batch + (n, n)), draw((n, n))
    a = x + np.conj(np.swapaxes(x, -1, -2))
    b = y @ np.conj(y.T) + n * np.eye(n)
    kind = np.complex128 if complex_ else dtype
    return a.astype(kind), b.astype(kind)


@pytest.mark.parametrize("itype", [1, 2, 3])
@pytest.mark.parametrize("complex_", [False, True])
@pytest.mark.parametrize(
    "kw", [dict(), dict(subset_by_index=(1, 3)), dict(subset_by_value=(-2.0, 2.0)),
           dict(eigvals_only=True), dict(symmetrize_input=False, lower=False)],
)  # fmt: skip
def test_shared_b_matches_scipy_and_per_element_b(itype, complex_, kw):
    rng = np.random.default_rng(itype + 3 * complex_)
    n = 6
    a, b = _problem(rng, n, (2, 3), complex_)
    shared = eigh(a, b[None], type=itype, **kw)  # batch axis of size 1
    per_element = eigh(a, np.broadcast_to(b, a.shape).copy(), type=itype, **kw)
    for x, y in zip(jax.tree.leaves(shared), jax.tree.leaves(per_element), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-11, atol=1e-11)
    w = np.asarray(shared if kw.get("eigvals_only") else shared[0])
    lower = kw.get("lower", True)
    for i in np.ndindex(2, 3):
        ref = sl.eigh(a[i], b, type=itype, eigvals_only=True, lower=lower)
        if "subset_by_index" in kw:
            ref = ref[1:4]
        if "subset_by_value" in kw:
            inside = ref[(ref > -2.0) & (ref <= 2.0)]
            ref = np.concatenate([inside, np.full(n - len(inside), np.nan)])
        np.testing.assert_allclose(w[i], ref, rtol=1e-11, atol=1e-11)


def test_the_kernel_is_told():
    rng = np.random.default_rng(0)
    a, b = _problem(rng, 4, (5,))
    assert "shared_b = true" in jax.jit(eigh).lower(a, b).as_text()
    assert "shared_b = false" in jax.jit(eigh).lower(a, np.stack([b] * 5)).as_text()
    assert "shared_b = false" in jax.jit(eigh).lower(a[0], b).as_text()  # nothing to share


def test_float32():
    rng = np.random.default_rng(1)
    a, b = _problem(rng, 5, (4,), dtype=np.float32)
    w = np.asarray(eigh(a, b, eigvals_only=True))
    for i in range(4):
        ref = sl.eigh(a[i].astype(np.float64), b.astype(np.float64), eigvals_only=True)
        np.testing.assert_allclose(w[i], ref, rtol=2e-5, atol=2e-5 * np.abs(ref).max())


def test_vmap_over_b_clears_sharing():
    """Inside the vmapped function b looks shared by a's batch; vmap then maps b itself, so each
    vmapped element must use its own b."""
    rng = np.random.default_rng(2)
    n = 5
    a = np.stack([_problem(rng, n, (3,))[0] for _ in range(4)])  # (4, 3, n, n)
    b = np.stack([_problem(rng, n, ())[1] for _ in range(4)])  # (4, n, n)
    w = np.asarray(jax.vmap(lambda a, b: eigh(a, b, eigvals_only=True))(a, b))
    w_unmapped = np.asarray(jax.vmap(lambda a: eigh(a, b[0], eigvals_only=True))(a))
    for k in range(4):
        for i in range(3):
            ref = sl.eigh(a[k, i], b[k], eigvals_only=True)
            np.testing.assert_allclose(w[k, i], ref, rtol=1e-11, atol=1e-11)
            ref0 = sl.eigh(a[k, i], b[0], eigvals_only=True)
            np.testing.assert_allclose(w_unmapped[k, i], ref0, rtol=1e-11, atol=1e-11)


def test_shared_b_not_positive_definite():
    rng = np.random.default_rng(3)
    a, b = _problem(rng, 4, (3,))
    b[2, 2] = -100.0
    with pytest.raises(np.linalg.LinAlgError, match=r"leading minor .* \(3 of 3 batch elements"):
        eigh(a, b)
    assert np.all(np.isnan(np.asarray(jax.jit(eigh)(a, b)[0])))


def test_gradients_through_shared_b():
    rng = np.random.default_rng(4)
    a, b = _problem(rng, 4, (3,))

    def loss(a, b):
        w, v = eigh(a, b)
        return jnp.sum(w**2) + jnp.sum(jnp.abs(v[..., 1]) ** 2)

    g_shared = jax.grad(loss, argnums=(0, 1))(a, b)
    g_each = jax.grad(loss, argnums=(0, 1))(a, jnp.broadcast_to(b, a.shape))
    np.testing.assert_allclose(g_shared[0], g_each[0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(g_shared[1], np.sum(g_each[1], axis=0), rtol=1e-10, atol=1e-12)


def test_kernel_reads_the_shared_b_once():
    """With the flag, the CPU kernel factorises the first element's b and uses it for all (the
    flag is what eigh sets when they are equal); without it, each element's own."""
    from shoal.linalg import _ffi
    from shoal.linalg._options import EighOptions, Problem

    rng = np.random.default_rng(5)
    a, _ = _problem(rng, 4, (3,))
    b = np.stack([_problem(rng, 4, ())[1] for _ in range(3)])
    for shared in (True, False):
        opts = EighOptions(problem=Problem.TYPE1, vectors=False, shared_b=shared)
        w = np.asarray(_ffi.kernel_eigh(jnp.asarray(a), jnp.asarray(b), opts)[0])
        for i in range(3):
            ref = sl.eigh(a[i], b[0 if shared else i], eigvals_only=True)
            np.testing.assert_allclose(w[i], ref, rtol=1e-11, atol=1e-11)


def test_vmap_with_a_fixed_b_shares_it():
    """jax.vmap(lambda f: eigh(f, s))(fs), s closed over: the kernel is told b is shared."""
    rng = np.random.default_rng(6)
    a, b = _problem(rng, 5, (4,))

    def solve(x):
        return eigh(x, b, eigvals_only=True)

    assert "shared_b = true" in jax.jit(jax.vmap(solve)).lower(a).as_text()
    w = np.asarray(jax.vmap(solve)(a))
    for i in range(4):
        np.testing.assert_allclose(w[i], sl.eigh(a[i], b, eigvals_only=True), rtol=1e-11)
