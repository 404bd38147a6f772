"""``shoal.ode.solve``: argument checking, broadcasting and dispatch to the compiled kernel."""

from __future__ import annotations

import math
import numbers

import jax
import jax.extend.core as jex_core
import jax.numpy as jnp
import numpy as np

from shoal.ode import _primitive
from shoal.ode._sensitivities import SolveConfig, run
from shoal.ode._sparse import normalize_pattern
from shoal.ode._sparsity_detection import detect_pattern


def _concrete(x):
    """x as a NumPy array if its value is known now (not a tracer), else None."""
    try:
        return np.asarray(jex_core.concrete_or_error(None, x))
    except Exception:  # noqa: BLE001 - any tracer means "not known yet"
        return None


def _positive_float(name: str, value, allow_none=False):
    if value is None and allow_none:
        return None
    if isinstance(value, jax.core.Tracer) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a Python float (a static option), got {value!r}")
    value = float(value)
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return value


def _as_float_array(name: str, x, dtype=None):
    try:
        arr = jnp.asarray(x) if dtype is None else jnp.asarray(x, dtype=dtype)
    except TypeError as err:
        raise TypeError(f"{name} must be an array of numbers: {err}") from err
    if jnp.issubdtype(arr.dtype, jnp.complexfloating):
        raise TypeError(f"{name} must be real; got dtype {arr.dtype}")
    if not jnp.issubdtype(arr.dtype, jnp.floating):
        arr = arr.astype(jnp.result_type(float))
    return arr


def _sparsity_pattern(f, sparsity, n: int, n_params: int, dtype) -> np.ndarray:
    """The pattern to compile: detected ("auto") or the user's, checked to cover the detected."""
    detected = detect_pattern(f, n, n_params, dtype) | np.eye(n, dtype=bool)
    if isinstance(sparsity, str):
        if sparsity != "auto":
            raise ValueError(f"sparsity must be None, 'auto' or a pattern; got {sparsity!r}")
        return detected
    pattern = normalize_pattern(sparsity, n)
    missing = np.argwhere(detected & ~pattern)
    if missing.size:
        shown = ", ".join(f"({i}, {j})" for i, j in missing[:10])
        more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        raise ValueError(
            f"sparsity misses {len(missing)} structural nonzero(s) of the Jacobian of f: "
            f"(row, col) = {shown}{more}; f_i depends on y_j there. Add them, or pass "
            "sparsity='auto'")
    return pattern


def solve(f, y0, t_span, params=None, *, method="rodas5p", rtol=1e-8, atol=1e-10, first_step=None,
          max_steps=100_000, return_stats=False, error_weights=None, pcoeff=0.0, icoeff=1.0,
          dcoeff=0.0, sens_error_control=True, sparsity=None, ordering="amd",
          lu_precision="fp64"):
    """Integrate an ensemble of ODE systems ``dy/dt = f(y, t, p)``.

    Parameters
    ----------
    f : callable
        ``f(y, t, p) -> dy/dt`` written with ``jax.numpy``: ``y`` has shape ``(n,)``, ``t`` is a
        scalar, ``p`` has shape ``(n_params,)``; returns shape ``(n,)`` (or a tuple of ``n``
        scalars) in y's dtype. It is traced once and compiled to C++.
    y0 : array, shape ``(n,)`` or ``(N, n)``
        Initial states. Its floating dtype (float32 or float64) is the precision of the solve.
    t_span : array, shape ``(n_save,)``
        Strictly increasing save times shared by the ensemble; ``t_span[0]`` is the start.
    params : array, shape ``(n_params,)`` or ``(N, n_params)``, optional
        Per-trajectory parameters, broadcast against ``y0``.
    method : {"tsit5", "rodas5p"}
        ``"tsit5"``: explicit Tsitouras 5(4), for non-stiff problems. ``"rodas5p"``: Rosenbrock
        5(4), for stiff problems; its Jacobian and ∂f/∂t come from ``f`` by dual numbers.
    rtol, atol : float
        Relative and absolute tolerances (> 0).
    first_step : float, optional
        Initial step; default ``1e-6 * (t_span[-1] - t_span[0])``.
    max_steps : int
        Maximum step attempts (accepted + rejected) per trajectory.
    return_stats : bool
        Also return ``{"accepted", "rejected", "status"}``, each int32 of shape ``(N,)``.
    error_weights : array, shape ``(n,)`` or ``(N, n)``, optional
        Non-negative weights on each component's error; 0 drops a component from step control.
    pcoeff, icoeff, dcoeff : float
        PID controller gains (default: the integral controller).
    sens_error_control : bool
        When differentiated (jvp, grad, jacfwd, ...): include the sensitivities in the error
        norm (default), tying the gradient's accuracy to rtol. ``False`` takes exactly the
        plain solve's steps and returns its values.
    sparsity : None, "auto", (n, n) bool mask, SciPy sparse matrix, or (nnz, 2) int pairs
        Rodas5P: the Jacobian's sparsity pattern. ``None`` factorises densely; a pattern buys one
        dual-number sweep per colour of its column-intersection graph and a sparse direct solver
        compiled for it. ``"auto"`` detects the structural pattern from ``f`` itself; a given
        pattern is checked against it and must contain every structural nonzero.
    ordering : {"amd", "natural"}
        The sparse solver's fill-reducing symmetric permutation: SuiteSparse AMD, or none.
    lu_precision : {"fp64", "fp32"}
        Rodas5P only: precision of the factorisation of ``I/(hγ) − J``; the state and stages keep
        y0's precision. fp32 rounds M to float (~1e-7 relative): an error floor near 1e-11 and
        occasional extra steps, so use it at moderate tolerances.

    Returns
    -------
    ys : array, shape ``(N, n_save, n)``
        The solution at ``t_span`` (``ys[:, 0] == y0``), differentiable (first order) with
        respect to ``y0`` and ``params`` by continuous forward sensitivities. A failed trajectory
        has NaN from the first save it could not reach; its status says why (see
        :class:`shoal.ode.Status`).
    stats : dict, only if ``return_stats``
    """
    if not callable(f):
        raise TypeError(f"f must be callable f(y, t, p), got {type(f).__name__}")
    if method not in _primitive.METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, _primitive.METHODS))}; "
                         f"got {method!r}")
    if lu_precision not in _primitive.LU_PRECISIONS:
        raise ValueError(f"lu_precision must be one of "
                         f"{', '.join(map(repr, _primitive.LU_PRECISIONS))}; got {lu_precision!r}")
    if ordering not in _primitive.ORDERINGS:
        raise ValueError(f"ordering must be one of {', '.join(map(repr, _primitive.ORDERINGS))}; "
                         f"got {ordering!r}")
    rtol = _positive_float("rtol", rtol)
    atol = _positive_float("atol", atol)
    first_step = _positive_float("first_step", first_step, allow_none=True)
    if isinstance(max_steps, bool) or not isinstance(max_steps, numbers.Integral):
        raise TypeError(f"max_steps must be a Python int, got {max_steps!r}")
    if max_steps <= 0 or max_steps > 2**31 - 1:
        raise ValueError(f"max_steps must be in [1, 2**31 - 1], got {max_steps}")
    gains = {}
    for name, value in (("pcoeff", pcoeff), ("icoeff", icoeff), ("dcoeff", dcoeff)):
        if isinstance(value, jax.core.Tracer) or not isinstance(value, numbers.Real) or \
                not math.isfinite(float(value)):
            raise ValueError(f"{name} must be a finite Python float, got {value!r}")
        gains[name] = float(value)

    y0 = _as_float_array("y0", y0)
    dtype = y0.dtype
    if y0.ndim not in (1, 2) or y0.shape[-1] == 0:
        raise ValueError(f"y0 must have shape (n,) or (N, n) with n >= 1; got {y0.shape}")
    n = y0.shape[-1]
    params = jnp.zeros((0,), dtype) if params is None else _as_float_array("params", params, dtype)
    if params.ndim not in (1, 2):
        raise ValueError(f"params must have shape (n_params,) or (N, n_params); got "
                         f"{params.shape}")
    t_span = _as_float_array("t_span", t_span, dtype)
    if t_span.ndim != 1 or t_span.shape[0] < 1:
        raise ValueError(f"t_span must have shape (n_save,) with n_save >= 1; got {t_span.shape}")
    t_values = _concrete(t_span)
    if t_values is not None:
        if not np.all(np.isfinite(t_values)):
            raise ValueError(f"t_span must be finite; got {t_values}")
        if np.any(np.diff(t_values) <= 0):
            raise ValueError(f"t_span must be strictly increasing; got {t_values}")

    n_y = y0.shape[0] if y0.ndim == 2 else 1
    n_p = params.shape[0] if params.ndim == 2 else 1
    if n_y != n_p and 1 not in (n_y, n_p):
        raise ValueError(f"y0 {y0.shape} and params {params.shape} have different ensemble "
                         f"sizes ({n_y} and {n_p}); each must be N or 1")
    N = max(n_y, n_p)

    weights = None
    if error_weights is not None:
        weights = _as_float_array("error_weights", error_weights, dtype)
        if weights.shape not in ((n,), (N, n), (1, n)):
            raise ValueError(f"error_weights must have shape ({n},) or ({N}, {n}); got "
                             f"{weights.shape}")
        w_values = _concrete(weights)
        if w_values is not None and not np.all((w_values >= 0) & np.isfinite(w_values)):
            raise ValueError("error_weights must be finite and >= 0")

    sparse = None
    if sparsity is not None:
        pattern = _sparsity_pattern(f, sparsity, n, params.shape[-1], dtype)
        sparse = (ordering, n, pattern.tobytes())
    cfg = SolveConfig(
        f=f, n_vars=n, n_params=params.shape[-1], dtype=np.dtype(dtype).name,
        stepper=_primitive.stepper_variant(method, lu_precision), rtol=rtol, atol=atol,
        first_step=-1.0 if first_step is None else first_step, max_steps=max_steps,
        sens_error_control=bool(sens_error_control), sparse=sparse, **gains)
    ys, accepted, rejected, status = run(y0, params, t_span, weights, cfg=cfg, n_traj=N)
    if return_stats:
        return ys, {"accepted": accepted, "rejected": rejected, "status": status}
    return ys
