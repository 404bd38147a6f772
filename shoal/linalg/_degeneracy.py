"""When two eigenvalues count as degenerate in derivatives, and the gap factor F that results.

Eigenvector derivatives divide by gaps ``λ_j − λ_i``. A pair whose gap is not resolved must have
its rotation dropped (F_ij = 0): the subspace leaves it undetermined, and ``1/Δ`` of a gap made
of rounding errors turns the exact cancellation in a rotation-invariant loss into noise.

The default rule (``deg_thresh=None``) masks the pair (i, j) when

    |λ_i − λ_j| <= sqrt(eps) · max(|λ_i|, |λ_j|)  +  c · (η_i + η_j),   c = 32,

- the first term is relative to the pair's own magnitudes, never to the rest of the spectrum:
  a level shift of 1e6 on other eigenvalues changes nothing for a pair near 1;
- η_i is the first-order change of λ_i under rounding errors of the input (``eps·‖A‖`` and
  ``eps·‖B‖``): ``dλ_i = P_ii + σ λ_i Q_ii`` (see _jvp.py) with ``|dA| = eps‖A‖_F`` and
  ``|dB| = eps‖B‖_F``. For the generalized problems the A part is taken over the largest left
  vector (the Cholesky reduction spreads A's rounding with ‖B⁻¹‖ to every eigenvalue). It is
  the resolution of the computed spectrum: an exact multiplet at 0, or in a spectrum shifted by
  1e8, comes out of LAPACK split by a few η (measured: at most 3.4 η, and up to ~20 η for
  cond(B) = 1e7), so c = 32 covers it; no gap larger than c·(η_i + η_j) is masked.

A user-given ``deg_thresh`` is an absolute gap instead. Everything here is a constant for the
derivative (stop_gradient): the mask is a choice, not a function of the input.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["NOISE_FACTOR", "gap_inverse", "noise_levels", "pair_threshold"]

NOISE_FACTOR = 32.0


def _frobenius(x):
    return jnp.sqrt(jnp.sum(jnp.abs(x) ** 2, axis=(-2, -1)))


def noise_levels(a, b, w, left, right):
    """η for each eigenvalue ``w`` (..., k): ``left``/``right`` are the vectors of P and Q for the
    same columns (see _jvp.py: v, or B v for type 2; v, or B⁻¹ v for type 3); b None: standard."""
    eps = jnp.finfo(w.dtype).eps
    a_norm = _frobenius(a)[..., None]
    if b is None:
        return eps * a_norm * jnp.ones_like(w)
    left_sq = jnp.sum(jnp.abs(left) ** 2, axis=-2)
    right_sq = jnp.sum(jnp.abs(right) ** 2, axis=-2)
    spread = jnp.max(left_sq, axis=-1, keepdims=True)
    return eps * (a_norm * spread + jnp.abs(w) * _frobenius(b)[..., None] * right_sq)


def pair_threshold(w_rows, w_cols, eta_rows, eta_cols):
    """The default rule's threshold for every pair (row k, column j): shape (..., k, j)."""
    eps = jnp.finfo(w_rows.dtype).eps
    magnitude = jnp.maximum(jnp.abs(w_rows)[..., :, None], jnp.abs(w_cols)[..., None, :])
    noise = eta_rows[..., :, None] + eta_cols[..., None, :]
    thr = jnp.sqrt(eps) * magnitude + NOISE_FACTOR * noise
    return jax.lax.stop_gradient(thr)


def gap_inverse(w_rows, w_cols, threshold, broadening):
    """F_kj = f(λ_j − λ_k), masked (or Lorentzian-broadened) where the gap is below the threshold
    (a scalar, or one per pair); shape (..., k, j)."""
    delta = w_cols[..., None, :] - w_rows[..., :, None]
    thr = jax.lax.stop_gradient(jnp.asarray(threshold, delta.dtype))
    if broadening == "lorentzian":
        return delta / (delta * delta + thr * thr)
    far = jnp.abs(delta) > thr
    return jnp.where(far, 1.0 / jnp.where(far, delta, 1.0), 0.0)
