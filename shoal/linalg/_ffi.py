"""The compiled kernels: LAPACK pointers from SciPy, FFI target registration, the ffi_call."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from shoal.linalg._options import EighOptions
from shoal.linalg._primitive import eigh_call, register_batch_partitionable

try:
    from shoal.linalg import _linalg_ext
except ImportError as exc:  # pragma: no cover - depends on the build
    _linalg_ext = None
    IMPORT_ERROR: ImportError | None = exc
else:
    IMPORT_ERROR = None

_registered = False

# Status codes written by the kernel (besides LAPACK's own info).
NON_FINITE_INPUT = -1000
# b is not positive definite, the failing minor unknown (the CUDA path's Cholesky in JAX).
NOT_POSITIVE_DEFINITE = -1001


def available() -> bool:
    """True when the compiled extension is importable."""
    return _linalg_ext is not None


def _openblas_local_threads_address() -> int:
    """Address of openblas_set_num_threads_local in SciPy's OpenBLAS, or 0 if there is none."""
    import ctypes
    import glob
    import os

    import scipy

    libs = os.path.join(os.path.dirname(os.path.dirname(scipy.__file__)), "scipy.libs")
    for path in sorted(glob.glob(os.path.join(libs, "libscipy_openblas*.so*"))):
        try:
            lib = ctypes.CDLL(path)  # already loaded by SciPy: the same handle
        except OSError:
            continue
        for symbol in ("openblas_set_num_threads_local", "scipy_openblas_set_num_threads_local"):
            fn = getattr(lib, symbol, None)
            if fn is not None:
                return ctypes.cast(fn, ctypes.c_void_p).value or 0
    return 0


def _threaded_blas_min_order() -> int:
    """SHOAL_LINALG_BLAS_THREADS: "auto" (default: a lone matrix with n >= 256 uses the BLAS's own
    threads, as SciPy would), "off" (always one BLAS thread per solve: robust on a machine shared
    with other busy processes), or an integer n (the order from which threads are used)."""
    import os

    value = os.environ.get("SHOAL_LINALG_BLAS_THREADS", "auto").strip().lower()
    if value in ("", "auto"):
        return 256
    if value == "off":
        return 2**62
    try:
        return max(0, int(value))
    except ValueError:
        raise ValueError(
            f"SHOAL_LINALG_BLAS_THREADS must be 'auto', 'off' or an integer; got {value!r}"
        ) from None


def _max_batch_workers() -> int:
    """SHOAL_LINALG_THREADS: most threads one batched call uses (default 0: XLA's CPU thread pool
    plus the calling thread)."""
    import os

    value = os.environ.get("SHOAL_LINALG_THREADS", "0").strip() or "0"
    try:
        return max(0, int(value))
    except ValueError:
        raise ValueError(f"SHOAL_LINALG_THREADS must be an integer; got {value!r}") from None


def _register() -> None:
    global _registered
    if _registered:
        return
    if _linalg_ext is None:
        raise RuntimeError(
            "shoal.linalg: the compiled extension _linalg_ext is not available "
            f"({IMPORT_ERROR}); build it (make build) or pass method='jax'"
        )
    from scipy.linalg import cython_lapack

    capi = cython_lapack.__pyx_capi__
    for name in _linalg_ext.lapack_names():
        _linalg_ext.set_lapack(name, capi[name])
    _linalg_ext.set_blas_local_threads_function(_openblas_local_threads_address())
    _linalg_ext.set_threaded_blas_min_order(_threaded_blas_min_order())
    _linalg_ext.set_max_batch_workers(_max_batch_workers())
    for name, capsule in _linalg_ext.registrations().items():
        jax.ffi.register_ffi_target(name, capsule, platform="cpu")
        register_batch_partitionable(name)
    _registered = True


def kernel_eigh(a, b, options: EighOptions):
    """One batched kernel call. ``a``/``b`` (b None for the standard problem): (..., n, n), same
    shape and dtype; only the triangle ``options.triangle`` is read.

    Returns ``(w, v, info)``: w (..., m) real, v (..., n, m) or None, info (...,) int32.
    """
    _register()
    n = a.shape[-1]
    m = options.count(n)
    real = jnp.finfo(a.dtype).dtype
    out = [((m,), real), ((n, m) if options.vectors else (0,), a.dtype), ((), np.int32)]
    target = "shoal_linalg_eigh_cpu" if b is None else "shoal_linalg_eigh_gen_cpu"
    w, v, info = eigh_call(target, [a] if b is None else [a, b], out, options)
    return w, (v if options.vectors else None), info
