"""Rodas5P with a Jacobian sparsity pattern (issue 5): the sparse direct solver against the dense
LU on a stiff Van der Pol ring and a 1-D Brusselator, every way of passing a pattern, both
orderings, gradients, pattern checking and detection, fp32 factorisation, float32, JAX
transformations, superset patterns, bad options, and Tsit5 (which validates and ignores it)."""

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse

from shoal.ode import Status, solve
from shoal.ode._model import detect_pattern

TIGHT = {"rtol": 1e-10, "atol": 1e-10}


# ---------------------------------------------------------------------------------------------
# Models and their hand-derived structural patterns


def vdp_ring(y, t, p):
    """Stiff Van der Pol ring, interleaved y = (x_0, v_0, x_1, v_1, ...), periodic; p = (μ, d, ω):
    x_i' = v_i,  v_i' = μ(1 − x_i²)v_i − ω²x_i + d(x_{i−1} − 2x_i + x_{i+1})."""
    mu, d, omega = p[0], p[1], p[2]
    x, v = y[0::2], y[1::2]
    lap = jnp.roll(x, 1) - 2.0 * x + jnp.roll(x, -1)
    dv = mu * (1.0 - x * x) * v - omega * omega * x + d * lap
    return jnp.stack([v, dv], axis=1).reshape(-1)


def ring_pattern(m: int) -> np.ndarray:
    """Structural Jacobian pattern of vdp_ring with m oscillators (no diagonal on x rows)."""
    p = np.zeros((2 * m, 2 * m), dtype=bool)
    for i in range(m):
        p[2 * i, 2 * i + 1] = True
        for j in (i - 1, i, i + 1):
            p[2 * i + 1, 2 * (j % m)] = True
        p[2 * i + 1, 2 * i + 1] = True
    return p


RING_P = np.array([100.0, 10.0, 1.0])  # μ, d, ω


def ring_y0(m: int) -> np.ndarray:
    """Two trajectories: the issue's x = 2, v = 0 (synchronised: the coupling term stays zero),
    and a perturbed start x_i = 2 + 0.2 sin(2πi/m), v_i = 0.1 cos(2πi/m) that exercises it."""
    phase = 2 * np.pi * np.arange(m) / m
    uniform = np.stack([np.full(m, 2.0), np.zeros(m)], axis=1).reshape(-1)
    perturbed = np.stack([2.0 + 0.2 * np.sin(phase), 0.1 * np.cos(phase)], axis=1).reshape(-1)
    return np.stack([uniform, perturbed])


RING_T = np.linspace(0.0, 1.0, 6)

BRUSS_N = 10  # grid points; y = (u_1..u_N, v_1..v_N)
BRUSS_P = np.array([1.0, 3.0, 1.0 / 50.0])  # A, B, α (the diffusion is α (N+1)² Δ)


def brusselator(y, t, p):
    """1-D Brusselator (Hairer-Wanner), Dirichlet u = 1, v = 3 at both ends, blocked layout."""
    n = y.shape[0] // 2
    a, b, alpha = p[0], p[1], p[2]
    k = alpha * (n + 1) ** 2
    u, v = y[:n], y[n:]
    one, three = jnp.ones((1,), y.dtype), jnp.full((1,), 3.0, y.dtype)
    ue = jnp.concatenate([one, u, one])
    ve = jnp.concatenate([three, v, three])
    uuv = u * u * v
    du = a + uuv - (b + 1.0) * u + k * (ue[:-2] - 2.0 * u + ue[2:])
    dv = b * u - uuv + k * (ve[:-2] - 2.0 * v + ve[2:])
    return jnp.concatenate([du, dv])


def bruss_pattern(n: int) -> np.ndarray:
    p = np.zeros((2 * n, 2 * n), dtype=bool)
    for i in range(n):
        for j in (i - 1, i, i + 1):
            if 0 <= j < n:
                p[i, j] = True                  # u_i ← u_j
                p[n + i, n + j] = True          # v_i ← v_j
        p[i, n + i] = p[n + i, i] = True        # reaction couples u_i and v_i
    return p


def bruss_y0(n: int) -> np.ndarray:
    xs = np.arange(1, n + 1) / (n + 1)
    return np.concatenate([1.0 + np.sin(2 * np.pi * xs), np.full(n, 3.0)])


BRUSS_T = np.linspace(0.0, 2.0, 5)


def chain(y, t, p):
    """Nonlinear tridiagonal chain with zero ends."""
    z = jnp.zeros((1,), y.dtype)
    left = jnp.concatenate([z, y[:-1]])
    right = jnp.concatenate([y[1:], z])
    return p[0] * left - 2.0 * y * y + jnp.sin(right)


def selects(y, t, p):
    """jnp.where / maximum / minimum / clip: both branches count, the predicate does not."""
    return jnp.stack([
        jnp.where(y[0] > 0, y[1], y[2]),
        jnp.maximum(y[1], y[3]),
        jnp.minimum(y[0] * p[0], 1.0),
        jnp.where(y[3] < y[0], y[0] * y[1], jnp.sin(y[2])),
        jnp.clip(y[4], -1.0, y[3]),
    ])


SELECTS_PATTERN = np.array([
    [0, 1, 1, 0, 0],
    [0, 1, 0, 1, 0],
    [1, 0, 0, 0, 0],
    [1, 1, 1, 0, 0],
    [0, 0, 0, 1, 1],
], dtype=bool)


def random_sparse_matrix(n: int, density: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.where(rng.random((n, n)) < density, rng.standard_normal((n, n)), 0.0)


def constant_matrix_model(a: np.ndarray):
    a = jnp.asarray(a)

    def f(y, t, p):
        return a @ jnp.tanh(y)

    return f


# ---------------------------------------------------------------------------------------------
# Helpers


def pattern_as(form: str, pattern: np.ndarray):
    if form == "auto":
        return "auto"
    if form == "mask":
        return pattern.copy()
    if form == "scipy":
        return scipy.sparse.csr_matrix(pattern.astype(np.float64))
    if form == "pairs":
        return np.argwhere(pattern)
    raise AssertionError(form)


def run(f, y0, t, p, **kwargs):
    ys, stats = solve(f, y0, t, p, method="rodas5p", return_stats=True, **kwargs)
    assert np.all(np.asarray(stats["status"]) == Status.SUCCESS), stats
    return np.asarray(ys), stats


@functools.cache
def ring_dense(m: int):
    return run(vdp_ring, ring_y0(m), RING_T, RING_P, sparsity="dense", **TIGHT)


@functools.cache
def bruss_dense():
    return run(brusselator, bruss_y0(BRUSS_N), BRUSS_T, BRUSS_P, sparsity="dense", **TIGHT)


# ---------------------------------------------------------------------------------------------
# Sparse equals dense


@pytest.mark.parametrize("ordering", ["amd", "natural"])
@pytest.mark.parametrize("form", ["auto", "scipy", "mask", "pairs"])
@pytest.mark.parametrize("m", [3, 12])
def test_vdp_ring_sparse_equals_dense(m, form, ordering):
    dense, dense_stats = ring_dense(m)
    sparse, stats = run(vdp_ring, ring_y0(m), RING_T, RING_P, sparsity=pattern_as(
        form, ring_pattern(m)), ordering=ordering, **TIGHT)
    np.testing.assert_allclose(sparse, dense, rtol=1e-10, atol=1e-12)
    # the same steps, up to a borderline decision changed by rounding
    assert np.all(np.abs(np.asarray(stats["accepted"]) - np.asarray(dense_stats["accepted"]))
                  <= 2)
    # the synchronised trajectory stays synchronised
    x = sparse[0, :, 0::2]
    np.testing.assert_allclose(x, np.broadcast_to(x[:, :1], x.shape), rtol=1e-12)


@pytest.mark.parametrize("ordering", ["amd", "natural"])
@pytest.mark.parametrize("form", ["auto", "scipy", "mask", "pairs"])
def test_brusselator_sparse_equals_dense(form, ordering):
    dense, _ = bruss_dense()
    sparse, _ = run(brusselator, bruss_y0(BRUSS_N), BRUSS_T, BRUSS_P,
                    sparsity=pattern_as(form, bruss_pattern(BRUSS_N)), ordering=ordering,
                    **TIGHT)
    np.testing.assert_allclose(sparse, dense, rtol=1e-10, atol=1e-12)
    assert not np.allclose(sparse[0, -1], sparse[0, 0])  # it actually moved


def test_superset_pattern_equals_dense():
    m = 3
    dense, _ = ring_dense(m)
    full = np.ones((2 * m, 2 * m), dtype=bool)
    sparse, _ = run(vdp_ring, ring_y0(m), RING_T, RING_P, sparsity=full, **TIGHT)
    np.testing.assert_allclose(sparse, dense, rtol=1e-10, atol=1e-12)
    # a pattern with a few spurious entries added
    extra = ring_pattern(m)
    extra[0, 5] = extra[4, 1] = extra[2, 3] = True
    sparse, _ = run(vdp_ring, ring_y0(m), RING_T, RING_P, sparsity=extra, ordering="natural",
                    **TIGHT)
    np.testing.assert_allclose(sparse, dense, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# Gradients


def test_ring_grad_params_and_jacfwd_y0_sparse_equal_dense():
    m = 4
    y0 = jnp.asarray(ring_y0(m)[1])
    t = jnp.asarray([0.0, 0.5])

    def loss(p, sparsity):
        ys = solve(vdp_ring, y0, t, p, sparsity=sparsity, **TIGHT)
        return jnp.sum(ys[0, -1] ** 2)

    p = jnp.asarray(RING_P)
    g_dense = np.asarray(jax.grad(loss)(p, "dense"))
    g_sparse = np.asarray(jax.grad(loss)(p, "auto"))
    assert np.all(np.isfinite(g_dense)) and np.all(g_dense != 0)
    np.testing.assert_allclose(g_sparse, g_dense, rtol=1e-8)

    def final(y, sparsity):
        return solve(vdp_ring, y, t, p, sparsity=sparsity, ordering="natural", **TIGHT)[0, -1]

    j_dense = np.asarray(jax.jacfwd(final)(y0, None))
    j_sparse = np.asarray(jax.jacfwd(final)(y0, ring_pattern(m)))
    assert j_dense.shape == (2 * m, 2 * m)
    np.testing.assert_allclose(j_sparse, j_dense, rtol=1e-8, atol=1e-12 * np.abs(j_dense).max())


def test_brusselator_grad_params_sparse_equals_dense():
    y0 = jnp.asarray(bruss_y0(BRUSS_N))
    t = jnp.asarray([0.0, 1.0])

    def loss(p, sparsity):
        ys = solve(brusselator, y0, t, p, sparsity=sparsity, **TIGHT)
        return jnp.sum(ys[0, -1] * jnp.arange(1.0, 2 * BRUSS_N + 1))

    p = jnp.asarray(BRUSS_P)
    g_dense = np.asarray(jax.grad(loss)(p, "dense"))
    g_sparse = np.asarray(jax.grad(loss)(p, "auto"))
    assert np.all(np.isfinite(g_dense)) and np.all(g_dense != 0)
    np.testing.assert_allclose(g_sparse, g_dense, rtol=1e-8)


# ---------------------------------------------------------------------------------------------
# Pattern checking and detection


@pytest.mark.parametrize("form", ["mask", "scipy", "pairs"])
def test_pattern_missing_an_entry_is_a_value_error_naming_it(form):
    m = 3
    pattern = ring_pattern(m)
    pattern[3, 0] = False  # v_1 depends on x_0
    with pytest.raises(ValueError, match=r"misses 1 structural nonzero.*\(3, 0\)"):
        solve(vdp_ring, ring_y0(m), RING_T, RING_P, sparsity=pattern_as(form, pattern))
    pattern[5, 4] = False  # and v_2 on x_2
    with pytest.raises(ValueError, match=r"misses 2 structural nonzero.*\(3, 0\), \(5, 4\)"):
        solve(vdp_ring, ring_y0(m), RING_T, RING_P, sparsity=pattern_as(form, pattern))


def test_missing_diagonal_is_not_an_error():
    """The iteration matrix always has its diagonal: a pattern without it is completed."""
    m = 3
    dense, _ = ring_dense(m)
    pattern = ring_pattern(m)
    np.fill_diagonal(pattern, False)
    sparse, _ = run(vdp_ring, ring_y0(m), RING_T, RING_P, sparsity=pattern, **TIGHT)
    np.testing.assert_allclose(sparse, dense, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("m", [1, 2, 5, 40])  # 40 oscillators: 80 variables, two tracer words
def test_detect_ring(m):
    got = detect_pattern(vdp_ring, 2 * m, 3, np.float64)
    np.testing.assert_array_equal(got, ring_pattern(m))


def test_detect_brusselator():
    np.testing.assert_array_equal(detect_pattern(brusselator, 12, 3, np.float64),
                                  bruss_pattern(6))


def test_detect_tridiagonal_chain():
    n = 9
    expected = np.eye(n, dtype=bool) | np.eye(n, k=1, dtype=bool) | np.eye(n, k=-1, dtype=bool)
    np.testing.assert_array_equal(detect_pattern(chain, n, 1, np.float64), expected)


def test_detect_selects_count_both_branches():
    np.testing.assert_array_equal(detect_pattern(selects, 5, 1, np.float64), SELECTS_PATTERN)


def test_detect_float32_model():
    np.testing.assert_array_equal(detect_pattern(vdp_ring, 8, 3, np.float32), ring_pattern(4))


def test_detect_constant_matrix_product():
    a = random_sparse_matrix(8, 0.25, seed=3)  # 64 multiplies: emitted term by term
    np.testing.assert_array_equal(detect_pattern(constant_matrix_model(a), 8, 0, np.float64),
                                  a != 0)


def test_detect_large_constant_matrix_product():
    a = random_sparse_matrix(32, 0.1, seed=4)
    np.testing.assert_array_equal(detect_pattern(constant_matrix_model(a), 32, 0, np.float64),
                                  a != 0)


def test_constant_matrix_model_sparse_equals_dense():
    a = random_sparse_matrix(8, 0.25, seed=3) - 20.0 * np.eye(8)
    f = constant_matrix_model(a)
    y0 = np.linspace(-1.0, 1.0, 8)
    t = np.linspace(0.0, 1.0, 3)
    dense, _ = run(f, y0, t, None, sparsity="dense", **TIGHT)
    sparse, _ = run(f, y0, t, None, sparsity="auto", **TIGHT)
    np.testing.assert_allclose(sparse, dense, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# Precision


def test_fp32_factorisation_with_sparsity():
    m = 6
    y0 = ring_y0(m)
    ref, _ = run(vdp_ring, y0, RING_T, RING_P, **TIGHT)
    loose = {"rtol": 1e-7, "atol": 1e-9}
    dense32, _ = run(vdp_ring, y0, RING_T, RING_P, lu_precision="fp32", **loose)
    sparse32, _ = run(vdp_ring, y0, RING_T, RING_P, lu_precision="fp32", sparsity="auto",
                      **loose)
    np.testing.assert_allclose(sparse32, ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(sparse32, dense32, rtol=1e-5, atol=1e-6)


def test_float32_solve_with_sparsity():
    m = 4
    y0 = ring_y0(m).astype(np.float32)
    p = RING_P.astype(np.float32)
    t = RING_T.astype(np.float32)
    ref, _ = ring_dense(m)
    tol = {"rtol": 1e-5, "atol": 1e-5}
    dense, _ = run(vdp_ring, y0, t, p, **tol)
    sparse, _ = run(vdp_ring, y0, t, p, sparsity="auto", **tol)
    assert sparse.dtype == np.float32
    np.testing.assert_allclose(sparse, dense, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(sparse, ref, rtol=1e-3, atol=1e-3)


# ---------------------------------------------------------------------------------------------
# Transformations


def test_vmap_jit_with_sparsity_is_one_call_and_equals_ensemble():
    m = 3
    y0 = jnp.asarray(ring_y0(m)[1])
    mus = jnp.linspace(95.0, 105.0, 4)

    def single(mu):
        p = jnp.stack([mu, jnp.asarray(RING_P[1]), jnp.asarray(RING_P[2])])
        return solve(vdp_ring, y0, RING_T, p, sparsity="auto", **TIGHT)

    params = np.stack([np.asarray(mus), np.full(4, RING_P[1]), np.full(4, RING_P[2])], axis=1)
    ens = np.asarray(solve(vdp_ring, y0, RING_T, params, sparsity="auto", **TIGHT))
    vm = np.asarray(jax.jit(jax.vmap(single))(mus))
    assert vm.shape == (4, 1, len(RING_T), 2 * m)
    np.testing.assert_array_equal(vm[:, 0], ens)
    np.testing.assert_array_equal(np.asarray(jax.jit(single)(mus[0]))[0], ens[0])
    hlo = jax.jit(jax.vmap(single)).lower(mus).as_text()
    # One shoal FFI call, whichever platform the default device is (cpu, or cuda on a GPU).
    assert len(re.findall(r"custom_call @shoal_ode_solve_(?:cpu|cuda)", hlo)) == 1
    assert "shoal_ode_rodas5p_lu64_sparse" in hlo
    dense = np.asarray(solve(vdp_ring, y0, RING_T, params, **TIGHT))
    np.testing.assert_allclose(ens, dense, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# Options


@pytest.mark.parametrize("ordering", ["metis", "AMD", "", None])
def test_invalid_ordering_is_a_value_error(ordering):
    with pytest.raises(ValueError, match="ordering"):
        solve(vdp_ring, ring_y0(2), RING_T, RING_P, sparsity="auto", ordering=ordering)


def test_invalid_sparsity_string_is_a_value_error():
    with pytest.raises(ValueError, match="sparsity must be None, 'auto', 'dense'"):
        solve(vdp_ring, ring_y0(2), RING_T, RING_P, sparsity="sparse")


# sparsity=None (the default) takes the sparse solver from 12 variables on patterns whose
# factors stay sparse (benchmarks/sparse_crossover.py measured it faster there), the dense LU
# below and on dense patterns; "dense" and "auto" force either; stats["sparse"] says which ran.
def test_default_sparsity_rule_on_both_sides_of_its_thresholds():
    from shoal.ode._model import AUTO_SPARSE_MIN_VARS, default_sparsity_choice

    def ring(n):
        return (np.eye(n, dtype=bool) | np.roll(np.eye(n, dtype=bool), 1, 1)
                | np.roll(np.eye(n, dtype=bool), -1, 1))

    assert AUTO_SPARSE_MIN_VARS == 12
    assert not default_sparsity_choice(ring(11))
    assert default_sparsity_choice(ring(12))
    assert not default_sparsity_choice(np.ones((12, 12), dtype=bool))  # L + U = n²
    arrow = np.eye(40, dtype=bool)
    arrow[0, :] = arrow[:, 0] = True  # fills completely unless ordered: AMD keeps it sparse
    assert default_sparsity_choice(arrow)


@pytest.mark.parametrize("m, sparse", [(5, False), (6, True)])  # 10 and 12 variables
def test_default_sparsity_picks_and_reports(m, sparse):
    y0 = ring_y0(m)
    ys, stats = solve(vdp_ring, y0, RING_T, RING_P, method="rodas5p", rtol=1e-7, atol=1e-9,
                      return_stats=True)
    assert np.asarray(stats["sparse"]).tolist() == [sparse] * len(y0)
    forced = "auto" if sparse else "dense"
    same, same_stats = solve(vdp_ring, y0, RING_T, RING_P, method="rodas5p", rtol=1e-7,
                             atol=1e-9, return_stats=True, sparsity=forced)
    assert np.asarray(ys).tobytes() == np.asarray(same).tobytes()
    other, other_stats = solve(vdp_ring, y0, RING_T, RING_P, method="rodas5p", rtol=1e-7,
                               atol=1e-9, return_stats=True,
                               sparsity="dense" if sparse else "auto")
    assert np.asarray(other_stats["sparse"]).tolist() == [not sparse] * len(y0)
    np.testing.assert_allclose(np.asarray(other), np.asarray(ys), rtol=1e-5, atol=1e-7)
    _, tsit5_stats = solve(vdp_ring, y0, RING_T, np.array([1.0, 1.0, 1.0]), method="tsit5",
                           return_stats=True, sparsity="auto")
    assert not np.asarray(tsit5_stats["sparse"]).any()


def test_tsit5_with_sparsity_validates_and_ignores_it():
    m = 3
    y0, p = ring_y0(m), np.array([1.0, 1.0, 1.0])  # non-stiff
    plain = np.asarray(solve(vdp_ring, y0, RING_T, p, method="tsit5"))
    for sparsity in ("auto", ring_pattern(m)):
        got = np.asarray(solve(vdp_ring, y0, RING_T, p, method="tsit5", sparsity=sparsity))
        np.testing.assert_array_equal(got, plain)
    missing = ring_pattern(m)
    missing[1, 0] = False
    with pytest.raises(ValueError, match=r"\(1, 0\)"):
        solve(vdp_ring, y0, RING_T, p, method="tsit5", sparsity=missing)


def test_default_sparsity_without_a_host_compiler_is_dense(monkeypatch):
    from shoal import _jit
    from shoal.ode import _model

    def no_compiler(model):
        raise _jit.CompileError("no C++ compiler found")

    monkeypatch.setattr(_model, "structural_pattern", no_compiler)
    model = _model.generated_model(vdp_ring, 12, 3, np.float64)[0]
    assert _model.resolve_sparsity(model, None) is None
    with pytest.raises(_jit.CompileError):
        _model.resolve_sparsity(model, "auto")
