"""A user's ``f`` as a model: traced once per signature, and what is derived from that trace.

Like ``jax.jit``, ``f`` is traced once per (function, n_vars, parameter layout, dtype): it is
keyed by identity, so rebinding a global it reads is not seen afterwards. A trace in which ``f``
closes over arrays an outer transformation is tracing is not kept: those arrays are inputs of
this call only. The structural Jacobian pattern
(``sparsity="auto"``) comes from the same generated model, compiled once more with
``shoal::ad::Tracer`` as its scalar: each state variable enters as the set {j}, every operation
returns the union of its operands' sets, and both branches of every select count, so ``f_i``
depending on ``y_j`` at all — whatever the numbers — puts (i, j) in the pattern, a superset of
every numerically nonzero Jacobian entry.
"""

from __future__ import annotations

import ctypes
import functools
import weakref

import jax
import numpy as np

from shoal import _jit
from shoal.ode import _codegen, _kernel_source
from shoal.ode._codegen.tracing import OUTPUT_SHAPES
from shoal.ode._options import SparsityPattern
from shoal.ode._params import ParamLayout
from shoal.ode._sparse import normalize_pattern

# f -> {(n_vars, parameter layout, dtype, extras): GeneratedModel}
_traced: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def generated_model(f, n_vars: int, params: int | ParamLayout, dtype,
                    extras: tuple[_codegen.ModelFunction, ...] = ()
                    ) -> tuple[_codegen.GeneratedModel, list]:
    """The C++ model generated from ``f`` (and the extra functions: jump, save, event) for these
    sizes and dtype (traced once per signature), and the traced arrays they close over
    (``_codegen.generate``)."""
    signature = (n_vars, params, np.dtype(dtype).name, extras)
    try:
        per_f = _traced.setdefault(f, {})
    except TypeError:  # not weak-referenceable: trace every time
        per_f = {}
    if signature in per_f:
        return per_f[signature], []
    model, closure = _codegen.generate(f, n_vars, params, dtype, extras)
    if not closure:
        per_f[signature] = model
    return model, closure


# f -> {(n_vars, parameter layout, dtype, extras): None or why f does not trace, and
#       ("reads", ..., leaf index): whether the functions read that leaf}
_accepted: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def traces_with(f, n_vars: int, layout: ParamLayout, dtype,
                extras: tuple[_codegen.ModelFunction, ...] = ()) -> str | None:
    """None when f (and the extra functions) trace to the shapes and dtype a model needs with
    the parameters read as ``layout``, else the reason (shapes only: nothing is generated)."""
    key = (n_vars, layout, np.dtype(dtype).name, extras)
    try:
        per_f = _accepted.setdefault(f, {})
    except TypeError:
        per_f = {}
    if key not in per_f:
        per_f[key] = None
        for kind, fn in [("rhs", f), *((e.kind, e.fn) for e in extras)]:
            try:
                _codegen.trace(fn, n_vars, layout, dtype, name=kind, shape=OUTPUT_SHAPES[kind])
            except Exception as err:  # noqa: BLE001 - any failure means "not this reading"
                per_f[key] = f"{kind}: {type(err).__name__}: {err}"
                break
    return per_f[key]


def reads_leaf(f, n_vars: int, layout: ParamLayout, dtype,
               extras: tuple[_codegen.ModelFunction, ...], index: int) -> bool:
    """Whether f or an extra function reads parameter leaf ``index`` at all (a leaf that a
    dict of parameters carries for another solve is never ambiguous). Conservative: passing
    the leaf into a nested call counts as reading it."""
    key = ("reads", n_vars, layout, np.dtype(dtype).name, extras, index)
    try:
        per_f = _accepted.setdefault(f, {})
    except TypeError:
        per_f = {}
    if key not in per_f:
        per_f[key] = _reads_leaf(f, n_vars, layout, dtype, extras, index)
    return per_f[key]


def _reads_leaf(f, n_vars, layout, dtype, extras, index) -> bool:
    dtype = np.dtype(dtype)
    slot = layout.slots[index]
    specs = (jax.ShapeDtypeStruct((n_vars,), dtype), jax.ShapeDtypeStruct((), dtype),
             jax.ShapeDtypeStruct((layout.n_params,), dtype),
             jax.ShapeDtypeStruct(slot.shape, slot.dtype))
    for fn in [f, *(e.fn for e in extras)]:
        def with_leaf(y, t, p, leaf, fn=fn):
            leaves = jax.tree_util.tree_leaves(layout.unflatten(p))
            leaves[index] = leaf
            return fn(y, t, jax.tree_util.tree_unflatten(layout.treedef, leaves))

        jaxpr = jax.make_jaxpr(with_leaf)(*specs).jaxpr
        leaf_var = jaxpr.invars[3]
        if any(v is leaf_var for eqn in jaxpr.eqns for v in eqn.invars) or any(
                v is leaf_var for v in jaxpr.outvars):
            return True
    return False


@functools.lru_cache(maxsize=256)
def structural_pattern(model: _codegen.GeneratedModel) -> np.ndarray:
    """Boolean (n, n), read-only: entry (i, j) when f_i structurally depends on y_j."""
    n = model.n_vars
    # Run once, so not worth optimising: -O0 compiles a large model's tracer 60x faster.
    source = _kernel_source.sparsity_tracer_source(model)
    lib = _jit.load_library(source, lambda path: ctypes.CDLL(str(path)), optimization="-O0")
    out = (ctypes.c_ubyte * (n * n))()
    lib.shoal_sparsity_pattern(out)
    pattern = np.frombuffer(bytes(out), dtype=np.uint8).reshape(n, n).astype(bool)
    pattern.setflags(write=False)
    return pattern


def detect_pattern(f, n_vars: int, n_params: int, dtype) -> np.ndarray:
    """Boolean (n, n): entry (i, j) when f_i structurally depends on y_j."""
    return structural_pattern(generated_model(f, n_vars, n_params, dtype)[0]).copy()


# sparsity=None (the default) uses the sparse solver where it measured faster than the dense LU
# (benchmarks/sparse_crossover.py): from this many variables, on patterns whose factors stay
# sparse. Below it the pattern is never detected, so small models compile nothing extra.
AUTO_SPARSE_MIN_VARS = 12
# ... and only where L + U (after the fill-reducing ordering) keeps at most this share of n².
AUTO_SPARSE_MAX_FILL = 0.5


def default_sparsity_choice(pattern: np.ndarray) -> bool:
    """Whether ``sparsity=None`` takes the sparse solver for this (n, n) pattern (diagonal
    included)."""
    from shoal.ode._sparse import analyze  # noqa: PLC0415 (the solver's analysis; cached there)

    n = pattern.shape[0]
    if n < AUTO_SPARSE_MIN_VARS:
        return False
    return analyze(pattern).nnz <= AUTO_SPARSE_MAX_FILL * n * n


def resolve_sparsity(model: _codegen.GeneratedModel, sparsity, stiff: bool = True,
                     mass: np.ndarray | None = None) -> SparsityPattern | None:
    """The pattern to compile: None (dense: ``"dense"``, a non-stiff method, or the default where
    the dense LU is as fast), the detected one (``"auto"``, or the default where the sparse
    solver is faster: ``default_sparsity_choice``), or the user's, checked to cover every
    structural nonzero of f. A mass matrix's pattern (``mass``, bool (n, n)) joins any pattern:
    the iteration matrix is M/(hγ) − J."""
    pattern = (sparsity if isinstance(sparsity, SparsityPattern)
               else _pattern_of(model, sparsity, stiff))
    if pattern is None or mass is None:
        return pattern
    return SparsityPattern(pattern.mask | mass)


def _pattern_of(model: _codegen.GeneratedModel, sparsity, stiff: bool) -> SparsityPattern | None:
    if isinstance(sparsity, str) and sparsity == "dense" or (sparsity is None and not stiff):
        return None
    n = model.n_vars
    if sparsity is None and n < AUTO_SPARSE_MIN_VARS:
        return None
    if sparsity is None:
        try:
            detected = structural_pattern(model) | np.eye(n, dtype=bool)
        except _jit.CompileError:
            return None  # no host compiler (a GPU-only machine): the dense LU needs no pattern
        return SparsityPattern(detected) if default_sparsity_choice(detected) else None
    detected = structural_pattern(model) | np.eye(n, dtype=bool)
    if isinstance(sparsity, str):  # "auto" (the record has checked the spelling)
        return SparsityPattern(detected)
    pattern = normalize_pattern(sparsity, n)
    missing = np.argwhere(detected & ~pattern)
    if missing.size:
        shown = ", ".join(f"({i}, {j})" for i, j in missing[:10])
        more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        raise ValueError(
            f"sparsity misses {len(missing)} structural nonzero(s) of the Jacobian of f: "
            f"(row, col) = {shown}{more}; f_i depends on y_j there. Add them, or pass "
            "sparsity='auto'")
    return SparsityPattern(pattern)
