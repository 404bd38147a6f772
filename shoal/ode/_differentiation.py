"""Differentiation of ensemble solves by continuous forward sensitivities.

``solve_ensemble`` is a ``jax.custom_jvp`` function with ``symbolic_zeros=True``: a plain call runs
the plain kernel and nothing else. A JVP with few differentiated entries (at most
``UNIT_COLUMNS``: y0's n, each own or shared parameter entry whose tangent is not a symbolic
zero) integrates the joint system [y, S] with a column per entry (y0: starting from I,
parameters: from 0) and returns ``dy = S · dθ``, a linear contraction that JAX transposes for
reverse mode: one joint solve serves jvp, jacfwd and grad alike. With more entries (a table),
the JVP is the plain solve plus ``_directional.directional``: a primitive linear in the
tangents, which forward mode evaluates with one column per tangent DIRECTION and reverse mode
transposes into columns per entry (in chunks). A shared parameter's tangent is the same for every
trajectory, so its cotangent sums the ensemble.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero

from shoal.ode import _codegen, _primitive
from shoal.ode._build import ModelBuild
from shoal.ode._directional import directional, unit_fits, unit_sensitivities, widths_of
from shoal.ode._kernel_source import Variant
from shoal.ode._options import SolveOptions


@dataclass(frozen=True)
class EnsembleProblem:
    """The static half of one solve: the generated model and the options (hashable: it keys
    jit caches). ``options.sparsity`` is resolved (None or a SparsityPattern)."""

    model: _codegen.GeneratedModel
    options: SolveOptions

    @property
    def n_vars(self) -> int:
        return self.model.n_vars

    @property
    def n_params(self) -> int:
        return self.model.n_params

    def run(self, y0, params, shared, t_span, weights, sens=None, directions=0,
            error_components=0, progress=None):
        o = self.options
        variant = Variant.of(o.method, o.lu_precision, o.sparsity, o.ordering, sens, directions)
        return _primitive.ensemble_solve(y0, params, shared, t_span, weights, progress,
                                         build=ModelBuild(self.model, variant), options=o,
                                         error_components=error_components)

    def parameter_columns(self, with_own: bool, with_shared: bool):
        """A unit-column sensitivity's parameter columns: p = [own, shared], so any choice is a
        range (True: all of them, False: none)."""
        n_own, n_params = self.model.n_own, self.n_params
        begin = 0 if with_own else n_own
        end = n_params if with_shared else n_own
        if begin == end:
            return False
        return True if (begin, end) == (0, n_params) else (begin, end)


def _solve_ensemble(problem: EnsembleProblem, y0, params, shared, t_span, weights, progress):
    return problem.run(y0, params, shared, t_span, weights, progress=progress)


solve_ensemble = jax.custom_jvp(_solve_ensemble, nondiff_argnums=(0,))

# Up to this many differentiated entries, one joint solve with a column per entry serves every
# JVP (its tangent is a contraction); beyond, a column per tangent direction.
UNIT_COLUMNS = 64


def _solve_ensemble_jvp(problem: EnsembleProblem, primals, tangents):
    y0, params, shared, t_span, weights, progress = primals
    dy0, dparams, dshared, dt_span, *_ = tangents  # error weights only select steps
    if not isinstance(dt_span, SymbolicZero):
        raise NotImplementedError(
            "differentiating shoal.ode.solve with respect to t_span is not supported; "
            "only y0 and params are differentiable")
    given = [not isinstance(d, SymbolicZero) for d in (dy0, dparams, dshared)]
    widths = widths_of(given, y0, params, shared[None])
    if not any(widths):
        out = problem.run(y0, params, shared, t_span, weights, progress=progress)
        return out, _zero_tangents(out)
    if sum(widths) <= UNIT_COLUMNS and unit_fits(problem, y0, widths):
        ys, S, stats = unit_sensitivities(problem, y0, params, shared, t_span, weights, widths,
                                          progress)
        per_trajectory = [dy0, dparams, dshared if not widths[2] else
                          jnp.broadcast_to(dshared, (y0.shape[0], shared.shape[-1]))]
        dtheta = jnp.concatenate([d.astype(y0.dtype) for d, w in zip(per_trajectory, widths,
                                                                     strict=True) if w], axis=1)
        out = (ys, *stats)
        return out, (jnp.einsum("nsci,nc->nsi", S, dtheta), *_zero_tangents(out)[1:])
    out = problem.run(y0, params, shared, t_span, weights, progress=progress)

    def one_direction(d, like):  # a symbolic zero becomes zeros, not a column to integrate
        return (d.astype(like.dtype) if not isinstance(d, SymbolicZero)
                else jnp.zeros_like(like))[None]

    dys = directional(problem, given, y0, params, shared[None], t_span[None], weights,
                      one_direction(dy0, y0), one_direction(dparams, params),
                      one_direction(dshared, shared)[:, None])[0]
    return out, (dys, *_zero_tangents(out)[1:])


def _zero_tangents(out):
    ys, *ints = out
    return (jnp.zeros_like(ys), *(np.zeros(i.shape, dtype=jax.dtypes.float0) for i in ints))


solve_ensemble.defjvp(_solve_ensemble_jvp, symbolic_zeros=True)
