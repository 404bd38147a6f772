"""The one table from a primitive's name to its translation.

A rule is ``rule(walker, eqn, ins) -> list[Sym]`` (one value per output). The walker applies it
when an equation is neither call-like (inlined) nor foldable (all inputs constant); a primitive
with no rule is named in a NotImplementedError with the user's source line.
"""

from __future__ import annotations

from collections.abc import Callable

from shoal.ode._codegen import (
    control_flow,
    data_movement,
    elementwise,
    indexing,
    linalg,
    reductions,
    scans,
    scatters,
    sorted_search,
)
from shoal.ode._codegen.contractions import dot_general

Rule = Callable[..., list]


def _elementwise(walker, eqn, ins):
    return [elementwise.elementwise(walker, eqn, ins)]


def _reduce(walker, eqn, ins):
    return [reductions.reduce(walker, eqn, ins[0])]


def _dot_general(walker, eqn, ins):
    return [dot_general(walker, eqn, ins[0], ins[1])]


def _cumulative(walker, eqn, ins):
    return [scans.cumulative(walker, eqn, ins[0])]


def _arg_reduction(walker, eqn, ins):
    return [scans.arg_reduction(walker, eqn, ins[0])]


def _iota(walker, eqn, ins):
    return walker.fold(eqn, ins)


def _nested(translate):
    """A rule translating body jaxprs, with the equation as their enclosing call."""

    def rule(walker, eqn, ins):
        with walker.inside(eqn):
            return translate(walker, eqn, ins)

    return rule


RULES: dict[str, Rule] = {
    **dict.fromkeys(elementwise.PRIMITIVES, _elementwise),
    # after elementwise: select_n and copy are data movement (select_n with a constant predicate)
    **dict.fromkeys(data_movement.DATA_OPERANDS, data_movement.move),
    **dict.fromkeys(reductions.PRIMITIVES, _reduce),
    **dict.fromkeys(scans.CUMULATIVE, _cumulative),
    **dict.fromkeys(scans.ARG_REDUCTIONS, _arg_reduction),
    "sort": scans.sort,
    # at run-time indices; with constant ones they are data movement
    "gather": indexing.gather,
    "dynamic_slice": indexing.dynamic_slice,
    **dict.fromkeys(scatters.PRIMITIVES, scatters.scatter),
    "dynamic_update_slice": scatters.dynamic_update_slice,
    "lu": linalg.lu,
    "lu_pivots_to_permutation": linalg.lu_pivots_to_permutation,
    "triangular_solve": linalg.triangular_solve,
    "custom_linear_solve": _nested(linalg.custom_linear_solve),
    "dot_general": _dot_general,
    "iota": _iota,
    "scan": _nested(control_flow.scan),
    "while": _nested(control_flow.while_loop),
    "cond": _nested(control_flow.cond),
}

# Library functions recognised by their jit's name and translated whole; a rule returns None to
# have the body inlined instead.
NAMED_CALLS: dict[str, Rule] = {
    "searchsorted": sorted_search.searchsorted,
}
