"""Differentiation of ensemble solves by continuous forward sensitivities.

``solve_ensemble`` is a ``jax.custom_jvp`` function with ``symbolic_zeros=True``: a plain call runs
the plain kernel and nothing else; a JVP integrates the joint system [y, S] for exactly the inputs
whose tangents are not symbolic zeros (y0: n columns starting from I; the per-trajectory and the
shared parameters: one column per entry, starting from 0) and returns ``dy = S · dθ``, a linear
contraction, so JAX transposes it for reverse mode (grad, vjp, jacrev) without any adjoint solve.
A shared parameter's tangent is the same for every trajectory (broadcast), so its cotangent is
summed over the ensemble.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero

from shoal.ode import _codegen, _primitive
from shoal.ode._build import ModelBuild
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

    def run(self, y0, params, shared, t_span, weights, sens=None, error_components=0):
        o = self.options
        variant = Variant.of(o.method, o.lu_precision, o.sparsity, o.ordering, sens)
        return _primitive.ensemble_solve(y0, params, shared, t_span, weights,
                                         build=ModelBuild(self.model, variant), options=o,
                                         error_components=error_components)


def _joint_solve(problem: EnsembleProblem, sens, error_components, z0, params, shared, t_span,
                 weights):
    return problem.run(z0, params, shared, t_span, weights, sens=sens,
                       error_components=error_components)


# The joint [y, S] solve has no derivative rule of its own: differentiating it would be second
# order (jax.hessian, a gradient of a gradient), which is not implemented. Its JVP raises a clear
# error instead of letting JAX reach the bare FFI call.
joint_solve = jax.custom_jvp(_joint_solve, nondiff_argnums=(0, 1, 2))


@joint_solve.defjvp
def _joint_solve_jvp(problem, sens, error_components, primals, tangents):
    raise NotImplementedError(
        "shoal.ode.solve supports first-order derivatives (jvp, grad, jacfwd, jacrev); "
        "second-order ones (jax.hessian, or differentiating a gradient) are not implemented")


def _is_zero(t) -> bool:
    return isinstance(t, SymbolicZero)


def _solve_ensemble(problem: EnsembleProblem, y0, params, shared, t_span, weights):
    return problem.run(y0, params, shared, t_span, weights)


solve_ensemble = jax.custom_jvp(_solve_ensemble, nondiff_argnums=(0,))


def _parameter_columns(problem: EnsembleProblem, with_own: bool, with_shared: bool):
    """The sensitivity variant's parameter columns: p = [own, shared], so any choice is a range
    (True: all of them, False: none)."""
    n_own, n_params = problem.model.n_own, problem.n_params
    begin = 0 if with_own else n_own
    end = n_params if with_shared else n_own
    if begin == end:
        return False
    return True if (begin, end) == (0, n_params) else (begin, end)


def _solve_ensemble_jvp(problem: EnsembleProblem, primals, tangents):
    y0, params, shared, t_span, weights = primals
    dy0, dparams, dshared, dt_span, _ = tangents  # error weights only select steps
    if not _is_zero(dt_span):
        raise NotImplementedError(
            "differentiating shoal.ode.solve with respect to t_span is not supported; "
            "only y0 and params are differentiable")
    n_traj, n = y0.shape
    with_y0 = not _is_zero(dy0)
    with_own = not _is_zero(dparams) and problem.model.n_own > 0
    with_shared = not _is_zero(dshared) and problem.model.n_shared > 0
    if not (with_y0 or with_own or with_shared):
        out = problem.run(y0, params, shared, t_span, weights)
        return out, _zero_tangents(out)

    blocks, dtheta = [y0], []
    if with_y0:
        blocks.append(jnp.broadcast_to(jnp.eye(n, dtype=y0.dtype).reshape(1, n * n),
                                       (n_traj, n * n)))
        dtheta.append(dy0)
    if with_own:
        dtheta.append(dparams)
    if with_shared:
        dtheta.append(jnp.broadcast_to(dshared, (n_traj, dshared.shape[-1])))
    n_param_cols = sum(d.shape[-1] for d in dtheta) - (n if with_y0 else 0)
    if n_param_cols:
        blocks.append(jnp.zeros((n_traj, n * n_param_cols), y0.dtype))
    z0 = jnp.concatenate(blocks, axis=1)
    m = (n if with_y0 else 0) + n_param_cols
    # A sensitivity component is weighted like its state component (0 still drops it).
    joint_weights = jnp.tile(weights, (1, 1 + m))
    # Without sensitivity error control the norm covers the state alone, so the joint solve
    # takes the plain solve's steps.
    error_components = 0 if problem.options.sens_error_control else n
    sens = (with_y0, _parameter_columns(problem, with_own, with_shared))
    ys_joint, accepted, rejected, status = joint_solve(
        problem, sens, error_components, z0, params, shared, t_span, joint_weights)
    n_save = ys_joint.shape[1]
    ys = ys_joint[..., :n]
    S = ys_joint[..., n:].reshape(n_traj, n_save, m, n)
    dtheta = jnp.concatenate(
        [d.astype(y0.dtype) if not isinstance(d, SymbolicZero) else d for d in dtheta], axis=1)
    dys = jnp.einsum("nsci,nc->nsi", S, dtheta)
    out = (ys, accepted, rejected, status)
    return out, (dys, *_zero_tangents(out)[1:])


def _zero_tangents(out):
    ys, *ints = out
    return (jnp.zeros_like(ys), *(np.zeros(i.shape, dtype=jax.dtypes.float0) for i in ints))


solve_ensemble.defjvp(_solve_ensemble_jvp, symbolic_zeros=True)
