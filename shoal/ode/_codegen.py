"""Translate a JAX right-hand side ``f(y, t, p)`` into a C++ model struct.

``f`` is traced once with :func:`jax.make_jaxpr` on one trajectory's shapes. The jaxpr is then
evaluated symbolically: every array value becomes a NumPy object array whose elements are either
Python constants or the names of C++ scalar locals. Elementwise primitives emit one statement per
element; data-movement primitives (slice, gather, reshape, concatenate, ...) emit nothing at all -
they are evaluated by JAX itself on arrays of element ids, so their semantics are JAX's by
construction; equations whose inputs are all constant are folded by JAX. Large contractions with a
constant matrix become loops over a static table so the source stays bounded. Loops whose trip
count is known at trace time are unrolled; ``lax.cond`` evaluates every branch and selects.

The result is ``template <class T> static void rhs(const T* y, const T& t, const T* p, T* dy)``,
instantiable with float, double, dual numbers or a sparsity tracer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import jax.extend.core as jex_core
import jax.numpy as jnp
import numpy as np

# Above this many multiply-adds a contraction with a constant operand becomes a table-driven loop.
DOT_TABLE_THRESHOLD = 512
# Loops with a trip count known at trace time are unrolled, up to this many iterations.
MAX_UNROLL = 10_000

_CALL_LIKE = {"jit", "pjit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call",
              "custom_vjp_call_jaxpr", "remat", "remat2", "checkpoint", "custom_lin"}

# name -> C++ format for elementwise float primitives (operands {0}, {1}, ...).
_FLOAT_UNARY = {
    "neg": "(-{0})", "exp": "exp({0})", "exp2": "exp2({0})", "log": "log({0})",
    "log1p": "log1p({0})", "expm1": "expm1({0})", "sqrt": "sqrt({0})", "rsqrt": "rsqrt({0})",
    "cbrt": "cbrt({0})", "sin": "sin({0})", "cos": "cos({0})", "tan": "tan({0})",
    "asin": "asin({0})", "acos": "acos({0})", "atan": "atan({0})", "sinh": "sinh({0})",
    "cosh": "cosh({0})", "tanh": "tanh({0})", "asinh": "asinh({0})", "acosh": "acosh({0})",
    "atanh": "atanh({0})", "logistic": "logistic({0})", "erf": "erf({0})", "erfc": "erfc({0})",
    "floor": "floor({0})", "ceil": "ceil({0})", "abs": "abs({0})", "sign": "sign({0})",
    "square": "square({0})",
}
_BINARY = {"add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})",
           "div": "({0} / {1})"}
_FLOAT_BINARY = {"max": "max({0}, {1})", "min": "min({0}, {1})", "pow": "pow({0}, {1})",
                 "atan2": "atan2({0}, {1})", "rem": "fmod({0}, {1})"}
_INT_BINARY = {"max": "({0} > {1} ? {0} : {1})", "min": "({0} < {1} ? {0} : {1})",
               "rem": "({0} % {1})"}
_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_LOGICAL = {"and": ("&&", "&"), "or": ("||", "|"), "xor": ("!=", "^")}
# Pure data movement: positions of operands that carry data (the rest must be constant indices).
_STRUCTURAL = {
    "slice": (0,), "squeeze": (0,), "expand_dims": (0,), "reshape": (0,),
    "broadcast_in_dim": (0,), "transpose": (0,), "rev": (0,), "copy": (0,), "copy_p": (0,),
    "concatenate": None, "pad": (0, 1), "gather": (0,), "dynamic_slice": (0,),
    "dynamic_update_slice": (0, 1), "split": (0,), "stack": None, "select_n": None,
    "tile": (0,), "unstack": (0,), "stop_gradient": (0,),
}


class ModelTraceError(ValueError):
    """``f`` does not have the signature or output a model needs."""


@dataclass(frozen=True)
class GeneratedModel:
    """C++ source of a model struct named ``Model`` plus its sizes."""

    source: str
    n_vars: int
    n_params: int
    dtype: np.dtype


def _eager():
    """A context where binding primitives on concrete arrays computes values now.

    The code generator folds constants and moves element ids with JAX itself, and it may run while
    an outer jit/vmap is tracing the user's program; those traces must not capture these binds.
    ``jax.ensure_compile_time_eval`` does not escape an enclosing vmap, the eval trace does.
    """
    from jax._src import core as _core  # no public equivalent (jax 0.10)

    return _core.eval_context()


def _where(eqn) -> str:
    """The user's file:line of an equation, or "" when JAX recorded none."""
    try:
        from jax._src import source_info_util

        return source_info_util.summarize(eqn.source_info)
    except Exception:  # noqa: BLE001 - source info is best effort
        return ""


def _gather_fill(value, dtype):
    """The element an out-of-bounds gather yields: fill_value, else JAX's default for dtype."""
    dtype = np.dtype(dtype)
    if value is not None:
        return np.asarray(value, dtype=dtype).item()
    if _is_float(dtype):
        return float("nan")
    if dtype == np.bool_:
        return True
    info = np.iinfo(dtype)
    return int(info.max if jnp.issubdtype(dtype, jnp.unsignedinteger) else info.min)


def _is_float(dtype) -> bool:
    return jnp.issubdtype(dtype, jnp.floating)


def _ctype(dtype) -> str:
    dtype = np.dtype(dtype)
    if _is_float(dtype):
        return "T"
    if dtype == np.bool_:
        return "bool"
    if jnp.issubdtype(dtype, jnp.unsignedinteger):
        return f"uint{dtype.itemsize * 8}_t"
    if jnp.issubdtype(dtype, jnp.integer):
        return f"int{dtype.itemsize * 8}_t"
    raise NotImplementedError(f"dtype {dtype} is not supported in a model")


def _double(value) -> str:
    """A C++ double constant expression (NaN and infinities have no literal)."""
    v = float(value)
    if math.isnan(v):
        return "__builtin_nan(\"\")"
    if math.isinf(v):
        return "__builtin_huge_val()" if v > 0 else "-__builtin_huge_val()"
    # repr() round-trips a double exactly; the value already has the jaxpr's precision.
    return repr(v)


def _literal(value, dtype) -> str:
    """C++ literal for a constant element of the given (jaxpr) dtype."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return "true" if bool(value) else "false"
    if _is_float(dtype):
        return f"T({_double(value)})"
    v = int(value)
    return f"{_ctype(dtype)}({v}LL)" if v < 0 else f"{_ctype(dtype)}({v}ULL)"


class _Sym:
    """An array value: an object array of elements (str = C++ expression, else a constant)."""

    __slots__ = ("elems", "dtype")

    def __init__(self, elems: np.ndarray, dtype):
        self.elems = elems
        self.dtype = np.dtype(dtype)

    @property
    def shape(self):
        return self.elems.shape

    def is_const(self) -> bool:
        return all(not isinstance(e, str) for e in self.elems.flat)

    def const_value(self) -> np.ndarray:
        return np.asarray(self.elems.tolist(), dtype=self.dtype).reshape(self.elems.shape)


def _const_sym(value) -> _Sym:
    arr = np.asarray(value)
    obj = np.empty(arr.shape, dtype=object)
    for idx in np.ndindex(arr.shape):
        obj[idx] = arr[idx].item() if arr.ndim else arr.item()
    return _Sym(obj, arr.dtype)


class _Emitter:
    def __init__(self):
        self.lines: list[str] = []
        self.tables: list[tuple[str, str, list[str]]] = []  # (C type, name, initialisers)
        self._count = 0

    def fresh(self, prefix="v") -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def render(self, elem, dtype) -> str:
        return elem if isinstance(elem, str) else _literal(elem, dtype)

    def assign(self, ctype: str, expr: str) -> str:
        name = self.fresh()
        self.lines.append(f"const {ctype} {name} = {expr};")
        return name


class _Translator:
    def __init__(self, emitter: _Emitter):
        self.em = emitter
        self.calls: list = []  # enclosing call-like equations, innermost last

    def where(self, eqn) -> str:
        # Equations inside library functions (jnp.cumsum is a jit) carry no user frame; the
        # nearest enclosing call that does is the line in f that the user can act on.
        for e in (eqn, *reversed(self.calls)):
            loc = _where(e)
            if loc:
                return loc
        return "<unknown location>"

    # -- jaxpr walking ------------------------------------------------------------------------
    def run(self, jaxpr, consts, args):
        env = {}

        def read(v):
            if isinstance(v, jex_core.Literal):
                return _const_sym(np.asarray(v.val, dtype=v.aval.dtype))
            return env[v]

        for var, val in zip(jaxpr.constvars, consts, strict=True):
            env[var] = val
        for var, val in zip(jaxpr.invars, args, strict=True):
            env[var] = val
        for eqn in jaxpr.eqns:
            ins = [read(v) for v in eqn.invars]
            outs = self.eqn(eqn, ins)
            for var, val in zip(eqn.outvars, outs, strict=True):
                if not isinstance(var, jex_core.DropVar):
                    env[var] = val
        return [read(v) for v in jaxpr.outvars]

    def eqn(self, eqn, ins):
        name = eqn.primitive.name
        if name in _CALL_LIKE:
            return self.call(eqn, ins)
        if all(s.is_const() for s in ins):
            folded = self.fold(eqn, ins)
            if folded is not None:
                return folded
        if name in _STRUCTURAL:
            return self.structural(eqn, ins)
        if name in ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and",
                    "reduce_or"):
            return [self.reduce(eqn, ins[0])]
        if name == "dot_general":
            return [self.dot_general(eqn, ins[0], ins[1])]
        if name == "iota":
            return self.fold(eqn, ins)
        control = {"scan": self.scan, "while": self.while_loop, "cond": self.cond}.get(name)
        if control is not None:
            self.calls.append(eqn)
            try:
                return control(eqn, ins)
            finally:
                self.calls.pop()
        return [self.elementwise(eqn, ins)]

    def _closed(self, closed, args):
        return self.run(closed.jaxpr, [_const_sym(c) for c in closed.consts], list(args))

    def scan(self, eqn, ins):
        """Unroll a scan (fori_loop with Python-int bounds, jnp.polyval): its length is static."""
        p = eqn.params
        length, nc, nk = int(p["length"]), p["num_consts"], p["num_carry"]
        if length > MAX_UNROLL:
            raise NotImplementedError(
                f"a 'scan' of {length} iterations is too long to unroll (at {self.where(eqn)}); "
                f"at most {MAX_UNROLL}")
        consts, carry, xs = ins[:nc], list(ins[nc:nc + nk]), ins[nc + nk:]
        y_avals = [v.aval for v in eqn.outvars[nk:]]
        ys = [[None] * length for _ in y_avals]
        for i in reversed(range(length)) if p["reverse"] else range(length):
            x_i = [_Sym(x.elems[i:i + 1].reshape(x.shape[1:]), x.dtype) for x in xs]
            outs = self._closed(p["jaxpr"], [*consts, *carry, *x_i])
            carry = outs[:nk]
            for y, out in zip(ys, outs[nk:], strict=True):
                y[i] = out.elems
        stacked = [_Sym(np.stack(y) if length else np.empty(tuple(a.shape), dtype=object),
                        a.dtype) for y, a in zip(ys, y_avals, strict=True)]
        return carry + stacked

    def cond(self, eqn, ins):
        """lax.cond/switch: every branch is evaluated and the taken one selected (they are pure,
        and a NaN in a branch not taken must not leak, which selecting guarantees)."""
        index, ops, branches = ins[0], ins[1:], eqn.params["branches"]
        if index.is_const():
            return self._closed(branches[int(index.const_value())], ops)
        results = [self._closed(b, ops) for b in branches]
        i = self.em.render(index.elems[()], index.dtype)
        outs = []
        for j, var in enumerate(eqn.outvars):
            dtype = np.dtype(var.aval.dtype)
            # select() for floats, as for select_n: the sparsity tracer joins every branch.
            pick = "select({}, {}, {})" if _is_float(dtype) else "({} ? {} : {})"
            out = np.empty(tuple(var.aval.shape), dtype=object)
            for idx in np.ndindex(out.shape):
                cases = [self.em.render(r[j].elems[idx], dtype) for r in results]
                expr = cases[-1]
                for k in range(len(cases) - 2, -1, -1):
                    expr = pick.format(f"{i} == {k}", cases[k], expr)
                out[idx] = self.em.assign(_ctype(dtype), expr)
            outs.append(_Sym(out, dtype))
        return outs

    def while_loop(self, eqn, ins):
        """Unroll a while loop whose condition is a constant at every iteration."""
        p = eqn.params
        nc, nb = p["cond_nconsts"], p["body_nconsts"]
        cond_consts, body_consts, carry = ins[:nc], ins[nc:nc + nb], list(ins[nc + nb:])
        for _ in range(MAX_UNROLL + 1):
            (go,) = self._closed(p["cond_jaxpr"], [*cond_consts, *carry])
            if not go.is_const():
                raise NotImplementedError(
                    f"'while' with a trip count that depends on the state, time or parameters is "
                    f"not supported (at {self.where(eqn)}); loop bounds must be constants")
            if not bool(go.const_value()):
                return carry
            carry = self._closed(p["body_jaxpr"], [*body_consts, *carry])
        raise NotImplementedError(
            f"a 'while' loop ran over {MAX_UNROLL} iterations while being unrolled "
            f"(at {self.where(eqn)})")

    def call(self, eqn, ins):
        params = eqn.params
        inner = None
        for key in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
            if key in params:
                inner = params[key]
                break
        if inner is None:
            raise NotImplementedError(
                f"shoal cannot translate primitive '{eqn.primitive.name}' (at {self.where(eqn)})")
        if isinstance(inner, jex_core.ClosedJaxpr):
            consts = [_const_sym(c) for c in inner.consts]
            jaxpr = inner.jaxpr
        else:
            consts, jaxpr = [], inner
        # custom_jvp/vjp calls may receive their consts as leading operands.
        self.calls.append(eqn)
        try:
            return self.run(jaxpr, consts, ins[len(ins) - len(jaxpr.invars):])
        finally:
            self.calls.pop()

    def fold(self, eqn, ins):
        """Evaluate an equation with constant inputs using JAX itself."""
        try:
            with _eager():
                out = eqn.primitive.bind(*[jnp.asarray(s.const_value()) for s in ins],
                                         **eqn.params)
        except Exception:  # noqa: BLE001 - fall back to symbolic translation
            return None
        outs = out if eqn.primitive.multiple_results else [out]
        return [_const_sym(np.asarray(o)) for o in outs]

    # -- primitives ---------------------------------------------------------------------------
    def structural(self, eqn, ins):
        name = eqn.primitive.name
        data_pos = _STRUCTURAL[name]
        if name == "select_n":
            if not ins[0].is_const():
                return [self.elementwise(eqn, ins)]
            data_pos = tuple(range(1, len(ins)))
        if data_pos is None:
            data_pos = tuple(range(len(ins)))
        # Give every data element a distinct id, let JAX move the ids, map them back.
        pool: list = []
        bound = []
        for i, s in enumerate(ins):
            if i in data_pos:
                ids = np.arange(len(pool), len(pool) + s.elems.size, dtype=np.int32)
                pool.extend(s.elems.flat)
                bound.append(jnp.asarray(ids.reshape(s.shape)))
            else:
                if not s.is_const():
                    raise NotImplementedError(
                        f"'{name}' with indices that depend on the state, time or parameters is"
                        f" not supported (at {self.where(eqn)}); indices must be constants")
                bound.append(jnp.asarray(s.const_value()))
        params = dict(eqn.params)
        fill = None
        if "fill_value" in params:
            # Out-of-bounds gathers come back as id -1 and take the user's fill value (or JAX's).
            fill, params["fill_value"] = params["fill_value"], -1
        try:
            with _eager():
                out = eqn.primitive.bind(*bound, **params)
        except Exception as err:  # noqa: BLE001
            raise NotImplementedError(
                f"shoal cannot translate '{name}' with these parameters (at {self.where(eqn)}): "
                f"{err}") from err
        outs = out if eqn.primitive.multiple_results else [out]
        results = []
        for o, var in zip(outs, eqn.outvars, strict=True):
            ids = np.asarray(o)
            elems = np.empty(ids.shape, dtype=object)
            missing = _gather_fill(fill, var.aval.dtype)
            for idx in np.ndindex(ids.shape):
                k = int(ids[idx])
                elems[idx] = pool[k] if 0 <= k < len(pool) else missing
            results.append(_Sym(elems, var.aval.dtype))
        return results

    def elementwise(self, eqn, ins):
        out_aval = eqn.outvars[0].aval
        out_dtype = np.dtype(out_aval.dtype)
        shape = tuple(out_aval.shape)
        # First: an unsupported primitive (sort, argmax, ...) must be named, not fail to broadcast.
        fmt, ctype = self.format_for(eqn, ins, out_dtype)
        arrays = [np.broadcast_to(s.elems, shape) for s in ins]
        out = np.empty(shape, dtype=object)
        for idx in np.ndindex(shape):
            operands = [self.em.render(a[idx], s.dtype) for a, s in zip(arrays, ins, strict=True)]
            out[idx] = self.em.assign(ctype, fmt.format(*operands))
        return _Sym(out, out_dtype)

    def format_for(self, eqn, ins, out_dtype):
        """C++ format string and result type for an elementwise equation."""
        name = eqn.primitive.name
        in_dtype = ins[0].dtype if ins else out_dtype
        ctype = _ctype(out_dtype)
        is_float = _is_float(in_dtype)
        if name in _BINARY:
            return _BINARY[name], ctype
        if is_float and name in _FLOAT_BINARY:
            return _FLOAT_BINARY[name], ctype
        if not is_float and name in _INT_BINARY:
            return _INT_BINARY[name], ctype
        if is_float and name in _FLOAT_UNARY:
            return _FLOAT_UNARY[name], ctype
        if name in ("neg", "abs") and not is_float:
            return ("(-{0})" if name == "neg" else "({0} < 0 ? -{0} : {0})"), ctype
        if name == "sign" and not is_float:  # jnp.floor_divide on integers uses it
            return f"static_cast<{ctype}>(({{0}} > 0) - ({{0}} < 0))", ctype
        if name == "square" and not is_float:
            return "({0} * {0})", ctype
        if name in _COMPARE:
            return "({0} " + _COMPARE[name] + " {1})", "bool"
        if name in _LOGICAL:
            op = _LOGICAL[name][0 if in_dtype == np.bool_ else 1]
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
            pick = "select({}, {}, {})" if _is_float(out_dtype) else "({} ? {} : {})"
            if n == 2 or ins[0].dtype == np.bool_:
                return pick.format("{0}", "{2}", "{1}"), ctype
            expr = "{" + str(n) + "}"
            for k in range(n - 2, -1, -1):
                expr = pick.format("{0} == " + str(k), "{" + str(k + 1) + "}", expr)
            return expr, ctype
        if name in ("convert_element_type", "copy", "copy_p", "reduce_precision",
                    "optimization_barrier"):
            return self.convert_format(in_dtype, out_dtype), ctype
        raise NotImplementedError(
            f"shoal cannot translate primitive '{name}' (at {self.where(eqn)}); "
            "supported: arithmetic, elementary functions, comparisons, select, cond, loops with "
            "constant bounds, indexing with constant indices, reductions and contractions")

    @staticmethod
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

    def reduce(self, eqn, x: _Sym) -> _Sym:
        name = eqn.primitive.name
        axes = tuple(eqn.params["axes"])
        keep = [d for d in range(x.elems.ndim) if d not in axes]
        moved = np.transpose(x.elems, keep + list(axes))
        out_shape = tuple(x.shape[d] for d in keep)
        rows = moved.reshape(out_shape + (-1,))
        ctype = _ctype(x.dtype)
        is_float = _is_float(x.dtype)
        combine = {
            "reduce_sum": "({0} + {1})", "reduce_prod": "({0} * {1})",
            "reduce_max": "max({0}, {1})" if is_float else _INT_BINARY["max"],
            "reduce_min": "min({0}, {1})" if is_float else _INT_BINARY["min"],
            "reduce_and": "({0} && {1})", "reduce_or": "({0} || {1})",
        }[name]
        identity = {"reduce_sum": 0, "reduce_prod": 1, "reduce_max": -math.inf,
                    "reduce_min": math.inf, "reduce_and": True, "reduce_or": False}[name]
        out = np.empty(out_shape, dtype=object)
        for idx in np.ndindex(out_shape):
            terms = list(rows[idx])
            if not terms:
                out[idx] = identity
                continue
            acc = terms[0]
            for term in terms[1:]:
                acc = self.em.assign(ctype, combine.format(self.em.render(acc, x.dtype),
                                                           self.em.render(term, x.dtype)))
            out[idx] = acc
        return _Sym(out, x.dtype)

    def dot_general(self, eqn, lhs: _Sym, rhs: _Sym) -> _Sym:
        (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
        out_dtype = np.dtype(eqn.outvars[0].aval.dtype)
        out_shape = tuple(eqn.outvars[0].aval.shape)

        def canon(s: _Sym, batch, contract):
            free = [d for d in range(s.elems.ndim) if d not in batch and d not in contract]
            e = np.transpose(s.elems, list(batch) + free + list(contract))
            nb = int(np.prod([s.shape[d] for d in batch], dtype=np.int64))
            nf = int(np.prod([s.shape[d] for d in free], dtype=np.int64))
            nc = int(np.prod([s.shape[d] for d in contract], dtype=np.int64))
            return e.reshape(nb, nf, nc)

        L = canon(lhs, lb, lc)
        R = canon(rhs, rb, rc)
        nb, nl, nc = L.shape
        nr = R.shape[1]
        ctype = _ctype(out_dtype)
        if nb * nl * nr * nc > DOT_TABLE_THRESHOLD and (lhs.is_const() or rhs.is_const()):
            return self.dot_table(L, R, lhs.is_const(), lhs.dtype, rhs.dtype, out_dtype,
                                  out_shape)
        out = np.empty((nb, nl, nr), dtype=object)
        for b in range(nb):
            for i in range(nl):
                for j in range(nr):
                    terms = []
                    for c in range(nc):
                        x, y = L[b, i, c], R[b, j, c]
                        if (not isinstance(x, str) and x == 0) or (
                                not isinstance(y, str) and y == 0):
                            continue  # a structural zero stays out, so sparsity stays visible
                        terms.append(
                            f"({self.em.render(x, lhs.dtype)} * {self.em.render(y, rhs.dtype)})")
                    if not terms:
                        out[b, i, j] = 0.0
                        continue
                    acc = self.em.assign(ctype, terms[0])
                    for term in terms[1:]:
                        acc = self.em.assign(ctype, f"({acc} + {term})")
                    out[b, i, j] = acc
        return _Sym(out.reshape(out_shape), out_dtype)

    def dot_table(self, L, R, const_is_lhs, ldt, rdt, out_dtype, out_shape) -> _Sym:
        K, V = (L, R) if const_is_lhs else (R, L)
        vdt = rdt if const_is_lhs else ldt
        nb, nk, nc = K.shape
        nv = V.shape[1]
        # The constant operand is stored by rows (b, k) of its nonzeros only, as the scalarised
        # path skips zeros: the loop then does no work on structural zeros, and the sparsity
        # tracer sees exactly the entries that matter instead of a dense product.
        table = self.em.fresh("table")
        values, columns, row_start = [], [], [0]
        for row in K.reshape(nb * nk, nc):
            for c, x in enumerate(row):
                if not (x == 0):  # NaN stays: it must propagate
                    values.append(_double(x))
                    columns.append(str(c))
            row_start.append(len(values))
        if not values:  # C++ has no zero-length arrays
            values, columns = ["0.0"], ["0"]
        self.em.tables += [
            ("double", f"{table}_values", values),
            ("int", f"{table}_columns", columns),
            ("int", f"{table}_rows", list(map(str, row_start))),
        ]
        vec = self.em.fresh("operand")
        items = ", ".join(self.em.render(x, vdt) for x in V.flat)
        res = self.em.fresh("product")
        self.em.lines += [
            f"const T {vec}[{V.size}] = {{{items}}};",
            f"T {res}[{nb * nk * nv}];",
            f"for (int b = 0; b < {nb}; ++b) for (int k = 0; k < {nk}; ++k) "
            f"for (int v = 0; v < {nv}; ++v) {{",
            "  T acc = T(0);",
            f"  for (int e = tab::{table}_rows[b * {nk} + k]; "
            f"e < tab::{table}_rows[b * {nk} + k + 1]; ++e)",
            f"    acc += T(tab::{table}_values[e]) * "
            f"{vec}[(b * {nv} + v) * {nc} + tab::{table}_columns[e]];",
            f"  {res}[(b * {nk} + k) * {nv} + v] = acc;",
            "}",
        ]
        out = np.empty((nb, nk, nv) if const_is_lhs else (nb, nv, nk), dtype=object)
        for b in range(nb):
            for k in range(nk):
                for v in range(nv):
                    ref = f"{res}[{(b * nk + k) * nv + v}]"
                    if const_is_lhs:
                        out[b, k, v] = ref
                    else:
                        out[b, v, k] = ref
        return _Sym(out.reshape(out_shape), out_dtype)


def _wrap_output(f):
    """Let f return an array or a tuple/list of scalars (the seed's convention)."""

    def wrapped(y, t, p):
        out = f(y, t, p)
        if isinstance(out, (tuple, list)):
            out = jnp.stack([jnp.asarray(o) for o in out])
        return out

    return wrapped


def trace(f, n_vars: int, n_params: int, dtype):
    """Trace f on one trajectory's shapes; checks its output's shape and dtype."""
    dtype = np.dtype(dtype)
    specs = (jax.ShapeDtypeStruct((n_vars,), dtype), jax.ShapeDtypeStruct((), dtype),
             jax.ShapeDtypeStruct((n_params,), dtype))
    closed = jax.make_jaxpr(_wrap_output(f))(*specs)
    outs = closed.out_avals
    if len(outs) != 1:
        raise ModelTraceError(f"f(y, t, p) must return one array of shape ({n_vars},); it "
                              f"returned {len(outs)} values")
    out = outs[0]
    if tuple(out.shape) != (n_vars,):
        raise ModelTraceError(f"f(y, t, p) must return shape ({n_vars},) like y; it returned "
                              f"shape {tuple(out.shape)}")
    if np.dtype(out.dtype) != dtype:
        raise ModelTraceError(f"f(y, t, p) must return dtype {dtype.name} like y; it returned "
                              f"{np.dtype(out.dtype).name}")
    for c in closed.consts:
        if isinstance(c, jax.core.Tracer):
            raise ModelTraceError("f closes over a traced value (an array that is being "
                                  "transformed by jit/vmap/grad); pass it through params instead")
    return closed


def _twin_tables(tables: list[tuple[str, str, list[str]]]) -> list[str]:
    """Constant tables as a host array and, under CUDA, a __device__ array with the same values.

    One source serves g++, nvcc and NVRTC: the host pass of nvcc must not read a __device__
    variable, and device code cannot read a host one, so each side gets its own copy (each table
    is spelled once, as a macro) and ``rhs`` picks the right namespace by ``__CUDA_ARCH__``.
    """
    if not tables:
        return []
    out = [f"#define SHOAL_GENERATED_{name} {{{', '.join(values)}}}"
           for _, name, values in tables]
    out += ["#if !defined(__CUDA_ARCH__)", "namespace host {"]
    out += [f"static const {ctype} {name}[] = SHOAL_GENERATED_{name};"
            for ctype, name, _ in tables]
    out += ["}  // namespace host", "#endif",
            "#if defined(__CUDACC__) || defined(__CUDACC_RTC__)", "namespace device {"]
    out += [f"__device__ static const {ctype} {name}[] = SHOAL_GENERATED_{name};"
            for ctype, name, _ in tables]
    out += ["}  // namespace device", "#endif"]
    out += [f"#undef SHOAL_GENERATED_{name}" for _, name, _ in tables]
    return out


def generate_model(f, n_vars: int, n_params: int, dtype) -> GeneratedModel:
    """Trace ``f`` and print it as a C++ ``struct Model``."""
    closed = trace(f, n_vars, n_params, dtype)
    em = _Emitter()
    y = _Sym(np.array([f"y[{i}]" for i in range(n_vars)], dtype=object), dtype)
    t = _Sym(np.array("t", dtype=object), dtype)
    p = _Sym(np.array([f"p[{i}]" for i in range(n_params)], dtype=object).reshape(n_params),
             dtype)
    consts = [_const_sym(np.asarray(c)) for c in closed.consts]
    (out,) = _Translator(em).run(closed.jaxpr, consts, [y, t, p])
    body = list(em.lines)
    for i, e in enumerate(out.elems.flat):
        body.append(f"dy[{i}] = {em.render(e, out.dtype)};")
    indent = "    "
    if em.tables:
        # Device code must read the __device__ copy of a table and host code the host copy.
        body = ["#if defined(__CUDA_ARCH__)", "namespace tab = device;", "#else",
                "namespace tab = host;", "#endif", *body]
    source = "\n".join([
        "// Generated by shoal from a JAX function; do not edit.",
        "#include \"shoal/math.hpp\"",
        "",
        "namespace shoal_generated {",
        *_twin_tables(em.tables),
        "",
        "struct Model {",
        f"  static constexpr int n_vars = {n_vars};",
        f"  static constexpr int n_params = {n_params};",
        "  template <class T>",
        "  SHOAL_HD static void rhs(const T* y, const T& t, const T* p, T* dy) {",
        "    SHOAL_MATH_USING;",
        "    (void)y; (void)t; (void)p;",
        *(indent + line for line in body),
        "  }",
        "};",
        "",
        "}  // namespace shoal_generated",
        "",
    ])
    return GeneratedModel(source=source, n_vars=n_vars, n_params=n_params, dtype=np.dtype(dtype))


__all__ = ["GeneratedModel", "ModelTraceError", "generate_model", "trace"]
