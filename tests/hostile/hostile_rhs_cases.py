"""Right-hand sides that are hostile themselves, run in a child process by test_rhs_faults.py:
NaN in a region of state space, blow-up to Inf, division by zero at t0, overflow. Each ends
with the right status and NaN after it, correct saves before it, for hostile initial values
and parameters too. Each case returns {"examples": {argument: count}}."""

from __future__ import annotations

import collections

import jax.numpy as jnp
import numpy as np
from hostile_values import SPECIAL_FLOATS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shoal.ode import Status, solve

SETTINGS = dict(deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))
FAILED = {Status.NON_FINITE, Status.STEP_SIZE_UNDERFLOW, Status.MAX_STEPS_REACHED}
METHODS = ("tsit5", "rodas5p")


def nan_above(y, t, p):
    """y' = 1 until y passes p[0], NaN beyond: y = y0 + t while it lasts."""
    return jnp.where(y > p[0], jnp.nan, jnp.ones_like(y))


def squared(y, t, p):
    """y' = y², y = 1/(1/y0 − t): blows up at t = 1/y0."""
    return y**2


def inverse_time(y, t, p):
    """y' = 1/t, y = y0 + log(t/t0): infinite at t = 0."""
    return jnp.ones_like(y) / t


def exponential(y, t, p):
    """y' = exp(p y): overflows to Inf for p y > 709."""
    return jnp.exp(p[0] * y)


def _status(stats):
    return Status(int(np.asarray(stats["status"])[0]))


def _assert_failed(ys, stats, exact, reached, lost, rtol):
    """A failure status; the saves ``reached`` (mask) agree with ``exact``, the ``lost`` ones
    (mask) are NaN; saves too close to the singularity to tell may be either."""
    ys = np.asarray(ys)[0, :, 0]
    assert _status(stats) in FAILED, _status(stats)
    assert np.all(np.isnan(ys[lost])), (ys, lost)
    np.testing.assert_allclose(ys[reached], exact[reached], rtol=rtol, atol=1e-9)


def nan_region(max_examples: int = 30):
    counts = collections.Counter()
    t_span = np.array([0.0, 0.5, 1.0, 3.0])

    @settings(max_examples=max_examples, **SETTINGS)
    @given(threshold=st.one_of(st.floats(-1, 5), st.sampled_from(SPECIAL_FLOATS)),
           y0=st.one_of(st.floats(-1, 1), st.sampled_from([0.0, 5e-324, -1e308])),
           method=st.sampled_from(METHODS))
    def run(threshold, y0, method):
        counts["f: NaN above a threshold (params)"] += 1
        ys, stats = solve(nan_above, np.array([y0]), t_span, np.array([threshold]),
                          method=method, return_stats=True)
        exact = y0 + t_span
        if np.isnan(threshold) or exact[-1] <= threshold:  # never crosses it (y > nan: False)
            assert _status(stats) == Status.SUCCESS
            np.testing.assert_allclose(np.asarray(ys)[0, :, 0], exact, rtol=1e-9, atol=1e-9)
            return
        if y0 > threshold:  # NaN from the first evaluation
            assert _status(stats) == Status.NON_FINITE
        margin = 1e-6 * max(1.0, abs(threshold))
        reached = (exact < threshold - margin) | (t_span == 0)
        lost = (exact > threshold + margin) & (t_span > 0)
        _assert_failed(ys, stats, exact, reached, lost, rtol=1e-9)

    run()
    return {"examples": dict(counts)}


def blow_up(max_examples: int = 30):
    counts = collections.Counter()
    t_span = np.array([0.0, 0.25, 0.5, 2.0])

    @settings(max_examples=max_examples, **SETTINGS)
    @given(y0=st.one_of(st.floats(0.05, 20), st.sampled_from([1e308, 1e-300, 5e-324, 0.0])),
           method=st.sampled_from(METHODS))
    def run(y0, method):
        counts["f: y' = y² blow-up (y0)"] += 1
        ys, stats = solve(squared, np.array([y0]), t_span, method=method, return_stats=True)
        y0 = np.float64(y0)
        with np.errstate(all="ignore"):
            blow_time = 1.0 / y0
            exact = 1.0 / (1.0 / y0 - t_span)
        if blow_time > 2.0 * (1 + 1e-3):
            assert _status(stats) == Status.SUCCESS
            np.testing.assert_allclose(np.asarray(ys)[0, :, 0], np.where(y0 == 0, 0, exact),
                                       rtol=1e-6, atol=1e-300)
        elif blow_time < 2.0 * (1 - 1e-3):
            reached = (t_span < blow_time * (1 - 1e-3)) | (t_span == 0)
            _assert_failed(ys, stats, np.where(t_span == 0, y0, exact), reached,
                           t_span > blow_time * (1 + 1e-3), rtol=1e-4)

    run()
    return {"examples": dict(counts)}


def division_at_start():
    counts = collections.Counter()
    for method in METHODS:
        counts["f: 1/t from t0 = 0"] += 1
        ys, stats = solve(inverse_time, np.array([1.0]), np.array([0.0, 0.5, 1.0]),
                          method=method, return_stats=True)
        assert _status(stats) == Status.NON_FINITE
        assert np.asarray(ys)[0, 0, 0] == 1.0 and np.all(np.isnan(np.asarray(ys)[0, 1:]))
        # the same f from t0 = 1 is fine: y = 1 + log t
        t_span = np.array([1.0, 2.0, 4.0])
        ys, stats = solve(inverse_time, np.array([1.0]), t_span, method=method,
                          return_stats=True)
        assert _status(stats) == Status.SUCCESS
        np.testing.assert_allclose(np.asarray(ys)[0, :, 0], 1 + np.log(t_span), rtol=1e-7)
    return {"examples": dict(counts)}


def overflow(max_examples: int = 20):
    counts = collections.Counter()
    t_span = np.array([0.0, 1e-3, 1.0])

    @settings(max_examples=max_examples, **SETTINGS)
    @given(rate=st.one_of(st.floats(-5, 5), st.sampled_from([800.0, 1e308, -1e308, np.inf,
                                                              np.nan])),
           method=st.sampled_from(METHODS))
    def run(rate, method):
        counts["f: exp(p y) overflow (params)"] += 1
        ys, stats = solve(exponential, np.array([1.0]), t_span, np.array([rate]), method=method,
                          max_steps=20_000, return_stats=True)
        status = _status(stats)
        ys = np.asarray(ys)[0, :, 0]
        if not np.isfinite(np.exp(rate)) or np.isnan(rate):  # f(y0) itself is Inf or NaN
            assert status == Status.NON_FINITE, status
            return
        # y = -log(exp(-p y0) - p t)/p blows up at t* = exp(-p)/p for p > 0
        blows = rate > 0 and np.exp(-rate) / rate < 1.0 * (1 + 1e-3)
        if blows:
            assert status in FAILED and np.isnan(ys[-1])
        elif rate != 0 and np.exp(-rate) / max(rate, 1e-300) > 1.0 * (1 + 1e-3):
            assert status == Status.SUCCESS
            exact = 1.0 - np.log1p(-rate * t_span * np.exp(rate)) / rate  # stable for small p
            np.testing.assert_allclose(ys, exact, rtol=1e-6)

    run()
    return {"examples": dict(counts)}
