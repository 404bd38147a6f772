"""eigh's input convention: by default the Hermitian part of a (and b) is solved, as
jnp.linalg.eigh(symmetrize_input=True) does, so values and gradients match JAX's (gradients
Hermitian); symmetrize_input=False reads one triangle only, as scipy.linalg.eigh, and sends the
gradient to that triangle alone."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.linalg import solve_triangular

from shoal.linalg import eigh, eigh_gen

jax.config.update("jax_enable_x64", True)


def _random(rng, n, complex_):
    x = rng.normal(size=(n, n))
    return x + 1j * rng.normal(size=(n, n)) if complex_ else x


def _not_hermitian(rng, n, complex_):
    """A matrix whose two triangles disagree, so the convention matters."""
    return _random(rng, n, complex_)


def _spd_not_hermitian(rng, n, complex_):
    x = _random(rng, n, complex_)
    spd = x @ np.conj(x.T) + n * np.eye(n)
    return spd + 0.1 * _random(rng, n, complex_)  # Hermitian part stays positive definite


def _loss(w, v):
    """Depends on eigenvalues and on eigenvectors through phase-free quantities only."""
    weights = jnp.arange(1.0, w.shape[-1] + 1)
    projector = (v * weights) @ jnp.conj(v.T)
    return jnp.sum(weights * w**2) + jnp.sum(jnp.abs(projector) ** 2)


def _hermitian_part(x):
    return (x + jnp.conj(x.T)) / 2


def _assert_hermitian(g):
    g = np.asarray(g)
    np.testing.assert_allclose(g, np.conj(g.T), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("complex_", [False, True])
def test_standard_values_and_gradient_match_jnp(complex_):
    rng = np.random.default_rng(1 + complex_)
    a = _not_hermitian(rng, 5, complex_)
    w, v = eigh(a)
    w_ref, _ = jnp.linalg.eigh(a)
    np.testing.assert_allclose(w, w_ref, rtol=1e-12, atol=1e-12)
    g = jax.grad(lambda a: _loss(*eigh(a)))(a)
    g_ref = jax.grad(lambda a: _loss(*jnp.linalg.eigh(a)))(a)
    np.testing.assert_allclose(g, g_ref, rtol=1e-9, atol=1e-10)
    _assert_hermitian(g)


def _jnp_generalized(a, b):
    """Type 1 by Cholesky reduction in plain JAX: b = L Lᴴ, C = L⁻¹ a L⁻ᴴ, v = L⁻ᴴ u."""
    a, b = _hermitian_part(a), _hermitian_part(b)
    low = jnp.linalg.cholesky(b)
    x = solve_triangular(low, a, lower=True)
    c = jnp.conj(solve_triangular(low, jnp.conj(x.T), lower=True).T)
    w, u = jnp.linalg.eigh(c)
    return w, solve_triangular(jnp.conj(low.T), u, lower=False)


@pytest.mark.parametrize("complex_", [False, True])
def test_generalized_gradient_matches_a_jnp_reference(complex_):
    rng = np.random.default_rng(10 + complex_)
    a, b = _not_hermitian(rng, 5, complex_), _spd_not_hermitian(rng, 5, complex_)
    w, _ = eigh_gen(a, b)
    np.testing.assert_allclose(w, _jnp_generalized(a, b)[0], rtol=1e-10, atol=1e-10)
    ga, gb = jax.grad(lambda a, b: _loss(*eigh(a, b)), argnums=(0, 1))(a, b)
    ga_ref, gb_ref = jax.grad(lambda a, b: _loss(*_jnp_generalized(a, b)), argnums=(0, 1))(a, b)
    np.testing.assert_allclose(ga, ga_ref, rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(gb, gb_ref, rtol=1e-8, atol=1e-9)
    _assert_hermitian(ga)
    _assert_hermitian(gb)


@pytest.mark.parametrize("itype", [2, 3])
def test_generalized_gradient_matches_finite_differences_along_symmetric_directions(itype):
    rng = np.random.default_rng(20 + itype)
    n = 4
    a, b = _not_hermitian(rng, n, False), _spd_not_hermitian(rng, n, False)

    def loss(a, b):
        return _loss(*eigh(a, b, type=itype))

    ga, gb = jax.grad(loss, argnums=(0, 1))(a, b)
    _assert_hermitian(ga)
    _assert_hermitian(gb)
    h = 1e-6
    for _ in range(2):
        da = _hermitian_part(rng.normal(size=(n, n)))
        db = _hermitian_part(rng.normal(size=(n, n)))
        fd = (loss(a + h * da, b + h * db) - loss(a - h * da, b - h * db)) / (2 * h)
        np.testing.assert_allclose(np.sum(ga * da) + np.sum(gb * db), fd, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("lower", [True, False])
def test_one_triangle_reading_ignores_the_other_and_gives_a_triangular_gradient(lower):
    rng = np.random.default_rng(30 + lower)
    n = 5
    a, b = _not_hermitian(rng, n, False), _spd_not_hermitian(rng, n, False)
    a, b = (np.tril(a) + np.tril(a, -1).T, np.tril(b) + np.tril(b, -1).T) if lower else (
        np.triu(a) + np.triu(a, 1).T, np.triu(b) + np.triu(b, 1).T)
    unread = np.triu(np.ones((n, n), bool), 1) if lower else np.tril(np.ones((n, n), bool), -1)
    garbage_a = np.where(unread, np.nan, a)
    garbage_b = np.where(unread, 1e6, b)
    w, _ = eigh(garbage_a, garbage_b, lower=lower, symmetrize_input=False)
    np.testing.assert_allclose(w, eigh(a, b)[0], rtol=1e-12, atol=1e-12)

    def loss(a, b):
        return _loss(*eigh(a, b, lower=lower, symmetrize_input=False))

    ga, gb = jax.grad(loss, argnums=(0, 1))(a, b)
    assert np.all(np.asarray(ga)[unread] == 0) and np.all(np.asarray(gb)[unread] == 0)
    assert np.any(np.asarray(ga)[unread.T] != 0)
    # the triangular gradient carries the symmetric one's off-diagonal pairs folded together
    ga_sym = jax.grad(lambda a: _loss(*eigh(a, b)))(a)
    folded = np.where(unread.T, 2 * np.asarray(ga_sym), np.where(unread, 0, ga_sym))
    np.testing.assert_allclose(ga, folded, rtol=1e-9, atol=1e-10)


def test_default_reads_both_triangles():
    """NaN in either triangle reaches the result by default (it is part of (a + aᴴ)/2)."""
    a = np.eye(3)
    a[0, 2] = np.nan
    with pytest.raises(np.linalg.LinAlgError, match="NaN"):
        eigh(a)
    assert np.all(np.isfinite(np.asarray(eigh(a, symmetrize_input=False)[0])))


def test_symmetrize_input_must_be_a_bool():
    with pytest.raises(TypeError, match="symmetrize_input must be True or False; got 'yes'"):
        eigh(np.eye(2), symmetrize_input="yes")
