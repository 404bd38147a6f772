"""Hostile values for every argument of shoal.ode.solve, run in a child process by
test_solve_inputs.py. Each case returns {"examples": {argument: count}}.

The model is y' = -k y (closed form y0 exp(-k (t - t0))), the same few compiled models for
every example: the values vary, not the models.
"""

from __future__ import annotations

import collections

import jax
import jax.numpy as jnp
import numpy as np
from hostile_values import SPECIAL_FLOATS, anything, arrays, scalars
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shoal.ode import Event, Status, solve
from shoal.ode._options import SolveOptions

OUTCOMES = collections.Counter()  # what the examples ended in: a test that never solves fails

SETTINGS = dict(deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))

Y0 = np.array([[1.0], [2.0], [0.5]])
K = np.array([[1.0], [0.5], [2.0]])
T = np.array([0.0, 0.5, 1.0])
STATUSES = {int(s) for s in Status}


def decay(y, t, p):
    return -p[0] * y


def double(y, t, p):  # a save function
    return 2.0 * y


def half_way(y, t, p):  # an event function
    return y[0] - 0.5


def keep(y, t, p):  # a jump function that changes nothing
    return y


def _message(err) -> str:
    return str(err) + " ".join(getattr(err, "__notes__", []))


def expect_clear_error(err, names):
    """A ValueError/TypeError that names one of ``names`` (the argument, or its path)."""
    text = _message(err)
    assert isinstance(err, (ValueError, TypeError)) and any(n in text for n in names), (
        f"unclear error for {names}: {type(err).__name__}: {text[:300]}")


def _rows(x, n_rows, dtype):
    x = np.asarray(x).astype(dtype)
    x = x.reshape(-1, x.shape[-1]) if x.ndim == 2 else x.reshape(1, -1)
    return np.broadcast_to(x, (n_rows, x.shape[-1]))


def check_result(ys, stats, y0, k, t_span, *, loose=False, saved=None):
    """Every status is a Status; failed members end in NaN; members that succeeded agree with
    the closed form, in the solve's dtype."""
    ys = np.asarray(ys)
    status = np.asarray(stats["status"])
    assert set(status.tolist()) <= STATUSES, status
    dtype = ys.dtype
    n_traj = ys.shape[0]
    y0 = _rows(y0, n_traj, dtype).astype(np.float64)
    k_all = np.asarray(k).astype(dtype).astype(np.float64)
    k = _rows(k_all, n_traj, np.float64)[:, 0]
    t = _rows(t_span, n_traj, dtype).astype(np.float64)
    with np.errstate(all="ignore"):
        exact = y0[:, None, :] * np.exp(-k[:, None, None] * (t - t[:, :1])[:, :, None])
    if saved is not None:
        exact = saved(exact)
    rel, abs_ = (1e-5, 1e-8) if dtype == np.float64 else (2e-3, 1e-5)
    for i, s in enumerate(status):
        if s == Status.SUCCESS:
            if loose or not np.all(np.isfinite(exact[i])):
                continue
            scale = np.abs(exact[i])
            assert np.all(np.abs(ys[i] - exact[i]) <= rel * scale + abs_ * max(1.0, scale.max())
                          ), (i, ys[i], exact[i])
        elif s != Status.EVENT:
            assert np.all(np.isnan(ys[i, -1])), (i, s, ys[i])


ARRAY_ARGUMENTS = ("y0", "t_span", "params", "tstops", "first_step", "error_weights")


def array_arguments(per_argument: int = 40):
    """Each positional/array argument replaced by a hostile value; the others stay clean."""
    counts = collections.Counter()
    for name in ARRAY_ARGUMENTS:
        _one_array_argument(name, per_argument, counts)
    return {"examples": dict(counts), "outcomes": dict(OUTCOMES)}


def _one_array_argument(name, max_examples, counts):
    @settings(max_examples=max_examples, **SETTINGS)
    @given(value=anything())
    def run(value):
        counts[name] += 1
        args = dict(y0=Y0, t_span=T, params=K, tstops=None, first_step=None, error_weights=None)
        args[name] = value
        try:
            ys, stats = solve(decay, args["y0"], args["t_span"], args["params"], method="tsit5",
                              tstops=args["tstops"], first_step=args["first_step"],
                              error_weights=args["error_weights"], return_stats=True)
        except Exception as err:  # noqa: BLE001 - the check is what it must be
            if name == "params" and "while tracing f(y, t, p)" in _message(err):
                # f reads p[0]: an empty array or a dict makes f itself fail (IndexError,
                # KeyError); f's own error keeps its type, the note names f and p's shapes
                OUTCOMES["clear error"] += 1
                return
            names = (name, "ensemble size") if name in ("y0", "params", "t_span") else (name,)
            expect_clear_error(err, names)
            OUTCOMES["clear error"] += 1
            return
        OUTCOMES["solved"] += 1
        weights = args["error_weights"]
        loose = weights is not None and not np.all(np.asarray(weights, np.float64) >= 1e-2)
        check_result(ys, stats, args["y0"], args["params"], args["t_span"], loose=loose)

    run()


def _option_values(name: str):
    """Hostile values for one option, plus the valid values a caller would also pass."""
    specific = {
        "method": st.sampled_from(["tsit5", "rodas5p", "RODAS5P", "rk4", "", None, 1]),
        "lu_precision": st.sampled_from(["fp64", "fp32", "fp16", None, 32]),
        "ordering": st.sampled_from(["amd", "natural", "rcm", None]),
        "sparsity": st.sampled_from([None, "auto", "dense", np.eye(1, dtype=bool), [[True]],
                                     np.ones((2, 2), bool), np.array([[0, 0]]),
                                     np.array([[1, 0]]), np.array([[-1, 0]]),
                                     np.array([[0.5]]), np.zeros((1, 1), bool), 3]),
        "jump_fn": st.sampled_from([None, keep, 3, "g"]),
        "save_fn": st.sampled_from([None, double, 3, "h"]),
        "event": st.sampled_from([None, Event(half_way), Event(half_way, terminal=False),
                                  Event(half_way, direction=-1), half_way, "e"]),
        "max_steps": st.one_of(st.integers(-3, 50), st.sampled_from([2**31, 2**40, True, 10.0,
                                                                     np.int64(20)])),
        "return_stats": st.sampled_from([True, False, "no", None, 1, np.bool_(True)]),
        "progress": st.sampled_from([False, "yes", 3, None, lambda done, total: None]),
        "params_axes": st.sampled_from([None, 0, 1, "x", (0,), {"k": 0}, -1]),
    }
    return specific.get(name, scalars)


OPTION_ARGUMENTS = (*SolveOptions.__dataclass_fields__, "return_stats", "progress",
                    "params_axes")


def option_keywords(per_argument: int = 12):
    """Each keyword option replaced by a hostile value; Tsit5 unless the option is Rodas5P's."""
    counts = collections.Counter()
    for name in OPTION_ARGUMENTS:
        _one_option(name, per_argument, counts)
    return {"examples": dict(counts), "outcomes": dict(OUTCOMES)}


def _one_option(name, max_examples, counts):
    @settings(max_examples=max_examples, **SETTINGS)
    @given(value=_option_values(name))
    def run(value):
        counts[name] += 1
        rodas = name in ("sparsity", "ordering", "lu_precision")
        kwargs = {"method": "rodas5p" if rodas else "tsit5", "return_stats": True, name: value}
        try:
            out = solve(decay, Y0, T, K, **kwargs)
        except Exception as err:  # noqa: BLE001
            expect_clear_error(err, (name, "Event"))
            OUTCOMES["clear error"] += 1
            return
        OUTCOMES["solved"] += 1
        if name in ("return_stats", "sens_error_control"):
            assert isinstance(value, (bool, np.bool_)), f"{name}={value!r} was taken as a flag"
        if kwargs["return_stats"] is False:
            ys, stats = out, None
        else:
            ys, stats = out
        if stats is None:
            assert np.asarray(ys).shape == (3, 3, 1)
            return
        tolerances = (SolveOptions().rtol if name != "rtol" else value,
                      SolveOptions().atol if name != "atol" else value)
        loose = not all(float(np.asarray(tol)) <= 1e-6 for tol in tolerances)
        check_result(ys, stats, Y0, K, T, loose=loose,
                     saved=(lambda y: 2.0 * y) if value is double else None)
        if isinstance(value, Event) and value.terminal:
            status = np.asarray(stats["status"])
            assert Status.EVENT in status.tolist()  # members 1 and 2 cross 0.5 before t = 1

    run()


HOSTILE_Y0 = [np.nan, np.inf, -np.inf, 1e308, -1e308, 5e-324]
HOSTILE_K = [np.nan, np.inf, -np.inf, 1e308, -1e308, -800.0]


def ensemble_isolation(per_kind: int = 20):
    """A hostile member (NaN/Inf/huge y0 or k) leaves every other member bit for bit as the
    clean members solved alone, statuses and step counts included; eagerly and under jit with
    per-member t_span rows, where a bad row is the INVALID_INPUT status."""
    counts = collections.Counter()
    for kind in ("y0", "params", "t_span"):
        _one_member_kind(kind, per_kind, counts)
    return {"examples": dict(counts)}


def _one_member_kind(kind, max_examples, counts):
    @settings(max_examples=max_examples, **SETTINGS)
    @given(n=st.integers(2, 6), data=st.data(), method=st.sampled_from(["tsit5", "rodas5p"]))
    def run(n, data, method):
        counts[f"ensemble member {kind}"] += 1
        y0 = np.array(data.draw(st.lists(st.floats(0.1, 10), min_size=n, max_size=n)))[:, None]
        k = np.array(data.draw(st.lists(st.floats(0.1, 5), min_size=n, max_size=n)))[:, None]
        t = np.broadcast_to(T, (n, T.size)).copy()
        bad = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))
        bad[data.draw(st.integers(0, n - 1))] = True
        bad[data.draw(st.integers(0, n - 1))] = False  # at least one clean member, maybe none bad
        for i in np.flatnonzero(bad):
            if kind == "y0":
                y0[i] = data.draw(st.sampled_from(HOSTILE_Y0))
            elif kind == "params":
                k[i] = data.draw(st.sampled_from(HOSTILE_K))
            else:
                t[i] = data.draw(st.sampled_from([T[::-1], [0.0, np.nan, 1.0], [0.0, 0.0, 1.0],
                                                  [0.0, 1e300, np.inf]]))

        def run_solve(y0, k, t):
            fn = lambda y0, k, t: solve(decay, y0, t, k, method=method, return_stats=True)  # noqa: E731
            return jax.jit(fn)(y0, k, t) if kind == "t_span" else fn(y0, k, t)

        ys, stats = run_solve(y0, k, t)
        clean = ~bad
        ys_alone, stats_alone = run_solve(y0[clean], k[clean], t[clean])
        np.testing.assert_array_equal(np.asarray(ys)[clean], np.asarray(ys_alone))
        for key in ("status", "accepted", "rejected"):
            np.testing.assert_array_equal(np.asarray(stats[key])[clean], stats_alone[key])
        check_result(ys_alone, stats_alone, y0[clean], k[clean], t[clean])
        status = np.asarray(stats["status"])
        if kind == "t_span":
            assert np.all(status[bad] == Status.INVALID_INPUT)
        else:
            non_finite_y0 = bad & ~np.isfinite(y0[:, 0])
            assert np.all(status[non_finite_y0] == Status.NON_FINITE)

    run()


RUN_JIT = jax.jit(lambda y0, k, fs, w: solve(decay, y0, T, k, method="tsit5", first_step=fs,
                                             error_weights=w, return_stats=True))


def traced_hostile_values(per_argument: int = 10):
    """Values only seen inside jit (so not checked before the run): NaN/Inf/huge y0, params,
    first_step and error_weights end in a status or a correct result, never a crash."""
    counts = collections.Counter()
    for name in ("y0", "params", "first_step", "error_weights"):
        _one_traced(name, per_argument, counts)
    return {"examples": dict(counts)}


def _one_traced(name, max_examples, counts):
    @settings(max_examples=max_examples, **SETTINGS)
    @given(values=arrays(max_dims=1, max_side=1).filter(lambda a: a.shape == (1,)).map(
               lambda a: a.astype(np.float64)) | st.sampled_from(SPECIAL_FLOATS).map(
               lambda v: np.array([v])))
    def run(values):
        counts[f"{name} (under jit)"] += 1
        args = dict(y0=Y0, params=K, first_step=np.full(3, 1e-3), error_weights=np.ones(1))
        args[name] = np.broadcast_to(values, np.shape(args[name])).copy()
        ys, stats = RUN_JIT(args["y0"], args["params"], args["first_step"],
                            args["error_weights"])
        weights = args["error_weights"]
        loose = not (np.all(weights >= 1e-2) and np.all(np.isfinite(weights)))
        check_result(ys, stats, args["y0"], args["params"], T, loose=loose)

    run()


def gradient_isolation(max_examples: int = 12):
    """Differentiated (sens_error_control both ways): a hostile member's NaN/Inf parameters
    leave the other members' values and gradients bit for bit as without it; the clean
    gradients match the closed form d/dk y0 exp(-k t) = -t y."""
    counts = collections.Counter()

    @settings(max_examples=max_examples, **SETTINGS)
    @given(n=st.integers(2, 4), data=st.data(), control=st.booleans())
    def run(n, data, control):
        counts["sens_error_control (gradient, hostile member)"] += 1
        k = np.array(data.draw(st.lists(st.floats(0.1, 3), min_size=n, max_size=n)))[:, None]
        bad = data.draw(st.integers(0, n - 1))
        k[bad] = data.draw(st.sampled_from(HOSTILE_K))

        def loss(k):
            ys = solve(decay, np.ones(1), T, k, method="tsit5", sens_error_control=control)
            return jnp.sum(jnp.where(jnp.isnan(ys[:, -1, 0]), 0.0, ys[:, -1, 0]))

        clean = np.arange(n) != bad
        g = np.asarray(jax.grad(loss)(k))
        g_alone = np.asarray(jax.grad(loss)(k[clean]))
        np.testing.assert_array_equal(g[clean], g_alone)
        exact = -T[-1] * np.exp(-k[clean, 0] * T[-1])
        np.testing.assert_allclose(g_alone[:, 0], exact, rtol=1e-6)

    run()
    return {"examples": dict(counts)}
