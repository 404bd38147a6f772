"""Random Hermitian / SPD test matrices and eigenvector phase alignment for the linalg tests
that must run with only numpy, scipy, jax and pytest installed (the GPU machine)."""

import numpy as np


def rand_herm(rng, n, dtype, batch=()):
    x = rng.normal(size=batch + (n, n))
    if np.iscomplexobj(np.empty(0, dtype)):
        x = x + 1j * rng.normal(size=batch + (n, n))
    return (x + np.conj(np.swapaxes(x, -1, -2))).astype(dtype)


def rand_spd(rng, n, dtype, batch=()):
    x = rng.normal(size=batch + (n, n))
    if np.iscomplexobj(np.empty(0, dtype)):
        x = x + 1j * rng.normal(size=batch + (n, n))
    return (x @ np.conj(np.swapaxes(x, -1, -2)) + n * np.eye(n)).astype(dtype)


def scramble_other_triangle(x, lower, rng):
    """Garbage in the triangle that must not be read."""
    n = x.shape[-1]
    junk = rng.normal(size=x.shape) * 100
    mask = np.triu(np.ones((n, n), bool), 1) if lower else np.tril(np.ones((n, n), bool), -1)
    return np.where(mask, junk.astype(x.dtype), x)


def align_phase(v, ref):
    """Rotate each column of v by the phase that best matches ref's column."""
    d = np.sum(np.conj(v) * ref, axis=-2, keepdims=True)
    mag = np.abs(d)
    return v * np.where(mag > 0, d / np.where(mag > 0, mag, 1), 1)


def subset_kwargs(mode, full, first, last):
    """eigh's keywords selecting eigenvalues first..last of the ascending spectrum ``full``: by
    index, or by value with the bounds halfway between neighbours (so float32 agrees on the
    count)."""
    if mode == "index":
        return dict(subset_by_index=(first, last))
    low, high = 0.5 * (full[first - 1] + full[first]), 0.5 * (full[last] + full[last + 1])
    return dict(subset_by_value=(low, high))


def solve_subset(a, b, itype, kw):
    """(w, v, w_only) of eigh for the subset keywords ``kw`` (itype 0: standard), as arrays."""
    from shoal.linalg import eigh

    w, v = eigh(a, b, type=max(itype, 1), **kw)
    w_only = eigh(a, b, type=max(itype, 1), eigvals_only=True, **kw)
    return np.asarray(w), np.asarray(v), np.asarray(w_only)


def check_subset_layout(mode, n, k, w, v, w_only=None):
    """A subset's static shapes: by index k eigenpairs; by value n slots, the k found first, then
    NaN eigenvalues with zero eigenvector columns."""
    if mode == "value":
        assert w.shape == (n,) and v.shape == (n, n)
        assert np.all(np.isnan(w[k:])) and np.all(v[:, k:] == 0)
        if w_only is not None:
            assert np.all(np.isnan(w_only[k:]))
    else:
        assert w.shape == (k,) and v.shape == (n, k)


def check_b_not_positive_definite(n, put=lambda x: x):
    """Element 1 of a batch of 3 has an indefinite b: eigh raises naming it outside jit, gives NaN
    for it (and the right values for the others) inside. ``put`` places the inputs (a device)."""
    import jax
    import pytest
    import scipy.linalg as sl

    from shoal.linalg import eigh

    rng = np.random.default_rng(5)
    a = rand_herm(rng, n, np.float64, (3,))
    b = rand_spd(rng, n, np.float64, (3,))
    b[1] = -b[1]
    with pytest.raises(np.linalg.LinAlgError, match=r"batch index \(1,\): b is not positive"):
        eigh(put(a), put(b))
    w, v = jax.jit(eigh)(put(a), put(b))
    w, v = np.asarray(w), np.asarray(v)
    assert np.all(np.isnan(w[1])) and np.all(np.isnan(v[1]))
    for i in (0, 2):
        ref = sl.eigh(a[i], b[i], eigvals_only=True)
        np.testing.assert_allclose(w[i], ref, atol=1e-10 * np.abs(ref).max(), rtol=0)
