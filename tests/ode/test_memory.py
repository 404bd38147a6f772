"""A CPU solve whose outputs cannot fit in memory is refused before it runs (_memory.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shoal.ode
from shoal.ode import _memory


def decay(y, t, p):
    return -p[0] * y


def test_the_available_memory_is_known_on_linux():
    available = _memory.available_bytes()
    assert isinstance(available, int) and available > 0


def test_an_ensemble_too_large_for_memory_raises_with_the_size_and_the_advice():
    # 10^7 trajectories x 10^4 saves x 8 bytes = 800 GB, never allocated: the inputs are
    # abstract and the check comes before anything is compiled.
    N, n_save = 10**7, 10**4
    t_span = jnp.linspace(0.0, 1.0, n_save)
    run = jax.jit(lambda y0, p: shoal.ode.solve(decay, y0, t_span, p))
    rows = jax.ShapeDtypeStruct((N, 1), np.float64)
    with pytest.raises(MemoryError, match=r"the solution would need 800\.\d GB .*10000000 "
                                          r"trajectories x 10000 saves x 1 numbers x 8 bytes.*"
                                          r"GB of memory available.*save fewer times.*save_fn="):
        run.lower(rows, rows)


def test_eager_solves_are_checked_and_the_joint_solve_counts_its_sensitivities(monkeypatch):
    # Shapes no other test compiles: the check runs when a solve is lowered, once per shape.
    N, n_save = 101, 203
    y0 = jnp.ones((N, 1))
    k = jnp.full((N, 1), 0.5)
    t_span = jnp.linspace(0.0, 1.0, n_save)
    plain = N * n_save * 8  # ys; the joint solve saves y and dy/dk: twice as much
    monkeypatch.setattr(_memory, "available_bytes", lambda: plain // 2)
    with pytest.raises(MemoryError, match="the solution would need"):
        shoal.ode.solve(decay, y0, t_span, k)

    monkeypatch.setattr(_memory, "available_bytes", lambda: plain + plain // 2)
    ys = shoal.ode.solve(decay, y0, t_span, k)
    np.testing.assert_allclose(ys[:, -1, 0], np.exp(-0.5), rtol=1e-6)
    with pytest.raises(MemoryError, match="the solution and its sensitivities would need"):
        jax.grad(lambda k: shoal.ode.solve(decay, y0, t_span, k).sum())(k)


def test_a_gradient_by_the_adjoint_counts_its_parameter_cotangent_rows(monkeypatch):
    # The adjoint's kernel keeps every trajectory's cotangent of every parameter (N x n_params
    # numbers) before summing the shared ones: 37 x 301 x 8 bytes here, far more than its
    # results (the saves, y0's cotangent, one shared row).
    N, n_shared = 37, 300
    y0 = jnp.ones((N, 1))
    t_span = jnp.linspace(0.0, 1.0, 3)
    w = jnp.full((n_shared,), 0.01)

    def f(y, t, p):
        return -(p["k"] + jnp.sum(p["w"])) * y

    def loss(w, adjoint):
        ys = shoal.ode.solve(f, y0, t_span, {"k": jnp.full((N,), 0.5), "w": w},
                             params_axes={"k": 0, "w": None}, adjoint=adjoint)
        return ys[:, -1, 0].sum()

    rows = N * (n_shared + 1) * 8
    monkeypatch.setattr(_memory, "available_bytes", lambda: rows // 2)
    message = (r"shoal\.ode\.solve\(adjoint=True\): the gradient would need \d+\.\d kB, of which "
               r"89\.1 kB are the parameters' cotangents \(37 trajectories x 301 parameters x 8 "
               r"bytes\).*differentiate the ensemble in parts")
    with pytest.raises(MemoryError, match=message):
        jax.grad(loss)(w, True)
    # Where "auto" chose the adjoint, the message says so (the user did not ask for it).
    with pytest.raises(MemoryError, match=r"solve\(adjoint='auto', which chose the adjoint for "
                                          r"this many differentiated entries\): the gradient"):
        jax.grad(loss)(w, "auto")

    monkeypatch.setattr(_memory, "available_bytes", lambda: 2 * rows)
    grad = jax.grad(loss)(w, True)
    want = -N * np.exp(-(0.5 + 3.0)) * np.ones(n_shared)  # d/dw_j of N e^{-(k + sum w)}
    np.testing.assert_allclose(grad, want, rtol=1e-5)
