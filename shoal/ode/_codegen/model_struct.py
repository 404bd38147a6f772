"""``generate_model``: trace ``f``, walk its jaxpr, print the C++ ``struct Model``."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import jax
import numpy as np

from shoal.ode._codegen import array_loops, contractions, scattered
from shoal.ode._codegen.emitter import Emitter, live
from shoal.ode._codegen.tracing import ModelTraceError, trace
from shoal.ode._codegen.values import Sym, const_sym
from shoal.ode._codegen.vjp import jvp_vjp_jaxpr, vjp_jaxpr
from shoal.ode._codegen.walker import Walker
from shoal.ode._constant_tables import host_and_device_tables, table_namespace_alias
from shoal.ode._params import ParamLayout

# Constant tables are in namespace shoal_generated; their initialiser macros carry this prefix.
_TABLE_MACRO_PREFIX = "SHOAL_GENERATED_"


@dataclass(frozen=True)
class ModelFunction:
    """A function of (y, t, p) compiled into the model next to ``rhs``: the state map at each
    stop (``jump``, shape (n,)), what each save records (``save``, any shape), an event
    function (``event``, a scalar), or the vector-Jacobian products of the adjoint (``vjp``:
    first order, of f and of the above; ``jvp_vjp``: f's second order; vjp.py; their ``fn`` is f
    itself, which they are derived from). ``fn`` is the user's, keyed by identity like f."""

    kind: str  # "jump" | "save" | "event" | "vjp" | "jvp_vjp"
    fn: Callable

    @property
    def user_name(self) -> str:
        return {"jump": "jump_fn", "save": "save_fn", "event": "event.fn", "vjp": "f",
                "jvp_vjp": "f"}[self.kind]


@dataclass(frozen=True)
class GeneratedModel:
    """C++ source of a model struct named ``Model`` plus its sizes: it reads ``n_params``
    parameters, of which the trailing ``n_shared`` are shared by the ensemble. ``saved_shape``
    is the shape of what one save records (the state, unless the model has a ``save``).
    ``lane_arithmetic``: whether its right-hand side runs in SIMD lanes (``lane_arithmetic()``
    below) rather than one lane at a time."""

    source: str
    n_vars: int
    n_params: int
    dtype: np.dtype
    n_shared: int = 0
    saved_shape: tuple[int, ...] | None = None
    has_jump: bool = False
    has_event: bool = False
    lane_arithmetic: bool = True
    has_vjp: bool = False  # it carries the vector-Jacobian products of the adjoint (vjp.py)
    vjp_in_lanes: bool = False  # f's vjp is lane arithmetic (the adjoint's backward sweeps)
    jvp_vjp_in_lanes: bool = False  # and its second-order product (Rosenbrock methods')

    @property
    def n_own(self) -> int:
        return self.n_params - self.n_shared

    @property
    def n_saved(self) -> int:
        """Numbers one save records."""
        return self.n_vars if self.saved_shape is None else int(np.prod(self.saved_shape))


def generate_model(f, n_vars: int, params: int | ParamLayout, dtype,
                   extras: tuple[ModelFunction, ...] = ()) -> GeneratedModel:
    """Trace ``f`` and print it as a C++ ``struct Model`` (f may not close over tracers)."""
    model, closure = generate(f, n_vars, params, dtype, extras)
    if closure:
        raise ModelTraceError("f closes over traced values; use generate() to receive them")
    return model


# The C++ signature of each compiled function and the name of its output array.
# f, jump, save and event take their parameters as any indexable `Params` (a pointer, or a dual
# sweep's parameters read in place: include/shoal/ad/param_reads.hpp); the vector-Jacobian
# products read p and their cotangents from one array.
_PARAMS_IN_PLACE = "template <class T, class Params = const T*>"
_SIGNATURES = {
    "rhs": "rhs(const T* y, const T& t, Params p, T* dy)",
    "jump": "jump(const T* y, const T& t, Params p, T* out)",
    "save": "save(const T* y, const T& t, Params p, T* out)",
    "event": "event(const T* y, const T& t, Params p, T* out)",
    "vjp": "vjp(const T* y, const T& t, const T* p, T* out)",
    "jump_vjp": "jump_vjp(const T* y, const T& t, const T* p, T* out)",
    "save_vjp": "save_vjp(const T* y, const T& t, const T* p, T* out)",
    "jvp_vjp": "jvp_vjp(const T* y, const T& t, const T* p, T* out)",
}


def generate(f, n_vars: int, params: int | ParamLayout, dtype,
             extras: tuple[ModelFunction, ...] = ()) -> tuple[GeneratedModel, list]:
    """Trace ``f`` (and each of ``extras``) and print them as a C++ ``struct Model``; also
    return the traced arrays they close over (under an outer jit/grad/vmap), which the model
    reads as trailing shared parameters after the layout's own: pass them, flattened, after the
    shared leaves, in this order (f's, then each extra's)."""
    dtype = np.dtype(dtype)
    layout = params if isinstance(params, ParamLayout) else ParamLayout.flat(params, dtype)
    traced = [("rhs", trace(f, n_vars, layout, dtype))]
    for extra in extras:
        if extra.kind in ("vjp", "jvp_vjp"):  # derived from the traces (below)
            continue
        shape = {"jump": None, "event": (), "save": "any"}[extra.kind]
        traced.append((extra.kind, trace(extra.fn, n_vars, layout, dtype, name=extra.user_name,
                                         shape=shape)))
    # jump_fn's and save_fn's products add to p̄ only if the function reads a parameter (its p,
    # or an array it closes over that is traced: read from p too).
    adds_p_bar = {f"{kind}_vjp": _reads_params(closed) for kind, closed in traced
                  if kind in ("jump", "save")}
    saved = [closed.out_avals[0].shape for kind, closed in traced if kind == "save"]
    saved_shape = tuple(saved[0]) if saved else None
    closure = [c for _, closed in traced for c in closed.consts
               if isinstance(c, jax.core.Tracer)]
    n_params = layout.n_params + sum(int(np.prod(c.shape)) for c in closure)
    n_shared = n_params - layout.n_own
    if any(extra.kind == "vjp" for extra in extras):
        traced += _vjps_of(traced, n_vars, layout.n_params, n_params, dtype,
                           any(extra.kind == "jvp_vjp" for extra in extras))
    em = Emitter()
    # A vjp reads its cotangent (and jvp_vjp its direction) behind the parameters (vjp.py).
    widest = max(n_params, *(closed.in_avals[2].shape[0] for _, closed in traced))
    p_names = np.array([f"p[{i}]" for i in range(widest)], dtype=object)
    offset = layout.n_params
    bodies = []
    for kind, closed in traced:
        consts = []
        for c in closed.consts:
            if isinstance(c, jax.core.Tracer):
                size = int(np.prod(c.shape))
                consts.append(Sym(p_names[offset:offset + size].reshape(c.shape), dtype))
                offset += size
            else:
                consts.append(const_sym(np.asarray(c)))
        # Only the adjoint's products run on the scalar path alone: indexed writes (scatters.py).
        em.indexed_writes = kind in (*_VJP_NAMES.values(), "jvp_vjp")
        # The functions that run in the lanes read shared weights as scalars where they can
        # (contractions._shared_weights): f, and f's products in the adjoint's backward sweeps.
        em.shared_params = ((layout.n_own, n_params)
                            if kind in ("rhs", "vjp", "jvp_vjp") and n_shared else None)
        # Every function reads the layout's parameters as p; a vjp its whole q (vjp.py).
        reads = (closed.in_avals[2].shape[0] if kind in (*_VJP_NAMES.values(), "jvp_vjp")
                 else layout.n_params)
        bodies.append((kind, _body(em, closed, consts, n_vars, reads, p_names, dtype,
                                   "dy" if kind == "rhs" else "out")))
    read = set(re.findall(r"\w+", "\n".join(line for _, body in bodies for line in body)))
    tables = [
        (ctype, name, "{" + ", ".join(values) + "}")
        for ctype, name, values in em.tables
        if name in read
    ]
    indent = "    "
    members = []
    lane_products = {}
    for kind, body in bodies:
        if tables:
            # Device code must read the __device__ copy of a table and host code the host copy.
            body = [*table_namespace_alias(), *body]
        if kind == "rhs":
            rhs_in_lanes = lane_arithmetic(body)
            if rhs_in_lanes:
                body = lane_statements(body)
        if kind in ("vjp", "jvp_vjp"):
            # The adjoint's backward sweeps run f's products on lanes where they are lane
            # arithmetic too (writing out[] at constant or loop indices;
            # adjoint_backward_lanes.hpp).
            in_lanes = lane_arithmetic(body, writes="out")
            lane_products[kind] = in_lanes
            if in_lanes:
                body = lane_statements(body)
        statements = ["    SHOAL_MATH_USING;", "    (void)y; (void)t; (void)p;",
                      *(indent + line for line in body)]
        if kind == "rhs" and not rhs_in_lanes:
            # What SIMD lanes cannot compute as scalars do (lane_arithmetic): one lane at a time.
            statements = ["    if constexpr (shoal::lane_count<T>() > 1) {",
                          "      shoal::rhs_per_lane<Model>(y, t, p, dy);",
                          "    } else {",
                          *("  " + line for line in statements),
                          "    }"]
        members += [
            "  " + (_PARAMS_IN_PLACE if "Params" in _SIGNATURES[kind] else "template <class T>"),
            f"  SHOAL_HD static void {_SIGNATURES[kind]} {{",
            *statements,
            "  }",
        ]
    kinds = {kind for kind, _ in bodies}
    source = "\n".join(
        [
            "// Generated by shoal from a JAX function; do not edit.",
            '#include "shoal/math.hpp"',
            "",
            "namespace shoal_generated {",
            *host_and_device_tables(tables, _TABLE_MACRO_PREFIX),
            "",
            "struct Model {",
            f"  static constexpr int n_vars = {n_vars};",
            f"  static constexpr int n_params = {n_params};",
            "  static constexpr bool params_in_place = true;",
            *([f"  static constexpr int n_shared = {n_shared};"] if n_shared else []),
            *([f"  static constexpr int n_saved = {int(np.prod(saved_shape))};"]
              if saved_shape is not None else []),
            *(["  static constexpr bool has_jump = true;"] if "jump" in kinds else []),
            *(["  static constexpr bool has_event = true;"] if "event" in kinds else []),
            *(["  static constexpr bool has_vjp = true;"] if "vjp" in kinds else []),
            *(["  static constexpr bool vjp_in_lanes = true;"]
              if lane_products.get("vjp") else []),
            *(["  static constexpr bool jvp_vjp_in_lanes = true;"]
              if lane_products.get("jvp_vjp") else []),
            *(f"  static constexpr bool {kind}_adds_p_bar = false;"
              for kind, adds in adds_p_bar.items() if not adds and kind in kinds),
            *members,
            "};",
            "",
            "}  // namespace shoal_generated",
            "",
        ]
    )
    return (GeneratedModel(source=source, n_vars=n_vars, n_params=n_params, dtype=dtype,
                           n_shared=n_shared, saved_shape=saved_shape,
                           has_jump="jump" in kinds, has_event="event" in kinds,
                           lane_arithmetic=rhs_in_lanes, has_vjp="vjp" in kinds,
                           vjp_in_lanes=bool(lane_products.get("vjp")),
                           jvp_vjp_in_lanes=bool(lane_products.get("jvp_vjp"))), closure)


# What a right-hand side may use and still run in SIMD lanes: arithmetic, comparisons and the
# choices made of them (simd/lanes.hpp: a comparison is a mask there), and the functions shoal
# computes itself for scalars and lanes alike (simd/lanes_math.hpp), so a lane's bits are the
# scalar path's.
LANE_FUNCTIONS = frozenset({
    "integer_pow", "select", "max", "min", "clamp", "abs", "fabs", "sign", "square", "sqrt",
    "rsqrt", "logistic", "exp", "exp2", "expm1", "log", "log1p", "sin", "cos", "tan", "atan",
    "asin", "acos", "atan2", "pow", "sinh", "cosh", "tanh", "cbrt", "erf", "erfc",
    # exact roundings (a uniform grid's index: floor((t - t0) / h))
    "floor", "ceil", "trunc", "round_even", "round_away",
})
# Integers (simd::IntLanes in the lanes, through the aliases lane_statements declares), the
# reads of tables at integer indices and a vjp's additions at them (math.hpp: pick, gather,
# gather_indexed, search_sorted, search_sorted_near, to_double, primal and scatter_add, each
# overloaded for lanes with every lane the scalar's answer).
INTEGER_TYPES = {f"{u}int{b}_t": f"{u.upper() or 'I'}{b}"
                 for u in ("", "u") for b in (8, 16, 32, 64)}
TABLE_FUNCTIONS = frozenset({"pick", "gather", "gather_indexed", "search_sorted",
                             "search_sorted_near", "to_double", "primal", "indexed",
                             "static_cast", "true", "false", "scatter_add"})
# An elementwise loop over arrays of T (array_loops.py: `for (int i = 0; i < n; ++i) v[i] = ...`),
# or a product with a block of parameters (contractions.py: loops over i and j), indexes with the
# same i and j in every lane.
_LANE_NAMES = frozenset({"const", "T", "y", "t", "p", "bool", "for", "int", "i", "j",
                         # weights read as scalars (contractions._dot_block)
                         "if", "else", "auto", "ps", "shoal", "shared_param_row", "Model",
                         *LANE_FUNCTIONS, *INTEGER_TYPES, *TABLE_FUNCTIONS,
                         "ULL", "LL"})  # integer literals' suffixes (cpp.literal)
_LANE_OPERATORS = frozenset("+-*/()[]=;,.<>!&|%^~{}:")
_TOKEN = re.compile(r"[A-Za-z_]\w*|\d[\d.]*(?:[eE][+-]?\d+)?|\S")
# What a subscript may hold in the lanes: a constant, or an elementwise loop's index (the same in
# every lane), shifted by a constant; a run-time index reads through gather().
_SUBSCRIPT = re.compile(r"\[([^\[\]]*)\]")
_LANE_SUBSCRIPT = re.compile(r"\d+|[ij]|\d+(?: \+ [ij](?: \* \d+)?)+|\d+ \+ i \+ 1|i - \d+")
# Loops over constants, or over a constant table's row (contractions.py: j over row i's nonzeros).
_LANE_LOOP = re.compile(r"\bfor \(int ([ij]) = (?:\d+|table\d+_rows\[\d+ \+ i\]); "
                        r"\1 < (?:\d+|table\d+_rows\[\d+ \+ i \+ 1\]); ")
_LOCAL_NAME = re.compile(r"(?:v|local)\d+|table\d+(?:_values|_columns|_rows)?")
_CAST = re.compile(r"static_cast\s*<\s*(\w+)\s*>")
_SPECIAL_CONSTANT = re.compile(r'__builtin_nan\(""\)|__builtin_huge_val\(\)')
_RUNTIME_NEAR_SEARCH = re.compile(r"search_sorted_near\((?!table\d+,)")
# A constant grid whose entries are computed (linspace.py): a constant table in the lanes.
_LINSPACE = re.compile(r"shoal::math::Linspace\{[^{}]*\}")
_BOOL_ARRAY = re.compile(r"\bbool \w+\[")
_INTEGER_TYPE = re.compile(r"\b(" + "|".join(INTEGER_TYPES) + r")\b")


def lane_arithmetic(body: list[str], writes: str = "dy") -> bool:
    """Whether these statements run in SIMD lanes exactly as scalars: floating-point arithmetic,
    comparisons of T values and the selects, max, min made of them, the functions of
    LANE_FUNCTIONS, elementwise loops over arrays of T, and integers with the table reads made
    of them (constant tables, local arrays and parameters at run-time indices, searchsorted);
    the rest (while loops, integer code other than these formats, other functions) runs one lane
    at a time. A `bool` may only name a comparison's result (a mask in the lanes). ``writes``
    names the output array (written at constant or loop indices only)."""
    alias = set(table_namespace_alias())
    text = "\n".join(line for line in body if line not in alias).replace("tab::", "")
    text = _SPECIAL_CONSTANT.sub("0", text)  # NaN and infinities (cpp.double) are constants
    text = _LINSPACE.sub("table0", text)
    if any(not _LANE_SUBSCRIPT.fullmatch(m) for m in _SUBSCRIPT.findall(text)):
        return False
    if any(m not in INTEGER_TYPES for m in _CAST.findall(text)):
        return False
    # Not yet in the lanes: arrays of bools (a mask per lane has no `bool` array), and the
    # guessed search over a run-time table (the code generator guesses on constant grids only).
    if _RUNTIME_NEAR_SEARCH.search(text) or _BOOL_ARRAY.search(text):
        return False
    if len(re.findall(r"\bint\b", text)) != len(_LANE_LOOP.findall(text)):
        return False
    for token in _TOKEN.findall(text):
        if token[0].isalpha() or token[0] == "_":
            if token not in _LANE_NAMES and token != writes and not _LOCAL_NAME.fullmatch(token):
                return False
        elif not (token[0].isdigit() or token in _LANE_OPERATORS):
            return False
    return True


def lane_statements(body: list[str]) -> list[str]:
    """The statements as the lanes compile them: a comparison's result is a mask, so its local
    is `auto` (bool for scalars and duals, simd::LaneMask in the lanes); an integer type is an
    alias of T's integers (shoal::IntOf: the integer itself for scalars and duals,
    simd::IntLanes in the lanes)."""
    lines = [line.replace("const bool ", "const auto ", 1) for line in body]
    used = sorted({m for line in lines for m in _INTEGER_TYPE.findall(line)})
    lines = [_INTEGER_TYPE.sub(lambda m: INTEGER_TYPES[m.group(1)], line) for line in lines]
    return [*(f"using {INTEGER_TYPES[c]} = shoal::IntOf<T, {c}>;" for c in used), *lines]


def _reads_params(closed) -> bool:
    """Whether a traced model function (y, t, p) reads p, or closes over a traced array (which
    the model reads from p): otherwise its vector-Jacobian product adds nothing to p̄."""
    if any(isinstance(c, jax.core.Tracer) for c in closed.consts):
        return True
    p = closed.jaxpr.invars[2]
    return (any(v is p for eqn in closed.jaxpr.eqns for v in eqn.invars)
            or any(v is p for v in closed.jaxpr.outvars))


# The vector-Jacobian product compiled for each model function the adjoint transposes.
_VJP_NAMES = {"rhs": "vjp", "jump": "jump_vjp", "save": "save_vjp"}


def _vjps_of(traced, n_vars: int, n_layout: int, n_params: int, dtype, second_order: bool):
    """The vector-Jacobian products (vjp.py) of f, jump_fn and save_fn among ``traced``, and
    with ``second_order`` f's jvp_vjp; the closures are read from p, after the layout's
    parameters, in the order generate() gives them (every traced function's, in turn)."""
    vjps, offset = [], n_layout
    for kind, closed in traced:
        slots = {}
        for i, c in enumerate(closed.consts):
            if isinstance(c, jax.core.Tracer):
                slots[i] = (offset, tuple(c.shape))
                offset += int(np.prod(c.shape))
        if kind in _VJP_NAMES:
            vjps.append((_VJP_NAMES[kind],
                         vjp_jaxpr(closed, n_vars, n_layout, slots, n_params, dtype)))
        if kind == "rhs" and second_order:
            vjps.append(("jvp_vjp",
                         jvp_vjp_jaxpr(closed, n_vars, n_layout, slots, n_params, dtype)))
    return vjps


def _body(em: Emitter, closed, consts, n_vars: int, n_reads: int, p_names, dtype,
          target: str) -> list[str]:
    """The statements of one function: its jaxpr walked into ``em`` (whose tables all the
    functions share), ending in ``target[k] = ...`` for each output element; it reads the
    first ``n_reads`` of ``p_names`` as its p."""
    em.lines = []
    for key in em._SCOPED:  # a name computed in another function is not in scope here
        setattr(em, key, {})
    y = Sym(np.array([f"y[{i}]" for i in range(n_vars)], dtype=object), dtype)
    t = Sym(np.array("t", dtype=object), dtype)
    p = Sym(p_names[:n_reads].reshape(n_reads), dtype)
    em.floats.update(["t", *y.elems.flat, *p_names])
    (out,) = Walker(em).run(closed.jaxpr, consts, [y, t, p])
    if em.indexed_writes:  # a vjp: its parameter cotangent accumulates (vjp.py)
        outputs = scattered.output_lines(em, out, target, written=n_vars)
        return contractions.fuse_outer_products(
            array_loops.fuse_chains([*live(em.lines, outputs), *outputs]), target)
    elems = list(np.asarray(out.elems, dtype=object).reshape(-1))
    outputs = array_loops.copy_lines(target, elems, lambda e: em.render(e, out.dtype))
    return array_loops.fuse_chains([*live(em.lines, outputs), *outputs])
