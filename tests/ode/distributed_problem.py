"""The ensemble test_distributed.py solves in 2 processes and in one: Robertson with a spread of
rate constants (stiff, Rodas5P, joint sensitivity solves under the gradient)."""

import jax.numpy as jnp
import numpy as np

N = 24  # 6 trajectories per device on 4 devices


def rhs(y, t, p):
    k1, k2, k3 = p[0], p[1], p[2]
    return jnp.stack([-k1 * y[0] + k3 * y[1] * y[2],
                      k1 * y[0] - k2 * y[1] ** 2 - k3 * y[1] * y[2],
                      k2 * y[1] ** 2])


def save_times():
    return jnp.asarray([0.0, 1.0, 10.0, 100.0])


def ensemble():
    rng = np.random.default_rng(7)
    y0 = np.tile([1.0, 0.0, 0.0], (N, 1))
    params = np.tile([0.04, 3e7, 1e4], (N, 1)) * rng.uniform(0.5, 2.0, (N, 3))
    return y0, params


def loss_of(solve):
    def loss(params, y0):
        ys, _ = solve(y0, params)
        return jnp.sum(ys[:, -1, 2] ** 2) + jnp.sum(ys[:, 1, 0])

    return loss
