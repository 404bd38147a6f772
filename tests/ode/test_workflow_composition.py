"""The workflow options together: windows, stops with jumps, save_fn, an event, first steps and
max_step, with both methods, the sparse solver, jit, vmap and gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shoal.ode import Event, Status, solve

jax.config.update("jax_enable_x64", True)


def chain(y, t, p):  # a decay chain A -> B -> C -> D dosed into A, with a forcing switched at 2
    k = p["k"]
    rates = k * y[:3]
    drive = jnp.where(t < 2.0, p["drive"], 0.0)
    return jnp.stack([drive - rates[0], rates[0] - rates[1], rates[1] - rates[2], rates[2]])


def dose(y, t, p):
    return y.at[0].add(p["dose"])


def observed(y, t, p):
    return jnp.stack([y[1] + y[2], y[3] / (1.0 + t)])


EVENT = Event(lambda y, t, p: y[3] - 0.8, terminal=False, direction=1)
T = jnp.array([[0.0, 1.0, 2.0, 4.0, 6.0], [0.5, 1.5, 3.0, 5.0, 8.0]])
Y0 = jnp.array([[1.0, 0.0, 0.0, 0.0], [0.5, 0.2, 0.0, 0.0]])


def params(k0):
    return {"k": jnp.stack([jnp.array([k0, 0.7, 0.4]), jnp.array([0.9, k0, 0.3])]),
            "drive": jnp.array([0.3, 0.1]), "dose": jnp.array([0.5, 1.0])}


def run(k0, method, sparsity=None):
    return solve(chain, Y0, T, params(k0), tstops=jnp.array([[2.0, 3.0], [2.0, 6.5]]),
                 jump_fn=dose, save_fn=observed, event=EVENT, first_step=jnp.array([1e-3, 1e-5]),
                 max_step=0.7, method=method, sparsity=sparsity, rtol=1e-10, atol=1e-12,
                 return_stats=True)


@pytest.mark.parametrize("method", ["tsit5", "rodas5p"])
def test_everything_together_matches_the_pieces_and_differentiates(method):
    ys, st = run(1.2, method)
    assert ys.shape == (2, 5, 2)
    assert st["status"].tolist() == [Status.SUCCESS, Status.SUCCESS]
    # Member by member, without save_fn and the event: the same trajectory.
    for i in range(2):
        p_i = jax.tree_util.tree_map(lambda x, i=i: x[i], params(1.2))
        full = solve(chain, Y0[i], T[i], p_i, params_axes=None,
                     tstops=jnp.array([[2.0, 3.0], [2.0, 6.5]])[i], jump_fn=dose,
                     method=method, rtol=1e-10, atol=1e-12)[0]
        expected = jax.vmap(observed, in_axes=(0, 0, None))(full, T[i], p_i)
        np.testing.assert_allclose(np.asarray(ys[i]), np.asarray(expected), rtol=1e-7,
                                   atol=1e-9)
    assert np.all(np.isfinite(np.asarray(st["event_time"])))

    def loss(k0):
        ys, st = run(k0, method)
        return jnp.sum(ys ** 2) + jnp.sum(st["event_time"])

    grad = float(jax.grad(loss)(1.2))
    eps = 1e-5
    fd = (float(loss(1.2 + eps)) - float(loss(1.2 - eps))) / (2 * eps)
    assert grad == pytest.approx(fd, rel=1e-5)


def test_the_sparse_solver_and_jit_and_vmap_give_the_same_answers():
    dense_ys, dense_st = run(1.2, "rodas5p")
    sparse_ys, sparse_st = jax.jit(lambda k: run(k, "rodas5p", "auto"))(1.2)
    np.testing.assert_allclose(np.asarray(sparse_ys), np.asarray(dense_ys), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(np.asarray(sparse_st["event_time"]),
                               np.asarray(dense_st["event_time"]), rtol=1e-8)
    batched_ys, batched_st = jax.vmap(lambda k: run(k, "tsit5"))(jnp.array([1.2, 1.5]))
    for b, k0 in enumerate([1.2, 1.5]):
        ys, st = run(k0, "tsit5")
        np.testing.assert_array_equal(np.asarray(batched_ys[b]), np.asarray(ys))
        np.testing.assert_array_equal(np.asarray(batched_st["event_time"][b]),
                                      np.asarray(st["event_time"]))
