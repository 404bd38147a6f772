"""The JVP of the (generalized) Hermitian eigenproblem, written in jnp so that JAX can transpose
it (reverse mode) and differentiate it again (second order).

For eigenpairs ``(λ, V)`` of a problem (``Problem``: standard, or type 1, 2, 3) with tangents
``dA``, ``dB`` (both Hermitian), write ``dV = U C`` in a basis U of eigenvectors (U = V for the
whole spectrum). With

    standard, 1:  P = Uᴴ dA V,           Q = Uᴴ dB V,           σ = -1, τ = -1
    type 2:       P = (BU)ᴴ dA (BV),     Q = Uᴴ dB V,           σ = +1, τ = -1
    type 3:       P = Uᴴ dA V,           Q = (B⁻¹U)ᴴ dB (B⁻¹V), σ = +1, τ = +1

(Q = 0 for the standard problem) and ``E_kj = P_kj + σ (λ_k + λ_j)/2 Q_kj``:

    dλ_j = E_jj
    C    = τ Q/2 + E ∘ F,   F_kj = 1/(λ_j - λ_k)  (k ≠ j),  F_jj = 0.

The Hermitian part of C (τQ/2) is what keeps V normalized (Vᴴ B V = I, or Vᴴ B⁻¹ V = I for
type 3) and is kept whole; E ∘ F is anti-Hermitian and carries the rotation among eigenvectors.
Only F is singular at degeneracy (_degeneracy.py says which pairs are masked). The imaginary part
of C_jj (the phase of a complex eigenvector) is a gauge choice: zero.

A subset S of eigenpairs passes the others as ``outside``: U = [V_S, V_out], so dV_S includes the
coupling to the eigenvectors that were not returned (the full linear-response derivative). Every
term is bilinear in a column of U and its conjugate, so the phases of V_out do not matter.
Without ``outside``, U = V_S and dV_S is the projection onto span(V_S).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.linalg import cho_solve

from shoal.linalg._degeneracy import gap_inverse, noise_levels, pair_threshold
from shoal.linalg._jax_impl import conj_transpose
from shoal.linalg._options import Problem


def _zero_nan(w):
    return jnp.where(jnp.isnan(w), 0, w)  # padding of a by-value subset contributes nothing


def eigh_jvp(a, b, w, v, da, db, *, problem: Problem, deg_thresh, broadening, outside=None):
    """Tangents (dw, dv) of the eigenpairs (w, v) for Hermitian input tangents da, db (None: zero).

    ``a``, ``b``: the Hermitian primal A and B (b None for the standard problem); ``v``:
    (..., n, m); ``w``: (..., m), NaN for padding entries of a by-value subset (whose columns of v
    are zero). ``outside``: (w_out, v_out), the eigenpairs not in the subset (zero columns are
    ignored), or None. ``deg_thresh``: an absolute gap, or None for the default rule.
    """
    m = w.shape[-1]
    w = _zero_nan(w)
    if da is None and db is None:
        return jnp.zeros_like(w), jnp.zeros_like(v)
    basis_w, basis = w, v
    if outside is not None:
        basis_w = jnp.concatenate([w, _zero_nan(outside[0])], axis=-1)
        basis = jnp.concatenate([v, outside[1]], axis=-1)
    # The vectors of P (left) and Q (right) for the basis; V's are its first m columns.
    left = b @ basis if problem is Problem.TYPE2 else basis
    right = basis
    if problem is Problem.TYPE3:
        right = cho_solve((jnp.linalg.cholesky(b, symmetrize_input=False), True), basis)
    dtype = v.dtype
    rows = basis.shape[-1]
    p = jnp.zeros(v.shape[:-2] + (rows, m), dtype)
    q = None
    if da is not None:
        p = conj_transpose(left) @ da @ left[..., :m]
    if db is not None and b is not None:
        q = conj_transpose(right) @ db @ right[..., :m]
    sigma = -1.0 if problem in (Problem.STANDARD, Problem.TYPE1) else 1.0
    tau = 1.0 if problem is Problem.TYPE3 else -1.0
    e = p
    if q is not None:
        mean = 0.5 * (basis_w[..., :, None] + w[..., None, :])
        e = p + sigma * mean.astype(dtype) * q
    dw = jnp.real(jnp.diagonal(e[..., :m, :], axis1=-2, axis2=-1)).astype(w.dtype)
    if deg_thresh is None:
        eta = jax.lax.stop_gradient(noise_levels(a, b, basis_w, left, right))
        threshold = pair_threshold(basis_w, w, eta, eta[..., :m])
    else:
        threshold = deg_thresh
    f = gap_inverse(basis_w, w, threshold, broadening).astype(dtype)
    c = e * f
    if q is not None:
        # Zero the imaginary diagonal of Q/2: that is the phase gauge.
        c = c + (0.5 * tau) * q
    c = _strip_imag_diagonal(c)
    return dw, basis @ c


def _strip_imag_diagonal(c):
    if not jnp.iscomplexobj(c):
        return c
    eye = jnp.eye(c.shape[-2], c.shape[-1], dtype=bool)
    return jnp.where(eye, jnp.real(c).astype(c.dtype), c)
