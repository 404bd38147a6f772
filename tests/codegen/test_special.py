"""Special functions in f (gammaln, digamma, polygamma, erfinv) against JAX and their derivatives.

Values at 1e-13 (float64, relative to max(|value|, 1)) and 5e-6 (float32: shoal evaluates these
in double and rounds once, JAX's float32 kernels are a few ulps off) over the domains,
poles and edges included; the dual-number Jacobian (Rodas5P's) against ``jax.jacfwd``, nested
duals (second derivatives) through a sensitivity solve; NVRTC compiles them for the device.
"""

from __future__ import annotations

import ctypes

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp
import numpy as np
import pytest
import scipy.special
from test_codegen import CompiledModel, assert_compiles_for_the_device, assert_matches
from test_scans import _JACOBIAN_HARNESS

from shoal import _jit
from shoal.ode import solve
from shoal.ode._codegen import generate_model

N = 6

MODELS = {
    "gammaln": lambda y, t, p: jsp.gammaln(y),
    "digamma": lambda y, t, p: jsp.digamma(y),
    "trigamma": lambda y, t, p: jsp.polygamma(1, y),
    "polygamma3": lambda y, t, p: jsp.polygamma(3, y),
    "erfinv": lambda y, t, p: jsp.erfinv(y),
}
POINTS = {
    "gammaln": [np.array([0.5, 1.0, 2.0, 3.7, 40.0, 1e3]),
                np.array([-0.5, -2.5, 1e-8, 0.0, -1.0, np.inf])],
    "digamma": [np.array([0.5, 1.0, 1.4616321449683623, 3.7, 40.0, 1e3]),
                np.array([-0.5, -2.5, 1e-8, 0.0, -1.0, -7.25])],
    "trigamma": [np.array([0.5, 1.0, 2.5, 11.9, 12.1, 1e3]),
                 np.array([-0.5, -2.5, 1e-4, 0.0, -1.0, 0.01])],
    "polygamma3": [np.array([0.5, 1.0, 2.5, 11.9, 12.1, 1e3]),
                   np.array([0.05, 0.25, 3.0, 7.5, 20.0, 100.0])],
    "erfinv": [np.array([-0.999999, -0.5, 0.0, 1e-10, 0.3, 0.9]),
               np.array([0.999999999, 1.0, -1.0, 1.5, 0.75, -0.2])],
}


@pytest.mark.parametrize("which", [0, 1], ids=["domain", "edges"])
@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_matches_jax(name, which, dtype):
    rtol = 1e-13 if dtype == np.float64 else 5e-6
    y = POINTS[name][which]
    if dtype == np.float32:  # float32 cannot tell 0.999999999 from 1
        y = np.where(np.abs(y) == 0.999999999, 0.9999, y)
    if name == "erfinv" and dtype == np.float64:
        # XLA's float64 erf_inv is off by up to 1e-11 near ±1 (4.320005388049 for 0.999999999,
        # SciPy and Newton on erfc give 4.320005388105): SciPy is the reference there.
        got = CompiledModel(MODELS[name], N, 1, dtype)(y, 0.0, [0.0])
        np.testing.assert_allclose(got, scipy.special.erfinv(y), rtol=1e-14, atol=1e-300)
        assert_matches(MODELS[name], N, 1, dtype, y, 0.0, [0.0], rtol=2e-11, floor=1.0)
        return
    assert_matches(MODELS[name], N, 1, dtype, y, 0.0, [0.0], rtol=rtol, floor=1.0)


@pytest.mark.parametrize("name", list(MODELS))
def test_dual_jacobian_matches_jacfwd(name):
    y = POINTS[name][0]
    model = generate_model(MODELS[name], N, 1, np.float64)
    lib = ctypes.CDLL(str(_jit.compile_library(model.source + _JACOBIAN_HARNESS)))
    ptr = ctypes.POINTER(ctypes.c_double)
    lib.jacobian.argtypes = [ptr, ctypes.c_double, ptr, ptr]
    got, p = np.full((N, N), np.nan), np.zeros(1)
    lib.jacobian(np.ascontiguousarray(y).ctypes.data_as(ptr), 0.0, p.ctypes.data_as(ptr),
                 got.ctypes.data_as(ptr))
    want = np.asarray(jax.jacfwd(MODELS[name])(jnp.asarray(y), 0.0, jnp.asarray(p)))
    if name == "erfinv":  # √π/2 e^{erfinv²}, with SciPy's more accurate erfinv (see above)
        want = np.diag(np.sqrt(np.pi) / 2 * np.exp(scipy.special.erfinv(y) ** 2))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300)


def test_far_negative_arguments_are_fast_and_follow_the_reflections():
    # Reflection formulas, not |x| recurrence steps; against SciPy on the positive side.
    x = np.array([-1e8 - 0.5, -12345.25, -3.3, -0.5, 2.5, 7.0])
    trigamma = CompiledModel(MODELS["trigamma"], N, 1, np.float64)(x, 0.0, [0.0])
    want = np.pi**2 / np.sin(np.pi * x) ** 2 - scipy.special.polygamma(1, 1 - x)
    want[4:] = scipy.special.polygamma(1, x[4:])
    np.testing.assert_allclose(trigamma, want, rtol=1e-9)
    digamma = CompiledModel(MODELS["digamma"], N, 1, np.float64)(x, 0.0, [0.0])
    np.testing.assert_allclose(digamma, scipy.special.digamma(x), rtol=1e-9)
    third = CompiledModel(MODELS["polygamma3"], N, 1, np.float64)(x, 0.0, [0.0])
    assert np.isnan(third[0]) and np.all(np.isfinite(third[1:]))


def test_derivatives_through_rodas5p_match_jax():
    # y' = -p0 · (gammaln(2 + y0²) + digamma(1.5 + y1²) + erfinv(tanh(y2)/2)): Rodas5P's dual
    # Jacobian and the nested duals of its joint sensitivity solve, against JAX differentiating
    # the same f integrated by an explicit reference (small steps, RK4).
    def f(y, t, p):
        s = (jsp.gammaln(2 + y[0] ** 2) + jsp.digamma(1.5 + y[1] ** 2)
             + jsp.erfinv(jnp.tanh(y[2]) / 2))
        return -p[0] * jnp.stack([s * y[0], s * y[1], s * y[2]]) * 0.1

    y0, p, ts = jnp.array([0.3, -0.4, 0.5]), jnp.array([1.2]), jnp.linspace(0.0, 1.0, 3)

    def rk4(p, steps=400):
        h, y = 1.0 / steps, y0
        for _ in range(steps):
            k1 = f(y, 0, p)
            k2 = f(y + h / 2 * k1, 0, p)
            k3 = f(y + h / 2 * k2, 0, p)
            k4 = f(y + h * k3, 0, p)
            y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return y

    final = lambda p: solve(f, y0, ts, p, rtol=1e-11, atol=1e-13)[0, -1]  # noqa: E731
    np.testing.assert_allclose(final(p), rk4(p), rtol=1e-9)
    np.testing.assert_allclose(jax.jacfwd(final)(p), jax.jacfwd(rk4)(p), rtol=1e-7)


def test_every_special_function_compiles_for_the_device():
    def f(y, t, p):
        return (jsp.gammaln(2 + y * y) + jsp.digamma(1 + y * y) + jsp.polygamma(2, 1 + y * y)
                + jsp.erfinv(jnp.tanh(y))) * p[0]

    assert_compiles_for_the_device(generate_model(f, 3, 1, np.float64))
