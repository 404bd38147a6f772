"""Rosenbrock Jacobians by dual-number sweeps of at most 16 directions, as few and as even as that
allows (ad/dual.hpp: sweep_width): 15 coupled variables and t are one sweep of 16, 16 of them two
sweeps of 9; the sparse solver sweeps its colours and t the same way. On both sides of that
threshold, dense and sparse, grad (forward columns), jacrev (the adjoint) and jacfwd agree to
1e-10 with a shared and a per-member leaf, with and without y0 differentiated (on the plain
solve's steps: sens_error_control off, a given first step).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shoal.ode import solve

jax.config.update("jax_enable_x64", True)


def _model(n):
    weight = np.cos(2.0 * np.arange(n)) / n
    own = np.sin(np.arange(n) + 0.5) / n

    def f(y, t, p):
        # Every variable coupled to every other (through the weighted sum; a dense Jacobian of
        # rank one plus a diagonal): n colours, n + 1 directions per Jacobian. A dense matrix
        # would do the same with n² products in every dual-number sweep: 5 s a compile.
        return (-p["k"] * y + p["scale"][0] * jnp.tanh(jnp.dot(weight, y) + own * y)
                - 0.1 * y ** 3)

    return f


@pytest.mark.parametrize("n", [15, 16])  # one sweep of 16 directions; two sweeps of 9
@pytest.mark.parametrize("sparsity", ["dense", "auto"])
def test_grad_jacrev_and_jacfwd_agree_on_both_sides_of_one_sweep(n, sparsity):
    f = _model(n)
    members = 8
    y0 = jnp.linspace(0.2, 1.4, members)[:, None] * jnp.cos(jnp.arange(n))[None, :]
    k = jnp.linspace(0.5, 1.5, members)
    scale = jnp.array([0.8])
    ts = jnp.array([0.0, 0.3, 1.0])

    def saves(scale, k, y0, adjoint):
        ys = solve(f, y0, ts, {"scale": scale, "k": k}, params_axes={"scale": None, "k": 0},
                   method="rodas5p", rtol=1e-9, atol=1e-9, sparsity=sparsity,
                   sens_error_control=False, first_step=1e-3, adjoint=adjoint)
        return ys[:, -1, :2].ravel()

    for argnums in ((0, 1), (0, 1, 2)):
        forward = jax.jacfwd(saves, argnums)(scale, k, y0, False)
        reverse = jax.jacrev(saves, argnums)(scale, k, y0, True)
        grad = jax.grad(lambda *a: jnp.sum(saves(*a, False)), argnums)(scale, k, y0)
        for r, fw, g in zip(reverse, forward, grad, strict=True):
            scale_of = float(jnp.max(jnp.abs(fw)))
            np.testing.assert_allclose(r, fw, rtol=1e-10, atol=1e-12 * scale_of)
            np.testing.assert_allclose(g, jnp.sum(fw, axis=0), rtol=1e-10,
                                       atol=1e-12 * scale_of)
