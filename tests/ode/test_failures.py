"""Failed trajectories get a status and NaN, and leave the others untouched; bad input is a
clear error naming the argument."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shoal.ode import Status
from shoal.ode.tsit5 import solve

from ode_problems import blow_up, decay, lorenz, sqrt_domain

T = jnp.array([0.0, 0.5, 2.0])


def test_max_steps_status_and_budget():
    p = jnp.array([10.0, 28.0, 8.0 / 3.0])
    ys, stats = solve(lorenz, jnp.array([1.0, 0.0, 0.0]), jnp.array([0.0, 1e-3, 10.0]), p,
                      max_steps=20, return_stats=True)
    assert int(stats["status"][0]) == Status.MAX_STEPS_REACHED
    assert int(stats["accepted"][0]) + int(stats["rejected"][0]) <= 20
    assert np.all(np.isfinite(np.asarray(ys[0, :2])))
    assert np.all(np.isnan(np.asarray(ys[0, 2])))


def test_budget_is_respected_by_every_trajectory():
    p = jnp.stack([jnp.full(16, 10.0), jnp.linspace(0, 28, 16), jnp.full(16, 8 / 3)], 1)
    for max_steps in (7, 50, 400):
        _, stats = solve(lorenz, jnp.array([1.0, 0.0, 0.0]), jnp.array([0.0, 5.0]), p,
                         max_steps=max_steps, return_stats=True)
        total = np.asarray(stats["accepted"]) + np.asarray(stats["rejected"])
        assert np.all(total <= max_steps)


def test_singular_solution_fails_alone():
    # y' = y² blows up at t = 1/y0: y0 = 1 fails before t = 2, y0 = 0.1 does not.
    y0 = jnp.array([[1.0], [0.1], [0.2]])
    ys, stats = solve(blow_up, y0, T, return_stats=True)
    status = np.asarray(stats["status"])
    assert status[0] in (Status.STEP_SIZE_UNDERFLOW, Status.NON_FINITE, Status.MAX_STEPS_REACHED)
    np.testing.assert_allclose(float(ys[0, 1, 0]), 2.0, rtol=1e-6)
    assert np.isnan(float(ys[0, 2, 0]))
    assert list(status[1:]) == [Status.SUCCESS, Status.SUCCESS]
    np.testing.assert_allclose(np.asarray(ys[1:, 2, 0]), 1.0 / (1.0 / np.array([0.1, 0.2]) - 2.0),
                               rtol=1e-6)
    # The healthy trajectories are bit-identical to solving them without the failing one.
    alone = solve(blow_up, y0[1:], T)
    np.testing.assert_array_equal(np.asarray(ys[1:]), np.asarray(alone))


def test_leaving_the_domain_is_non_finite():
    ys, stats = solve(sqrt_domain, jnp.array([1.0, 0.0]), jnp.array([0.0, 0.5, 3.0]),
                      return_stats=True)
    assert int(stats["status"][0]) == Status.NON_FINITE
    assert np.all(np.isfinite(np.asarray(ys[0, 1])))
    assert np.all(np.isnan(np.asarray(ys[0, 2])))


def test_non_finite_initial_state():
    ys, stats = solve(decay, jnp.array([[1.0], [np.nan]]), T, jnp.array([1.0]),
                      return_stats=True)
    assert list(np.asarray(stats["status"])) == [Status.SUCCESS, Status.NON_FINITE]
    assert np.all(np.isnan(np.asarray(ys[1])))


def test_bad_t_span_inside_jit_is_a_status():
    run = jax.jit(lambda t: solve(decay, jnp.array([1.0]), t, jnp.array([1.0]),
                                  return_stats=True))
    ys, stats = run(jnp.array([0.0, 1.0, 0.5]))
    assert int(stats["status"][0]) == Status.INVALID_INPUT
    assert np.all(np.isnan(np.asarray(ys)))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"t_span": [0.0, 1.0, 1.0]}, "t_span must be strictly increasing"),
        ({"t_span": [1.0, 0.0]}, "t_span must be strictly increasing"),
        ({"t_span": [0.0, np.inf]}, "t_span must be finite"),
        ({"t_span": [[[0.0, 1.0]]]}, r"t_span must have shape \(n_save,\) or \(N, n_save\)"),
        ({"y0": np.ones((2, 2, 1))}, r"y0 must have shape"),
        ({"params": np.ones((3, 1))}, r"different ensemble sizes"),
        ({"params": np.ones((1, 1, 1))}, r"params must have shape"),
        ({"rtol": 0.0}, "rtol must be a finite number > 0"),
        ({"rtol": -1e-6}, "rtol must be a finite number > 0"),
        ({"atol": 0.0}, "atol must be a finite number > 0"),
        ({"atol": -1e-9}, "atol must be a finite number > 0"),
        ({"max_steps": 0}, r"max_steps must be in \[1"),
        ({"max_steps": -5}, r"max_steps must be in \[1"),
        ({"first_step": -0.1}, "first_step must be finite and > 0"),
        ({"max_step": 0.0}, "max_step must be a finite number > 0"),
        ({"method": "rk4"},
         "method must be one of 'tsit5', 'rodas5p', 'rodas4', 'rosenbrock23', 'vern7', 'vern9'; "
         "got 'rk4'"),
        ({"method": "rodas5p", "lu_precision": "fp16"},
         "lu_precision must be one of 'fp64', 'fp32'; got 'fp16'"),
        ({"error_weights": np.ones(3)}, r"error_weights must have shape \(1,\)"),
        ({"error_weights": -np.ones(1)}, "error_weights must be finite and >= 0"),
        ({"pcoeff": np.nan}, "pcoeff must be a finite Python float"),
        ({"lu_precision": "float32"}, "lu_precision must be one of 'fp64', 'fp32'"),
        ({"lu_precision": None}, "lu_precision must be one of 'fp64', 'fp32'; got None"),
    ],
)
@pytest.mark.parametrize("method", [None, "rodas5p", "tsit5"])  # None: the default method
def test_bad_input_is_a_value_error(kwargs, match, method):
    args = {"y0": np.ones((2, 1)), "t_span": [0.0, 1.0], "params": np.ones((2, 1))}
    if method is not None:
        args["method"] = method
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        solve(decay, args.pop("y0"), args.pop("t_span"), args.pop("params"), **args)


@pytest.mark.parametrize("method", ["rodas5p", "tsit5"])
def test_type_errors(method):
    with pytest.raises(TypeError, match="f must be callable"):
        solve(None, np.ones(1), [0.0, 1.0], method=method)
    with pytest.raises(TypeError, match="max_steps must be a Python int"):
        solve(decay, np.ones(1), [0.0, 1.0], np.ones(1), method=method, max_steps=10.5)
    with pytest.raises(TypeError, match="y0 must be real"):
        solve(decay, np.ones(1, complex), [0.0, 1.0], np.ones(1), method=method)


def test_wrong_model_output_is_a_value_error():
    with pytest.raises(ValueError, match=r"must return shape \(2,\)"):
        solve(lambda y, t, p: y[:1], np.ones(2), [0.0, 1.0])
    with pytest.raises(ValueError, match="must return dtype float64"):
        solve(lambda y, t, p: y.astype(jnp.float32), np.ones(2), [0.0, 1.0])
