"""Small dense linear algebra inside f: jnp.linalg.solve, inv, det, slogdet and
jax.scipy.linalg's lu_factor/lu_solve and solve_triangular (lu, triangular_solve,
custom_linear_solve, lu_pivots_to_permutation).

The matrices depend on y, t and p, and their first column changes pivot row with the values, so
the run-time pivoting is exercised. Against JAX at 1e-13 (float64) and 1e-6 (float32), the
dual-number Jacobian against ``jax.jacfwd``, the sparsity tracer's pattern, and the errors for
what is not translated.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
from test_codegen import (
    assert_compiles_for_the_device,
    assert_matches_at,
    assert_pattern_covers_jacobians,
    jacobians_at,
)

from shoal.ode._codegen import generate_model
from shoal.ode._model import detect_pattern


@pytest.fixture(autouse=True, scope="module")
def _x64():
    with jax.enable_x64(True):
        yield


N, NP = 6, 3


def _fold(arrays):
    """Length-N output from several arrays: their elements, weighted, summed in rows of N."""
    flat = jnp.concatenate([jnp.ravel(a) for a in arrays])
    flat = jnp.pad(flat, (0, -flat.size % N)).reshape(-1, N)
    return (flat * jnp.arange(1.0, flat.shape[0] + 1.0, dtype=flat.dtype)[:, None]).sum(axis=0)


def _a3(y, t, p):
    # |2 y0| against 1.5 picks the first pivot row; det >= 0.25 * 2.4 for |y|, |t|, |p| <= 1
    return jnp.array(
        [
            [2.0 * y[0], 1.5, 0.3 * p[0]],
            [-1.5, y[1], 0.2 * t],
            [0.1 * y[2], 0.4, 2.5 + y[3] ** 2],
        ],
        dtype=y.dtype,
    )


def _b4(y, t, p):
    # a row-permuted diagonally dominant matrix: every column pivots off the diagonal
    return jnp.array(
        [
            [0.1 * y[0], 3.0 + y[1] ** 2, 0.2, 0.1 * t],
            [0.3, 0.1 * y[2], 0.2 * p[1], 3.0 + y[3] ** 2],
            [3.0 + y[4] ** 2, 0.2 * t, 0.1 * p[0], 0.3],
            [0.2, 0.1, 3.0 + y[5] ** 2, 0.1 * y[0]],
        ],
        dtype=y.dtype,
    )


def _c5(y, t, p):
    k = jnp.arange(1.0, 6.0, dtype=y.dtype)
    return 3.0 * jnp.eye(5, dtype=y.dtype) + 0.4 * jnp.sin(jnp.outer(k, y[:5]) + t)


def _solves(y, t, p):
    # one factorisation per matrix: every LU is unrolled, and the tests compile each model thrice
    a, b, c = _a3(y, t, p), _b4(y, t, p), _c5(y, t, p)
    return _fold(
        [
            jnp.linalg.solve(a, jnp.stack([y[:3] * t + p, y[3:], p], axis=1)),
            jsl.lu_solve(jsl.lu_factor(b), y[:4]),
            # c's diagonal dominates: triangular solves with either triangle stay well-conditioned
            jsl.solve_triangular(c, y[:5], lower=True),
            jsl.solve_triangular(c, y[1:], lower=False, trans=1),
            jsl.solve_triangular(c, y[:5], lower=False, unit_diagonal=True),
            jsl.solve_triangular(c[:3, :3], jnp.stack([y[3:], p], axis=1), lower=True, trans=1),
        ]
    )


def _inverses(y, t, p):
    batch = jnp.stack([_a3(y, t, p), _a3(y[::-1], -t, p)])
    return _fold([jnp.linalg.inv(_b4(y, t, p)), jnp.linalg.inv(batch)])


def _determinants(y, t, p):
    sign, logdet = jnp.linalg.slogdet(_c5(y, t, p))
    return _fold(
        [
            jnp.linalg.det(_a3(y, t, p)),  # 3x3: JAX's own closed form
            jnp.linalg.det(_b4(y, t, p)),
            jnp.stack([sign, logdet]),
            y * jnp.linalg.det(_a3(y, t, p)[:2, :2]),
        ]
    )


def _singular(y, t, p):
    # a column of zeros computed at run time: LAPACK leaves a zero pivot's column unscaled, so
    # det is 0 and slogdet (0, -inf), not NaN
    b = _b4(y, t, p).at[:, 1].set(y[:4] - y[:4])
    sign, logdet = jnp.linalg.slogdet(b)
    return _fold([jnp.linalg.det(b), sign, logdet, jsl.lu_factor(b)[0]])


DIFFERENTIATED = [_solves, _inverses, _determinants]
MODELS = [*DIFFERENTIATED, _singular]


def _points(seed, dtype, count=20):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        y, t, p = rng.uniform(-1.0, 1.0, N), rng.uniform(-1.0, 1.0), rng.uniform(-1, 1, NP)
        yield y.astype(dtype), dtype(t), p.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("f", MODELS, ids=lambda f: f.__name__.strip("_"))
def test_linear_algebra_matches_jax(f, dtype):
    # float32 relative to the folded terms' size, which the weighted sums may cancel
    floor = 1.0 if dtype == np.float64 else 10.0
    assert_matches_at(f, N, NP, dtype, _points(1, dtype), floor=floor)


@pytest.mark.parametrize("f", DIFFERENTIATED, ids=lambda f: f.__name__.strip("_"))
def test_dual_jacobian_matches_jacfwd(f):
    for got, want, *_ in jacobians_at(f, N, NP, _points(2, np.float64, count=10)):
        np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-11)


@pytest.mark.parametrize("f", DIFFERENTIATED, ids=lambda f: f.__name__.strip("_"))
def test_sparsity_pattern_covers_the_jacobian(f):
    assert_pattern_covers_jacobians(f, N, NP, _points(3, np.float64, count=5))


def _pattern_model(y, t, p):
    a = jnp.array([[2.0 * y[0], 1.5], [-1.5, y[1]]], dtype=y.dtype)
    x = jnp.linalg.solve(a, jnp.stack([y[2], t]))
    return jnp.concatenate([x, jnp.linalg.det(jnp.diag(y[2:4]) + 1.0)[None], y[3:] * t])


def test_sparsity_pattern_of_a_solve_is_exact():
    want = np.zeros((N, N), bool)
    want[:2, :3] = True  # the solution depends on the matrix (y0, y1) and the rhs (y2)
    want[2, 2:4] = True
    want[3:, 3:] = np.eye(3, dtype=bool)
    np.testing.assert_array_equal(detect_pattern(_pattern_model, N, NP, np.float64), want)


def test_linear_algebra_compiles_for_the_device():
    # one small solve: NVRTC compiles Rodas5P's sensitivity kernel over nested duals slowly
    def f(y, t, p):
        return jnp.concatenate([jnp.linalg.solve(_a3(y, t, p), y[:3]), y[3:] * t])

    assert_compiles_for_the_device(generate_model(f, N, NP, np.float64))


@pytest.mark.parametrize(
    "f, primitive",
    [
        (lambda y, t, p: jnp.tile(jnp.linalg.eigh(_a3(y, t, p) + _a3(y, t, p).T)[0], 2), "eigh"),
        (lambda y, t, p: jnp.tile(jnp.linalg.svd(_a3(y, t, p))[1], 2), "svd"),
    ],
    ids=["eigh", "svd"],
)
def test_untranslated_decompositions_name_the_primitive_line_and_alternative(f, primitive):
    with pytest.raises(NotImplementedError) as info:
        generate_model(f, N, NP, np.float64)
    message = str(info.value)
    assert f"'{primitive}'" in message
    assert "test_linalg_in_f.py:" in message
    assert "jnp.linalg.solve, inv, det and slogdet" in message


def test_a_matrix_too_large_to_unroll_names_the_limit():
    def f(y, t, p):
        return jnp.linalg.solve(jnp.eye(33) * y[0] + 1.0, jnp.ones(33))[:N]

    with pytest.raises(NotImplementedError, match="at most 32 rows"):
        generate_model(f, N, NP, np.float64)
