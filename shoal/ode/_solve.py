"""``shoal.ode.solve``: checking the arrays, broadcasting, and dispatch to the compiled kernel.

The keyword options are the fields of :class:`shoal.ode._options.SolveOptions`: ``solve`` takes
them as ``**options`` and its signature and docstring are made from the record, so an option's
name, default, check and documentation live in one place.
"""

from __future__ import annotations

import functools
import inspect
import math
import warnings

import jax
import jax.extend.core as jex_core
import jax.numpy as jnp
import numpy as np

from shoal.ode import _mass, _model, _options, _params, _progress, _validation
from shoal.ode._codegen import ModelFunction, ModelTraceError
from shoal.ode._differentiation import EnsembleProblem, solve_ensemble
from shoal.ode._options import SolveOptions
from shoal.ode._user_functions import UserFunctions


def _concrete(x):
    """x as a NumPy array if its value is known now (not a tracer), else None."""
    try:
        return np.asarray(jex_core.concrete_or_error(None, x))
    except Exception:  # noqa: BLE001 - any tracer means "not known yet"
        return None


def _as_float_array(name: str, x, dtype=None):
    try:
        arr = jnp.asarray(x) if dtype is None else jnp.asarray(x, dtype=dtype)
    except (TypeError, ValueError, OverflowError) as err:  # None, strings, ragged lists, 2**64
        kind = TypeError if isinstance(err, TypeError) else ValueError
        raise kind(f"{name} must be an array of numbers; got {x!r:.80}: {err}") from err
    if jnp.issubdtype(arr.dtype, jnp.complexfloating):
        raise TypeError(f"{name} must be real; got dtype {arr.dtype}")
    if not jnp.issubdtype(arr.dtype, jnp.floating):
        arr = arr.astype(jnp.result_type(float))
    return arr


def _solve_options(options: dict) -> SolveOptions:
    try:
        return SolveOptions(**options)
    except TypeError as err:
        unknown = sorted(set(options) - set(SolveOptions.__dataclass_fields__))
        if unknown:
            raise TypeError(f"solve() got unexpected keyword argument(s) {', '.join(unknown)}; "
                            f"the options are {', '.join(SolveOptions.__dataclass_fields__)}"
                            ) from None
        raise err


_warned_precisions: set = set()


def _check_precision(rtol: float, dtype) -> None:
    """Warn once per (dtype, rtol) when rtol asks for more than the dtype resolves: float32 at
    rtol 1e-10 took 72 791 steps and reported success, and JAX without x64 silently makes
    float32 out of the float64 a user meant."""
    eps = float(jnp.finfo(dtype).eps)
    floor = 10.0 ** math.floor(math.log10(10 * eps))  # float32: 1e-6, float64: 1e-15
    if rtol >= floor or (dtype, rtol) in _warned_precisions:
        return
    _warned_precisions.add((dtype, rtol))
    hint = (" (JAX makes float32 arrays unless jax.config.update('jax_enable_x64', True) is "
            "set before creating them)" if dtype == jnp.float32 else "")
    warnings.warn(
        f"shoal.ode.solve: rtol={rtol:g} is below what {dtype.name} resolves (machine epsilon "
        f"{eps:.1e}): expect very many steps or STEP_SIZE_UNDERFLOW, and no accuracy beyond about "
        f"{floor:.0e}. Use rtol >= {floor:.0e}, or float64 inputs{hint}.",
        RuntimeWarning, stacklevel=3)


def _ensemble_size(n_y: int, n_p: int, n_t: int) -> int:
    sizes = {"y0": n_y, "params": n_p, "t_span": n_t}
    N = max(sizes.values())
    wrong = {k: v for k, v in sizes.items() if v not in (1, N)}
    if wrong:
        shown = ", ".join(f"{k} has {v} rows" for k, v in sizes.items())
        raise ValueError(f"y0, params and t_span have different ensemble sizes ({shown}); each "
                         "must be N or 1")
    return N


def _time_rows(t_span, N: int, dtype):
    """t_span as rows (1 or N, n_save), checked where its values are known."""
    t_span = _as_float_array("t_span", t_span, dtype)
    if t_span.ndim not in (1, 2) or t_span.shape[-1] < 1:
        raise ValueError("t_span must have shape (n_save,) or (N, n_save) with n_save >= 1; got "
                         f"{t_span.shape}")
    rows = t_span.reshape(-1, t_span.shape[-1])
    values = _concrete(rows)
    if values is not None:
        for i, row in enumerate(values):
            _validation.time_row(f"t_span[{i}]" if t_span.ndim == 2 else "t_span", row, dtype)
    return rows


def _stops(tstops, N: int, dtype):
    """tstops as ascending rows (1 or N, k)."""
    if tstops is None:
        return jnp.zeros((1, 0), dtype)
    stops = _as_float_array("tstops", tstops, dtype)
    if stops.ndim not in (1, 2) or (stops.ndim == 2 and stops.shape[0] not in (1, N)):
        raise ValueError(f"tstops must have shape (k,) or ({N}, k); got {stops.shape}")
    values = _concrete(stops)
    if values is not None and not np.all(np.isfinite(values)):
        raise ValueError(f"tstops must be finite; got {values}")
    rows = stops.shape[0] if stops.ndim == 2 else 1  # explicit: k may be 0
    return jnp.sort(stops.reshape(rows, stops.shape[-1]), axis=-1)


def _first_steps(first_step, N: int, dtype):
    """first_step as (1 or N, 1); <= 0 stands for the default."""
    if first_step is None:
        return jnp.full((1, 1), -1.0, dtype)
    steps = _as_float_array("first_step", first_step, dtype)
    if steps.ndim > 1 or (steps.ndim == 1 and steps.shape[0] not in (1, N)):
        raise ValueError(f"first_step must be a number or have shape ({N},); got {steps.shape}")
    values = _concrete(steps)
    if values is not None and not np.all((values > 0) & np.isfinite(values)):
        raise ValueError(f"first_step must be finite and > 0; got {values}")
    if values is not None:
        _validation.normal_positive("first_step", values, dtype)
    return steps.reshape(-1, 1)


def _open_end(t_span, first_step, opts, dtype):
    """A t_span ending at inf (run until a terminal event, diffrax's t1=inf idiom): the end
    becomes the largest time whose span stays finite, and the default first step 1e-6 of the
    last finite save's span (1e-6 time units without one), since 1e-6 of the span is not a
    step. Other infinite times are refused by the time checks."""
    end = t_span[..., -1] if t_span.ndim in (1, 2) and t_span.shape[-1] >= 2 else None
    if end is None:
        return t_span, first_step
    values = _concrete(end)
    if values is not None and not np.any(np.isposinf(values)):
        return t_span, first_step
    if opts.event is None or not opts.event.terminal:
        if values is None:
            return t_span, first_step
        raise ValueError(
            "t_span must be finite; it may end at inf only together with a terminal event "
            "that ends each trajectory (event=shoal.ode.Event(fn, terminal=True)); to run to a "
            f"steady state use shoal.ode.steady_state. Got t_span ending at {values} and no "
            "terminal event")
    horizon = np.asarray(np.finfo(dtype).max / 8, dtype)
    t_span = jnp.where(jnp.isposinf(t_span), horizon, t_span)
    if first_step is None:
        finite = t_span[..., -2] - t_span[..., 0] if t_span.shape[-1] > 2 else None
        first_step = (jnp.full((1,), 1e-6, dtype) if finite is None
                      else 1e-6 * jnp.reshape(finite, (-1,)))
    return t_span, first_step


def split_params(f, y0, params, params_axes, dtype, extras=()) -> _params.SplitParams:
    """params sorted into own and shared leaves as f (and the extra functions) read them."""
    n = y0.shape[-1]
    return _params.split(
        params, params_axes, y0.shape[0] if y0.ndim == 2 else None, dtype,
        accepts=lambda layout: _model.traces_with(f, n, layout, dtype, extras),
        reads=lambda layout, i: _model.reads_leaf(f, n, layout, dtype, extras, i))


def _traced_model(f, n: int, split, dtype, extras):
    """_model.generated_model; a shape error says how params was read and how to change it."""
    try:
        return _model.generated_model(f, n, split.layout, dtype, extras)
    except ModelTraceError as err:
        note = split.reading.describe() if split.reading is not None else ""
        if not note or "must return shape" not in str(err):
            raise
        raise ModelTraceError(f"{err}. {note}") from None


def solve(f, y0, t_span, params=None, *, params_axes=None, tstops=None, first_step=None,
          error_weights=None, return_stats=False, progress=False, **options):
    if not callable(f):
        raise TypeError(f"f must be callable f(y, t, p), got {type(f).__name__}")
    opts = _solve_options(options)
    progress = _progress.check(progress)
    return_stats = _validation.flag("return_stats", return_stats)

    y0 = _as_float_array("y0", y0)
    dtype = _validation.solve_dtype(y0.dtype)
    _validation.options_in_dtype(opts, dtype)
    _check_precision(opts.rtol, dtype)
    if y0.ndim not in (1, 2) or y0.shape[-1] == 0:
        raise ValueError(f"y0 must have shape (n,) or (N, n) with n >= 1; got {y0.shape}")
    n = y0.shape[-1]
    n_y = y0.shape[0] if y0.ndim == 2 else 1
    if opts.mass is not None:
        _mass.check_supported(opts.mass, n, opts)
    extras = opts.model_functions()
    split = split_params(f, y0, params, params_axes, dtype, extras)
    t_span = _as_float_array("t_span", t_span, dtype)  # before its shape: a ragged list
    t_span, first_step = _open_end(t_span, first_step, opts, dtype)
    t_shape = np.shape(t_span)
    N = _ensemble_size(n_y, split.n_traj, t_shape[0] if len(t_shape) == 2 else 1)
    t_rows = _time_rows(t_span, N, dtype)
    stops = _stops(tstops, N, dtype)
    steps = _first_steps(first_step, N, dtype)

    weights = None
    if error_weights is not None:
        weights = _as_float_array("error_weights", error_weights, dtype)
        if weights.shape not in ((n,), (N, n), (1, n)):
            raise ValueError(f"error_weights must have shape ({n},) or ({N}, {n}); got "
                             f"{weights.shape}")
        w_values = _concrete(weights)
        if w_values is not None and not np.all((w_values >= 0) & np.isfinite(w_values)):
            raise ValueError("error_weights must be finite and >= 0")

    # adjoint=True or "auto": the model also carries the vector-Jacobian products of f, jump_fn
    # and save_fn (_codegen/vjp.py), and for a Rosenbrock method f's second-order one.
    vjp = ()
    if opts.adjoint:
        vjp = (ModelFunction("vjp", f),
               *((ModelFunction("jvp_vjp", f),) if opts.method.rosenbrock else ()))
    model, closure = _traced_model(f, n, split, dtype, extras + vjp)
    # Arrays f closes over while an outer transformation traces them follow the shared leaves.
    shared = jnp.concatenate([split.shared, *(jnp.ravel(c).astype(dtype) for c in closure)])
    opts = opts.replace(sparsity=_model.resolve_sparsity(
        model, opts.sparsity, stiff=not opts.method.explicit,
        mass=None if opts.mass is None else opts.mass.pattern))
    functions = UserFunctions(f, extras, n, split.layout, dtype.name)
    inconsistent = None
    if opts.mass is not None and opts.mass.singular:
        y0, inconsistent = _mass.consistent_start(functions.pure("rhs"), opts.mass, y0,
                                                  split.own, shared, t_rows, N, opts)
    ys, accepted, rejected, status, event_time, event_state = _progress.reported(
        progress, N, lambda slot: _run(y0, split.own, shared, t_rows, weights, stops, steps, slot,
                                       problem=EnsembleProblem(model, opts, functions),
                                       n_traj=N))
    if inconsistent is not None:
        ys, status = _mass.mark_failed(ys, status, inconsistent)
    if model.saved_shape is not None:
        ys = ys.reshape(*ys.shape[:2], *model.saved_shape)
    if not return_stats:
        return ys
    # Computed from status (every code is >= 0) so that it is laid out, sharded, as the other
    # statistics are: a constant (or status == status, which XLA folds) comes out replicated.
    sparse = opts.sparsity is not None and not opts.method.explicit
    stats = {"accepted": accepted, "rejected": rejected, "status": status,
             "sparse": (status >= 0) if sparse else (status < 0)}
    if model.has_event:
        stats["event_time"] = event_time[:, 0]
        stats["event_state"] = event_state
    return ys, stats


solve.__doc__ = f"""Integrate an ensemble of ODE systems ``dy/dt = f(y, t, p)``.

    Parameters
    ----------
    f : callable
        ``f(y, t, p) -> dy/dt`` written with ``jax.numpy``: ``y`` has shape ``(n,)``, ``t`` is a
        scalar, ``p`` is one trajectory's view of ``params`` (same structure; a per-trajectory
        leaf loses its leading axis); returns shape ``(n,)`` (or a tuple of ``n`` scalars) in
        y's dtype. It is traced once per parameter structure and compiled to C++. Arrays it
        closes over are constants, compiled in; ones that an outer ``jit``/``grad``/``vmap`` is
        tracing become run-time inputs, as if passed in ``params``.
    y0 : array, shape ``(n,)`` or ``(N, n)``
        Initial states. Its floating dtype (float32 or float64) is the precision of the solve.
    t_span : array, shape ``(n_save,)`` or ``(N, n_save)``
        Strictly increasing save times shared by the ensemble, or one row per trajectory (its
        own start ``t_span[i, 0]``, saves and end). It may end at ``inf`` with a terminal
        ``event``, which then ends each trajectory. Differentiable: a save time's tangent is
        ``f(y(t_i), t_i, p)``, the start time's moves the whole solution.
    params : pytree of arrays, optional
        Any pytree (dict, tuple, NamedTuple, dataclass, equinox module, registered class);
        function leaves are compiled in as static. A leaf whose leading axis has length N (y0's
        rows) is per-trajectory where f accepts it so; a vector ``(N,)`` that f accepts both
        per member and whole is refused (say which with ``params_axes``); any other leaf is
        shared by the whole ensemble and passed once. Every array leaf is a run-time input
        (new values never recompile) and differentiable. Other bare arrays keep their meaning:
        ``(n_params,)`` for every trajectory, ``(N, n_params)`` one row each.
    params_axes : pytree prefix of params, optional
        ``0`` (per-trajectory, leading axis N or 1) or ``None`` (shared) for each subtree, like
        :func:`jax.vmap`'s ``in_axes``: says which is which where the leading length is
        ambiguous (a shared table with N entries) or y0 is a single state.
    tstops : array, shape ``(k,)`` or ``(N, k)``, optional
        Times where f may be discontinuous (doses, switches), shared or per trajectory, in any
        order. The integrator lands on each stop in ``[t_span[0], t_span[-1])``: the step before
        evaluates f only left of it, the next one only right of it, and the method restarts
        there (after ``jump_fn``, if given, maps the state). Other stops are ignored (pad rows
        with times outside the window); equal stops are one. Not differentiable.
    first_step : float or array ``(N,)``, optional
        The first step size per trajectory; default ``1e-6 * (t_span[-1] - t_span[0])``.
    return_stats : bool
        Also return ``{{"accepted", "rejected", "status"}}``, each int32 of shape ``(N,)``, and
        with an ``event`` ``"event_time"`` ``(N,)`` and ``"event_state"`` ``(N, n)`` (NaN where
        no event occurred).
    error_weights : array, shape ``(n,)`` or ``(N, n)``, optional
        Non-negative weights on each component's error; 0 drops a component from step control.
    progress : bool or callable, default False
        ``True`` shows a ``tqdm`` bar of trajectories finished, updated live while the solve runs
        (eagerly and under ``jit``: each execution gets its own bar; under ``vmap`` one bar for
        the whole batch). A callable ``progress(done, total)`` (ints) is called instead, from a
        polling thread every 0.1 s while it runs and finally with ``(total, total)``. Eager
        solves return once it has ended. On GPUs the count jumps to done at the end.
{_options.documentation()}

    Returns
    -------
    ys : array, shape ``(N, n_save, n)``, or ``(N, n_save, *h_shape)`` with ``save_fn``
        The solution at ``t_span`` (``ys[:, 0] == y0``), differentiable (first order) with
        respect to ``y0``, ``params`` and ``t_span`` by continuous forward sensitivities. A
        failed trajectory has NaN from the first save it could not reach; its status says why
        (see :class:`shoal.ode.Status`).
    stats : dict, only if ``return_stats``
    """


def _signature() -> inspect.Signature:
    keyword = inspect.Parameter.KEYWORD_ONLY
    fixed = list(inspect.signature(solve).parameters.values())[:-1]  # all but **options
    record = [inspect.Parameter(name, keyword, default=getattr(field.default, "value",
                                                               field.default))
              for name, field in SolveOptions.__dataclass_fields__.items()]
    return inspect.Signature(fixed + record)


solve.__signature__ = _signature()


@functools.partial(jax.jit, static_argnames=("problem", "n_traj"))
def _run(y0, params, shared, t_span, weights, tstops, first_step, progress, *,
         problem: EnsembleProblem, n_traj: int):
    """Broadcast the inputs to the ensemble and solve; one jitted dispatch when called eagerly.

    y0 (n,) or (N|1, n), params (the own parameters) (N|1, n_own), shared (n_shared,), t_span
    (N|1, n_save), weights None, (n,) or (N|1, n), tstops (N|1, k), first_step (N|1, 1);
    progress the slot that counts finished trajectories (None: off).
    """

    def ensemble(x):  # explicit rows, since the trailing size may be 0
        rows = x.shape[0] if x.ndim == 2 else 1
        return jnp.broadcast_to(x.reshape(rows, x.shape[-1]), (n_traj, x.shape[-1]))

    weights = jnp.ones((n_traj, problem.n_vars), y0.dtype) if weights is None else ensemble(weights)
    progress = np.full((1,), -1, np.int32) if progress is None else progress
    return solve_ensemble(problem, ensemble(y0), ensemble(params), shared, t_span, weights,
                          tstops, ensemble(first_step), progress)
