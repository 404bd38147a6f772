"""Which parameter leaves are per member when a leading axis has length N (issue 24).

A leaf whose leading axis equals the number of members is read the one way the model's
functions accept; where they accept both, the call is refused with the params_axes that settles
it; a shape error says how params was read. References are closed forms of y' = -k y.
"""

import jax.numpy as jnp
import numpy as np
import pytest

from shoal.ode import ModelTraceError, solve

TS = jnp.linspace(0.0, 1.0, 3)


def decay(y, t, p):
    return -p["rates"] * y


def test_the_issue_case_is_refused_when_n_equals_the_leaf_length_and_right_otherwise():
    rates = jnp.array([1.0, 2.0])
    # N = 3: the two rates can only be per state.
    ys = solve(decay, jnp.ones((3, 2)), TS, {"rates": rates})
    np.testing.assert_allclose(np.asarray(ys[:, -1]), np.tile(np.exp(-np.asarray(rates)), (3, 1)),
                               rtol=1e-6)
    # N = 2: per member or per state both trace; no guess.
    with pytest.raises(ValueError, match=r"params\['rates'\]: leading axis of length 2.*both "
                       r"ways.*params_axes=\{'rates': 0\} \(per member\) or "
                       r"params_axes=\{'rates': None\} \(shared\)"):
        solve(decay, jnp.ones((2, 2)), TS, {"rates": rates})
    shared = solve(decay, jnp.ones((2, 2)), TS, {"rates": rates}, params_axes={"rates": None})
    np.testing.assert_allclose(np.asarray(shared[:, -1]),
                               np.tile(np.exp(-np.asarray(rates)), (2, 1)), rtol=1e-6)
    own = solve(decay, jnp.ones((2, 2)), TS, {"rates": rates}, params_axes={"rates": 0})
    np.testing.assert_allclose(np.asarray(own[:, -1]),
                               np.exp(-np.asarray(rates))[:, None] * np.ones((2, 2)), rtol=1e-6)


def test_a_leaf_f_can_only_take_one_way_is_read_that_way():
    rates = jnp.array([0.5, 1.0, 2.0])
    # One rate per member (f cannot multiply three rates into two states).
    ys = solve(decay, jnp.ones((3, 2)), TS, {"rates": rates})
    np.testing.assert_allclose(np.asarray(ys[:, -1]),
                               np.exp(-np.asarray(rates))[:, None] * np.ones((3, 2)), rtol=1e-6)

    # A table of N entries read by interpolation beside per-member rates: shared.
    def forced(y, t, p):
        return -p["rates"] * y + jnp.interp(t, jnp.linspace(0.0, 1.0, 3), p["table"])

    table = jnp.array([0.0, 1.0, 4.0])
    got = solve(forced, jnp.ones((3, 1)), TS, {"rates": rates, "table": table})
    want = solve(forced, jnp.ones((3, 1)), TS, {"rates": rates, "table": table},
                 params_axes={"rates": 0, "table": None})
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    differs = solve(forced, jnp.ones((3, 1)), TS, {"rates": rates, "table": 2 * table})
    assert not np.allclose(np.asarray(differs), np.asarray(got))  # the table is read at all


def test_a_bare_array_follows_the_same_rule_as_a_leaf():
    p = jnp.array([0.5, 1.0, 2.0])
    per_member = solve(lambda y, t, p: -p * y, jnp.ones((3, 2)), TS, p)
    np.testing.assert_allclose(np.asarray(per_member[:, -1]),
                               np.exp(-np.asarray(p))[:, None] * np.ones((3, 2)), rtol=1e-6)
    indexed = solve(lambda y, t, p: -p[1] * y, jnp.ones((3, 2)), TS, p)  # a shared vector
    np.testing.assert_allclose(np.asarray(indexed[:, -1]), np.exp(-1.0) * np.ones((3, 2)),
                               rtol=1e-6)
    with pytest.raises(ValueError, match=r"params: leading axis of length 2.*params_axes=0 "
                       r"\(per member\) or params_axes=None \(shared\)"):
        solve(lambda y, t, p: -p * y, jnp.ones((2, 2)), TS, jnp.array([1.0, 2.0]))


def test_the_other_model_functions_take_part_in_the_reading():
    # f never reads "dose"; the jump adds it to one state, so it can only be per member.
    def f(y, t, p):
        return -y

    def dose(y, t, p):
        return y.at[0].add(p["dose"])

    doses = jnp.array([1.0, 2.0])
    ys = solve(f, jnp.ones((2, 2)), jnp.array([0.0, 1.0, 2.0]), {"dose": doses}, jump_fn=dose,
               tstops=jnp.array([1.0]))
    want = np.exp(-1.0) * (np.exp(-1.0) + np.asarray(doses))
    np.testing.assert_allclose(np.asarray(ys[:, -1, 0]), want, rtol=1e-6)


def test_a_shape_error_says_how_params_was_read():
    with pytest.raises(ModelTraceError, match=r"returned shape \(5,\).*read as "
                       r"params_axes=\{'k': None\}.*params_axes=\{'k': 0\}"):
        solve(lambda y, t, p: -p["k"] * y, jnp.ones(1), TS, {"k": jnp.ones(5)})
    # ... and params_axes does what it says: five members from one y0.
    ys = solve(lambda y, t, p: -p["k"] * y, jnp.ones(1), TS, {"k": jnp.arange(1.0, 6.0)},
               params_axes={"k": 0})
    np.testing.assert_allclose(np.asarray(ys[:, -1, 0]), np.exp(-np.arange(1.0, 6.0)),
                               rtol=1e-6)


def test_a_leaf_no_function_reads_is_never_ambiguous():
    # A dict carried over from a solve that used "dose": f here ignores it.
    params = {"rates": jnp.array([0.5, 1.0, 2.0]), "dose": jnp.array([1.0, 2.0, 3.0])}
    ys = solve(decay, jnp.ones((3, 2)), TS, params)
    np.testing.assert_allclose(np.asarray(ys[:, -1]),
                               np.exp(-np.asarray(params["rates"]))[:, None] * np.ones((3, 2)),
                               rtol=1e-6)


def test_a_square_matrix_of_n_rows_is_in_doubt_and_refused():
    # y' = -M y - y/10 with M (2, 2) and two members: a row of M per member (M[i] @ y, a scalar
    # that broadcasts to y's shape) traces as readily as the whole matrix. Both readings run, so
    # neither is guessed.
    m = jnp.array([[1.0, 0.5], [0.0, 2.0]])

    def linear(y, t, p):
        return -(p["m"] @ y) - 0.1 * y

    with pytest.raises(ValueError, match=r"params\['m'\]: leading axis of length 2.*both ways.*"
                       r"params_axes=\{'m': 0\} \(per member\) or params_axes=\{'m': None\}"):
        solve(linear, jnp.ones((2, 2)), TS, {"m": m})
    from scipy.linalg import expm

    ys = solve(linear, jnp.ones((2, 2)), TS, {"m": m}, params_axes={"m": None})
    np.testing.assert_allclose(np.asarray(ys[:, -1]),
                               np.tile(expm(-np.asarray(m) - 0.1 * np.eye(2)) @ np.ones(2),
                                       (2, 1)), rtol=1e-6)


def test_a_matrix_in_doubt_beside_a_leaf_only_shared_works_is_refused():
    # The kinetics of tests/codegen/test_param_contractions.py with as many members as species:
    # "w" (4, 3) can only be shared (w[:, 0] of a row fails), and "s" (4, 4) then traces both
    # ways; it was read per member, silently a different model. With 5 members nothing is in
    # doubt.
    rng = np.random.default_rng(3)
    params = {"w": jnp.asarray(rng.uniform(0.5, 1.5, (4, 3))),
              "s": jnp.asarray(rng.normal(size=(4, 4)) / 4)}

    def kinetics(y, t, p):
        w = p["w"]
        return p["s"] @ (w[:, 0] * jnp.exp(-w[:, 1] / (1.0 + y**2))) - w[:, 2] * y

    with pytest.raises(ValueError, match=r"params\['s'\]: leading axis of length 4.*both ways.*"
                       r"params_axes=\{'s': None, 'w': None\} \(shared\)"):
        solve(kinetics, jnp.ones((4, 4)), TS, params)
    five = solve(kinetics, jnp.ones((5, 4)), TS, params)
    four = solve(kinetics, jnp.ones((4, 4)), TS, params, params_axes={"s": None, "w": None})
    np.testing.assert_allclose(np.asarray(four), np.asarray(five[:4]), rtol=1e-12)


def test_a_schedule_with_other_lengths_stays_per_member():
    # A (N, K) schedule with K != N that f reduces over: per member, as its rows suggest.
    doses = jnp.array([[1.0, 2.0, 0.5], [0.25, 0.25, 0.5]])

    def decay_by_total(y, t, p):
        return -jnp.sum(p["doses"]) * y

    ys = solve(decay_by_total, jnp.ones((2, 2)), TS, {"doses": doses})
    totals = np.asarray(doses).sum(axis=1)
    np.testing.assert_allclose(np.asarray(ys[:, -1]), np.exp(-totals)[:, None] * np.ones((2, 2)),
                               rtol=1e-6)
