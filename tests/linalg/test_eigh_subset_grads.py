"""Derivatives of eigenvector subsets include the coupling to the eigenvectors outside the subset:
an occupied-only SCF density matrix d(V_occ V_occᵀ) against central differences of SciPy, by
index and by value, all problem types, complex input, and second order."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg as sl
from jax.test_util import check_grads

from shoal.linalg import eigh

jax.config.update("jax_enable_x64", True)


def _fd(fun, x, dx, h=1e-5):
    return (fun(x + h * dx) - fun(x - h * dx)) / (2 * h)


def _problem(rng, n, complex_=False):
    x = rng.normal(size=(n, n)) + (1j * rng.normal(size=(n, n)) if complex_ else 0)
    y = rng.normal(size=(n, n)) + (1j * rng.normal(size=(n, n)) if complex_ else 0)
    f = x + np.conj(x.T)  # a Fock-like matrix
    s = y @ np.conj(y.T) + n * np.eye(n)  # an overlap matrix
    return f, s


@pytest.mark.parametrize("itype", [0, 1, 2, 3])
@pytest.mark.parametrize("complex_", [False, True])
def test_occupied_density_matrix(itype, complex_):
    """The issue's case: with subset_by_index=(0, nocc-1) the density-matrix derivative was
    zero (-8e-16 against 2.47); it must equal that of the full decomposition."""
    rng = np.random.default_rng(itype + 4 * complex_)
    n, nocc = 7, 3
    f, s = _problem(rng, n, complex_)
    s = None if itype == 0 else s
    kind = max(itype, 1)
    g = rng.normal(size=(n, n))
    df = rng.normal(size=(n, n)) + (1j * rng.normal(size=(n, n)) if complex_ else 0)
    df = df + np.conj(df.T)
    ds = None if s is None else 0.3 * (df + n * np.eye(n))

    def density_np(f, s):
        v = sl.eigh(f, s, type=kind)[1][:, :nocc]
        return np.real(np.sum(g * (v @ np.conj(v.T))))

    def density(f, s, **kw):
        v = eigh(f, s, type=kind, **kw)[1]
        return jnp.real(jnp.sum(g * (v @ jnp.conj(v.T))))

    w = sl.eigh(f, s, eigvals_only=True, type=kind)
    by_value = dict(subset_by_value=(-np.inf, np.mean(w[nocc - 1 : nocc + 1])))
    for kw in (dict(subset_by_index=(0, nocc - 1)), by_value):
        if s is None:
            _, got = jax.jvp(lambda f, kw=kw: density(f, None, **kw), (f,), (df,))
            ref = _fd(lambda t: density_np(t, None), f, df)
            if not complex_:  # reverse mode too
                grad = jax.grad(lambda f, kw=kw: density(f, None, **kw))(f)
                assert abs(np.sum(grad * df) - ref) < 1e-7 * max(1, abs(ref))
        else:
            _, got = jax.jvp(lambda f, s, kw=kw: density(f, s, **kw), (f, s), (df, ds))
            ref = _fd(lambda t: density_np(f + t * df, s + t * ds), 0.0, 1.0)
        assert abs(ref) > 0.01  # a derivative that a projection onto the subset would miss
        np.testing.assert_allclose(got, ref, rtol=1e-7, atol=1e-9)


def test_subset_vectors_match_full_decomposition():
    """Each eigenvector of an index subset has the derivative of the same column of the full
    decomposition (phases aligned), the eigenvalues too."""
    rng = np.random.default_rng(9)
    f, s = _problem(rng, 6)
    df = rng.normal(size=(6, 6))
    df = df + df.T
    lo, hi = 2, 4
    (w, v), (dw, dv) = jax.jvp(lambda f: eigh(f, s, subset_by_index=(lo, hi)), (f,), (df,))
    (w_all, v_all), (dw_all, dv_all) = jax.jvp(lambda f: eigh(f, s), (f,), (df,))
    sign = np.sign(np.asarray(v)[0] * np.asarray(v_all)[0, lo : hi + 1])
    np.testing.assert_allclose(dw, dw_all[lo : hi + 1], rtol=1e-10)
    np.testing.assert_allclose(np.asarray(dv) * sign, dv_all[:, lo : hi + 1], rtol=1e-8,
                               atol=1e-10)  # fmt: skip


def test_second_order():
    rng = np.random.default_rng(11)
    f, s = _problem(rng, 5)

    def density(f, s):
        v = eigh(f, s, subset_by_index=(0, 1))[1]
        return jnp.sum(jnp.arange(25.0).reshape(5, 5) * (v @ v.T))

    check_grads(density, (f, s), order=2, modes=("fwd", "rev"), atol=1e-5, rtol=1e-5)


def test_eigenvalues_only_subset_needs_no_whole_solve():
    """Without eigenvectors the rule needs only the subset's own: one kernel call per solve."""
    rng = np.random.default_rng(12)
    f, s = _problem(rng, 5)

    def loss(f):
        return jnp.sum(eigh(f, s, subset_by_index=(0, 1), eigvals_only=True) ** 2)

    hlo = jax.jit(jax.grad(loss)).lower(f).as_text()
    assert hlo.count("shoal_linalg_eigh_gen_cpu") == 1
    with_vectors = jax.jit(jax.grad(lambda f: jnp.sum(eigh(f, s, subset_by_index=(0, 1))[1])))
    assert with_vectors.lower(f).as_text().count("shoal_linalg_eigh_gen_cpu") == 2
