"""shoal.ode.solve under hostile input: every argument gets NaN/±Inf/huge/subnormal values,
random shapes and dtypes, None, strings, objects; each call raises a ValueError/TypeError that
names the argument or returns a correct result (the closed form of y' = -k y where the solve
succeeded, NaN after a failure), and a hostile ensemble member changes no other member.

Each test runs its hypothesis examples in one child process (conftest.run_child): a crash in
the kernel fails the test, not the suite."""


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
    assert sum(report["examples"].values()) >= 15
