"""The JVP of the (generalized) Hermitian eigenproblem, written in jnp so that JAX can transpose
it (reverse mode) and differentiate it again (second order).

For eigenpairs ``(λ, V)`` of a problem (``Problem``: standard, or type 1, 2, 3) with tangents
``dA``, ``dB`` (both Hermitian), write ``dV = V C``. With

    standard, 1:  P = Vᴴ dA V,           Q = Vᴴ dB V,           σ = -1, τ = -1
    type 2:       P = (BV)ᴴ dA (BV),     Q = Vᴴ dB V,           σ = +1, τ = -1
    type 3:       P = Vᴴ dA V,           Q = (B⁻¹V)ᴴ dB (B⁻¹V), σ = +1, τ = +1

(Q = 0 for the standard problem) and ``E_ij = P_ij + σ (λ_i + λ_j)/2 Q_ij``:

    dλ_i = E_ii
    C    = τ Q/2 + E ∘ F,   F_ij = 1/(λ_j - λ_i)  (i ≠ j),  F_ii = 0.

The Hermitian part of C (τQ/2) is what keeps V normalized (Vᴴ B V = I, or Vᴴ B⁻¹ V = I for
type 3) and is kept whole; E ∘ F is anti-Hermitian and carries the rotation among eigenvectors.
Only F is singular at degeneracy, so degenerate pairs drop exactly the part of the rotation that
the degenerate subspace leaves undetermined: F_ij = 0 where |λ_j - λ_i| <= threshold, or the
Lorentzian F_ij = Δ/(Δ² + ε²). The imaginary part of C_ii (the phase of a complex eigenvector) is
a gauge choice: zero.

For a subset of m < n eigenpairs, P and Q are m×m and ``dV = V C`` is the projection of the
exact eigenvector derivative onto the span of the returned eigenvectors (B-orthogonal projection;
B⁻¹-orthogonal for type 3); dλ is exact.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.linalg import cho_solve

from shoal.linalg._jax_impl import conj_transpose
from shoal.linalg._options import Problem


def default_threshold(w):
    """sqrt(eps) times the spectrum's scale (per batch element), never below the tiny float."""
    finfo = jnp.finfo(w.dtype)
    scale = jnp.max(jnp.where(jnp.isnan(w), 0, jnp.abs(w)), axis=-1)
    return jnp.sqrt(finfo.eps) * jnp.maximum(scale, finfo.tiny)


def gap_inverse(w, threshold, broadening):
    """F_ij = f(λ_j - λ_i) with masked (or Lorentzian-broadened) small gaps; shape (..., m, m)."""
    delta = w[..., None, :] - w[..., :, None]
    thr = jax.lax.stop_gradient(jnp.asarray(threshold, w.dtype))
    thr = thr[..., None, None] if thr.ndim else thr
    if broadening == "lorentzian":
        return delta / (delta * delta + thr * thr)
    far = jnp.abs(delta) > thr
    return jnp.where(far, 1.0 / jnp.where(far, delta, 1.0), 0.0)


def eigh_jvp(b, w, v, da, db, *, problem: Problem, threshold, broadening):
    """Tangents (dw, dv) of the eigenpairs (w, v) for Hermitian input tangents da, db (None: zero).

    ``b``: the Hermitian primal B (None for the standard problem); ``v``: (..., n, m);
    ``w``: (..., m), NaN for padding entries of a by-value subset (whose columns of v are zero).
    """
    w0 = jnp.where(jnp.isnan(w), 0, w)  # padding contributes nothing
    vh = conj_transpose(v)
    dtype = v.dtype
    p = None
    q = None
    if da is not None:
        left = b @ v if problem is Problem.TYPE2 else v
        p = conj_transpose(left) @ da @ left
    if db is not None and b is not None:
        if problem is Problem.TYPE3:
            chol = jnp.linalg.cholesky(b, symmetrize_input=False)
            right = cho_solve((chol, True), v)
            q = conj_transpose(right) @ db @ right
        else:
            q = vh @ db @ v
    m = w.shape[-1]
    if p is None and q is None:
        return jnp.zeros_like(w), jnp.zeros_like(v)
    if p is None:
        p = jnp.zeros(v.shape[:-2] + (m, m), dtype)
    sigma = -1.0 if problem in (Problem.STANDARD, Problem.TYPE1) else 1.0
    tau = 1.0 if problem is Problem.TYPE3 else -1.0
    e = p
    if q is not None:
        mean = 0.5 * (w0[..., :, None] + w0[..., None, :])
        e = p + sigma * mean.astype(dtype) * q
    dw = jnp.real(jnp.diagonal(e, axis1=-2, axis2=-1)).astype(w.dtype)
    f = gap_inverse(w0, threshold, broadening).astype(dtype)
    c = e * f
    if q is not None:
        # Zero the imaginary diagonal of Q/2: that is the phase gauge.
        c = c + (0.5 * tau) * q
    c = _strip_imag_diagonal(c)
    dv = v @ c
    return dw, dv


def _strip_imag_diagonal(c):
    if not jnp.iscomplexobj(c):
        return c
    m = c.shape[-1]
    eye = jnp.eye(m, dtype=bool)
    return jnp.where(eye, jnp.real(c).astype(c.dtype), c)
