"""Differentiation of ensemble solves by continuous forward sensitivities.

``solve_ensemble`` is a ``jax.custom_jvp`` function with ``symbolic_zeros=True``: a plain call runs
the plain kernel and nothing else; a JVP integrates the joint system [y, S] for exactly the inputs
whose tangents are not symbolic zeros (y0: n columns starting from I, params: n_params columns
starting from 0) and returns ``dy = S · dθ``, a linear contraction, so JAX transposes it for
reverse mode (grad, vjp, jacrev) without any adjoint solve.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero

from shoal.ode import _primitive


@dataclass(frozen=True)
class SolveConfig:
    """Static options of one solve (hashable: it keys jit caches)."""

    f: Any
    n_vars: int
    n_params: int
    dtype: str
    stepper: str
    rtol: float
    atol: float
    first_step: float
    pcoeff: float
    icoeff: float
    dcoeff: float
    max_steps: int
    sens_error_control: bool
    sparse: tuple[str, int, bytes] | None = None  # (ordering, n, pattern bytes)

    def run(self, y0, params, t_span, weights, sens=None, n_error=0):
        variant = _primitive.Variant(self.stepper, sens, self.sparse)
        model = _primitive.generated_model(self.f, self.n_vars, self.n_params, self.dtype)
        return _primitive.ensemble_solve(
            y0, params, t_span, weights, build=_primitive.ModelBuild(model, variant),
            rtol=self.rtol,
            atol=self.atol,
            first_step=self.first_step, pcoeff=self.pcoeff, icoeff=self.icoeff,
            dcoeff=self.dcoeff, max_steps=self.max_steps, n_error=n_error)


def _joint_solve(cfg: SolveConfig, sens, n_error, z0, params, t_span, weights):
    return cfg.run(z0, params, t_span, weights, sens=sens, n_error=n_error)


# The joint [y, S] solve has no derivative rule of its own: differentiating it would be second
# order (jax.hessian, a gradient of a gradient), which is not implemented. Its JVP raises a clear
# error instead of letting JAX reach the bare FFI call.
joint_solve = jax.custom_jvp(_joint_solve, nondiff_argnums=(0, 1, 2))


@joint_solve.defjvp
def _joint_solve_jvp(cfg, sens, n_error, primals, tangents):
    raise NotImplementedError(
        "shoal.ode.solve supports first-order derivatives (jvp, grad, jacfwd, jacrev); "
        "second-order ones (jax.hessian, or differentiating a gradient) are not implemented")


def _is_zero(t) -> bool:
    return isinstance(t, SymbolicZero)


def _solve_ensemble(cfg: SolveConfig, y0, params, t_span, weights):
    return cfg.run(y0, params, t_span, weights)


solve_ensemble = jax.custom_jvp(_solve_ensemble, nondiff_argnums=(0,))


def _solve_ensemble_jvp(cfg: SolveConfig, primals, tangents):
    y0, params, t_span, weights = primals
    dy0, dparams, dt_span, _ = tangents  # error weights only select steps: no derivative
    if not _is_zero(dt_span):
        raise NotImplementedError(
            "differentiating shoal.ode.solve with respect to t_span is not supported; "
            "only y0 and params are differentiable")
    with_y0 = not _is_zero(dy0)
    with_p = not _is_zero(dparams) and cfg.n_params > 0
    if not (with_y0 or with_p):
        out = cfg.run(y0, params, t_span, weights)
        return out, _zero_tangents(out)

    n_traj, n = y0.shape
    blocks, dtheta = [y0], []
    if with_y0:
        blocks.append(jnp.broadcast_to(jnp.eye(n, dtype=y0.dtype).reshape(1, n * n),
                                       (n_traj, n * n)))
        dtheta.append(dy0)
    if with_p:
        blocks.append(jnp.zeros((n_traj, n * cfg.n_params), y0.dtype))
        dtheta.append(dparams)
    z0 = jnp.concatenate(blocks, axis=1)
    m = (n if with_y0 else 0) + (cfg.n_params if with_p else 0)
    # A sensitivity component is weighted like its state component (0 still drops it).
    joint_weights = jnp.tile(weights, (1, 1 + m))
    n_error = 0 if cfg.sens_error_control else n
    ys_joint, accepted, rejected, status = joint_solve(cfg, (with_y0, with_p), n_error, z0,
                                                       params, t_span, joint_weights)
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


@functools.partial(jax.jit, static_argnames=("cfg", "n_traj"))
def run(y0, params, t_span, weights, *, cfg: SolveConfig, n_traj: int):
    """Broadcast the inputs to the ensemble and solve; one jitted dispatch when called eagerly.

    y0 (n,) or (N|1, n), params (n_p,) or (N|1, n_p), weights None, (n,) or (N|1, n).
    """

    def ensemble(x):  # explicit rows, since the trailing size may be 0
        rows = x.shape[0] if x.ndim == 2 else 1
        return jnp.broadcast_to(x.reshape(rows, x.shape[-1]), (n_traj, x.shape[-1]))

    weights = jnp.ones((n_traj, cfg.n_vars), y0.dtype) if weights is None else ensemble(weights)
    return solve_ensemble(cfg, ensemble(y0), ensemble(params), t_span, weights)
