"""shoal.ode.solve under hostile input: every argument gets NaN/±Inf/huge/subnormal values,
random shapes and dtypes, None, strings, objects; each call raises a ValueError/TypeError that
names the argument or returns a correct result (the closed form of y' = -k y where the solve
succeeded, NaN after a failure), and a hostile ensemble member changes no other member.

Each test runs its hypothesis examples in one child process (conftest.run_child): a crash in
the kernel fails the test, not the suite; the bugs those runs found are pinned below, in
process, since they raise before anything runs."""

import numpy as np
import pytest

from shoal.ode import Event, solve

from ode_problems import decay


def test_array_arguments(child):
    report = child("hostile_solve_cases:array_arguments")
    assert sum(report["examples"].values()) >= 50


def test_option_keywords(child):
    report = child("hostile_solve_cases:option_keywords")
    assert sum(report["examples"].values()) >= 80


def test_hostile_member_leaves_the_others_bit_for_bit(child):
    report = child("hostile_solve_cases:ensemble_isolation")
    assert set(report["examples"]) == {"ensemble member y0", "ensemble member params",
                                       "ensemble member t_span"}


def test_values_seen_only_inside_jit(child):
    report = child("hostile_solve_cases:traced_hostile_values")
    assert sum(report["examples"].values()) >= 25


# The bugs the hostile runs found, pinned one by one (input: what it did before the fix).
BAD_INPUT = [
    # None / strings / ragged lists: a JAX or NumPy message that did not name the argument
    ({"y0": None}, ValueError, "y0 must be an array of numbers"),
    ({"t_span": [[0.0], [0.0, 1.0]]}, ValueError, "t_span must be an array of numbers"),
    ({"tstops": "a"}, ValueError, "tstops must be an array of numbers"),
    ({"first_step": "a"}, ValueError, "first_step must be an array of numbers"),
    ({"error_weights": "a"}, ValueError, "error_weights must be an array of numbers"),
    # a Python int beyond int64: OverflowError from JAX
    ({"y0": [2**63]}, ValueError, "y0 must be an array of numbers"),
    ({"params": [2**63]}, ValueError, "params must be an array of numbers"),
    # params of shape (0, 0): ZeroDivisionError in a reshape
    ({"params": np.ones((0, 0))}, ValueError, "different ensemble sizes"),
    # float16 y0: a kernel error ("element type the compiled model was not built for")
    ({"y0": np.ones((2, 1), np.float16)}, TypeError, "y0 must be float32 or float64"),
    # subnormals, read as 0 by the kernel (flush-to-zero): [0, 5e-324] was INVALID_INPUT
    # eagerly, max_step=5e-324 silently unbounded, the others silently changed
    ({"t_span": [0.0, 5e-324]}, ValueError, "t_span must be strictly increasing once subnormal"),
    ({"max_step": 5e-324}, ValueError, "max_step must be at least 2.23e-308"),
    ({"rtol": 5e-324}, ValueError, "rtol must be at least"),
    ({"atol": 1e-310}, ValueError, "atol must be at least"),
    ({"first_step": 5e-324}, ValueError, "first_step must be at least"),
    ({"factor_min": 5e-324}, ValueError, "factor_min must be at least"),
    ({"y0": np.ones((2, 1), np.float32), "max_step": 1e-40}, ValueError,
     "max_step must be at least 1.18e-38"),
    # a span whose length overflows: MAX_STEPS_REACHED after 100 000 steps
    ({"t_span": [-1e308, 1e308]}, ValueError, "whose length overflows float64"),
    # flags that were silently truthy (bool("False") is True) or ambiguous
    ({"return_stats": "no"}, TypeError, "return_stats must be True or False"),
    ({"sens_error_control": "False"}, TypeError, "sens_error_control must be True or False"),
    ({"sens_error_control": np.array([1, 0])}, TypeError, "sens_error_control must be True"),
    ({"rtol": True}, TypeError, "rtol must be a Python float"),
    ({"pcoeff": True}, ValueError, "pcoeff must be a finite Python float"),
]


@pytest.mark.parametrize(("kwargs", "error", "match"), BAD_INPUT)
def test_found_bad_input_is_a_clear_error(kwargs, error, match):
    args = {"y0": np.ones((2, 1)), "t_span": [0.0, 1.0], "params": np.ones((2, 1)),
            "method": "tsit5"}
    args.update(kwargs)
    with pytest.raises(error, match=match):
        solve(decay, args.pop("y0"), args.pop("t_span"), args.pop("params"), **args)


def test_event_terminal_must_be_a_bool():
    with pytest.raises(TypeError, match="Event.terminal must be True or False, got 'no'"):
        Event(lambda y, t, p: y[0], terminal="no")  # was silently terminal


def test_empty_tstops_are_no_stops():
    # was ZeroDivisionError (a reshape of shape (0,) to (-1, 0))
    ys = solve(decay, np.ones(1), [0.0, 1.0], np.ones(1), method="tsit5", tstops=[])
    plain = solve(decay, np.ones(1), [0.0, 1.0], np.ones(1), method="tsit5")
    np.testing.assert_array_equal(ys, plain)


def test_hostile_member_leaves_the_others_gradients_bit_for_bit(child):
    report = child("hostile_solve_cases:gradient_isolation")
    assert sum(report["examples"].values()) >= 10
