"""The CUDA path: cuSOLVER found and loaded at run time, the FFI calls, and the primal.

Routines (see docs/linalg.md): standard n <= 32 batched Jacobi (``syevjBatched``), n > 32
``syevd`` per matrix; generalized n <= 32 Cholesky reduction in JAX then the batched Jacobi
kernel, n > 32 ``sygvd`` per matrix. Subsets are selected from the full decomposition.

Nothing here runs on a machine without a CUDA backend: ``enabled()`` is False there and
``_api`` then adds no CUDA branch at all.
"""

from __future__ import annotations

import enum
import glob
import os
import sys
import threading
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import solve_triangular

from shoal.linalg import _ffi
from shoal.linalg._jax_impl import conj_transpose, finish, hermitian
from shoal.linalg._options import EighOptions, Problem, Triangle
from shoal.linalg._primitive import eigh_call, register_batch_partitionable

# syevjBatched's limit.
JACOBI_MAX_N = 32


class Algorithm(enum.IntEnum):
    """The standard handler's routine (its "algorithm" attribute; values as in C++)."""

    JACOBI = 1  # syevjBatched, n <= JACOBI_MAX_N
    SYEVD = 2  # syevd per matrix


_HIGHEST = jax.lax.Precision.HIGHEST  # never TF32 in the reduction

_lock = threading.Lock()
_state: dict = {}  # "status": (ok, message), "warned": bool


# --------------------------------------------------------------------------------------------
# Finding and loading cuSOLVER


def cusolver_candidates() -> list[tuple[str, bool]]:
    """(soname or path, noload) in the order they are tried.

    ``SHOAL_CUSOLVER`` (a path or soname), when set, is the only candidate. Otherwise: a
    cuSOLVER already loaded in the process (jax's CUDA plugin loads one), the sonames on the
    loader's path, the NVIDIA wheels (``site-packages/nvidia/**/lib``), ``$CUDA_HOME/lib64``,
    ``/usr/local/cuda/lib64``.
    """
    override = os.environ.get("SHOAL_CUSOLVER", "").strip()
    if override:
        return [(override, False)]
    sonames = ["libcusolver.so.12", "libcusolver.so.11"]
    out = [(s, True) for s in sonames + ["libcusolver.so"]]
    out += [(s, False) for s in sonames]
    roots = [p for p in sys.path if p and os.path.isdir(os.path.join(p, "nvidia"))]
    found = []
    for root in roots:
        pattern = os.path.join(root, "nvidia", "**", "lib", "libcusolver.so*")
        found += glob.glob(pattern, recursive=True)
    homes = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", ""), "/usr/local/cuda"]
    for base in homes:
        if base:
            found += glob.glob(os.path.join(base, "lib64", "libcusolver.so*"))

    def version_key(path: str):
        tail = os.path.basename(path).split(".so")[-1].lstrip(".")
        parts = [int(p) for p in tail.split(".") if p.isdigit()]
        return [-p for p in parts] or [1]  # newest major first; unversioned last

    seen = set()
    for path in sorted(found, key=version_key):
        if path not in seen:
            seen.add(path)
            out.append((path, False))
    return out


def load_cusolver() -> tuple[bool, str]:
    """Load cuSOLVER into the extension (once per process). Returns (ok, where-or-why)."""
    ext = _ffi._linalg_ext
    if ext is None:
        return False, f"the compiled extension is unavailable ({_ffi.IMPORT_ERROR})"
    if ext.cusolver_loaded_path():
        return True, ext.cusolver_loaded_path()
    tried = []
    for path, noload in cusolver_candidates():
        why = ext.load_cusolver(path, noload)
        if not why:
            return True, ext.cusolver_loaded_path()
        if not noload:
            tried.append(why)
    hint = (
        "install the NVIDIA cuSOLVER wheel (pip install 'jax[cuda13]' brings it) or set "
        "SHOAL_CUSOLVER to the path of libcusolver.so"
    )
    return False, "cuSOLVER not found (" + "; ".join(tried) + "); " + hint


def _cuda_backend() -> tuple[bool, str]:
    try:
        devices = jax.devices("cuda")
    except RuntimeError as exc:
        return False, f"no CUDA backend in this jax ({exc})"
    if not devices:
        return False, "no CUDA device"
    return True, f"{len(devices)} CUDA device(s)"


def status() -> tuple[bool, str]:
    """Whether the cuSOLVER path is used on CUDA devices, and why (not). Decided once."""
    ok, why, _ = _status()
    return ok, why


def _status() -> tuple[bool, str, bool]:
    with _lock:
        if "status" not in _state:
            _state["status"] = _decide()
        return _state["status"]


def _decide() -> tuple[bool, str, bool]:
    """(use cuSOLVER, why, a CUDA backend exists)."""
    setting = os.environ.get("SHOAL_LINALG_CUDA", "auto").strip().lower()
    if setting in ("0", "off", "false", "no"):
        return False, "disabled by SHOAL_LINALG_CUDA", False
    if not _ffi.available():
        return False, f"the compiled extension is unavailable ({_ffi.IMPORT_ERROR})", False
    present, why = _cuda_backend()
    if not present:
        return False, why, False
    ok, where = load_cusolver()
    if not ok:
        return False, where, True
    for name, capsule in _ffi._linalg_ext.cuda_registrations().items():
        jax.ffi.register_ffi_target(name, capsule, platform="CUDA")
        register_batch_partitionable(name)
    return True, f"cuSOLVER {_ffi._linalg_ext.cusolver_version()} from {where}", True


def enabled() -> bool:
    """True when eigh on a CUDA device should use the cuSOLVER kernels.

    A CUDA backend without a loadable cuSOLVER falls back to the pure-JAX path with a one-time
    warning (the results are the same; only the kernels differ).
    """
    ok, why, backend = _status()
    if not ok and backend:
        with _lock:
            warn = not _state.get("warned")
            _state["warned"] = True
        if warn:
            warnings.warn(
                f"shoal.linalg: {why}; eigh on CUDA devices uses the pure-JAX path",
                stacklevel=4,
            )
    return ok


# --------------------------------------------------------------------------------------------
# The FFI calls. Both solve in place on the column-major view of the row-major buffer, i.e. on
# conj(a); the returned buffer holds Vᴴ row-major (see src/linalg/eigh_ffi_cuda.cc). The kernels
# compute all eigenpairs: ``options`` has no subset (subsets are selected in JAX).


def call_eigh(a, options: EighOptions, *, algorithm: Algorithm):
    """The standard problem -> (buffer (..., n, n) holding Vᴴ, w (..., n), info (...,) int32)."""
    n = a.shape[-1]
    real = jnp.finfo(a.dtype).dtype
    out = [((n, n), a.dtype), ((n,), real), ((), np.int32)]
    return tuple(eigh_call("shoal_linalg_eigh_cuda", [a], out, options,
                           extra=[("algorithm", np.int64(algorithm))], aliases=[(0, 0)]))


def call_eigh_gen(a, b, options: EighOptions):
    """A generalized problem -> (buffer (..., n, n) holding Vᴴ, w (..., n), info (...,) int32)."""
    n = a.shape[-1]
    real = jnp.finfo(a.dtype).dtype
    out = [((n, n), a.dtype), ((n, n), b.dtype), ((n,), real), ((), np.int32)]
    buf, _, w, info = eigh_call("shoal_linalg_eigh_gen_cuda", [a, b], out, options,
                                aliases=[(0, 0), (1, 1)])
    return buf, w, info


# --------------------------------------------------------------------------------------------
# The primal


def _triangle(n: int, lower: bool):
    ones = jnp.ones((n, n), bool)
    return jnp.tril(ones) if lower else jnp.triu(ones)


def _finite(x, lower: bool):
    """Per matrix: is the triangle that is read free of NaN/Inf."""
    return jnp.all(jnp.isfinite(x) | ~_triangle(x.shape[-1], lower), axis=(-2, -1))


def _sanitize(x, lower: bool, ok, identity: bool):
    """What cuSOLVER gets: the read triangle with a real diagonal (as LAPACK assumes), the other
    triangle zero, and failed elements (``~ok``) replaced by 0 or I so no solver sees NaN."""
    n = x.shape[-1]
    eye = jnp.eye(n, dtype=bool)
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        x = jnp.where(eye, jnp.real(x).astype(x.dtype), x)
    x = jnp.where(_triangle(n, lower), x, 0)
    fill = eye.astype(x.dtype) if identity else jnp.zeros((n, n), x.dtype)
    return jnp.where(ok[..., None, None], x, fill)


def _standard(a, options: EighOptions):
    """All eigenpairs of the standard problem ``options`` (no subset)."""
    n = a.shape[-1]
    algorithm = Algorithm.JACOBI if n <= JACOBI_MAX_N else Algorithm.SYEVD
    buf, w, info = call_eigh(a, options, algorithm=algorithm)
    if algorithm == Algorithm.JACOBI:
        # syevjBatched says "did not converge" with n + 1, which for the generalized problem
        # would read as "b not positive definite".
        info = jnp.where(info == n + 1, 1, info)
    return w, (conj_transpose(buf) if options.vectors else None), info


def _generalized_small(a, b, options: EighOptions):
    """n <= 32: B = L Lᴴ in JAX (batched on the GPU), the reduced standard problem through the
    batched Jacobi kernel, then the back-transform; LAPACK's conventions (vᴴ B v = I for types
    1 and 2, vᴴ B⁻¹ v = I for type 3). A failed Cholesky does not say which minor failed:
    info NOT_POSITIVE_DEFINITE."""
    n = a.shape[-1]
    a = hermitian(a, options.lower)
    b = hermitian(b, options.lower)
    low = jnp.linalg.cholesky(b, symmetrize_input=False)
    chol_ok = jnp.all(jnp.isfinite(low), axis=(-2, -1))
    low = jnp.where(chol_ok[..., None, None], low, jnp.eye(n, dtype=low.dtype))
    low_h = conj_transpose(low)
    if options.problem is Problem.TYPE1:  # C = L⁻¹ A L⁻ᴴ
        x = solve_triangular(low, a, lower=True)
        c = conj_transpose(solve_triangular(low, conj_transpose(x), lower=True))
    else:  # C = Lᴴ A L
        c = jnp.matmul(jnp.matmul(low_h, a, precision=_HIGHEST), low, precision=_HIGHEST)
    c = 0.5 * (c + conj_transpose(c))
    reduced = options.replace(problem=Problem.STANDARD, triangle=Triangle.LOWER)
    w, u, info = _standard(c, reduced)
    v = None
    if options.vectors:
        if options.problem is Problem.TYPE3:  # v = L u
            v = jnp.matmul(low, u, precision=_HIGHEST)
        else:  # v = L⁻ᴴ u
            v = solve_triangular(low_h, u, lower=False)
    info = jnp.where(chol_ok, info, _ffi.NOT_POSITIVE_DEFINITE)
    return w, v, info


def cuda_eigh(a, b, options: EighOptions):
    """Same contract as ``_ffi.kernel_eigh``: returns (w, v or None, info)."""
    n = a.shape[-1]
    lower = options.lower
    whole = options.whole()  # the kernels compute everything; finish() selects the subset
    ok = _finite(a, lower)
    if b is not None:
        ok = ok & _finite(b, lower)
    a = _sanitize(a, lower, ok, identity=False)
    if b is None:
        w, v, info = _standard(a, whole)
    else:
        b = _sanitize(b, lower, ok, identity=True)
        if n <= JACOBI_MAX_N:
            w, v, info = _generalized_small(a, b, whole)
        else:
            buf, w, info = call_eigh_gen(a, b, whole)
            v = conj_transpose(buf) if options.vectors else None
    info = jnp.where(ok, info, _ffi.NON_FINITE_INPUT).astype(jnp.int32)
    return finish(w, v, info, options)
