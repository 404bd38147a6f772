"""Pure-JAX primal: Cholesky reduction + jnp.linalg.eigh (for platforms without the extension)."""

from __future__ import annotations

import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

from shoal.linalg._ffi import NON_FINITE_INPUT
from shoal.linalg._options import EighOptions, Problem, Subset


def conj_transpose(x):
    """xᴴ over the last two axes."""
    return jnp.conj(jnp.swapaxes(x, -1, -2))


def hermitian(x, lower: bool):
    """The Hermitian matrix whose named triangle is that of x (the other one is never read)."""
    tri = jnp.tril(x, -1) if lower else jnp.triu(x, 1)
    diag = jnp.real(jnp.diagonal(x, axis1=-2, axis2=-1)).astype(x.dtype)
    eye = jnp.eye(x.shape[-1], dtype=x.dtype)
    return tri + conj_transpose(tri) + diag[..., None] * eye


def jax_eigh(a, b, options: EighOptions):
    """Same contract as ``_ffi.kernel_eigh``: returns (w, v or None, info)."""
    n = a.shape[-1]
    a = hermitian(a, options.lower)
    b = None if b is None else hermitian(b, options.lower)
    if b is None:
        w, v = jnp.linalg.eigh(a, symmetrize_input=False)
        chol_ok = jnp.ones(a.shape[:-2], bool)
    else:
        low = jnp.linalg.cholesky(b, symmetrize_input=False)
        chol_ok = jnp.all(jnp.isfinite(low), axis=(-2, -1))
        if options.problem is Problem.TYPE1:
            # C = L⁻¹ A L⁻ᴴ
            x = solve_triangular(low, a, lower=True)
            c = conj_transpose(solve_triangular(low, conj_transpose(x), lower=True))
        else:
            c = conj_transpose(low) @ a @ low
        c = 0.5 * (c + conj_transpose(c))
        w, u = jnp.linalg.eigh(c, symmetrize_input=False)
        if options.problem is Problem.TYPE3:
            v = low @ u
        else:
            v = solve_triangular(conj_transpose(low), u, lower=False)
    finite_in = jnp.all(jnp.isfinite(a), axis=(-2, -1))
    if b is not None:
        finite_in &= jnp.all(jnp.isfinite(b), axis=(-2, -1))
    ok_out = jnp.all(jnp.isfinite(w), axis=-1)
    info = jnp.where(
        ~finite_in, NON_FINITE_INPUT, jnp.where(~chol_ok, n + 1, jnp.where(ok_out, 0, 1))
    ).astype(jnp.int32)
    return finish(w, v, info, options)


def select_subset(w, v, options: EighOptions):
    """Pick options.subset out of a full ascending decomposition with the kernels' semantics.

    By index: indices il..iu. By value: the eigenvalues in (vl, vu] first, then NaN padding
    (length n); the padding's eigenvector columns are zero. ``v`` may be None.
    """
    n = w.shape[-1]
    il, iu, vl, vu = options.il, options.iu, options.vl, options.vu
    if options.subset is Subset.BY_INDEX:
        w = w[..., il : iu + 1]
        v = None if v is None else v[..., il : iu + 1]
    elif options.subset is Subset.BY_VALUE:
        inside = (w > vl) & (w <= vu)
        first = jnp.sum(w <= vl, axis=-1, keepdims=True)
        count = jnp.sum(inside, axis=-1, keepdims=True)
        idx = jnp.arange(n)
        take = jnp.clip(first + idx, 0, n - 1)
        keep = idx < count
        w = jnp.where(keep, jnp.take_along_axis(w, take, axis=-1), jnp.nan)
        if v is not None:
            v = jnp.take_along_axis(v, jnp.broadcast_to(take[..., None, :], v.shape), axis=-1)
            v = jnp.where(keep[..., None, :], v, 0)
    return w, v


def outside_subset(w, v, options: EighOptions):
    """The eigenpairs of a full decomposition (w, v) that options.subset does not select, as
    (w_out, v_out). By index: the other columns. By value: all n columns, those inside
    (vl, vu] zeroed (NaN eigenvalue, zero vector), so that shapes stay static."""
    if options.subset is Subset.BY_INDEX:
        il, iu = options.il, options.iu
        cat = jnp.concatenate
        return cat([w[..., :il], w[..., iu + 1 :]], -1), cat([v[..., :il], v[..., iu + 1 :]], -1)
    inside = (w > options.vl) & (w <= options.vu)
    return jnp.where(inside, jnp.nan, w), jnp.where(inside[..., None, :], 0, v)


def finish(w, v, info, options: EighOptions):
    """Subset selection, then NaN for the failed elements (info != 0): (w, v or None, info)."""
    w, v = select_subset(w, v if options.vectors else None, options)
    bad = info != 0
    w = jnp.where(bad[..., None], jnp.nan, w)
    if not options.vectors:
        return w, None, info
    v = jnp.where(bad[..., None, None], jnp.nan, v)
    return w, v, info
