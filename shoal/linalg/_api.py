"""Public eigensolvers: argument checking, the custom_jvp wiring, error reporting."""

from __future__ import annotations

import math
import os
import sys
import warnings
from functools import lru_cache, partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero

from shoal.linalg import _cuda, _ffi
from shoal.linalg._jax_impl import hermitian, jax_eigh, outside_subset
from shoal.linalg._jvp import eigh_jvp
from shoal.linalg._options import EighOptions, Problem, Subset, problem_type
from shoal.linalg._scipy_keywords import check_scipy_keywords

__all__ = ["eigh", "eigh_gen"]


class _Config(NamedTuple):
    options: EighOptions  # what the primal solves
    deg_thresh: float | None
    broadening: str | None
    method: str


def _primal(a, b, cfg: _Config):
    options = cfg.options
    if cfg.method == "jax":
        return jax_eigh(a, b, options)
    # CPU: the LAPACK kernels. CUDA: the cuSOLVER kernels when cuSOLVER loads (decided once; the
    # branch exists only where a CUDA backend does). Anything else (ROCm, TPU, or CUDA without
    # cuSOLVER): the pure-JAX path. Only the branch for the compilation platform is lowered.
    branches = dict(
        cpu=lambda a, b: _ffi.kernel_eigh(a, b, options),
        default=lambda a, b: jax_eigh(a, b, options),
    )
    if _cuda.enabled():
        branches["cuda"] = lambda a, b: _cuda.cuda_eigh(a, b, options)
    return jax.lax.platform_dependent(a, b, **branches)


@partial(jax.custom_jvp, nondiff_argnums=(2,))
def _eigh_core(a, b, cfg: _Config):
    return _primal(a, b, cfg)


@partial(_eigh_core.defjvp, symbolic_zeros=True)
def _eigh_core_jvp(cfg: _Config, primals, tangents):
    a, b = primals
    da, db = tangents
    # The rule needs eigenvectors even when the caller asked for eigenvalues only. Calling the
    # custom_jvp function itself (not the kernel) keeps the rule differentiable: higher orders
    # come back here.
    options = cfg.options
    solved = cfg._replace(options=options.replace(vectors=True))
    w, v, info = _eigh_core(a, b, solved)
    # Eigenvectors of a subset couple to those outside it: the rule needs them too (a second,
    # whole solve; only when the caller's eigenvectors are differentiated).
    outside = None
    if options.vectors and options.subset is not Subset.ALL:
        whole = solved._replace(options=solved.options.whole())
        outside = outside_subset(*_eigh_core(a, b, whole)[:2], options)
    # Only the named triangle is read, so the effective tangents are the Hermitian matrices that
    # triangle defines; the transpose of this map sends cotangents back to that triangle alone.
    lower = options.lower
    da = None if isinstance(da, SymbolicZero) else hermitian(da, lower)
    db = None if (b is None or isinstance(db, SymbolicZero)) else hermitian(db, lower)
    b_full = None if b is None else hermitian(b, lower)
    dw, dv = eigh_jvp(
        hermitian(a, lower), b_full, w, v, da, db, problem=options.problem,
        deg_thresh=cfg.deg_thresh, broadening=cfg.broadening, outside=outside,
    )  # fmt: skip
    # A symbolic zero of info's own tangent type: it keeps info's varying manual axes, which a
    # plain float0 array would lack inside shard_map (check_vma).
    dinfo = SymbolicZero(jax.typeof(info).to_tangent_aval())
    if options.vectors:
        return (w, v, info), (dw, dv, dinfo)
    return (w, None, info), (dw, None, dinfo)


def _as_matrix(x, name: str):
    given = type(x).__name__
    if not hasattr(x, "shape") or not hasattr(x, "dtype"):
        try:
            x = np.asarray(x)
        except ValueError as err:  # a ragged list
            raise ValueError(f"{name} must be an array of numbers; got {x!r:.80}: {err}") from None
    if not (np.issubdtype(x.dtype, np.number) or np.issubdtype(x.dtype, np.bool_)):
        # None, strings and objects would otherwise be reported as a shape () problem
        raise TypeError(f"{name} must be an array of numbers; got {given} (as an array, dtype "
                        f"{x.dtype})")
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(
            f"{name} must be a square matrix or a stack of them (shape (..., n, n)); "
            f"got {name}.shape={tuple(x.shape)}"
        )
    return x


def _result_dtype(*arrays):
    dtypes = tuple(np.dtype(x.dtype) for x in arrays if x is not None)
    return _promoted(dtypes, bool(jax.config.jax_enable_x64))


@lru_cache(maxsize=64)
def _promoted(dtypes: tuple, x64: bool):
    """The solve's dtype (cached: JAX's promotion costs ~10 µs, a sixth of an eager call)."""
    del x64  # part of the key: it changes what jnp.result_type returns
    dtype = jnp.result_type(*dtypes)
    if not jnp.issubdtype(dtype, jnp.inexact):
        dtype = jnp.result_type(float)
    if dtype in (jnp.float16, jnp.bfloat16):
        dtype = jnp.dtype(jnp.float32)
    if jnp.dtype(dtype) not in (
        jnp.dtype(t) for t in (jnp.float32, jnp.float64, jnp.complex64, jnp.complex128)
    ):
        raise TypeError(f"unsupported dtype {dtype}; use float32, float64, complex64 or complex128")
    return jnp.dtype(dtype)


def _symmetrize(x):
    """(x + xᴴ)/2, what ``jnp.linalg.eigh`` solves, computed as x/2 + xᴴ/2 so that entries
    near the largest float do not overflow (exactly x for Hermitian x above the subnormal
    range). The barrier keeps XLA from factoring it back into (x + xᴴ)·0.5 under jit."""
    half = jax.lax.optimization_barrier(0.5 * x)
    return half + jnp.conj(jnp.swapaxes(half, -1, -2))


def _flag(name: str, value) -> bool:
    # bool("no") is True: only real booleans, so a misspelt argument is not silently truthy
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False; got {value!r}")
    return bool(value)


def _real(name: str, value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a real number; got {value!r}") from None


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


def _outside_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning issued by its caller point at user code (the first
    frame outside shoal.linalg, however many of the package's frames lie in between)."""
    here = os.path.dirname(os.path.abspath(__file__))
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == here:
        frame, level = frame.f_back, level + 1
    return level


def _resolve_method(method: str) -> str:
    global _warned_fallback
    if not isinstance(method, str) or method not in ("lapack", "jax"):
        raise ValueError(f"method must be 'lapack' or 'jax'; got method={method!r}")
    if method == "lapack" and not _ffi.available():
        if not _warned_fallback:
            warnings.warn(
                "shoal.linalg: compiled extension unavailable "
                f"({_ffi.IMPORT_ERROR}); using method='jax'",
                stacklevel=_outside_stacklevel(),
            )
            _warned_fallback = True
        return "jax"
    return method


def _pipeline(a, b, cfg: _Config, dtype, batch: tuple, symmetrize_input: bool):
    """From checked arguments to (w, v, info): cast, broadcast, symmetrize, solve."""
    n = a.shape[-1]
    a = jnp.broadcast_to(jnp.asarray(a, dtype), batch + (n, n))
    if b is not None:
        b = jnp.broadcast_to(jnp.asarray(b, dtype), batch + (n, n))
    if symmetrize_input:
        # jnp.linalg.eigh's convention: (x + xᴴ)/2 is solved, so both triangles are read and
        # the gradient is Hermitian. Without it the kernels read the named triangle themselves.
        a = _symmetrize(a)
        b = None if b is None else _symmetrize(b)
    return _eigh_core(a, b, cfg)


@lru_cache(maxsize=256)
def _eager_pipeline(cfg: _Config, dtype, batch: tuple, symmetrize_input: bool):
    """_pipeline compiled once per configuration (jit adds one entry per input shape/dtype).

    Called eagerly, the pipeline's dozen operations (cast, broadcast, symmetrize, the custom_jvp
    and platform_dependent wrappers, the kernel call) were each dispatched and traced on their
    own: 300-500 µs per call on 7-18 orbitals, ten times the kernel. As one jitted call the cost
    is the dispatch of one executable; the info output is then checked on the host."""
    return jax.jit(partial(_pipeline, cfg=cfg, dtype=dtype, batch=batch,
                           symmetrize_input=symmetrize_input))  # fmt: skip


def _solve(
    a,
    b,
    *,
    problem: Problem,
    lower,
    symmetrize_input,
    eigvals_only,
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
    options = EighOptions.build(
        n,
        problem=problem,
        lower=_flag("lower", lower),
        eigvals_only=_flag("eigvals_only", eigvals_only),
        subset_by_index=subset_by_index,
        subset_by_value=subset_by_value,
        shared_b=b is not None and math.prod(b.shape[:-2]) == 1 and math.prod(batch) > 1,
    )
    if deg_thresh is not None:
        deg_thresh = _real("deg_thresh", deg_thresh)
        if not deg_thresh >= 0:
            raise ValueError(f"deg_thresh must be >= 0 or None; got {deg_thresh}")
    if broadening is not None:
        if isinstance(broadening, tuple) and len(broadening) == 2 and broadening[0] == "lorentzian":
            width = _real("the Lorentzian width", broadening[1])
            if not width > 0:
                raise ValueError(f"the Lorentzian width must be > 0; got {width}")
            deg_thresh = width
        elif broadening != "lorentzian":
            raise ValueError(
                "broadening must be None, 'lorentzian' or ('lorentzian', width); "
                f"got {broadening!r}"
            )
        broadening = "lorentzian"
    symmetrize_input = _flag("symmetrize_input", symmetrize_input)
    concrete = _is_concrete(a) and _is_concrete(b)

    cfg = _Config(options=options, deg_thresh=deg_thresh, broadening=broadening, method=method)
    if n == 0:
        real = jnp.finfo(dtype).dtype
        w = jnp.zeros(batch + (0,), real)
        return w if eigvals_only else (w, jnp.zeros(batch + (0, 0), dtype))
    if concrete:
        # One compiled call instead of a dozen eagerly dispatched operations (see _pipeline).
        w, v, info = _eager_pipeline(cfg, dtype, batch, symmetrize_input)(a, b)
    else:
        w, v, info = _pipeline(a, b, cfg, dtype, batch, symmetrize_input)
    if concrete:
        _raise_on_failure(info, batch, n, options.generalized)
    return w if eigvals_only else (w, v)


def eigh(
    a,
    b=None,
    *,
    lower: bool = True,
    symmetrize_input: bool = True,
    eigvals_only: bool = False,
    type: int = 1,  # noqa: A002
    subset_by_index=None,
    subset_by_value=None,
    deg_thresh: float | None = None,
    broadening=None,
    method: str = "lapack",
    check_finite: bool = True,
    overwrite_a: bool = False,
    overwrite_b: bool = False,
    driver: str | None = None,
    turbo: bool = True,
):
    """Eigenvalues and eigenvectors of a Hermitian matrix, or of a Hermitian-definite pencil.

    Solves ``a v = λ v`` (``b`` None) or, with ``b`` Hermitian positive definite, the problem of
    type ``type``: 1 ``a v = λ b v``; 2 ``a b v = λ v``; 3 ``b a v = λ v``. By default, as
    :func:`jax.numpy.linalg.eigh`, the Hermitian parts ``(a + aᴴ)/2`` and ``(b + bᴴ)/2`` are
    solved, so values and gradients match ``jnp.linalg.eigh`` (gradients are Hermitian);
    ``symmetrize_input=False`` gives SciPy's semantics: only the ``lower`` (or upper) triangle
    of ``a`` and ``b`` is read, and gradients land in that triangle alone.

    Parameters
    ----------
    a, b : array_like, shape (..., n, n)
        float32, float64, complex64 or complex128 (integers are promoted). Leading batch
        dimensions broadcast between ``a`` and ``b``.
    lower : bool
        With ``symmetrize_input=False``: read the lower (True) or upper (False) triangle.
    symmetrize_input : bool
        True (default, like ``jnp.linalg.eigh``): solve the Hermitian part of ``a`` and ``b``;
        NaN anywhere in them reaches the result. False: read one triangle only (the other may
        hold anything, even NaN), as ``scipy.linalg.eigh``.
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
        a gap below ``sqrt(eps) * max(|λ_i|, |λ_j|)`` (the pair's own magnitudes) or below the
        computed eigenvalues' rounding resolution (~``eps * ‖A‖``); see docs/linalg.md.
    broadening : None, "lorentzian" or ("lorentzian", width)
        Replace ``1/Δ`` in eigenvector derivatives by ``Δ/(Δ² + width²)``; the width defaults to
        ``deg_thresh`` (or its default).
    method : {"lapack", "jax"}
        The compiled kernels (LAPACK on CPU, cuSOLVER on CUDA GPUs), or the pure-JAX path
        (Cholesky + ``jnp.linalg.eigh``).
    check_finite, overwrite_a, overwrite_b, driver, turbo
        ``scipy.linalg.eigh``'s keywords, accepted for drop-in use and checked as SciPy checks
        them, without effect: the input is always checked for NaN/Inf, never overwritten, and
        shoal picks the LAPACK routine (``?syevd``/``?sygvd``, ``?syevr``/``?sygvx`` for
        subsets).

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
    problem = problem_type(type, "type")
    check_scipy_keywords(
        generalized=b is not None, subset=subset_by_index is not None or
        subset_by_value is not None, driver=driver, check_finite=check_finite,
        overwrite_a=overwrite_a, overwrite_b=overwrite_b, turbo=turbo,
    )  # fmt: skip
    return _solve(
        a,
        b,
        problem=Problem.STANDARD if b is None else problem,
        lower=lower,
        symmetrize_input=symmetrize_input,
        eigvals_only=eigvals_only,
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
    symmetrize_input: bool = True,
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
    problem_type(itype, "itype")
    return eigh(
        a,
        b,
        lower=lower,
        symmetrize_input=symmetrize_input,
        eigvals_only=eigvals_only,
        type=itype,
        subset_by_index=subset_by_index,
        subset_by_value=subset_by_value,
        deg_thresh=deg_thresh,
        broadening=broadening,
        method=method,
    )
