"""Vector-Jacobian products of a model's functions, as more model functions.

The adjoint (``include/shoal/ode/explicit_rk_adjoint.hpp``) needs ``wᵀ ∂f/∂y`` and
``wᵀ ∂f/∂p`` at every stage of every step, never a Jacobian, and the same of ``jump_fn`` at each
stop and of ``save_fn`` at each save. They come from JAX's own ``jax.vjp`` of the traced
function (so transposes are JAX's: a gather's is a scatter-add), and the code generator prints
the result like any model function, e.g. for f:

    vjp(const T* y, const T& t, const T* q, T* out)

(``jump_vjp``, ``save_vjp`` likewise), where ``q`` holds the model's ``n_params`` parameters
followed by the cotangent ``w`` of the function's output; ``wᵀ ∂/∂y`` is written to
``out[:n_vars]`` and ``wᵀ ∂/∂p`` *added* to ``out[n_vars:n_vars + n_params]``, where the adjoint
sums it over a whole backward sweep: the cotangent of a table read is a few additions at run-time
indices (scattered.py), never a pass over the table. Packing w behind p keeps the signature of
every other model function. The parameters are the
model's whole ``p``: the layout's leaves and the arrays the functions close over under an outer
transformation (``model_struct.generate``), so their cotangents are the closures' too.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def _on_whole_p(fn, n_layout: int, closure_slots: dict[int, tuple[int, tuple]]):
    """The function of (y, t, p) that ``fn`` computes, with its traced closures read from the
    model's whole p (so that they are differentiated rather than captured)."""

    def on_whole_p(y, t, p):
        consts = [p[offset:offset + int(np.prod(shape))].reshape(shape)
                  if i in closure_slots else c
                  for i, c in enumerate(fn.consts)
                  for offset, shape in [closure_slots.get(i, (0, ()))]]
        (out,) = jax.core.eval_jaxpr(fn.jaxpr, consts, y, t, p[:n_layout])
        return out

    return on_whole_p


def vjp_jaxpr(fn, n_vars: int, n_layout: int, closure_slots: dict[int, tuple[int, tuple]],
              n_params: int, dtype):
    """The closed jaxpr of (y, t, q) -> [wᵀ g_y, wᵀ g_p], q = [p (n_params), w (m)], for a
    model function g whose output has m entries.

    ``fn`` is g's closed jaxpr on (y, t, p[:n_layout]); ``closure_slots`` maps the index of
    each of its consts that is a traced array to (offset in p, shape): those become inputs
    here, read from p, so that they are differentiated rather than captured."""
    dtype = np.dtype(dtype)
    out_shape = tuple(fn.out_avals[0].shape)
    m = int(np.prod(out_shape))
    f_full = _on_whole_p(fn, n_layout, closure_slots)

    def vjp(y, t, q):
        p, w = q[:n_params], q[n_params:].reshape(out_shape)
        _, pull = jax.vjp(lambda y, p: f_full(y, t, p), y, p)
        y_bar, p_bar = pull(w)
        return jnp.concatenate([y_bar, p_bar])

    specs = (jax.ShapeDtypeStruct((n_vars,), dtype), jax.ShapeDtypeStruct((), dtype),
             jax.ShapeDtypeStruct((n_params + m,), dtype))
    return jax.make_jaxpr(vjp)(*specs)


def jvp_vjp_jaxpr(fn, n_vars: int, n_layout: int, closure_slots: dict[int, tuple[int, tuple]],
                  n_params: int, dtype):
    """The closed jaxpr of (y, t, q) -> [∂/∂y, ∂/∂p of wᵀ (f_y v + f_t τ)], q = [p (n_params),
    v (n_vars), τ (1), w (n_vars)]: the second-order product a Rosenbrock step's adjoint needs
    (its iteration matrix and ∂f/∂t depend on y and p; rosenbrock_adjoint.hpp)."""
    dtype = np.dtype(dtype)
    f_full = _on_whole_p(fn, n_layout, closure_slots)

    def product(y, t, q):
        p = q[:n_params]
        v = q[n_params:n_params + n_vars]
        tau = q[n_params + n_vars]
        w = q[n_params + n_vars + 1:]

        def directional(y, p):
            return jax.jvp(lambda y, t: f_full(y, t, p), (y, t), (v, tau))[1]

        _, pull = jax.vjp(directional, y, p)
        y_bar, p_bar = pull(w)
        return jnp.concatenate([y_bar, p_bar])

    specs = (jax.ShapeDtypeStruct((n_vars,), dtype), jax.ShapeDtypeStruct((), dtype),
             jax.ShapeDtypeStruct((n_params + 2 * n_vars + 1,), dtype))
    return jax.make_jaxpr(product)(*specs)
