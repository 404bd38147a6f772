"""Everyday jax.numpy in f: norms, jax.nn activations, jax.scipy.special functions, einsum.

They all trace to primitives the code generator already has; this file is the proof, in every
scalar type the core instantiates: the generated C++ in double and float against JAX (1e-13,
1e-6), the dual-number Jacobian (nested and float duals compiled too) against ``jax.jacfwd``,
and the sparsity tracer's pattern. Inputs reach the far tails (|x| = 30) and signed zeros.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp
import numpy as np
import pytest
from test_codegen import assert_matches_at, assert_pattern_covers_jacobians, jacobians_at

from shoal.ode._model import detect_pattern


@pytest.fixture(autouse=True, scope="module")
def _x64():
    with jax.enable_x64(True):
        yield


N, NP = 24, 2  # three state variables per function below


def _activations(y, t, p):
    g = y.reshape(8, 3)
    return jnp.concatenate(
        [
            jax.nn.softplus(g[0]),
            jax.nn.sigmoid(g[1]),
            jax.nn.relu(g[2]),
            jax.nn.gelu(g[3], approximate=True),
            jax.nn.gelu(g[4], approximate=False),
            jax.nn.silu(g[5]),
            jax.nn.log_sigmoid(g[6]),
            jax.nn.softplus(-g[7]) * p[0],
        ]
    )


def _special(y, t, p):
    g = y.reshape(8, 3)
    weights = jnp.array([1.0, 2.0, 0.5], dtype=y.dtype)
    return jnp.concatenate(
        [
            jsp.erf(g[0]),
            jsp.erfc(g[1]),
            jsp.xlogy(g[2], g[2] ** 2 + p[1] ** 2),  # xlogy(0, .) = 0
            jsp.xlog1py(g[3], jnp.abs(g[3])),
            jsp.expit(g[4]),
            jsp.logit(0.01 + 0.98 * jsp.expit(g[5])),
            jnp.stack([jsp.logsumexp(g[6]), jsp.logsumexp(g[6], b=weights), t]),
            jax.nn.softmax(g[7]),
        ]
    )


# 6 x 4 x 24 = 576 multiply-adds: above DOT_TABLE_THRESHOLD, a loop over a static table
C = np.round(np.random.default_rng(7).uniform(-1.0, 1.0, (6, N)), 3) / N


def _norms_and_einsum(y, t, p):
    m = y[:12].reshape(3, 4)
    norms = jnp.stack(
        [
            jnp.linalg.norm(y),
            jnp.linalg.norm(y, 1),
            jnp.linalg.norm(y, jnp.inf),
            jnp.linalg.norm(y[:5], -jnp.inf),
            jnp.linalg.norm(y[5:9], 3),
            jnp.linalg.norm(m, "fro"),
            jnp.linalg.norm(m, 1),
            jnp.linalg.norm(m, jnp.inf),
        ]
    )
    return jnp.concatenate(
        [
            norms,
            jnp.linalg.norm(m, axis=1),
            jnp.einsum(  # a constant operand
                "ij,jk->ik", jnp.asarray(C, y.dtype), jnp.stack([y, y**2, -y, t * y], 1)
            ).sum(1),
            jnp.einsum("ij,jk->ik", m[:2, :3], m[:, 2:]).ravel(),  # two state operands
            jnp.einsum("i,i->", y[:5], y[5:10])[None],
            jnp.einsum("i,j->ij", y[:1], p).ravel() * t,
        ]
    )


MODELS = [_activations, _special, _norms_and_einsum]


def _points(seed, dtype, count=20):
    rng = np.random.default_rng(seed)
    tails = np.array([-30.0, -0.0, 0.0, 1e-7, 30.0, -4.5] * 4)
    for k in range(count):
        y = tails if k == 0 else rng.uniform(-4.0, 4.0, N)
        yield y.astype(dtype), dtype(rng.uniform(-1, 1)), rng.uniform(-2, 2, NP).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("f", MODELS, ids=lambda f: f.__name__.strip("_"))
def test_matches_jax(f, dtype):
    assert_matches_at(f, N, NP, dtype, _points(1, dtype))


@pytest.mark.parametrize("f", MODELS, ids=lambda f: f.__name__.strip("_"))
def test_dual_jacobian_matches_jacfwd(f):
    # random points only: the tails' point sits on relu's and the norms' kinks
    points = list(_points(2, np.float64, count=8))[1:]
    for got, want, *_ in jacobians_at(f, N, NP, points):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)


def test_sparsity_patterns():
    # elementwise functions depend on their own element only, exactly
    eye = np.eye(N, dtype=bool)
    np.testing.assert_array_equal(detect_pattern(_activations, N, NP, np.float64), eye)
    want = eye.copy()
    want[18:21, 18:21] = want[21:, 21:] = True  # logsumexp and softmax of a group of three
    want[20] = False  # t
    np.testing.assert_array_equal(detect_pattern(_special, N, NP, np.float64), want)
    points = list(_points(3, np.float64, count=4))[1:]
    assert_pattern_covers_jacobians(_norms_and_einsum, N, NP, points)


def _hamiltonian(y, t, p):
    """Dynamics from an energy by jax.grad inside f (its jaxpr sums tangents with add_any)."""

    def energy(q, v):
        return 0.5 * jnp.sum(v**2) + p[0] * jnp.sum(1.0 - jnp.cos(q)) + p[1] * q[0] * q[1]

    q, v = y[:N // 2], y[N // 2:]
    dq, dv = jax.grad(energy, argnums=(0, 1))(q, v)
    return jnp.concatenate([dv, -dq])


def test_f_may_differentiate_an_energy_with_jax_grad():
    rng = np.random.default_rng(7)
    points = [(rng.normal(size=N), 0.0, np.array([1.3, 0.4])) for _ in range(3)]
    assert_matches_at(_hamiltonian, N, NP, np.float64, points)
