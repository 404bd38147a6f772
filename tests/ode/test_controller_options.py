"""The controller and norm options real codes use: factor_min/factor_max, error weights that leave
the RMS mean, and a first step per trajectory."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shoal.ode import solve

jax.config.update("jax_enable_x64", True)

METHODS = ["tsit5", "rodas5p"]


def oscillator(y, t, p):
    return jnp.stack([y[1], -p[0] * y[0]])


def copies(y, t, p):  # component 0 is the oscillator's position; 1..3 are unrelated decays
    return jnp.concatenate([oscillator(y[:2], t, p), -p[1] * y[2:]])


@pytest.mark.parametrize("method", METHODS)
def test_zero_weights_leave_the_rms_mean(method):
    # Controlling the oscillator inside a 5-component system with weight 0 on the rest takes
    # exactly the oscillator's own steps: the zero-weighted components are not in the mean's
    # denominator either (before, they diluted it by sqrt(5/2)).
    t = jnp.linspace(0.0, 10.0, 5)
    alone, st_alone = solve(oscillator, jnp.array([[1.0, 0.0]]), t, [4.0], method=method,
                            rtol=1e-7, atol=1e-9, return_stats=True)
    inside, st_inside = solve(copies, jnp.array([[1.0, 0.0, 1.0, 2.0, 3.0]]), t, [4.0, 0.1],
                              method=method, rtol=1e-7, atol=1e-9, return_stats=True,
                              error_weights=[1.0, 1.0, 0.0, 0.0, 0.0])
    assert int(st_inside["accepted"][0]) == int(st_alone["accepted"][0])
    assert int(st_inside["rejected"][0]) == int(st_alone["rejected"][0])
    np.testing.assert_array_equal(np.asarray(inside[..., :2]), np.asarray(alone))


@pytest.mark.parametrize("method", METHODS)
def test_factor_limits_bound_the_step_growth(method):
    t = jnp.array([0.0, 20.0])
    y0 = jnp.array([[1.0, 0.0]])
    counts = {}
    for lo, hi in [(0.2, 10.0), (0.3, 20.0), (0.2, 1.2)]:
        ys, st = solve(oscillator, y0, t, [1.0], method=method, rtol=1e-8, atol=1e-10,
                       factor_min=lo, factor_max=hi, first_step=1e-8, return_stats=True)
        np.testing.assert_allclose(np.asarray(ys[0, -1]), [np.cos(20.0), -np.sin(20.0)],
                                   atol=1e-5)
        counts[(lo, hi)] = int(st["accepted"][0])
    # From a step of 1e-8, growth by at most 1.2 per step needs ~log(1e8)/log(1.2) ≈ 100 steps
    # just to reach the step the tolerance allows.
    assert counts[(0.2, 1.2)] > counts[(0.2, 10.0)] + 60
    assert counts[(0.3, 20.0)] <= counts[(0.2, 10.0)]


def test_first_step_per_trajectory_and_under_vmap():
    t = jnp.array([0.0, 1.0])
    y0 = jnp.ones((3, 2))
    steps = jnp.array([1e-9, 1e-3, 0.9])
    _, st = solve(oscillator, y0, t, [1.0], method="tsit5", first_step=steps, return_stats=True)
    one_by_one = [int(solve(oscillator, y0[:1], t, [1.0], method="tsit5", first_step=float(h),
                            return_stats=True)[1]["accepted"][0]) for h in steps]
    assert st["accepted"].tolist() == one_by_one
    assert one_by_one[0] > one_by_one[1]  # a tiny first step costs steps to grow out of

    batched = jax.vmap(lambda h: solve(oscillator, y0, t, [1.0], method="tsit5", first_step=h,
                                       return_stats=True)[1]["accepted"])(
        jnp.stack([steps, steps[::-1]]))
    assert batched[0].tolist() == one_by_one and batched[1].tolist() == one_by_one[::-1]
    with pytest.raises(ValueError, match="first_step must be finite and > 0"):
        solve(oscillator, y0, t, [1.0], first_step=jnp.array([1e-3, 0.0, 1e-3]))
    with pytest.raises(ValueError, match=r"first_step must be a number or have shape \(3,\)"):
        solve(oscillator, y0, t, [1.0], first_step=jnp.ones(2))
