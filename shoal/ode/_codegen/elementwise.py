"""Elementwise primitives: one C++ statement per output element, from a format per primitive."""

from __future__ import annotations

import numpy as np

from shoal.ode._codegen import array_loops
from shoal.ode._codegen.cpp import ctype as _ctype
from shoal.ode._codegen.cpp import is_float as _is_float
from shoal.ode._codegen.values import Sym

# name -> C++ format for elementwise float primitives (operands {0}, {1}, ...).
FLOAT_UNARY = {
    "neg": "(-{0})",
    "exp": "exp({0})",
    "exp2": "exp2({0})",
    "log": "log({0})",
    "log1p": "log1p({0})",
    "expm1": "expm1({0})",
    "sqrt": "sqrt({0})",
    "rsqrt": "rsqrt({0})",
    "cbrt": "cbrt({0})",
    "sin": "sin({0})",
    "cos": "cos({0})",
    "tan": "tan({0})",
    "asin": "asin({0})",
    "acos": "acos({0})",
    "atan": "atan({0})",
    "sinh": "sinh({0})",
    "cosh": "cosh({0})",
    "tanh": "tanh({0})",
    "asinh": "asinh({0})",
    "acosh": "acosh({0})",
    "atanh": "atanh({0})",
    "logistic": "logistic({0})",
    "erf": "erf({0})",
    "erfc": "erfc({0})",
    "erf_inv": "erf_inv({0})",
    "lgamma": "lgamma({0})",
    "digamma": "digamma({0})",
    "floor": "floor({0})",
    "ceil": "ceil({0})",
    "abs": "abs({0})",
    "sign": "sign({0})",
    "square": "square({0})",
}
BINARY = {"add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})", "div": "({0} / {1})",
          # the sum of tangent contributions in a jax.jvp / jax.grad inside f
          "add_any": "({0} + {1})"}
FLOAT_BINARY = {
    "max": "max({0}, {1})",
    "min": "min({0}, {1})",
    "pow": "pow({0}, {1})",
    "atan2": "atan2({0}, {1})",
    "rem": "fmod({0}, {1})",
    # jax.scipy.special.polygamma(m, x): the order m is a constant of the model.
    "polygamma": "polygamma(static_cast<int>(primal({0})), {1})",
}
# Integer choices are pick(c, a, b) (math.hpp: `c ? a : b`; a masked select in SIMD lanes).
INT_BINARY = {
    "max": "pick({0} > {1}, {0}, {1})",
    "min": "pick({0} < {1}, {0}, {1})",
    "rem": "({0} % {1})",
}
COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
# lax's total-order comparisons (searchsorted): NaN above every float. Operands are primal values.
TOTAL_ORDER = {"lt_to": "lt_total({0}, {1})", "le_to": "(!lt_total({1}, {0}))"}
LOGICAL = {"and": ("&&", "&"), "or": ("||", "|"), "xor": ("!=", "^")}
CONVERSIONS = (
    "convert_element_type",
    "copy",
    "copy_p",
    "reduce_precision",
    "optimization_barrier",
)
# Every primitive format_for has a format for (for some dtypes).
PRIMITIVES = frozenset(
    [*FLOAT_UNARY, *BINARY, *FLOAT_BINARY, *INT_BINARY, *COMPARE, *TOTAL_ORDER, *LOGICAL]
    + [*CONVERSIONS]
    + ["not", "integer_pow", "round", "is_finite", "clamp", "select_n"]
)


def elementwise(walker, eqn, ins) -> Sym:
    out_aval = eqn.outvars[0].aval
    out_dtype = np.dtype(out_aval.dtype)
    shape = tuple(out_aval.shape)
    # First: an unsupported primitive (sort, argmax, ...) must be named, not fail to broadcast.
    fmt, ctype = format_for(walker, eqn, ins, out_dtype)
    arrays = [np.broadcast_to(s.elems, shape) for s in ins]
    em = walker.em
    if eqn.primitive.name == "add_any":
        summed = _sum_of_cotangents(em, arrays, out_dtype)
        if summed is not None:
            return Sym(summed, out_dtype)
    if ins and int(np.prod(shape)) >= array_loops.LOOP_MIN_SIZE:
        out = array_loops.loop(em, fmt, ctype, arrays, [s.dtype for s in ins], shape)
        return Sym(out, out_dtype)
    out = np.empty(shape, dtype=object)
    for idx in np.ndindex(shape):
        operands = [em.render(a[idx], s.dtype) for a, s in zip(arrays, ins, strict=True)]
        out[idx] = em.assign(ctype, fmt.format(*operands))
    return Sym(out, out_dtype)


def _is_zero(e) -> bool:
    return not isinstance(e, str) and e == 0


def _sum_of_cotangents(em, arrays, dtype) -> np.ndarray | None:
    """``add_any`` (JAX's sum of cotangents) where one side is mostly constant zeros, as the
    transposes of slices and table reads are: the other side's element, with no code (a zero's
    sign is no cotangent's concern). None where a loop over all elements is as good."""
    a, b = arrays
    both = [idx for idx in np.ndindex(a.shape) if not (_is_zero(a[idx]) or _is_zero(b[idx]))]
    if a.size < array_loops.LOOP_MIN_SIZE or len(both) >= array_loops.LOOP_MIN_SIZE:
        return None
    out = np.where(np.vectorize(_is_zero, otypes=[bool])(a), b, a)
    ctype = _ctype(dtype)
    for idx in both:
        out[idx] = em.assign(ctype, f"({em.render(a[idx], dtype)} + {em.render(b[idx], dtype)})")
    return out


def format_for(walker, eqn, ins, out_dtype):
    """C++ format string and result type for an elementwise equation."""
    name = eqn.primitive.name
    in_dtype = ins[0].dtype if ins else out_dtype
    ctype = _ctype(out_dtype)
    is_float = _is_float(in_dtype)
    if name in BINARY:
        return BINARY[name], ctype
    if is_float and name in FLOAT_BINARY:
        return FLOAT_BINARY[name], ctype
    if not is_float and name in INT_BINARY:
        return INT_BINARY[name], ctype
    if is_float and name in FLOAT_UNARY:
        return FLOAT_UNARY[name], ctype
    if name in ("neg", "abs") and not is_float:
        return ("(-{0})" if name == "neg" else "pick({0} < 0, -{0}, {0})"), ctype
    if name == "sign" and not is_float:  # jnp.floor_divide on integers uses it
        return f"pick({{0}} > 0, {ctype}(1), pick({{0}} < 0, {ctype}(-1), {ctype}(0)))", ctype
    if name == "square" and not is_float:
        return "({0} * {0})", ctype
    if name in COMPARE:
        return "({0} " + COMPARE[name] + " {1})", "bool"
    if name in TOTAL_ORDER:
        key = "primal({})" if is_float else "{}"
        return TOTAL_ORDER[name].format(key.format("{0}"), key.format("{1}")), "bool"
    if name in LOGICAL:
        op = LOGICAL[name][0 if in_dtype == np.bool_ else 1]
        return "({0} " + op + " {1})", ctype
    if name == "not":
        return ("(!{0})" if in_dtype == np.bool_ else "(~{0})"), ctype
    if name == "integer_pow":
        return "integer_pow({0}, " + str(int(eqn.params["y"])) + ")", ctype
    if name == "round":
        method = int(eqn.params.get("rounding_method", 0))
        return ("round_even({0})" if method == 1 else "round_away({0})"), ctype
    if name == "is_finite":
        return "is_finite({0})", "bool"
    if name == "clamp":
        return "clamp({0}, {1}, {2})", ctype
    if name == "select_n":
        # select_n(pred, case0, case1, ...): pred is bool or an integer case index. Floats go
        # through select() so that the sparsity tracer can join both branches.
        n = len(ins) - 1
        pick = "select({}, {}, {})" if _is_float(out_dtype) else "pick({}, {}, {})"
        if n == 2 or ins[0].dtype == np.bool_:
            return pick.format("{0}", "{2}", "{1}"), ctype
        expr = "{" + str(n) + "}"
        for k in range(n - 2, -1, -1):
            expr = pick.format("{0} == " + str(k), "{" + str(k + 1) + "}", expr)
        return expr, ctype
    if name in CONVERSIONS:
        return convert_format(in_dtype, out_dtype), ctype
    raise walker.unsupported(eqn)


def convert_format(src, dst) -> str:
    src, dst = np.dtype(src), np.dtype(dst)
    if _is_float(dst):
        # Every float in a model computes in the solve's precision T.
        return "{0}" if _is_float(src) else "T({0})"
    if dst == np.bool_:
        return "(primal({0}) != 0)" if _is_float(src) else "({0} != 0)"
    if _is_float(src):
        return f"static_cast<{_ctype(dst)}>(primal({{0}}))"
    return f"static_cast<{_ctype(dst)}>({{0}})"
