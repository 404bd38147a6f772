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
