"""An equinox module as params (issue 24): its function fields (an MLP's activation) are
compiled in as static, its arrays are run-time inputs; values and gradients against diffrax."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shoal.ode import solve

TS = jnp.linspace(0.0, 1.0, 4)
Y0 = jnp.array([[1.0, 0.5], [0.2, -0.3], [-1.0, 0.8]])


def vector_field(y, t, p):
    return p["mlp"](y) - p["decay"] * y


def _mlp():
    return eqx.nn.MLP(2, 2, 8, 2, activation=jax.nn.softplus, key=jax.random.PRNGKey(0),
                      dtype=jnp.float64)


def _diffrax(params):
    def one(y0):
        term = diffrax.ODETerm(lambda t, y, args: vector_field(y, t, params))
        sol = diffrax.diffeqsolve(term, diffrax.Tsit5(), 0.0, 1.0, 1e-3, y0,
                                  saveat=diffrax.SaveAt(ts=TS),
                                  stepsize_controller=diffrax.PIDController(rtol=1e-11,
                                                                            atol=1e-13))
        return sol.ys

    return jax.vmap(one)(Y0)


@pytest.mark.parametrize("method", ["tsit5", "rodas5p"])
def test_an_equinox_mlp_in_params_matches_diffrax_with_gradients(method):
    params = {"mlp": _mlp(), "decay": jnp.asarray(0.7)}
    ys = solve(vector_field, Y0, TS, params, method=method, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.asarray(ys), np.asarray(_diffrax(params)), rtol=1e-7,
                               atol=1e-9)

    def loss(solver, params):
        return jnp.sum(solver(params) ** 2)

    ours = eqx.filter_grad(lambda p: loss(lambda q: solve(
        vector_field, Y0, TS, q, method=method, rtol=1e-10, atol=1e-12), p))(params)
    peer = eqx.filter_grad(lambda p: loss(_diffrax, p))(params)
    for a, b in zip(jax.tree_util.tree_leaves(eqx.filter(ours, eqx.is_array)),
                    jax.tree_util.tree_leaves(eqx.filter(peer, eqx.is_array)), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=1e-8)


def test_a_non_numeric_leaf_names_equinox_partition():
    with pytest.raises(TypeError, match=r"params\['label'\].*equinox.partition"):
        solve(vector_field, Y0, TS, {"mlp": _mlp(), "decay": 0.7, "label": object()})
