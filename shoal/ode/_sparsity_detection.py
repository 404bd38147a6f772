"""The structural Jacobian pattern of a model, found by running it on dependency tracers.

The generated model is compiled once more with ``shoal::ad::Tracer`` as its scalar: each state
variable enters as the set {j}, every operation returns the union of its operands' sets, and both
branches of every select count. ``f_i`` depending on ``y_j`` at all — whatever the numbers — puts
(i, j) in the pattern, so it is a superset of every numerically nonzero Jacobian entry.
"""

from __future__ import annotations

import ctypes
import functools
import weakref

import numpy as np

from shoal import _jit
from shoal.ode import _codegen


def _library_source(model: _codegen.GeneratedModel) -> str:
    return "\n".join([
        model.source,
        '#include "shoal/ad/sparsity_tracer.hpp"',
        '#define SHOAL_EXPORT extern "C" __attribute__((visibility("default"), used))',
        "SHOAL_EXPORT const char shoal_cache_key[] = SHOAL_CACHE_KEY;",
        "SHOAL_EXPORT void shoal_sparsity_pattern(unsigned char* out) {",
        "  using M = shoal_generated::Model;",
        "  constexpr int n = M::n_vars;",
        "  using Tr = shoal::ad::Tracer<(n + 63) / 64>;",
        "  Tr y[n], dy[n], p[M::n_params > 0 ? M::n_params : 1];",
        "  for (int j = 0; j < n; ++j) y[j] = Tr::variable(j);",
        "  M::rhs<Tr>(y, Tr(), p, dy);",
        "  for (int i = 0; i < n; ++i)",
        "    for (int j = 0; j < n; ++j) out[i * n + j] = dy[i].depends_on(j) ? 1 : 0;",
        "}",
        "",
    ])


@functools.lru_cache(maxsize=256)
def _pattern_of(source: str, n: int) -> bytes:
    lib = ctypes.CDLL(str(_jit.compile_library(source)))
    out = (ctypes.c_ubyte * (n * n))()
    lib.shoal_sparsity_pattern(out)
    return bytes(out)


# f -> {(n_vars, n_params, dtype): pattern bytes}: traced once per signature, like jax.jit.
_detected: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def detect_pattern(f, n_vars: int, n_params: int, dtype) -> np.ndarray:
    """Boolean (n, n): entry (i, j) when f_i structurally depends on y_j."""
    signature = (n_vars, n_params, np.dtype(dtype).name)
    try:
        per_f = _detected.setdefault(f, {})
    except TypeError:  # not weak-referenceable: trace every time
        per_f = {}
    if signature not in per_f:
        model = _codegen.generate_model(f, n_vars, n_params, dtype)
        per_f[signature] = _pattern_of(_library_source(model), n_vars)
    raw = per_f[signature]
    return np.frombuffer(raw, dtype=np.uint8).reshape(n_vars, n_vars).astype(bool)
