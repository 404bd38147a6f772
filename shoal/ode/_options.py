"""The options of one ``shoal.ode.solve``: one frozen, validated, hashable record.

``SolveOptions`` is built once from ``solve``'s keyword arguments (its fields are those
keywords, with their defaults and documentation: ``solve``'s signature and docstring are made
from it). Everything downstream reads the record: the choice of compiled kernel (method, LU
precision, sparse solver) and the run-time options, which reach the kernel as ONE dictionary
attribute (:meth:`SolveOptions.kernel_attributes`) decoded into the C++ struct
``ShoalSolveOptions`` (``include/shoal/ode/solve_options.hpp``; the two field lists are held equal
by a test).

Adding an option: a field here (default, check, documentation, and ``kernel=...`` if the kernel
reads it), a line in ``SHOAL_SOLVE_OPTION_FIELDS`` if it does, the code that uses it, its test.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import numbers
import textwrap
from typing import Any

import jax
import numpy as np

from shoal.ode import _mass
from shoal.ode._codegen.model_struct import ModelFunction


class Method(str, enum.Enum):
    """The integration method."""

    TSIT5 = "tsit5"
    RODAS5P = "rodas5p"
    RODAS4 = "rodas4"
    ROSENBROCK23 = "rosenbrock23"
    VERN7 = "vern7"
    VERN9 = "vern9"

    @property
    def explicit(self) -> tuple[str, str] | None:
        """(header, C++ stepper template) of an explicit Runge-Kutta method's tableau
        (explicit_rk.hpp), or None for a Rosenbrock method."""
        return {Method.TSIT5: ("shoal/ode/tsit5.hpp", "shoal::ode::Tsit5"),
                Method.VERN7: ("shoal/ode/vern7.hpp", "shoal::ode::Vern7"),
                Method.VERN9: ("shoal/ode/vern9.hpp", "shoal::ode::Vern9")}.get(self)

    @property
    def rosenbrock(self) -> tuple[str, str] | None:
        """(header, C++ template over an iteration matrix) of a Rosenbrock method's tableau, or
        None for an explicit method."""
        return {Method.RODAS5P: ("shoal/ode/rodas5p.hpp", "shoal::ode::Rodas5PUsing"),
                Method.RODAS4: ("shoal/ode/rodas4.hpp", "shoal::ode::Rodas4Using"),
                Method.ROSENBROCK23: ("shoal/ode/rosenbrock23.hpp",
                                      "shoal::ode::Rosenbrock23Using")}.get(self)


class LuPrecision(str, enum.Enum):
    """Rodas5P: the precision of the factorisation of ``I/(hγ) − J``."""

    FP64 = "fp64"
    FP32 = "fp32"

    @property
    def ctype(self) -> str:
        return "double" if self is LuPrecision.FP64 else "float"


class Ordering(str, enum.Enum):
    """The sparse solver's fill-reducing symmetric permutation."""

    AMD = "amd"
    NATURAL = "natural"


class SparsityPattern:
    """A Jacobian pattern as an immutable ``(n, n)`` bool array, hashed and compared by value."""

    __slots__ = ("mask", "_hash")

    def __init__(self, mask):
        mask = np.array(mask, dtype=bool)
        if mask.ndim != 2 or mask.shape[0] != mask.shape[1]:
            raise ValueError(f"a sparsity pattern is a square bool mask; got shape {mask.shape}")
        mask.setflags(write=False)
        self.mask = mask
        self._hash = hash((mask.shape, mask.tobytes()))

    @property
    def n(self) -> int:
        return self.mask.shape[0]

    def __eq__(self, other) -> bool:
        return isinstance(other, SparsityPattern) and np.array_equal(self.mask, other.mask)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"SparsityPattern(n={self.n}, nnz={int(self.mask.sum())})"


def _enum(kind: type[enum.Enum], name: str):
    def check(value):
        try:
            return kind(value)
        except ValueError:
            choices = ", ".join(repr(m.value) for m in kind)
            raise ValueError(f"{name} must be one of {choices}; got {value!r}") from None

    return check


def _static_real(name: str, value) -> float:
    # bool is a numbers.Real: rtol=True would silently be 1.0
    if isinstance(value, (jax.core.Tracer, bool, np.bool_)) or not isinstance(value,
                                                                          numbers.Real):
        raise TypeError(f"{name} must be a Python float (a static option), got {value!r}")
    return float(value)


def _positive(name: str):
    def check(value):
        value = _static_real(name, value)
        if not (value > 0 and math.isfinite(value)):
            raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
        return value

    return check


def _optional_positive(name: str):
    positive = _positive(name)
    return lambda value: None if value is None else positive(value)


def _gain(name: str):
    def check(value):
        if isinstance(value, (jax.core.Tracer, bool, np.bool_)) or \
                not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
            raise ValueError(f"{name} must be a finite Python float, got {value!r}")
        return float(value)

    return check


def _max_steps(value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"max_steps must be a Python int, got {value!r}")
    if value <= 0 or value > 2**31 - 1:
        raise ValueError(f"max_steps must be in [1, 2**31 - 1], got {value}")
    return int(value)


def _adjoint_memory(value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"adjoint_memory must be a Python int (bytes), got {value!r}")
    if value <= 0 or value > 2**62:
        raise ValueError(f"adjoint_memory must be a positive number of bytes, got {value}")
    return int(value)


def _sparsity(value):
    """None, "auto", a resolved pattern, or a user's pattern as given: solve resolves it against
    f (model.resolve_sparsity) before the record is used as a key."""
    if isinstance(value, str) and value not in ("auto", "dense"):
        raise ValueError(f"sparsity must be None, 'auto', 'dense' or a pattern; got {value!r}")
    return value


def _flag(name: str):
    def check(value):  # bool("False") is True: only real booleans
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{name} must be True or False, got {value!r}")
        return bool(value)

    return check


def _adjoint_choice(value):
    if isinstance(value, str) and value == "auto":
        return value
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"adjoint must be True, False or 'auto', got {value!r}")


def _option(default, check, doc: str, kernel=None):
    """A record field: its default, its check (value -> normalised value, or raise), its
    documentation, and for options the kernel reads, how the kernel receives it."""
    return dataclasses.field(default=default,
                             metadata={"check": check, "doc": doc, "kernel": kernel})


def _kernel_float(value):
    return np.float64(value)


def _kernel_max_step(value):
    return np.float64(-1.0 if value is None else value)  # ≤ 0: unbounded


def _factor(name: str, low: float, high: float):
    def check(value):
        value = _static_real(name, value)
        if not (low < value < high):
            raise ValueError(f"{name} must be in ({low}, {high}), got {value!r}")
        return value

    return check


def _lanes(value):
    if (isinstance(value, bool) or not isinstance(value, (int, np.integer))
            or not (value == 0 or (1 <= value <= 64 and value & (value - 1) == 0))):
        raise ValueError(f"lanes must be 0 (the host's vector width) or a power of two from 1 "
                         f"to 64; got {value!r}")
    return int(value)


def _optional_callable(name: str):
    def check(value):
        if value is not None and not callable(value):
            raise TypeError(f"{name} must be a callable (y, t, p) -> ... or None, got "
                            f"{type(value).__name__}")
        return value

    return check


@dataclasses.dataclass(frozen=True)
class Event:
    """An event: the first time ``fn(y, t, p)`` (a scalar written with ``jax.numpy``, compiled
    into the kernel) crosses zero, located on the dense output to the solver's tolerance.

    ``terminal``: the trajectory stops there (status ``EVENT``; later saves are NaN).
    ``direction``: ``+1`` counts only rising crossings (negative to non-negative), ``-1`` only
    falling ones, ``0`` both. ``solve(..., return_stats=True)`` reports ``stats["event_time"]``
    ``(N,)`` and ``stats["event_state"]`` ``(N, n)``, NaN where no event occurred; both are
    differentiable.
    """

    fn: Any
    terminal: bool = True
    direction: int = 0

    def __post_init__(self):
        if not callable(self.fn):
            raise TypeError(f"Event.fn must be callable fn(y, t, p) -> scalar, got "
                            f"{type(self.fn).__name__}")
        if self.direction not in (-1, 0, 1) or isinstance(self.direction, bool):
            raise ValueError(f"Event.direction must be -1, 0 or 1, got {self.direction!r}")
        object.__setattr__(self, "terminal", _flag("Event.terminal")(self.terminal))


def _event(value):
    if value is not None and not isinstance(value, Event):
        raise TypeError(f"event must be a shoal.ode.Event(fn, terminal=..., direction=...), got "
                        f"{type(value).__name__}")
    return value


def _kernel_event(value):
    """The event's settings as two kernel options (without an event: unused defaults)."""
    terminal, direction = (True, 0) if value is None else (value.terminal, value.direction)
    return {"event_terminal": np.int64(terminal), "event_direction": np.int64(direction)}


@dataclasses.dataclass(frozen=True)
class SolveOptions:
    """The static options of one solve (hashable: it keys jit and compile caches)."""

    method: Method = _option(
        Method.RODAS5P, _enum(Method, "method"),
        '``"rodas5p"`` (Rosenbrock 5(4), stiff problems; Jacobian and ∂f/∂t from ``f`` by dual '
        'numbers), ``"rodas4"`` (Rosenbrock 4(3), the same with 6 stages instead of 8: cheaper '
        'per step at loose tolerances), ``"rosenbrock23"`` (Shampine\'s ode23s, order 2(3), 3 '
        'stages: for tolerances of 1e-2…1e-4), ``"tsit5"`` (explicit Tsitouras 5(4), non-stiff '
        'problems, cheaper per step), ``"vern7"`` or ``"vern9"`` (Verner\'s explicit 7(6) and 9(8) '
        'pairs with interpolants of their order: non-stiff problems at tight tolerances, '
        'rtol ≲ 1e-8).')
    rtol: float = _option(1e-8, _positive("rtol"), "Relative tolerance (> 0).", _kernel_float)
    atol: float = _option(1e-10, _positive("atol"), "Absolute tolerance (> 0).", _kernel_float)
    max_step: float | None = _option(
        None, _optional_positive("max_step"),
        "The largest step size (> 0); default unbounded. With it no feature of f shorter than "
        "max_step can be stepped over; ``tstops`` is the exact tool for known times.",
        _kernel_max_step)
    factor_min: float = _option(
        0.2, _factor("factor_min", 0.0, 1.0),
        "The smallest factor by which one attempt shrinks the step, in (0, 1).", _kernel_float)
    factor_max: float = _option(
        10.0, _factor("factor_max", 1.0, math.inf),
        "The largest factor by which an accepted step grows the next one, > 1.", _kernel_float)
    max_steps: int = _option(
        100_000, _max_steps, "Maximum step attempts (accepted + rejected) per trajectory.",
        np.int64)
    pcoeff: float = _option(0.0, _gain("pcoeff"), "PID proportional gain.", _kernel_float)
    icoeff: float = _option(
        1.0, _gain("icoeff"), "PID integral gain (the default is the integral controller).",
        _kernel_float)
    dcoeff: float = _option(0.0, _gain("dcoeff"), "PID derivative gain.", _kernel_float)
    jump_fn: Any = _option(
        None, _optional_callable("jump_fn"),
        "``g(y, t, p) -> y``, written with ``jax.numpy`` and compiled into the kernel: applied "
        "to the state at each stop of ``tstops`` (a bolus dose); differentiable. A save at a "
        "stop records the state before the jump.")
    save_fn: Any = _option(
        None, _optional_callable("save_fn"),
        "``h(y, t, p) -> array``, written with ``jax.numpy`` and compiled into the kernel: what "
        "each save records instead of the state, so ``ys`` is ``(N, n_save, *h_shape)`` and the "
        "full state is never stored; differentiable like the state.")
    event: Any = _option(
        None, _event,
        "A :class:`shoal.ode.Event`: the first zero crossing of ``event.fn(y, t, p)`` per "
        "trajectory, optionally terminal; its time and state are in ``stats``.", _kernel_event)
    sens_error_control: bool = _option(
        True, _flag("sens_error_control"),
        "When differentiated (jvp, grad, jacfwd, ...): include the sensitivities in the error "
        "norm (default), tying the gradient's accuracy to rtol. ``False``: the state alone "
        "controls the steps, so after the first step (chosen for the joint system, see "
        "``first_step``) they are the plain solve's; with a given ``first_step``, exactly the "
        "plain solve's steps and values.")
    sens_atol: float | None = _option(
        None, _optional_positive("sens_atol"),
        "The absolute tolerance of every sensitivity ∂y_i/∂θ_k when differentiated. Default, as "
        "CVODES does it: ``atol / |θ_k|`` (``atol`` where θ_k is 0), so the change of y for a "
        "relative change of θ_k is controlled like y itself, and tiny or huge parameters, or a "
        "y0 entry near 0, neither starve nor loosen the step size.")
    sparsity: Any = _option(
        None, _sparsity,
        'Rodas5P: ``None`` (the default: the sparse solver on the pattern detected from ``f`` '
        "where it measured faster, from 12 variables on patterns whose LU factors keep at most "
        'half of n² entries; the dense LU elsewhere), ``"dense"`` (always the dense LU), '
        '``"auto"`` (always the detected pattern), '
        "or the Jacobian pattern as an n-by-n bool mask, a SciPy sparse matrix or an "
        "nnz-by-2 int array of (row, col) pairs; a given pattern must contain every structural "
        "nonzero of ``f``. "
        "A pattern buys one dual-number sweep per colour of its column-intersection graph and a "
        "sparse direct solver compiled for it. ``return_stats`` reports the choice "
        "(``stats['sparse']``).")
    ordering: Ordering = _option(
        Ordering.AMD, _enum(Ordering, "ordering"),
        'The sparse solver\'s fill-reducing symmetric permutation: ``"amd"`` (SuiteSparse AMD; '
        'the natural order is kept where AMD would fill more) or ``"natural"``.')
    lu_precision: LuPrecision = _option(
        LuPrecision.FP64, _enum(LuPrecision, "lu_precision"),
        'Rodas5P: ``"fp64"`` or ``"fp32"``, the precision of the factorisation of '
        "``I/(hγ) − J``; the state and stages keep y0's precision. fp32 rounds M to float (~1e-7 "
        "relative): an error floor near 1e-11 and occasional extra steps, so use it at moderate "
        "tolerances.")

    adjoint: bool | str = _option(
        False, _adjoint_choice,
        "``True``: reverse mode (grad, vjp, jacrev) by the discrete adjoint of the steps taken: "
        "one more forward solve and one backward sweep per cotangent, whatever the number of "
        "differentiated entries (thousands of table entries or network weights), instead of "
        "a sensitivity column per entry. The derivative is that of the same discretisation "
        "forward sensitivities compute (steps held fixed); every method, on the CPU (the "
        "Rosenbrock methods' adjoint factorises densely). ``\"auto\"``: the adjoint "
        "on the CPU where more entries are differentiated than the measured crossover (32 for "
        "the explicit methods, 10 for the Rosenbrock ones), forward sensitivities elsewhere. "
        "``False`` (default): forward sensitivities. Forward mode (jvp, jacfwd) is unchanged.")
    adjoint_memory: int = _option(
        4 * 2**20, _adjoint_memory,
        "With the adjoint: the bytes of states one trajectory's recording of its forward solve "
        "may keep (default 4 MiB). Every step's t and size are kept (3 numbers); its state is "
        "kept at checkpoints, every step at first, every 2nd, 4th, … step once the states "
        "would need more, and the backward sweep takes the steps between again from the "
        "checkpoint before them (bit for bit the same states, so the same gradient; about one "
        "more step evaluation per step where it thinned). A sweep also holds one window of "
        "states between two checkpoints. Per worker thread, the recordings of up to twice the "
        "lanes' width of trajectories are held at once.", np.int64)
    mass: Any = _option(
        None, _mass.option,
        "A constant ``(n, n)`` mass matrix M (array, nested lists or SciPy sparse): solve "
        "``M y' = f(y, t, p)`` with a Rosenbrock method, M possibly singular (a differential-"
        "algebraic system of index 1: a zero row makes that row of f an algebraic equation "
        "``0 = f_i``). The iteration matrix becomes ``M/(hγ) − J`` (its nonzeros join a sparse "
        "pattern); every component, algebraic ones included, is in the error norm "
        "(``error_weights`` 0 leaves one out). y0 must "
        "satisfy the algebraic equations (see ``dae_init``). Forward sensitivities (jvp, grad, "
        "jacfwd) solve ``M S' = J S + f_p``; ``adjoint=True`` transposes the steps with ``Mᵀ``; "
        "save, start and event times take dy/dt from M y' = f and the algebraic equations "
        "differentiated. Not supported with a mass matrix: the explicit methods, and a "
        "derivative with respect to t_span together with a save_fn.")
    dae_init: str = _option(
        "check", _mass.dae_init_option,
        "With a singular ``mass``: ``\"check\"`` (default) requires y0 to satisfy the algebraic "
        "equations to tolerance (one Newton correction of the algebraic components within "
        "``atol + rtol |y0|`` in RMS norm); an inconsistent member raises a ``ValueError`` where "
        "y0 and params are concrete, and under ``jit`` gets status ``INVALID_INPUT`` and NaN "
        "saves. ``\"solve\"`` makes y0 consistent first: Newton on the algebraic components "
        "with the differential ones held (differentiable, by the implicit-function theorem); "
        "``ys[:, 0]`` is then the consistent state.")
    lanes: int = _option(
        0, _lanes,
        "CPU: trajectories stepped together in SIMD lanes per thread; ``0`` (default) the "
        "host's vector width (8 float64 / 16 float32 with AVX-512, 4 / 8 with AVX2), ``1`` one "
        "at a time, or a power of two up to 64. Results are bit-identical whatever the value; "
        "only speed differs. ``0`` keeps a model whose f is not plain arithmetic (libm "
        "functions, comparisons, tables) on one lane, where lanes measured slower, and solves an "
        "ensemble of fewer trajectories than one vector holds (vmapped ones counted) on the "
        "scalar path, since idle lanes cost as much as busy ones. Ignored on GPUs.")

    def __post_init__(self):
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, f.metadata["check"](getattr(self, f.name)))

    def replace(self, **changes) -> SolveOptions:
        return dataclasses.replace(self, **changes)

    def model_functions(self) -> tuple[ModelFunction, ...]:
        """The functions compiled into the model besides f, in the model's order."""
        given = (("jump", self.jump_fn), ("save", self.save_fn),
                 ("event", self.event.fn if self.event is not None else None))
        return tuple(ModelFunction(kind, fn) for kind, fn in given if fn is not None)

    def kernel_attributes(self, error_components: int = 0,
                          joint: bool = False) -> dict[str, Any]:
        """The run-time options as the kernel's ``options`` dictionary attribute.

        ``error_components``: the error norm covers components ``[0, this)`` only (0 = all); a
        joint solve without sensitivity error control passes the state size. ``joint``: a joint
        solve [y, S], whose default first step is bounded by an estimate on the whole joint
        state (integrate.hpp).
        """
        attributes = {}
        for f in dataclasses.fields(self):
            if f.metadata["kernel"] is not None:
                value = f.metadata["kernel"](getattr(self, f.name))
                attributes.update(value if isinstance(value, dict) else {f.name: value})
        attributes["error_components"] = np.int64(error_components)
        attributes["first_step_estimate"] = np.int64(joint)
        return attributes


def documentation() -> str:
    """The numpy-style ``Parameters`` entries of every option, for ``solve``'s docstring."""
    lines = []
    for f in dataclasses.fields(SolveOptions):
        default = f.default.value if isinstance(f.default, enum.Enum) else f.default
        lines.append(f"    {f.name} : default {default!r}")
        lines.append(textwrap.fill(f.metadata["doc"], width=96, initial_indent=" " * 8,
                                   subsequent_indent=" " * 8))
    return "\n".join(lines)
