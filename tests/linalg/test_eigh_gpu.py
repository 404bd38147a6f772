"""shoal.linalg on an NVIDIA GPU through cuSOLVER: values against SciPy, both kernels (batched
Jacobi for n <= 32, syevd/sygvd above), the Cholesky-reduced small generalized path, subsets,
gradients against the CPU kernels, failures. Skipped (reported as such) without a CUDA device.

    PYTHONPATH=. python -m pytest tests/linalg/test_eigh_gpu.py -q -rs
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg as sl
from jax.test_util import check_grads
from linalg_helpers import (
    align_phase,
    check_b_not_positive_definite,
    check_subset_layout,
    rand_herm,
    rand_spd,
    scramble_other_triangle,
    subset_kwargs,
)

from shoal.linalg import _cuda, eigh, eigh_gen
from shoal.linalg._options import EighOptions


def _gpus():
    try:
        return jax.devices("cuda")
    except RuntimeError:
        return []


GPUS = _gpus()
pytestmark = pytest.mark.skipif(not GPUS, reason="no CUDA GPU visible to jax")
DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
CPU = jax.devices("cpu")[0]


def gpu(x):
    return None if x is None else jax.device_put(x, GPUS[0])


def _hi(x):
    return None if x is None else x.astype(np.complex128 if np.iscomplexobj(x) else np.float64)


def single(dtype):
    return np.finfo(dtype).bits <= 32 or dtype == np.complex64


def rel_tol(dtype, n):
    return (2e-6 if single(dtype) else 1e-14) * max(n, 8)


def check_pair(a, b, itype, w, v, dtype):
    """Backward error of (w, v) and its normalization, in float64, relative to the scales of
    the terms (cond(b) enters through the Cholesky back-transform)."""
    a, b = _hi(a), _hi(b)
    w, v = np.asarray(w).astype(np.float64), _hi(np.asarray(v))
    n = a.shape[-1]
    na, nv, nw = np.abs(a).max(), np.abs(v).max(), np.abs(w).max()
    if b is None:
        res = a @ v - v * w[..., None, :]
        gram = np.conj(np.swapaxes(v, -1, -2)) @ v
        scale, cond = (na + nw) * nv, 1.0
    else:
        nb, cond = np.abs(b).max(), np.linalg.cond(b)
        lhs = {1: a @ v, 2: a @ (b @ v), 3: b @ (a @ v)}[itype]
        res = lhs - (b @ v if itype == 1 else v) * w[..., None, :]
        metric = np.linalg.inv(b) if itype == 3 else b
        gram = np.conj(np.swapaxes(v, -1, -2)) @ metric @ v
        scale = (na + nw * nb) * nv if itype == 1 else (na * nb + nw) * nv
    assert np.abs(res).max() <= 20 * rel_tol(dtype, n) * scale * cond
    assert np.abs(gram - np.eye(v.shape[-1])).max() <= 20 * rel_tol(dtype, n) * cond


def test_the_cusolver_path_is_used():
    ok, why = _cuda.status()
    assert ok, f"cuSOLVER path unavailable on a GPU machine: {why}"
    for n, b_needed, target in [
        (8, False, "shoal_linalg_eigh_cuda"),
        (64, False, "shoal_linalg_eigh_cuda"),
        (8, True, "shoal_linalg_eigh_cuda"),  # Cholesky in JAX + batched Jacobi
        (64, True, "shoal_linalg_eigh_gen_cuda"),
    ]:
        a = jnp.eye(n, dtype=jnp.float32)
        b = a if b_needed else None
        hlo = jax.jit(lambda a, b: eigh(a, b)).lower(gpu(a), gpu(b)).as_text()
        assert target in hlo
        assert "shoal_linalg_eigh_cpu" not in hlo and "shoal_linalg_eigh_gen_cpu" not in hlo


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("itype", [0, 1, 2, 3])
@pytest.mark.parametrize("n", [8, 32, 33, 64, 200])
def test_values_match_scipy(dtype, itype, n):
    rng = np.random.default_rng(n * 10 + itype)
    batch = (3,) if n <= 64 else ()
    lower = bool(n % 2)
    a = rand_herm(rng, n, dtype, batch)
    b = None if itype == 0 else rand_spd(rng, n, dtype, batch)
    aj = scramble_other_triangle(a, lower, rng)
    bj = None if b is None else scramble_other_triangle(b, lower, rng)
    w, v = eigh(gpu(aj), gpu(bj), lower=lower, type=max(itype, 1), symmetrize_input=False)
    w_only = eigh(gpu(aj), gpu(bj), lower=lower, type=max(itype, 1), eigvals_only=True,
                  symmetrize_input=False)
    assert w.dtype == np.finfo(dtype).dtype and v.dtype == dtype
    assert w.shape == batch + (n,) and v.shape == batch + (n, n)
    for idx in np.ndindex(*batch):
        ref = sl.eigh(_hi(a[idx]), _hi(None if b is None else b[idx]), type=max(itype, 1))[0]
        scale = np.abs(ref).max()
        np.testing.assert_allclose(w[idx], ref, atol=rel_tol(dtype, n) * scale, rtol=0)
        np.testing.assert_allclose(w_only[idx], ref, atol=rel_tol(dtype, n) * scale, rtol=0)
        check_pair(a[idx], None if b is None else b[idx], max(itype, 1), w[idx], v[idx], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_jacobi_and_syevd_agree(dtype):
    """The two standard kernels on the same matrices (n = 16 fits both)."""
    rng = np.random.default_rng(1)
    a = gpu(rand_herm(rng, 16, dtype, (4,)))
    options = EighOptions()  # standard, lower triangle, vectors, all eigenpairs
    jacobi, syevd = _cuda.Algorithm.JACOBI, _cuda.Algorithm.SYEVD
    b1, w1, i1 = jax.jit(lambda a: _cuda.call_eigh(a, options, algorithm=jacobi))(a)
    b2, w2, i2 = jax.jit(lambda a: _cuda.call_eigh(a, options, algorithm=syevd))(a)
    assert not np.any(i1) and not np.any(i2)
    np.testing.assert_allclose(w1, w2, atol=rel_tol(dtype, 16) * np.abs(w2).max(), rtol=0)
    v1 = np.conj(np.swapaxes(np.asarray(b1), -1, -2))
    v2 = np.conj(np.swapaxes(np.asarray(b2), -1, -2))
    np.testing.assert_allclose(np.abs(align_phase(v1, v2) - v2).max(), 0, atol=1e-2)


def test_large_batch_of_small_matrices():
    rng = np.random.default_rng(2)
    a = rand_herm(rng, 12, np.float32, (70_000,))  # more than one syevjBatched chunk (65536)
    w = np.asarray(eigh(gpu(a), eigvals_only=True))
    ref = np.linalg.eigvalsh(a.astype(np.float64))
    np.testing.assert_allclose(w, ref, atol=1e-4 * np.abs(ref).max(), rtol=0)


@pytest.mark.parametrize("itype", [0, 1, 2, 3])
@pytest.mark.parametrize("mode", ["index", "value"])
@pytest.mark.parametrize("n", [10, 64])
def test_subsets_match_scipy(itype, mode, n):
    rng = np.random.default_rng(100 + itype + n)
    a = rand_herm(rng, n, np.complex128)
    b = None if itype == 0 else rand_spd(rng, n, np.complex128)
    full = sl.eigh(a, b, type=max(itype, 1), eigvals_only=True)
    kw = subset_kwargs(mode, full, 2, 6)
    ref_w, ref_v = sl.eigh(a, b, type=max(itype, 1), **kw)
    w, v = eigh(gpu(a), gpu(b), type=max(itype, 1), **kw)
    w, v = np.asarray(w), np.asarray(v)
    k = len(ref_w)
    assert k == 5
    check_subset_layout(mode, n, k, w, v)
    np.testing.assert_allclose(w[:k], ref_w, atol=1e-11 * np.abs(full).max(), rtol=0)
    np.testing.assert_allclose(align_phase(v[:, :k], ref_v), ref_v, atol=1e-8, rtol=0)


@pytest.mark.parametrize("itype", [0, 1, 2, 3])
@pytest.mark.parametrize("n", [6, 40])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_gradients_match_the_cpu(itype, n, dtype):
    rng = np.random.default_rng(9 + itype + n)
    a = rand_herm(rng, n, dtype)
    b = None if itype == 0 else rand_spd(rng, n, dtype)
    c = rng.normal(size=(n, n))

    def loss(a, b):
        w, v = eigh(a, b, type=max(itype, 1))
        return jnp.sum(w * jnp.arange(n)) + jnp.sum(c * jnp.abs(v) ** 2)

    argnums = (0,) if b is None else (0, 1)
    g = jax.jit(jax.grad(loss, argnums=argnums))
    g_gpu = g(gpu(a), gpu(b))
    g_cpu = g(jax.device_put(a, CPU), None if b is None else jax.device_put(b, CPU))
    for x, y in zip(g_gpu, g_cpu, strict=True):
        y = np.asarray(y)
        np.testing.assert_allclose(np.asarray(x), y, atol=1e-8 * np.abs(y).max(), rtol=0)


@pytest.mark.parametrize("itype", [1, 2, 3])
def test_check_grads_on_gpu(itype):
    rng = np.random.default_rng(itype)
    a, b = gpu(rand_herm(rng, 4, np.float64)), gpu(rand_spd(rng, 4, np.float64))

    def f(a, b):
        w, v = eigh_gen(a, b, itype=itype)
        return w, v @ jnp.conj(v.T)

    check_grads(f, (a, b), order=2, modes=("fwd", "rev"), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("n", [8, 64])
def test_b_not_positive_definite(n):
    check_b_not_positive_definite(n, gpu)


@pytest.mark.parametrize("n", [8, 64])
@pytest.mark.parametrize("generalized", [False, True])
def test_non_finite_input(n, generalized):
    rng = np.random.default_rng(6)
    a = rand_herm(rng, n, np.float32, (2,))
    b = rand_spd(rng, n, np.float32, (2,)) if generalized else None
    (b if generalized else a)[1, n - 1, 0] = np.nan
    with pytest.raises(np.linalg.LinAlgError, match=r"\(1,\): the input contains NaN or Inf"):
        eigh(gpu(a), gpu(b))
    w = np.asarray(jax.jit(lambda a, b: eigh(a, b, eigvals_only=True))(gpu(a), gpu(b)))
    assert np.all(np.isnan(w[1])) and np.all(np.isfinite(w[0]))


@pytest.mark.parametrize("n", [8, 64])
def test_vmap_is_one_custom_call(n):
    rng = np.random.default_rng(7)
    a = gpu(rand_herm(rng, n, np.float32, (5,)))
    hlo = jax.jit(jax.vmap(lambda x: eigh(x))).lower(a).as_text()
    assert hlo.count("shoal_linalg_eigh_cuda") == 1
    w, _ = jax.vmap(lambda x: eigh(x))(a)
    np.testing.assert_allclose(
        w, np.linalg.eigvalsh(np.asarray(a, np.float64)), atol=1e-3 * n, rtol=0
    )


def test_the_cpu_path_still_works_on_a_gpu_machine():
    rng = np.random.default_rng(8)
    a, b = rand_herm(rng, 6, np.float64), rand_spd(rng, 6, np.float64)
    ac, bc = jax.device_put(a, CPU), jax.device_put(b, CPU)
    hlo = jax.jit(lambda a, b: eigh(a, b)).lower(ac, bc).as_text()
    assert "shoal_linalg_eigh_gen_cpu" in hlo
    assert "shoal_linalg_eigh_cuda" not in hlo and "shoal_linalg_eigh_gen_cuda" not in hlo
    w, _ = eigh(ac, bc)
    np.testing.assert_allclose(w, sl.eigh(a, b, eigvals_only=True), atol=1e-12, rtol=0)
