"""``SHOAL_OPTIMIZATION``: the -O level of model libraries changes compile and run time, never bits.

The test suite compiles its models at -O1 (tests/conftest.py: about half the compile time of -O3,
which is most of ``make test``), while users get -O3. That is sound only if the level cannot
change a result: ``-ffp-contract=off`` without fast-math leaves the compiler no freedom over
floating-point operations, and g++ vectorises the SIMD lanes only at -O3, so the lanes' machine
code differs most. These tests hold -O1 and -O3 builds to the same bytes, scalar and in the
lanes, for each kind of library a solve builds: an explicit method with failing members, a
Rosenbrock method dense and sparse, forward sensitivities, the adjoint, a mass matrix, an event,
and a right-hand side with tables, masks and shoal's elementary functions.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shoal import _jit
from shoal.ode import Event, Status, _build, solve

from ode_problems import lorenz
from stiff_problems import robertson

jax.config.update("jax_enable_x64", True)

LEVELS = ("-O1", "-O3")


@pytest.fixture
def at_level(monkeypatch):
    """``at_level(level, run)``: ``run()`` with models built at ``level``; ``at_level.libraries``
    maps each level to the libraries its calls lowered (so a switch that did nothing, comparing
    a build with itself, is caught)."""
    libraries = {}

    def call(level, run):
        host_library = _build._host_library

        def recording(build, optimization):
            path = host_library(build, optimization)
            libraries.setdefault(optimization, set()).add(path)
            return path

        with monkeypatch.context() as mp:
            mp.setenv("SHOAL_OPTIMIZATION", level)
            mp.setattr(_build, "_host_library", recording)
            jax.clear_caches()  # lower the solve again, so it asks for this level's library
            out = jax.tree_util.tree_map(np.asarray, run())
        jax.clear_caches()
        return out

    call.libraries = libraries
    return call


def assert_level_independent(at_level, run, lanes=(1, 0)):
    """run(lanes) at each level and lane count (0: the host's width): all the same bytes, from
    different libraries."""
    runs = {(level, width): at_level(level, lambda w=width: run(w))
            for level in LEVELS for width in lanes}
    assert set(at_level.libraries) == set(LEVELS)
    assert not at_level.libraries["-O1"] & at_level.libraries["-O3"]
    (first_key, first), *rest = runs.items()
    leaves = jax.tree_util.tree_leaves(first)
    for key, out in rest:
        for got, want in zip(jax.tree_util.tree_leaves(out), leaves, strict=True):
            assert got.dtype == want.dtype and got.shape == want.shape, (key, first_key)
            assert got.tobytes() == want.tobytes(), f"{key} differs from {first_key}"


GRID = jnp.array([0.0, 1.0, 2.0, 3.0])
LEVELS_TABLE = jnp.array([1.0, 2.0, 0.5, 1.0])


def tabled(y, t, p):
    """A table read, a comparison, exp, pow, tanh and log1p: gathers, masks and shoal's own
    elementary functions (include/shoal/elementary)."""
    rate = p[0] * jnp.interp(t, GRID, LEVELS_TABLE)
    return jnp.stack([-rate * y[0] + jnp.exp(-t) + 0.1 * jnp.tanh(y[1]),
                      jnp.maximum(y[0], 0.25) - y[1] ** 1.5 + jnp.log1p(t) * p[1]])


def mixed_lorenz(n=13):
    rho = np.linspace(0.0, 28.0, n)
    p = np.stack([np.full(n, 10.0), rho, np.full(n, 8 / 3)], 1)
    y0 = np.ones((n, 3))
    y0[3] = np.nan       # a NaN member
    p[n - 2, 0] = 1e4    # a stiff one that runs out of steps
    t_span = np.linspace(0.0, 2.0, 9)
    return y0, t_span, p


@pytest.mark.parametrize("method", ["tsit5", "vern9"])
def test_explicit_methods_with_failing_members(at_level, method):
    y0, t_span, p = mixed_lorenz()

    def run(lanes):
        return solve(lorenz, y0, t_span, p, method=method, rtol=1e-8, atol=1e-8, max_steps=2000,
                     return_stats=True, lanes=lanes)

    assert_level_independent(at_level, run)
    status = set(np.asarray(run(0)[1]["status"]).tolist())
    assert {Status.SUCCESS, Status.NON_FINITE, Status.MAX_STEPS_REACHED} <= status


def test_rosenbrock_dense_with_forward_sensitivities(at_level):
    k = np.array([0.04, 3e7, 1e4]) * np.linspace(0.95, 1.05, 7)[:, None]
    t_span = np.array([0.0, 1e-3, 1.0, 1e2, 1e4])

    def run(lanes):
        def final(k):
            return solve(robertson, jnp.array([1.0, 0.0, 0.0]), t_span, k, rtol=1e-8,
                         atol=1e-12, lanes=lanes)[:, -1]
        return final(k), jax.jacfwd(lambda k: final(k).sum(0))(jnp.asarray(k))

    assert_level_independent(at_level, run)


def test_rosenbrock_sparse(at_level):
    m = 6

    def chain(y, t, p):  # a stiff reaction chain: a banded Jacobian, 12 variables
        up = jnp.concatenate([jnp.zeros(1), y[:-1]])
        return p[0] * up - p[1] * y + 0.1 * jnp.sin(y) * jnp.roll(y, 1)

    y0 = np.linspace(1.0, 0.1, 2 * m)
    p = np.array([[1e3, 1.1e3], [2e3, 2.05e3], [5.0, 6.0]])

    def run(lanes):
        return solve(chain, y0, np.linspace(0.0, 1.0, 5), p, sparsity="auto", rtol=1e-8,
                     atol=1e-10, return_stats=True, lanes=lanes)

    assert_level_independent(at_level, run)
    assert bool(np.all(np.asarray(run(1)[1]["sparse"])))


def test_adjoint_gradient_through_tables_and_functions(at_level):
    p = np.array([[1.0, 0.5], [1.3, 0.2], [0.7, 0.9]])
    t_span = np.linspace(0.0, 3.0, 7)

    def run(lanes):
        def loss(p):
            ys = solve(tabled, jnp.array([1.0, 0.5]), t_span, p, method="tsit5", rtol=1e-9,
                       atol=1e-9, adjoint=True, lanes=lanes)
            return jnp.sum(ys ** 2)
        return jax.value_and_grad(loss)(jnp.asarray(p))

    assert_level_independent(at_level, run)


def test_mass_matrix_and_event(at_level):
    def robertson_dae(y, t, k):
        return jnp.stack([-k[0] * y[0] + k[2] * y[1] * y[2],
                          k[0] * y[0] - k[1] * y[1] ** 2 - k[2] * y[1] * y[2],
                          y[0] + y[1] + y[2] - 1.0])

    k = np.array([0.04, 3e7, 1e4]) * np.linspace(0.9, 1.1, 5)[:, None]

    def y1_half(y, t, k):
        return y[0] - 0.5

    def run(lanes):
        return solve(robertson_dae, jnp.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 1e2, 1e4]),
                     k, mass=np.diag([1.0, 1.0, 0.0]), event=Event(y1_half), rtol=1e-8,
                     atol=1e-12, return_stats=True, lanes=lanes)

    assert_level_independent(at_level, run)
    assert set(np.asarray(run(1)[1]["status"]).tolist()) == {Status.EVENT}


def test_unknown_level_is_refused(monkeypatch):
    monkeypatch.setenv("SHOAL_OPTIMIZATION", "-O9")
    with pytest.raises(ValueError, match=r"SHOAL_OPTIMIZATION must be one of .*'-O9'"):
        _jit.optimization_level()
    monkeypatch.setenv("SHOAL_OPTIMIZATION", "")
    assert _jit.optimization_level() == "-O3"
    monkeypatch.setenv("SHOAL_OPTIMIZATION", "-O1")
    assert _jit.compiler_flags()[0] == "-O1"
    # The level is part of the cache key: libraries of two levels never replace each other.
    assert _jit._library_identity("-O1") != _jit._library_identity("-O3")
