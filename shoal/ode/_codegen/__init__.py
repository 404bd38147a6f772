"""Translate a JAX right-hand side ``f(y, t, p)`` into a C++ model struct.

``f`` is traced once with :func:`jax.make_jaxpr` on one trajectory's shapes (``tracing``). The
jaxpr is then evaluated symbolically (``walker``): every array value becomes a NumPy object array
whose elements are either Python constants or the names of C++ scalar locals (``values``).
Equations whose inputs are all constant are folded by JAX; every other equation is translated by
the rule its primitive maps to in ``rules``:

- elementwise primitives emit one statement per element (``elementwise``);
- data-movement primitives (slice, gather, reshape, concatenate, ...) emit nothing at all - they
  are evaluated by JAX itself on arrays of element ids, so their semantics are JAX's by
  construction (``data_movement``);
- reads at indices computed at run time (gather, dynamic_slice) index a static table when the
  array is constant, else a local array (``indexing``), and ``jnp.searchsorted`` into a constant
  array is one binary search (``sorted_search``), so the source does not grow with a table;
- writes (scatter, dynamic_update_slice) move elements at constant indices and select over the
  elements they may land on at run-time ones (``scatters``);
- small dense linear algebra (LU with run-time pivoting, triangular solves) is unrolled
  (``linalg``);
- reductions fold their elements pairwise (``reductions``);
- large contractions with a constant matrix become loops over a static table so the source stays
  bounded (``contractions``);
- short loops are unrolled, longer ones and while loops whose condition depends on run-time
  values become C++ loops over mutable carries (``control_flow``, ``loops``), and ``lax.cond``
  evaluates every branch and selects.

The result (``model_struct``) is ``template <class T, class Params = const T*> static void
rhs(const T* y, const T& t, Params p, T* dy)``, instantiable with float, double, dual numbers or a
sparsity tracer; ``p`` is a pointer or, in a dual sweep, the parameters read in place
(include/shoal/ad/param_reads.hpp).
"""

from shoal.ode._codegen.contractions import DOT_TABLE_THRESHOLD as DOT_TABLE_THRESHOLD
from shoal.ode._codegen.loops import MAX_UNROLLED_STATEMENTS as MAX_UNROLLED_STATEMENTS
from shoal.ode._codegen.model_struct import (
    GeneratedModel,
    ModelFunction,
    generate,
    generate_model,
)
from shoal.ode._codegen.tracing import ModelTraceError, trace

__all__ = [
    "GeneratedModel",
    "ModelFunction",
    "ModelTraceError",
    "generate",
    "generate_model",
    "trace",
]
