"""shoal.linalg forward results against scipy.linalg.eigh: values, vectors (up to phase),
residuals, B-orthonormality; every dtype, type, triangle, subset; batching, jit, vmap; errors."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg as sl
from hypothesis import given, settings
from hypothesis import strategies as st
from linalg_helpers import (
    align_phase,
    check_subset_layout,
    rand_herm,
    rand_spd,
    scramble_other_triangle,
    solve_subset,
    subset_kwargs,
)

from shoal.linalg import eigh, eigh_gen

jax.config.update("jax_enable_x64", True)

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def tol(dtype):
    return 2e-4 if np.finfo(dtype).bits <= 32 or dtype == np.complex64 else 1e-10


def gram_metric(b, itype):
    if b is None:
        return None
    return np.linalg.inv(b) if itype == 3 else b


def check_solution(a, b, itype, w, v, dtype):
    """Residual and normalization of (w, v) for the full Hermitian a (and b)."""
    a = a.astype(np.complex128 if np.iscomplexobj(a) else np.float64)
    scale = np.abs(a).max() * a.shape[-1]
    if b is None:
        res = a @ v - v * w[..., None, :]
        gram = np.conj(np.swapaxes(v, -1, -2)) @ v
    else:
        b = b.astype(a.dtype)
        if itype == 1:
            res = a @ v - (b @ v) * w[..., None, :]
        elif itype == 2:
            res = a @ (b @ v) - v * w[..., None, :]
        else:
            res = b @ (a @ v) - v * w[..., None, :]
        scale *= np.abs(b).max() * b.shape[-1]
        gram = np.conj(np.swapaxes(v, -1, -2)) @ gram_metric(b, itype) @ v
    assert np.abs(res).max() <= 50 * tol(dtype) * scale
    eye = np.eye(v.shape[-1])
    assert np.abs(gram - eye).max() <= 50 * tol(dtype) * (1 if b is None else np.linalg.cond(b))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("itype", [0, 1, 2, 3])
@pytest.mark.parametrize("lower", [True, False])
def test_matches_scipy(dtype, itype, lower):
    rng = np.random.default_rng(itype * 10 + lower)
    n = 6
    a = rand_herm(rng, n, dtype)
    b = None if itype == 0 else rand_spd(rng, n, dtype)
    ref_w, ref_v = sl.eigh(
        a.astype(np.complex128 if np.iscomplexobj(a) else np.float64),
        None if b is None else b.astype(np.complex128 if np.iscomplexobj(b) else np.float64),
        type=max(itype, 1),
    )
    aj = scramble_other_triangle(a, lower, rng)
    bj = None if b is None else scramble_other_triangle(b, lower, rng)
    # symmetrize_input=False: SciPy's semantics, the other triangle holds garbage never read
    kw = dict(lower=lower, type=max(itype, 1), symmetrize_input=False)
    w, v = eigh(aj, bj, **kw)
    w_only = eigh(aj, bj, eigvals_only=True, **kw)
    assert w.dtype == np.finfo(dtype).dtype and v.dtype == dtype
    assert w_only.dtype == w.dtype
    w, v, w_only = np.asarray(w), np.asarray(v), np.asarray(w_only)
    scale = np.abs(ref_w).max()
    np.testing.assert_allclose(w, ref_w, atol=tol(dtype) * scale * 10, rtol=0)
    np.testing.assert_allclose(w_only, ref_w, atol=tol(dtype) * scale * 10, rtol=0)
    assert np.all(np.diff(w) >= 0)
    vv = align_phase(v.astype(ref_v.dtype), ref_v)
    np.testing.assert_allclose(vv, ref_v, atol=tol(dtype) * 1e3, rtol=0)
    check_solution(a, b, max(itype, 1), w, v, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("itype", [0, 1, 2, 3])
@pytest.mark.parametrize("mode", ["index", "value"])
def test_subsets_match_scipy(dtype, itype, mode):
    rng = np.random.default_rng(100 + itype)
    n = 7
    a = rand_herm(rng, n, dtype)
    b = None if itype == 0 else rand_spd(rng, n, dtype)
    hi = np.complex128 if np.iscomplexobj(a) else np.float64
    full = sl.eigh(
        a.astype(hi), None if b is None else b.astype(hi), type=max(itype, 1), eigvals_only=True
    )
    kw = subset_kwargs(mode, full, 2, 4)
    ref_w, ref_v = sl.eigh(
        a.astype(hi), None if b is None else b.astype(hi), type=max(itype, 1), **kw
    )
    w, v, w_only = solve_subset(a, b, itype, kw)
    k = len(ref_w)
    assert k == 3
    check_subset_layout(mode, n, k, w, v, w_only)
    scale = np.abs(full).max()
    np.testing.assert_allclose(w[:k], ref_w, atol=tol(dtype) * scale * 10, rtol=0)
    np.testing.assert_allclose(w_only[:k], ref_w, atol=tol(dtype) * scale * 10, rtol=0)
    vv = align_phase(v[:, :k].astype(ref_v.dtype), ref_v)
    np.testing.assert_allclose(vv, ref_v, atol=tol(dtype) * 1e3, rtol=0)
    check_solution(a, b, max(itype, 1), w[:k], v[:, :k], dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
@pytest.mark.parametrize("itype", [0, 1, 3])
def test_batched_and_broadcast(dtype, itype):
    rng = np.random.default_rng(7)
    n = 5
    a = rand_herm(rng, n, dtype, batch=(3, 2))
    b = None if itype == 0 else rand_spd(rng, n, dtype, batch=(2,))  # broadcasts against (3, 2)
    w, v = eigh(a, b, type=max(itype, 1))
    assert w.shape == (3, 2, n) and v.shape == (3, 2, n, n)
    for i in range(3):
        for j in range(2):
            bij = None if b is None else b[j]
            hi = np.complex128 if np.iscomplexobj(a) else np.float64
            ref = sl.eigh(
                a[i, j].astype(hi),
                None if bij is None else bij.astype(hi),
                type=max(itype, 1),
                eigvals_only=True,
            )
            np.testing.assert_allclose(w[i, j], ref, atol=tol(dtype) * 100, rtol=0)
            check_solution(
                a[i, j], bij, max(itype, 1), np.asarray(w[i, j]), np.asarray(v[i, j]), dtype
            )


def test_float32_stays_float32_with_x64():
    rng = np.random.default_rng(1)
    a = rand_herm(rng, 4, np.float32)
    b = rand_spd(rng, 4, np.float32)
    w, v = eigh(jnp.asarray(a), jnp.asarray(b))
    assert w.dtype == jnp.float32 and v.dtype == jnp.float32
    w, v = eigh(jnp.asarray(a.astype(np.complex64)))
    assert w.dtype == jnp.float32 and v.dtype == jnp.complex64
    # mixed: real a, complex b -> complex
    w, v = eigh(a.astype(np.float64), b.astype(np.complex128))
    assert w.dtype == jnp.float64 and v.dtype == jnp.complex128
    # integers are promoted, as in SciPy
    w = eigh(np.array([[2, 1], [1, 2]]), eigvals_only=True)
    np.testing.assert_allclose(w, [1.0, 3.0], atol=1e-12)


def test_eigh_gen_is_eigh_with_b():
    rng = np.random.default_rng(2)
    a, b = rand_herm(rng, 5, np.float64), rand_spd(rng, 5, np.float64)
    for it in (1, 2, 3):
        w1, v1 = eigh_gen(a, b, itype=it)
        w2, v2 = eigh(a, b, type=it)
        np.testing.assert_array_equal(w1, w2)
        np.testing.assert_array_equal(v1, v2)


def test_jit_vmap_is_one_kernel_call():
    rng = np.random.default_rng(3)
    a = rand_herm(rng, 4, np.float64, batch=(8,))
    b = rand_spd(rng, 4, np.float64, batch=(8,))

    def f(a, b):
        return eigh(a, b, type=2)

    batched = jax.jit(jax.vmap(f))
    hlo = batched.lower(a, b).as_text()
    assert len(re.findall(r"shoal_linalg_eigh_gen_cpu", hlo)) == 1
    w, v = batched(a, b)
    w_loop = np.stack([np.asarray(f(a[i], b[i])[0]) for i in range(8)])
    np.testing.assert_allclose(w, w_loop, atol=1e-12, rtol=0)
    # vmap with b shared (not batched) and nested vmap
    w2, _ = jax.vmap(f, in_axes=(0, None))(a, b[0])
    np.testing.assert_allclose(w2[3], np.asarray(f(a[3], b[0])[0]), atol=1e-12, rtol=0)
    hlo2 = jax.jit(jax.vmap(jax.vmap(lambda x: eigh(x)))).lower(a.reshape(2, 4, 4, 4)).as_text()
    assert len(re.findall(r"shoal_linalg_eigh_cpu", hlo2)) == 1


def test_eigvals_only_computes_no_vectors():
    rng = np.random.default_rng(4)
    a = rand_herm(rng, 4, np.float64)
    hlo = jax.jit(lambda x: eigh(x, eigvals_only=True)).lower(a).as_text()
    assert "vectors = false" in hlo


def test_non_pd_b_raises_outside_jit_and_is_nan_inside():
    rng = np.random.default_rng(5)
    n = 4
    a = rand_herm(rng, n, np.float64, batch=(3,))
    b = rand_spd(rng, n, np.float64, batch=(3,))
    b[1] = -b[1]  # not positive definite
    with pytest.raises(np.linalg.LinAlgError, match=r"batch index \(1,\).*not positive definite"):
        eigh(a, b)
    for method in ("lapack", "jax"):
        w, v = jax.jit(lambda a, b, m=method: eigh(a, b, method=m))(a, b)
        assert np.all(np.isnan(w[1])) and np.all(np.isnan(v[1]))
        assert np.all(np.isfinite(w[0])) and np.all(np.isfinite(w[2]))
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        eigh(a[1], b[1], method="jax")
    a_bad = a[0].copy()
    a_bad[2, 1] = np.nan
    with pytest.raises(np.linalg.LinAlgError, match="NaN"):
        eigh(a_bad)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda a, b: eigh(a[:, :3]), r"a must be a square matrix.*\(4, 3\)"),
        (lambda a, b: eigh(a[0]), r"a must be a square.*\(4,\)"),
        (lambda a, b: eigh(a, b[:3, :3]), r"same matrix size.*\(4, 4\).*\(3, 3\)"),
        (lambda a, b: eigh(np.stack([a] * 2), np.stack([b] * 3)), r"batch dimensions.*\(2, 4, 4\)"),
        (lambda a, b: eigh(a, b, type=4), r"type must be 1, 2 or 3; got type=4"),
        (lambda a, b: eigh_gen(a, b, itype=0), r"itype must be 1, 2 or 3; got itype=0"),
        (lambda a, b: eigh(a, subset_by_index=(0, 1), subset_by_value=(0, 1)), "at most one"),
        (lambda a, b: eigh(a, subset_by_index=(2, 7)), r"subset_by_index=\(2, 7\).*n=4"),
        (lambda a, b: eigh(a, subset_by_value=(1, 0)), "low < high"),
        (lambda a, b: eigh(a, method="cuda"), "method must be"),
        (lambda a, b: eigh(a, broadening="gaussian"), "broadening must be"),
        (lambda a, b: eigh(a, deg_thresh=-1.0), "deg_thresh must be"),
        (lambda a, b: eigh_gen(a, None), "eigh_gen needs b"),
    ],
)
def test_bad_input(call, match):
    rng = np.random.default_rng(6)
    a, b = rand_herm(rng, 4, np.float64), rand_spd(rng, 4, np.float64)
    with pytest.raises(ValueError, match=match):
        call(a, b)


def test_jax_method_agrees_with_lapack():
    rng = np.random.default_rng(8)
    for dtype in (np.float64, np.complex128):
        a = rand_herm(rng, 6, dtype, batch=(2,))
        b = rand_spd(rng, 6, dtype, batch=(2,))
        for kw in ({}, dict(subset_by_index=(1, 3)), dict(subset_by_value=(-1.0, 1.0))):
            for it in (1, 2, 3):
                w1, v1 = eigh(a, b, type=it, **kw)
                w2, v2 = eigh(a, b, type=it, method="jax", **kw)
                np.testing.assert_allclose(w1, w2, atol=1e-10, rtol=0)
                ok = np.isfinite(np.asarray(w1))[..., None, :]
                v1 = np.where(ok, v1, 0)
                v2 = np.where(ok, v2, 0)
                np.testing.assert_allclose(
                    align_phase(np.asarray(v2), np.asarray(v1)), v1, atol=1e-8, rtol=0
                )


def test_empty_matrix():
    w, v = eigh(np.zeros((0, 0)))
    assert w.shape == (0,) and v.shape == (0, 0)


@pytest.mark.parametrize("method", ["lapack", "jax"])
def test_unread_triangle_may_hold_nan(method):
    rng = np.random.default_rng(9)
    a, b = rand_herm(rng, 4, np.float64), rand_spd(rng, 4, np.float64)
    ref = sl.eigh(a, b, eigvals_only=True)
    a_up, b_up = a.copy(), b.copy()
    a_up[0, 3] = b_up[1, 2] = np.nan
    w = eigh(a_up, b_up, lower=True, symmetrize_input=False, eigvals_only=True, method=method)
    np.testing.assert_allclose(w, ref, atol=1e-12, rtol=0)
    a_lo, b_lo = a.copy(), b.copy()
    a_lo[3, 0] = b_lo[2, 1] = np.inf
    w = eigh(a_lo, b_lo, lower=False, symmetrize_input=False, eigvals_only=True, method=method)
    np.testing.assert_allclose(w, ref, atol=1e-12, rtol=0)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(
    n=st.integers(1, 9),
    batch=st.sampled_from([(), (2,), (2, 1)]),
    dtype=st.sampled_from(DTYPES),
    itype=st.sampled_from([0, 1, 2, 3]),
    lower=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_differential_against_scipy(n, batch, dtype, itype, lower, seed):
    rng = np.random.default_rng(seed)
    a = rand_herm(rng, n, dtype, batch)
    b = None if itype == 0 else rand_spd(rng, n, dtype, batch)
    w, v = eigh(a, b, lower=lower, type=max(itype, 1))
    hi = np.complex128 if np.iscomplexobj(a) else np.float64
    for idx in np.ndindex(*batch):
        bi = None if b is None else b[idx].astype(hi)
        ref = sl.eigh(a[idx].astype(hi), bi, type=max(itype, 1), eigvals_only=True)
        scale = max(np.abs(ref).max(), 1.0)
        np.testing.assert_allclose(w[idx], ref, atol=10 * tol(dtype) * scale, rtol=0)
        check_solution(
            a[idx],
            None if b is None else b[idx],
            max(itype, 1),
            np.asarray(w[idx]),
            np.asarray(v[idx]),
            dtype,
        )


@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
@pytest.mark.parametrize("itype", [0, 2])
@pytest.mark.parametrize("eigvals_only", [False, True])
def test_batched_subsets(dtype, itype, eigvals_only):
    rng = np.random.default_rng(12)
    n = 6
    a = rand_herm(rng, n, dtype, batch=(4,))
    b = None if itype == 0 else rand_spd(rng, n, dtype, batch=(4,))
    hi = np.complex128 if np.iscomplexobj(a) else np.float64
    for kw in (dict(subset_by_index=(3, 5)), dict(subset_by_value=(-2.0, 2.0))):
        out = eigh(a, b, type=max(itype, 1), eigvals_only=eigvals_only, **kw)
        w = np.asarray(out if eigvals_only else out[0])
        for i in range(4):
            bi = None if b is None else b[i].astype(hi)
            ref = sl.eigh(a[i].astype(hi), bi, type=max(itype, 1), eigvals_only=True, **kw)
            k = len(ref)
            np.testing.assert_allclose(w[i, :k], ref, atol=100 * tol(dtype), rtol=0)
            assert np.all(np.isnan(w[i, k:]))
            if not eigvals_only and k:
                check_solution(
                    a[i],
                    None if b is None else b[i],
                    max(itype, 1),
                    w[i, :k],
                    np.asarray(out[1][i])[:, :k],
                    dtype,
                )


@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_threaded_batch_matches_loop(dtype):
    """A batch large enough to be spread over threads (and to use per-thread workspaces), with
    one failing element in the middle: every other element matches SciPy."""
    rng = np.random.default_rng(13)
    batch, n = 80, 16  # 80 * 16**3 flops: above the kernel's threading threshold
    a = rand_herm(rng, n, dtype, batch=(batch,))
    b = rand_spd(rng, n, dtype, batch=(batch,))
    b[37] = -b[37]
    w, v = jax.jit(lambda a, b: eigh(a, b, type=3))(a, b)
    w, v = np.asarray(w), np.asarray(v)
    hi = np.complex128 if np.iscomplexobj(a) else np.float64
    for i in range(batch):
        if i == 37:
            assert np.all(np.isnan(w[i])) and np.all(np.isnan(v[i]))
            continue
        ref = sl.eigh(a[i].astype(hi), b[i].astype(hi), type=3, eigvals_only=True)
        np.testing.assert_allclose(w[i], ref, atol=100 * tol(dtype) * np.abs(ref).max(), rtol=0)
    check_solution(a[0], b[0], 3, w[0], v[0], dtype)
    check_solution(a[-1], b[-1], 3, w[-1], v[-1], dtype)
    with pytest.raises(np.linalg.LinAlgError, match=r"batch index \(37,\)"):
        eigh(a, b, type=3)
