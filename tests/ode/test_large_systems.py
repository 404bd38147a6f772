"""Hundreds of state variables on the CPU (issue 12): a 400-variable moment hierarchy solved dense
and sparse against SciPy, and a generated source that does not grow with the system's size."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
import scipy.sparse

from shoal.ode import _codegen, solve
from shoal.ode._kernel_source import Variant, library_source
from shoal.ode._model import resolve_sparsity
from shoal.ode._options import LuPrecision, Method, Ordering

from stiff_problems import moment_hierarchy

N_VARS = 400
PARAMS = np.array([10.0, 2.0])  # streaming rate a, damping b (b l^2 / n reaches 800: stiff)
T_SAVE = np.array([0.0, 0.5, 2.0])


def _hierarchy_matrix(n: int, a: float, b: float) -> scipy.sparse.csr_matrix:
    """The hierarchy is linear, y' = A y: its tridiagonal A, written out for SciPy."""
    ell = np.arange(n, dtype=float)
    lower = a * ell[1:] / (2 * ell[1:] + 1)
    upper = -a * (ell[:-1] + 1) / (2 * ell[:-1] + 1)
    return scipy.sparse.diags([lower, -b * ell * ell / n, upper], [-1, 0, 1], format="csr")


def _y0(n: int) -> np.ndarray:
    return 1.0 / (1.0 + np.arange(n))


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    a = _hierarchy_matrix(N_VARS, *PARAMS)
    sol = scipy.integrate.solve_ivp(lambda t, y: a @ y, (T_SAVE[0], T_SAVE[-1]), _y0(N_VARS),
                                    method="Radau", t_eval=T_SAVE, jac=a, rtol=1e-10,
                                    atol=1e-14)
    assert sol.success
    return sol.y.T


@pytest.mark.parametrize("sparsity", ["dense", "auto"], ids=["dense", "sparse"])
def test_400_variables_match_scipy(sparsity, reference):
    ys, stats = solve(moment_hierarchy, jnp.asarray(_y0(N_VARS)), jnp.asarray(T_SAVE),
                      jnp.asarray(PARAMS), rtol=1e-10, atol=1e-14, sparsity=sparsity,
                      return_stats=True)
    assert int(stats["status"][0]) == 0
    np.testing.assert_allclose(np.asarray(ys)[0], reference, rtol=1e-7, atol=1e-12)


def test_generated_source_is_bounded():
    # Elementwise work over the whole state is one loop per operation whatever n is, so the
    # model's source has as many lines at n = 1000 as at 300; the sparse solver's straight-line
    # code is bounded by its unrolling thresholds (emission.MAX_UNROLLED_*).
    def model(n: int):
        return _codegen.generate_model(moment_hierarchy, n, 2, np.float64)

    assert model(300).source.count("\n") == model(1000).source.count("\n") < 80
    pattern = resolve_sparsity(model(300), "auto")
    variant = Variant.of(Method.RODAS5P, LuPrecision.FP64, pattern, Ordering.AMD)
    assert library_source(model(300), variant).count("\n") < 2500
