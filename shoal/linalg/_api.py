"""Public eigensolvers: argument checking, the custom_jvp wiring, error reporting."""

from __future__ import annotations

import operator
import warnings
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero

from shoal.linalg import _cuda, _ffi
from shoal.linalg._jax_impl import hermitian, jax_eigh
from shoal.linalg._jvp import default_threshold, eigh_jvp

__all__ = ["eigh", "eigh_gen"]


class _Config(NamedTuple):
    itype: int  # 0: standard problem; 1, 2, 3: generalized
    lower: bool  # which triangle of a and b is read
    vectors: bool
    subset: int  # 0 all, 1 by index, 2 by value
    il: int
    iu: int
    vl: float
    vu: float
    m: int
    deg_thresh: float | None
    broadening: str | None
    method: str


def _primal(a, b, cfg: _Config, vectors: bool):
    kw = dict(
        lower=cfg.lower,
        itype=cfg.itype,
        vectors=vectors,
        subset=cfg.subset,
        il=cfg.il,
        iu=cfg.iu,
        vl=cfg.vl,
        vu=cfg.vu,
        m=cfg.m,
    )
    if cfg.method == "jax":
        return jax_eigh(a, b, **kw)
    # CPU: the LAPACK kernels. CUDA: the cuSOLVER kernels when cuSOLVER loads (decided once; the
    # branch exists only where a CUDA backend does). Anything else (ROCm, TPU, or CUDA without
    # cuSOLVER): the pure-JAX path. Only the branch for the compilation platform is lowered.
    branches = dict(
        cpu=lambda a, b: _ffi.kernel_eigh(a, b, **kw),
        default=lambda a, b: jax_eigh(a, b, **kw),
    )
    if _cuda.enabled():
        branches["cuda"] = lambda a, b: _cuda.cuda_eigh(a, b, **kw)
    return jax.lax.platform_dependent(a, b, **branches)


@partial(jax.custom_jvp, nondiff_argnums=(2,))
def _eigh_core(a, b, cfg: _Config):
    return _primal(a, b, cfg, cfg.vectors)


@partial(_eigh_core.defjvp, symbolic_zeros=True)
def _eigh_core_jvp(cfg: _Config, primals, tangents):
    a, b = primals
    da, db = tangents
    # The rule needs eigenvectors even when the caller asked for eigenvalues only. Calling the
    # custom_jvp function itself (not the kernel) keeps the rule differentiable: higher orders
    # come back here.
    w, v, info = _eigh_core(a, b, cfg._replace(vectors=True))
    # Only the named triangle is read, so the effective tangents are the Hermitian matrices that
    # triangle defines; the transpose of this map sends cotangents back to that triangle alone.
    da = None if isinstance(da, SymbolicZero) else hermitian(da, cfg.lower)
    db = None if (b is None or isinstance(db, SymbolicZero)) else hermitian(db, cfg.lower)
    b_full = None if b is None else hermitian(b, cfg.lower)
    threshold = default_threshold(w) if cfg.deg_thresh is None else cfg.deg_thresh
    dw, dv = eigh_jvp(
        b_full, w, v, da, db, itype=cfg.itype, threshold=threshold, broadening=cfg.broadening
    )
    dinfo = np.zeros(info.shape, dtype=jax.dtypes.float0)
    if cfg.vectors:
        return (w, v, info), (dw, dv, dinfo)
    return (w, None, info), (dw, None, dinfo)


def _as_matrix(x, name: str):
    if not hasattr(x, "shape") or not hasattr(x, "dtype"):
        x = np.asarray(x)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(
            f"{name} must be a square matrix or a stack of them (shape (..., n, n)); "
            f"got {name}.shape={tuple(x.shape)}"
        )
    return x


def _result_dtype(*arrays):
    dtype = jnp.result_type(*[x.dtype for x in arrays if x is not None])
    if not jnp.issubdtype(dtype, jnp.inexact):
        dtype = jnp.result_type(float)
    if dtype in (jnp.float16, jnp.bfloat16):
        dtype = jnp.dtype(jnp.float32)
    if jnp.dtype(dtype) not in (
        jnp.dtype(t) for t in (jnp.float32, jnp.float64, jnp.complex64, jnp.complex128)
    ):
        raise TypeError(f"unsupported dtype {dtype}; use float32, float64, complex64 or complex128")
    return jnp.dtype(dtype)


def _is_concrete(x) -> bool:
    return x is None or not isinstance(x, jax.core.Tracer)


def _reason(code: int, n: int, generalized: bool) -> str:
    if code == _ffi.NON_FINITE_INPUT:
        return "the input contains NaN or Inf"
    if code == _ffi.NOT_POSITIVE_DEFINITE:
        return "b is not positive definite (its Cholesky factorization failed)"
    if code < 0:
        return f"LAPACK rejected argument {-code} (internal error, please report)"
    if generalized and code > n:
        return f"b is not positive definite (its leading minor of order {code - n} is not positive)"
    return f"the eigenvalue algorithm failed to converge (LAPACK info={code})"


def _raise_on_failure(info, batch_shape, n: int, generalized: bool) -> None:
    info = np.asarray(info)
    bad = np.flatnonzero(info.reshape(-1))
    if bad.size == 0:
        return
    first = int(bad[0])
    index = tuple(int(i) for i in np.unravel_index(first, batch_shape))
    where = f" at batch index {index}" if batch_shape else ""
    msg = _reason(int(info.reshape(-1)[first]), n, generalized)
    more = f" ({bad.size} of {info.size} batch elements failed)" if info.size > 1 else ""
    raise np.linalg.LinAlgError(f"shoal.linalg.eigh{where}: {msg}{more}")


_warned_fallback = False


def _resolve_method(method: str) -> str:
    global _warned_fallback
    if method not in ("lapack", "jax"):
        raise ValueError(f"method must be 'lapack' or 'jax'; got method={method!r}")
    if method == "lapack" and not _ffi.available():
        if not _warned_fallback:
            warnings.warn(
                "shoal.linalg: compiled extension unavailable "
                f"({_ffi.IMPORT_ERROR}); using method='jax'",
                stacklevel=3,
            )
            _warned_fallback = True
        return "jax"
    return method


def _solve(
    a,
    b,
    *,
    lower,
    eigvals_only,
    itype,
    subset_by_index,
    subset_by_value,
    deg_thresh,
    broadening,
    method,
):
    method = _resolve_method(method)
    a = _as_matrix(a, "a")
    n = a.shape[-1]
    if b is not None:
        b = _as_matrix(b, "b")
        if b.shape[-1] != n:
            raise ValueError(
                f"b must have the same matrix size as a; got a.shape={tuple(a.shape)}"
                f" and b.shape={tuple(b.shape)}"
            )
    dtype = _result_dtype(a, b)
    batch = tuple(a.shape[:-2])
    if b is not None:
        try:
            batch = tuple(np.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2])))
        except ValueError:
            raise ValueError(
                f"the batch dimensions of a and b do not broadcast: a.shape={tuple(a.shape)}, "
                f"b.shape={tuple(b.shape)}"
            ) from None
    if subset_by_index is not None and subset_by_value is not None:
        raise ValueError("pass at most one of subset_by_index and subset_by_value")
    subset, il, iu, vl, vu, m = 0, 0, n - 1, 0.0, 0.0, n
    if subset_by_index is not None:
        try:
            il, iu = (operator.index(i) for i in subset_by_index)
        except (TypeError, ValueError):
            raise ValueError(
                f"subset_by_index must be two integers (first, last), got {subset_by_index!r}"
            ) from None
        if not 0 <= il <= iu <= n - 1:
            raise ValueError(
                f"subset_by_index={tuple(subset_by_index)!r} is invalid for n={n}: "
                "need 0 <= first <= last <= n - 1"
            )
        subset, m = 1, iu - il + 1
    elif subset_by_value is not None:
        try:
            vl, vu = (float(x) for x in subset_by_value)
        except (TypeError, ValueError):
            raise ValueError(
                f"subset_by_value must be two numbers (low, high], got {subset_by_value!r}"
            ) from None
        if not vl < vu:
            raise ValueError(f"subset_by_value={tuple(subset_by_value)!r}: need low < high")
        big = float(np.finfo(np.float64).max)
        vl, vu = max(vl, -big), min(vu, big)
        subset = 2
    if deg_thresh is not None:
        deg_thresh = float(deg_thresh)
        if not deg_thresh >= 0:
            raise ValueError(f"deg_thresh must be >= 0 or None; got {deg_thresh}")
    if broadening is not None:
        if isinstance(broadening, tuple) and len(broadening) == 2 and broadening[0] == "lorentzian":
            width = float(broadening[1])
            if not width > 0:
                raise ValueError(f"the Lorentzian width must be > 0; got {width}")
            deg_thresh = width
        elif broadening != "lorentzian":
            raise ValueError(
                "broadening must be None, 'lorentzian' or ('lorentzian', width); "
                f"got {broadening!r}"
            )
        broadening = "lorentzian"
    concrete = _is_concrete(a) and _is_concrete(b)

    # No symmetrized copy: the kernels read the named triangle themselves.
    a = jnp.broadcast_to(jnp.asarray(a, dtype), batch + (n, n))
    if b is not None:
        b = jnp.broadcast_to(jnp.asarray(b, dtype), batch + (n, n))
    cfg = _Config(
        itype=itype,
        lower=bool(lower),
        vectors=not eigvals_only,
        subset=subset,
        il=il,
        iu=iu,
        vl=vl,
        vu=vu,
        m=m,
        deg_thresh=deg_thresh,
        broadening=broadening,
        method=method,
    )
    if n == 0:
        real = jnp.finfo(dtype).dtype
        w = jnp.zeros(batch + (0,), real)
        return w if eigvals_only else (w, jnp.zeros(batch + (0, 0), dtype))
    w, v, info = _eigh_core(a, b, cfg)
    if concrete:
        _raise_on_failure(info, batch, n, b is not None)
    return w if eigvals_only else (w, v)


def _check_itype(value: Any, name: str) -> int:
    if isinstance(value, bool) or value not in (1, 2, 3):
        raise ValueError(f"{name} must be 1, 2 or 3; got {name}={value!r}")
    return int(value)


def eigh(
    a,
    b=None,
    *,
    lower: bool = True,
    eigvals_only: bool = False,
    type: int = 1,  # noqa: A002
    subset_by_index=None,
    subset_by_value=None,
    deg_thresh: float | None = None,
    broadening=None,
    method: str = "lapack",
):
    """Eigenvalues and eigenvectors of a Hermitian matrix, or of a Hermitian-definite pencil.

    Solves ``a v = λ v`` (``b`` None) or, with ``b`` Hermitian positive definite, the problem of
    type ``type``: 1 ``a v = λ b v``; 2 ``a b v = λ v``; 3 ``b a v = λ v``. SciPy's semantics:
    only the ``lower`` (or upper) triangle of ``a`` and ``b`` is read.

    Parameters
    ----------
    a, b : array_like, shape (..., n, n)
        float32, float64, complex64 or complex128 (integers are promoted). Leading batch
        dimensions broadcast between ``a`` and ``b``.
    lower : bool
        Read the lower (True) or upper (False) triangle.
    eigvals_only : bool
        Return only the eigenvalues (LAPACK then computes no eigenvectors).
    type : {1, 2, 3}
        The generalized problem type (ignored when ``b`` is None).
    subset_by_index : (int, int), optional
        Inclusive 0-based range ``(first, last)`` of eigenvalues, in ascending order.
    subset_by_value : (float, float), optional
        Eigenvalues in the half-open interval ``(low, high]``. Static output shape: the result
        has length n, the eigenvalues found first, then NaN (their eigenvector columns are zero).
    deg_thresh : float, optional
        Absolute eigenvalue gap below which a pair counts as degenerate in derivatives. Default:
        ``sqrt(eps) * max|λ|`` per matrix.
    broadening : None, "lorentzian" or ("lorentzian", width)
        Replace ``1/Δ`` in eigenvector derivatives by ``Δ/(Δ² + width²)``; the width defaults to
        ``deg_thresh`` (or its default).
    method : {"lapack", "jax"}
        The compiled kernels (LAPACK on CPU, cuSOLVER on CUDA GPUs), or the pure-JAX path
        (Cholesky + ``jnp.linalg.eigh``).

    Returns
    -------
    w : (..., m) real, ascending
    v : (..., n, m), only when ``eigvals_only`` is False; ``vᴴ b v = I`` (types 1, 2),
        ``vᴴ b⁻¹ v = I`` (type 3), ``vᴴ v = I`` (standard).

    Raises
    ------
    numpy.linalg.LinAlgError
        Outside ``jit``/tracing, when an element fails (b not positive definite, no
        convergence, NaN input). Under tracing, that element's outputs are NaN instead.
    """
    itype = _check_itype(type, "type")
    return _solve(
        a,
        b,
        lower=lower,
        eigvals_only=eigvals_only,
        itype=0 if b is None else itype,
        subset_by_index=subset_by_index,
        subset_by_value=subset_by_value,
        deg_thresh=deg_thresh,
        broadening=broadening,
        method=method,
    )


def eigh_gen(
    a,
    b,
    *,
    lower: bool = True,
    itype: int = 1,
    eigvals_only: bool = False,
    subset_by_index=None,
    subset_by_value=None,
    deg_thresh: float | None = None,
    broadening=None,
    method: str = "lapack",
):
    """The generalized Hermitian-definite eigenproblem of type ``itype``; see :func:`eigh`.

    ``itype`` 1: ``a v = λ b v``; 2: ``a b v = λ v``; 3: ``b a v = λ v``. ``b`` is required.
    """
    if b is None:
        raise ValueError("eigh_gen needs b (use eigh for the standard problem)")
    itype = _check_itype(itype, "itype")
    return _solve(
        a,
        b,
        lower=lower,
        eigvals_only=eigvals_only,
        itype=itype,
        subset_by_index=subset_by_index,
        subset_by_value=subset_by_value,
        deg_thresh=deg_thresh,
        broadening=broadening,
        method=method,
    )
