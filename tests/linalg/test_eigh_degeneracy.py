"""The default degeneracy rule (shoal/linalg/_degeneracy.py) against finite differences of
scipy.linalg.eigh: a level shift elsewhere in the spectrum never masks a real gap, and losses
that are invariant within an exact multiplet keep exact derivatives."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg as sl

from shoal.linalg import eigh

jax.config.update("jax_enable_x64", True)


def _fd5(fun, x, dx, h):
    """Five-point central difference: error O(h⁴), so 1e-8 comparisons are meaningful."""
    return (-fun(x + 2 * h * dx) + 8 * fun(x + h * dx) - 8 * fun(x - h * dx)
            + fun(x - 2 * h * dx)) / (12 * h)  # fmt: skip


def _sym(x):
    return 0.5 * (x + x.T)


def _pencil(rng, lam, itype):
    """(A, B) with generalized eigenvalues lam (B None for itype 0): random B and vectors."""
    n = len(lam)
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    if itype == 0:
        return _sym(q @ np.diag(lam) @ q.T), None
    x = rng.normal(size=(n, n))
    b = _sym(x @ x.T + n * np.eye(n))
    low = np.linalg.cholesky(b)
    if itype == 3:
        v = low @ q
        bv = np.linalg.solve(b, v)
        return _sym(bv @ np.diag(lam) @ bv.T), b
    v = np.linalg.solve(low.T, q)
    a = v @ np.diag(lam) @ v.T if itype == 2 else b @ v @ np.diag(lam) @ v.T @ b
    return _sym(a), b


def _pad(x, shift, k):
    """SCF padding: k extra orbitals, decoupled, with diagonal ``shift`` (I for b)."""
    n = x.shape[0]
    out = np.zeros((n + k, n + k))
    out[:n, :n] = x
    out[n:, n:] = shift * np.eye(k)
    return out


def _one_vector_projector(a, b, j, g, itype=1):
    """Σ g ∘ v_j v_jᵀ with scipy (sign free, not invariant under rotations mixing v_j)."""
    v = sl.eigh(a, b, type=itype)[1][:, j]
    return np.sum(g * np.outer(v, v))


def test_issue_spectrum_vector_gradient():
    """The issue's case: [-1, -0.5, 0, 0.01, 1, 1e6]; the old default sqrt(eps)·max|λ| = 0.0149
    masked the 0.01 gap and the gradient was 98 % wrong."""
    rng = np.random.default_rng(0)
    lam = np.array([-1, -0.5, 0, 0.01, 1, 1e6])
    a, _ = _pencil(rng, lam, 0)
    g = rng.normal(size=(6, 6))
    da = _sym(rng.normal(size=(6, 6)))

    def loss(a):
        v = eigh(a)[1][:, 2]
        return jnp.sum(g * jnp.outer(v, v))

    got = np.sum(jax.grad(loss)(a) * da)
    # the eigenvectors carry rounding errors of eps·1e6/0.01: the difference step is a compromise
    ref = _fd5(lambda t: _one_vector_projector(t, None, 2, g), a, da, 1e-5)
    assert abs(got - ref) < 1e-4 * abs(ref)


@pytest.mark.parametrize("shift", [1e3, 1e4, 1e6, 1e8])
@pytest.mark.parametrize("itype", [0, 1, 2, 3])
def test_level_shift_keeps_small_gaps(shift, itype):
    """Padding orbitals shifted by 1e3…1e8 (decoupled, as pyscfad's SCFPad): the derivative of an
    eigenvector separated by a gap of 0.01 stays exact."""
    rng = np.random.default_rng(int(np.log10(shift)) + 10 * itype)
    a, b = _pencil(rng, np.array([-1.0, -0.5, 0.0, 0.01, 1.0]), itype)
    a = _pad(a, shift, 2)
    b = None if b is None else _pad(b, 1.0, 2)
    n = a.shape[0]
    g = rng.normal(size=(n, n))
    da = _pad(_sym(rng.normal(size=(5, 5))), 0.0, 2)  # keeps the padding decoupled
    kind = max(itype, 1)

    def loss(a, **kw):
        v = eigh(a, b, type=kind, **kw)[1][:, 2]
        return jnp.sum(g * jnp.outer(v, v))

    got = np.sum(jax.grad(loss)(a) * da)
    # h well below the 0.01 gap (truncation ~ (h/gap)⁴); type 3 at 1e8 is the noisiest (~1e-5)
    ref = _fd5(lambda t: _one_vector_projector(t, b, 2, g, kind), a, da, 1e-5)
    assert abs(got - ref) < 3e-5 * abs(ref)
    # nothing at all was masked: the same as the unmasked rule
    unmasked = np.sum(jax.grad(lambda a: loss(a, deg_thresh=0.0))(a) * da)
    np.testing.assert_allclose(got, unmasked, rtol=1e-13)


def _invariant_losses(w, v, cluster, g, metric, np_=jnp):
    """Losses that depend on the cluster only through its spectral projector and symmetric
    functions of its eigenvalues (what the masked rule differentiates exactly; a matrix function
    V f(Λ) Vᵀ with f' ≠ 0 on the cluster is not one: its derivative needs the splitting of the
    cluster, which no linear rule in (dλ, dV) can give)."""
    vc = v[:, cluster]
    proj = np_.sum(g * (vc @ vc.T @ metric))
    return [proj, np_.sum(np_.sin(w)), proj * np_.sum(w[cluster] ** 2)]


@pytest.mark.parametrize("value, shift", [(0.0, None), (-0.5, None), (0.0, 1e6), (-0.5, 1e8)])
@pytest.mark.parametrize("itype", [0, 1, 2, 3])
def test_exact_multiplet_invariant_losses(value, shift, itype):
    """A triple eigenvalue (at 0, where only the resolution floor can detect it, or at -0.5),
    alone or beside padding shifted by 1e6/1e8: rotation-invariant losses match central
    differences to 1e-8."""
    rng = np.random.default_rng(7 + itype)
    lam = np.array([value, value, value, 1.5, -2.0])
    a, b = _pencil(rng, lam, itype)
    if shift is not None:
        a = _pad(a, shift, 2)
        b = None if b is None else _pad(b, 1.0, 2)
    n = a.shape[0]
    kind = max(itype, 1)
    w_ref = sl.eigh(a, b, type=kind, eigvals_only=True)
    cluster = np.flatnonzero(np.abs(w_ref - value) < 1e-3)
    assert len(cluster) == 3 and np.ptp(w_ref[cluster]) < 1e-12
    g = rng.normal(size=(n, n))
    da = _sym(rng.normal(size=(n, n)))
    db = None if b is None else _sym(rng.normal(size=(n, n))) * 0.1
    if shift is not None:  # stay decoupled, so that the differences are accurate
        da = _pad(da[:5, :5], 0.0, 2)
        db = None if db is None else _pad(db[:5, :5], 0.0, 2)

    def metric(b):
        return np.eye(n) if b is None else (np.linalg.inv(b) if itype == 3 else b)

    def losses(a, b):
        w, v = eigh(a, b, type=kind)
        m = jnp.eye(n) if b is None else (jnp.linalg.inv(b) if itype == 3 else b)
        return jnp.stack(_invariant_losses(w, v, cluster, g, m))

    def losses_np(a, b):
        w, v = sl.eigh(a, b, type=kind)
        return np.array(_invariant_losses(w, v, cluster, g, metric(b), np))

    h = 1e-4  # five-point: truncation ~h⁴ and rounding ~eps/h both well below 1e-8
    if b is None:
        _, got = jax.jvp(lambda a: losses(a, None), (a,), (da,))
        ref = _fd5(lambda t: losses_np(t, None), a, da, h)
    else:
        _, got = jax.jvp(losses, (a, b), (da, db))
        ref = _fd5(lambda s: losses_np(a + s * da, b + s * db), 0.0, 1.0, h)
    np.testing.assert_allclose(got, ref, rtol=1e-8, atol=1e-8 * np.abs(ref).max())
    # reverse mode is the transpose of the same rule
    jac = jax.jacrev(losses, argnums=0)(a, b)
    if b is None:
        np.testing.assert_allclose(np.einsum("kij,ij->k", jac, da), got, rtol=1e-10, atol=1e-12)


def test_user_threshold_is_absolute():
    """deg_thresh=0.02 masks the 0.01 gap (as asked); the default does not."""
    rng = np.random.default_rng(3)
    a, _ = _pencil(rng, np.array([-1.0, 0.0, 0.01, 1.0]), 0)
    da = _sym(rng.normal(size=(4, 4)))

    def dv(**kw):
        return np.asarray(jax.jvp(lambda a: eigh(a, **kw)[1], (a,), (da,))[1])

    v = np.asarray(eigh(a)[1])
    # the tangent's component along the neighbour across the 0.01 gap
    default, masked = v[:, 2] @ dv()[:, 1], v[:, 2] @ dv(deg_thresh=0.02)[:, 1]
    # Masked: the 1/gap term is gone; what is left is rounding (v's columns are orthonormal to
    # ~1e-16 only: -6.9e-18 on a Xeon, where an exact 0 was asserted before).
    assert abs(masked) < 1e-12 * abs(default)
    expected = (v[:, 2] @ da @ v[:, 1]) / (0.0 - 0.01)
    np.testing.assert_allclose(default, expected, rtol=1e-8)
