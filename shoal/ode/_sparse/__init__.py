"""Host-side analysis of a Jacobian sparsity pattern, and emission of its sparse direct solver.

Everything here runs once, on the host, when a kernel is built; nothing here imports JAX.

Pipeline (``analyze``, in ``analysis``):

1. ``normalize_pattern`` (``pattern``) turns what the user passed as ``sparsity=`` into an
   ``(n, n)`` boolean mask with the diagonal set (the iteration matrix ``I/(h*gamma) - J`` always
   has it).
2. ``colour_columns`` (``colouring``) colours the column-intersection graph greedily (best of
   several vertex orderings, verified orthogonal): one dual-number sweep per colour recovers the
   Jacobian.
3. ``amd_ordering`` (``ordering``: SuiteSparse AMD via cvxopt, on ``S + S^T``; kept only when it
   fills less than the natural order) or the natural ordering gives a symmetric permutation
   ``P S P^T``, which keeps every diagonal entry on the diagonal; there is no pivoting, so the
   structure is fixed at compile time and the same in every thread.
4. ``symbolic_lu`` (``symbolic``) eliminates the permuted pattern bit-per-entry: exactly the
   entries an unpivoted numeric LU touches, no more and no less.
5. One CSR image of ``L + U`` (L strictly left of the diagonal with unit diagonal implied, U from
   the diagonal rightwards), factorised in place, up-looking, row by row: a ``SparseStructure``
   (``structure``).

``SparseStructure.emit_cpp`` (``emission``) emits a C++17 struct (host and device) with the
factorisation and both triangular solves either as straight-line code with literal slots or as
loops over index tables. Both perform the same floating-point operations in the same order, so
they agree bit for bit (and with ``SparseStructure.factor_reference`` / ``solve_reference``, the
same sequence in Python, when the C++ is compiled without floating-point contraction).
"""

from shoal.ode._sparse.analysis import analyze
from shoal.ode._sparse.colouring import colour_columns
from shoal.ode._sparse.emission import MAX_UNROLLED_SUBSTITUTIONS, MAX_UNROLLED_UPDATES
from shoal.ode._sparse.ordering import ORDERINGS, amd_ordering
from shoal.ode._sparse.pattern import normalize_pattern
from shoal.ode._sparse.structure import SparseStructure
from shoal.ode._sparse.symbolic import symbolic_lu

__all__ = [
    "MAX_UNROLLED_SUBSTITUTIONS",
    "MAX_UNROLLED_UPDATES",
    "ORDERINGS",
    "SparseStructure",
    "amd_ordering",
    "analyze",
    "colour_columns",
    "normalize_pattern",
    "symbolic_lu",
]
