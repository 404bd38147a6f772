"""A right-hand side closing over traced integer arrays (issue 24): DISCO-EB's background is a
dict with int64 leaves, closed over by f under jax.jit. They become run-time inputs like integer
params leaves: new values never recompile and results match the closed form."""

import jax
import jax.numpy as jnp
import numpy as np

from shoal.ode import solve

TS = jnp.linspace(0.0, 1.0, 3)
RATES = jnp.array([[1.0], [3.0]])


@jax.jit
def solve_with_background(background):
    def f(y, t, p):
        k = background["scale"][background["index"]] / background["count"]
        flag = background["on"]
        return -jnp.where(flag, k, 0.0) * y * p[0]

    return solve(f, jnp.ones((2, 3)), TS, RATES)


def _closed_form(background):
    k = np.asarray(background["scale"])[np.asarray(background["index"])]
    k = k / float(background["count"]) * bool(background["on"])
    return np.exp(-np.asarray(RATES) * k[None, :] * float(TS[-1]))


def _background(index):
    return {"scale": jnp.array([1.0, 2.0, 3.0]), "index": jnp.asarray(index, jnp.int64),
            "count": jnp.asarray(3, jnp.int32), "on": jnp.asarray(True)}


def test_traced_integer_and_boolean_closures_are_run_time_inputs():
    for index in ([2, 0, 1], [0, 0, 2]):  # new integer values: the same compiled kernel
        background = _background(index)
        got = solve_with_background(background)
        np.testing.assert_allclose(np.asarray(got[:, -1]), _closed_form(background), rtol=1e-7)
    off = dict(_background([2, 0, 1]), on=jnp.asarray(False))
    np.testing.assert_allclose(np.asarray(solve_with_background(off)[:, -1]), 1.0)


def test_gradient_beside_integer_closures_matches_central_differences():
    background = _background([2, 0, 1])

    def loss(scale):
        return jnp.sum(solve_with_background(dict(background, scale=scale))[:, -1] ** 2)

    scale = background["scale"]
    grad = np.asarray(jax.grad(loss)(scale))
    eps = 1e-6
    central = [(loss(scale.at[i].add(eps)) - loss(scale.at[i].add(-eps))) / (2 * eps)
               for i in range(3)]
    np.testing.assert_allclose(grad, np.asarray(central), rtol=1e-6)
