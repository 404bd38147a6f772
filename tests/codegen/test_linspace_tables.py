"""Constant grids that are a linspace to the bit are computed, not read (_codegen/linspace.py,
math.hpp: Linspace): searches and reads of them give the table's bits, scalar and in SIMD lanes,
in the dual-number Jacobian sweeps and through an adjoint gradient, against the same model
compiled with the grid as a table."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shoal.ode import solve
from shoal.ode._codegen import linspace
from shoal.ode._codegen.linspace import linspace_table

jax.config.update("jax_enable_x64", True)

# The formula's last entry is 0.8999999999999999, linspace's stop 0.9: the last is its own.
GRID = np.linspace(-1.0, 0.9, 101)
VALUES = np.cos(4.0 * GRID) + 1.5


def test_which_tables_are_computed():
    assert (-1.0 + 100 * ((0.9 + 1.0) / 100)) != 0.9  # the stop is not the formula's
    assert linspace_table(GRID) == ("shoal::math::Linspace{101, -1.0, 0.019, 0.9}")
    assert linspace_table(0.5 + 0.25 * np.arange(40.0)) is not None  # x0 + h i
    nudged = GRID.copy()
    nudged[37] = np.nextafter(nudged[37], 1.0)  # one ulp off the formula
    assert linspace_table(nudged) is None
    signed = np.linspace(0.0, 1.0, 20)
    signed[0] = -0.0  # 0·h + (−0) is +0: not the table's bits
    assert linspace_table(signed) is None
    assert linspace_table(GRID.astype(np.float32)) is None
    assert linspace_table(GRID[:linspace.MIN_SIZE - 1]) is None
    assert linspace_table(np.geomspace(1e-3, 1.0, 50)) is None
    with_nan = GRID.copy()
    with_nan[-1] = np.nan
    assert linspace_table(with_nan) is None


def _rate(t):
    # jnp.interp (a search and reads of the grid), a searchsorted and reads at i and i + 1 —
    # beyond the grid's end too, where the last entry is read.
    i = jnp.clip(jnp.searchsorted(GRID, t, side="right") - 1, 0, GRID.size - 2)
    values = jnp.asarray(VALUES)
    slope = (values[i + 1] - values[i]) / (jnp.asarray(GRID)[i + 1] - jnp.asarray(GRID)[i])
    return jnp.interp(t, GRID, VALUES) + 0.1 * slope * (t - jnp.asarray(GRID)[i])


def _model():
    # A new function each time: shoal traces and generates a model once per function.
    def f(y, t, p):
        r = _rate(t * p[1] - 1.0)
        return jnp.array([-p[0] * r * y[0] + y[1], p[0] * r * y[0] - (1.0 + y[0] ** 2) * y[1]])

    return f


def _solve(method, lanes, as_table, monkeypatch, **options):
    if as_table:
        monkeypatch.setattr(linspace, "MIN_SIZE", 10**9)
    else:
        monkeypatch.setattr(linspace, "MIN_SIZE", 16)
    n = 13
    y0 = jnp.stack([jnp.linspace(0.5, 1.5, n), jnp.linspace(0.0, 0.3, n)], axis=1)
    p = jnp.stack([jnp.linspace(0.5, 2.0, n), jnp.linspace(0.5, 2.6, n)], axis=1)
    ts = jnp.linspace(0.0, 1.5, 7)  # t·p[1] − 1 runs past the grid's end (0.9)

    f = _model()

    def loss(p):
        ys = solve(f, y0, ts, p, method=method, rtol=1e-8, atol=1e-10, lanes=lanes, **options)
        return jnp.sum(ys ** 2), ys

    (_, ys), grad = jax.value_and_grad(loss, has_aux=True)(p)
    return ys, grad


@pytest.mark.parametrize("method", ["tsit5", "rodas5p"])
@pytest.mark.parametrize("lanes", [1, 8])
def test_a_computed_grid_gives_the_tables_bits(method, lanes, monkeypatch):
    options = {"adjoint": True} if lanes == 8 else {}
    computed = _solve(method, lanes, False, monkeypatch, **options)
    table = _solve(method, lanes, True, monkeypatch, **options)
    for a, b in zip(computed, table, strict=True):
        np.testing.assert_array_equal(a, b)
    assert np.all(np.isfinite(computed[1]))


def test_the_generated_model_computes_the_grid():
    from shoal.ode._codegen.model_struct import generate

    model, _ = generate(_model(), 2, 2, np.float64)
    assert "shoal::math::Linspace{101, -1.0, 0.019, 0.9}" in model.source
    assert "search_sorted_near(shoal::math::Linspace" in model.source
    assert "gather_indexed<T>(shoal::math::Linspace" in model.source  # its index depends on y
    assert model.lane_arithmetic  # a computed grid is a constant table in the lanes
