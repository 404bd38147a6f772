"""The CUDA path's JAX side, run on the CPU: shoal.linalg._cuda.cuda_eigh with its two FFI calls
replaced by emulators of cuSOLVER's documented behaviour (column-major, in place, the fill-mode
triangle only, conj(V) left in the buffer, devInfo per matrix).

This checks everything between the public API and the kernels — the row-/column-major and
triangle conventions, the n <= 32 Cholesky reduction and its back-transforms for itypes 1-3,
subset selection, the info/NaN/LinAlgError handling and derivatives — against SciPy. The kernels
themselves (and the emulators' fidelity) are checked on a GPU by tests/linalg/test_eigh_gpu.py.
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
    solve_subset,
    subset_kwargs,
)
from test_eigh_values import check_solution, tol

from shoal.linalg import _cuda, _ffi, eigh
from shoal.linalg._jax_impl import hermitian, jax_eigh
from shoal.linalg._options import Problem, Subset, Triangle

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


class FakeCusolver:
    """Emulates the two handlers; records which path each call took."""

    def __init__(self):
        self.calls = []
        self.fail_convergence = None  # (..., ) bool mask: matrices that "do not converge"
        self.saw_non_finite = []

    def _check_finite(self, *xs):
        # cuSOLVER must never see NaN/Inf (it may not terminate); checked at run time.
        ok = jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in xs]))
        jax.debug.callback(lambda ok: self.saw_non_finite.append(not bool(ok)), ok)

    def call_eigh(self, a, options, *, algorithm):
        n = a.shape[-1]
        lower, vectors = options.lower, options.vectors
        assert options.problem == Problem.STANDARD and options.subset == Subset.ALL
        assert algorithm in (1, 2)
        assert algorithm == 2 or n <= _cuda.JACOBI_MAX_N
        self.calls.append(("eigh", n, algorithm))
        self._check_finite(a)
        view = jnp.swapaxes(a, -1, -2)  # the column-major reading of the row-major buffer
        w, u = jnp.linalg.eigh(hermitian(view, not lower), symmetrize_input=False)
        buf = jnp.swapaxes(u, -1, -2) if vectors else jnp.full_like(a, 7)  # jobz=N: garbage
        info = jnp.zeros(a.shape[:-2], jnp.int32)
        if self.fail_convergence is not None:
            code = n + 1 if algorithm == 1 else 1  # syevjBatched vs syevd conventions
            info = jnp.where(self.fail_convergence, code, info)
            w = jnp.where(self.fail_convergence[..., None], 12345.0, w)
        return buf, w, info

    def call_eigh_gen(self, a, b, options):
        n = a.shape[-1]
        vectors = options.vectors
        assert options.generalized and options.subset == Subset.ALL
        assert n > _cuda.JACOBI_MAX_N
        self.calls.append(("gen", n, options.problem))
        self._check_finite(a, b)
        av, bv = jnp.swapaxes(a, -1, -2), jnp.swapaxes(b, -1, -2)
        flipped = Triangle.UPPER if options.lower else Triangle.LOWER
        w, v, info = jax_eigh(av, bv, options.replace(triangle=flipped, vectors=True))
        # sygvd: info = n + k when the minor of order k of B is not positive definite
        buf = jnp.swapaxes(v, -1, -2) if vectors else jnp.full_like(a, 7)
        return buf, w, info


@pytest.fixture
def fake(monkeypatch):
    f = FakeCusolver()
    monkeypatch.setattr(_cuda, "call_eigh", f.call_eigh)
    monkeypatch.setattr(_cuda, "call_eigh_gen", f.call_eigh_gen)
    # Route the CPU branch of the public API through the CUDA glue.
    monkeypatch.setattr(_ffi, "kernel_eigh", _cuda.cuda_eigh)
    yield f
    jax.effects_barrier()
    assert not any(f.saw_non_finite)


def _hi(x):
    return x.astype(np.complex128 if np.iscomplexobj(x) else np.float64)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("itype", [0, 1, 2, 3])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("n", [6, 40])
def test_matches_scipy(fake, dtype, itype, lower, n):
    rng = np.random.default_rng(n + itype * 10 + lower)
    a = rand_herm(rng, n, dtype)
    b = None if itype == 0 else rand_spd(rng, n, dtype)
    ref_w, ref_v = sl.eigh(_hi(a), None if b is None else _hi(b), type=max(itype, 1))
    aj = scramble_other_triangle(a, lower, rng)
    bj = None if b is None else scramble_other_triangle(b, lower, rng)
    w, v = eigh(aj, bj, lower=lower, type=max(itype, 1), symmetrize_input=False)
    w_only = eigh(aj, bj, lower=lower, type=max(itype, 1), eigvals_only=True,
                  symmetrize_input=False)
    expected = ("gen", n, itype) if itype and n > 32 else ("eigh", n, 1 if n <= 32 else 2)
    assert fake.calls == [expected, expected]
    assert w.dtype == np.finfo(dtype).dtype and v.dtype == dtype
    w, v, w_only = np.asarray(w), np.asarray(v), np.asarray(w_only)
    scale = np.abs(ref_w).max()
    slack = 10 if n < 32 else 100
    np.testing.assert_allclose(w, ref_w, atol=tol(dtype) * scale * slack, rtol=0)
    np.testing.assert_allclose(w_only, ref_w, atol=tol(dtype) * scale * slack, rtol=0)
    if np.finfo(dtype).bits > 32 or n < 32:  # float32 vectors at n=40: residual check only
        vv = align_phase(v.astype(ref_v.dtype), ref_v)
        np.testing.assert_allclose(vv, ref_v, atol=tol(dtype) * 1e3 * slack, rtol=0)
    check_solution(a, b, max(itype, 1), w, v, dtype)


@pytest.mark.parametrize("itype", [0, 1, 2, 3])
@pytest.mark.parametrize("mode", ["index", "value"])
@pytest.mark.parametrize("n", [7, 36])
def test_subsets_match_scipy(fake, itype, mode, n):
    dtype = np.complex128
    rng = np.random.default_rng(100 + itype + n)
    a = rand_herm(rng, n, dtype)
    b = None if itype == 0 else rand_spd(rng, n, dtype)
    full = sl.eigh(a, b, type=max(itype, 1), eigvals_only=True)
    kw = subset_kwargs(mode, full, 2, 4)
    ref_w, ref_v = sl.eigh(a, b, type=max(itype, 1), **kw)
    w, v, w_only = solve_subset(a, b, itype, kw)
    k = len(ref_w)
    assert k == 3
    check_subset_layout(mode, n, k, w, v, w_only)
    np.testing.assert_allclose(w[:k], ref_w, atol=1e-10 * np.abs(full).max(), rtol=0)
    np.testing.assert_allclose(w_only[:k], ref_w, atol=1e-10 * np.abs(full).max(), rtol=0)
    np.testing.assert_allclose(align_phase(v[:, :k], ref_v), ref_v, atol=1e-8, rtol=0)


@pytest.mark.parametrize("n", [5, 34])
def test_batched_vmap_and_jit(fake, n):
    rng = np.random.default_rng(3)
    a = rand_herm(rng, n, np.float64, batch=(3, 2))
    b = rand_spd(rng, n, np.float64, batch=(2,))
    w, v = eigh(a, b, type=3)
    wv, vv = jax.vmap(jax.jit(lambda x: eigh(x, b, type=3)))(a)
    np.testing.assert_allclose(wv, w, atol=1e-12 * np.abs(w).max(), rtol=0)
    np.testing.assert_allclose(np.abs(vv), np.abs(v), atol=1e-9, rtol=0)
    for i in range(3):
        for j in range(2):
            ref = sl.eigh(a[i, j], b[j], type=3, eigvals_only=True)
            np.testing.assert_allclose(w[i, j], ref, atol=1e-10 * np.abs(ref).max(), rtol=0)


@pytest.mark.parametrize("n", [4, 40])
def test_b_not_positive_definite(fake, n):
    check_b_not_positive_definite(n)


@pytest.mark.parametrize("n", [4, 40])
@pytest.mark.parametrize("generalized", [False, True])
def test_non_finite_input(fake, n, generalized):
    rng = np.random.default_rng(6)
    a = rand_herm(rng, n, np.float32, batch=(2,))
    b = rand_spd(rng, n, np.float32, batch=(2,)) if generalized else None
    target = b if generalized else a
    target[1, n - 1, 0] = np.nan  # lower triangle: read
    with pytest.raises(np.linalg.LinAlgError, match=r"\(1,\): the input contains NaN or Inf"):
        eigh(a, b)
    w = np.asarray(jax.jit(lambda a, b: eigh(a, b, eigvals_only=True))(a, b))
    assert np.all(np.isnan(w[1])) and np.all(np.isfinite(w[0]))
    # the same NaN in the unread triangle is ignored when one triangle is read
    target[1, n - 1, 0] = target[1, 0, n - 1]
    target[1, 0, n - 1] = np.inf
    assert np.all(np.isfinite(np.asarray(eigh(a, b, eigvals_only=True, symmetrize_input=False))))


@pytest.mark.parametrize("n", [4, 40])
def test_no_convergence_is_reported_as_such(fake, n):
    rng = np.random.default_rng(8)
    a = rand_herm(rng, n, np.float64, batch=(2,))
    fake.fail_convergence = jnp.array([False, True])
    with pytest.raises(np.linalg.LinAlgError, match=r"\(1,\): the eigenvalue algorithm failed"):
        eigh(a)
    w = np.asarray(jax.jit(lambda a: eigh(a, eigvals_only=True))(a))
    assert np.all(np.isnan(w[1])) and np.all(np.isfinite(w[0]))


@pytest.mark.parametrize("itype", [0, 1, 2, 3])
@pytest.mark.parametrize("n", [4, 34])
def test_gradients_match_the_cpu_kernels(fake, monkeypatch, itype, n):
    rng = np.random.default_rng(9 + itype)
    a = rand_herm(rng, n, np.float64)
    b = None if itype == 0 else rand_spd(rng, n, np.float64)
    c = rng.normal(size=(n, n))

    def loss(a, b):
        w, v = eigh(a, b, type=max(itype, 1))
        return jnp.sum(w * jnp.arange(n)) + jnp.sum(c * (v * v))

    args = (a,) if b is None else (a, b)
    argnums = tuple(range(len(args)))
    f = (lambda a: loss(a, None)) if b is None else loss
    g_cuda = jax.grad(f, argnums=argnums)(*args)
    if n < 8:
        check_grads(f, args, order=1, modes=("fwd", "rev"), atol=1e-5, rtol=1e-5)
    monkeypatch.undo()  # the real CPU kernels
    g_cpu = jax.grad(f, argnums=argnums)(*args)
    for x, y in zip(g_cuda, g_cpu, strict=True):
        np.testing.assert_allclose(x, y, atol=1e-8 * np.abs(y).max(), rtol=0)
