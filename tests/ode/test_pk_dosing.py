"""Multi-dose pharmacokinetics: discontinuous forcing at ``tstops``, boluses by ``jump_fn``,
``max_step``, per-trajectory schedules and save times, and gradients through the doses.

The model has three compartments, amounts in mg, time in h::

    depot'      = -ka depot                                   (oral / subcutaneous depot)
    central'    =  ka depot + R(t) - (CL + Q)/V1 central + Q/V2 periph
    periph'     =  Q/V1 central - Q/V2 periph

with concentration C = central / V1 (mg/L) and parameters (CL, V1, Q, V2, ka) per trajectory.
Two dosing routes:

* short intravenous infusions: the rate R(t) is R0 during 0.1 h windows (every 12 h), written in
  ``f`` with ``jnp.where`` on t as a user would, and ``tstops`` at every window start and end;
* boluses into the depot: ``jump_fn`` adds the dose to the depot at each stop (the dose times).

The reference is SciPy DOP853 at rtol 1e-12, atol 1e-14, restarted at every window boundary and
dose time (the bolus added between segments), evaluated at the save times by its dense output. It
is itself checked against closed forms (one compartment: bolus, infusion and first-order
absorption, all by superposition) and against the matrix exponential of the linear system. A
segmented shoal solve (one solve per piece with a rate-constant f, what a user had to write
before ``tstops``) is the baseline for accuracy and step count.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from scipy.integrate import solve_ivp

from shoal.ode import Status, solve

METHODS = ("rodas5p", "tsit5")
DEPOT, CENTRAL, PERIPH = 0, 1, 2

TAU = 12.0  # dosing interval (h)
TINF = 0.1  # infusion duration (h)
T_FIRST = 1.0  # first dose, 1 h into the observation (a stop at t_span[0] would be ignored)
T_END = 72.0
DOSE_TIMES = T_FIRST + TAU * np.arange(6)  # 1, 13, ..., 61: the last window ends before T_END
WINDOW_ENDS = DOSE_TIMES + TINF
INFUSION_STOPS = np.concatenate([DOSE_TIMES, WINDOW_ENDS])
# Every 2 h, plus saves inside each window and just after it (the peaks); none is a stop.
T_SAVE = np.unique(np.concatenate([np.linspace(0.0, T_END, 37), DOSE_TIMES + 0.05,
                                   WINDOW_ENDS + 0.4]))

N = 4
PARAMS = {
    "CL": np.array([4.0, 5.0, 6.5, 3.0]),  # clearance (L/h)
    "V1": np.array([40.0, 50.0, 35.0, 60.0]),  # central volume (L)
    "Q": np.array([8.0, 10.0, 12.0, 6.0]),  # inter-compartmental clearance (L/h)
    "V2": np.array([80.0, 100.0, 70.0, 120.0]),  # peripheral volume (L)
    "ka": np.array([1.0, 1.5, 0.8, 2.0]),  # absorption rate constant (1/h)
    "R0": np.array([1000.0, 800.0, 1200.0, 1000.0]),  # infusion rate (mg/h): 80-120 mg a dose
    "dose": np.array([100.0, 80.0, 120.0, 150.0]),  # bolus (mg)
}
Y0 = np.zeros((N, 3))

SOLVER_TOL = dict(rtol=1e-8, atol=1e-10)
GRAD_TOL = dict(rtol=1e-10, atol=1e-12)
REF_TOL = dict(rtol=1e-12, atol=1e-14)
# Bounds. Landing on the stops with f evaluated strictly on either side, the error at rtol 1e-8
# should be that of a solve restarted at every stop with a rate-constant f: 2.6e-9 (Tsit5) and
# 2.7e-9 (Rodas5P), measured by test_segmented_shoal_solves_match_reference (infusions) and
# 2.5-3.3e-9 for the depot boluses; diffrax Tsit5 with jump_ts: 2.8e-9. A solver that evaluates
# f *at* the stops (segmented solves of the jnp.where models) gets 4e-8 to 1.5e-6, depending on
# the style. The gradient of such a restarted solve (rtol 1e-10) is within 1e-9 of central
# differences (eps 1e-5) and 1e-10 of the exact derivative; evaluating at the stops, 1e-5.
ACCURACY = 1e-7
GRAD_ACCURACY = 1e-6


def member(p, i):
    """Trajectory i's parameters: floats (a per-trajectory table leaf gives its row)."""
    return {k: np.asarray(v)[i] for k, v in p.items()}


def jparams(p):
    return {k: jnp.asarray(v) for k, v in p.items()}


# --------------------------------------------------------------------------------------------
# Models (jax.numpy, traced by shoal)
# --------------------------------------------------------------------------------------------

def _pk(y, p, rate):
    k10, k12, k21 = p["CL"] / p["V1"], p["Q"] / p["V1"], p["Q"] / p["V2"]
    absorbed = p["ka"] * y[DEPOT]
    return jnp.stack([-absorbed,
                      absorbed + rate - (k10 + k12) * y[CENTRAL] + k21 * y[PERIPH],
                      k12 * y[CENTRAL] - k21 * y[PERIPH]])


def infusion_mod(y, t, p):
    """Rate R0 while (t - 1) mod 12 < 0.1: on at each window start, off at its end."""
    on = jnp.mod(t - T_FIRST, TAU) < TINF
    return _pk(y, p, jnp.where(on, p["R0"], 0.0))


_STARTS = jnp.asarray(DOSE_TIMES)


def infusion_closed(y, t, p):
    """Rate R0 on s <= t <= s + 0.1 for each listed start s: on at both window boundaries."""
    on = jnp.any((t >= _STARTS) & (t <= _STARTS + TINF))
    return _pk(y, p, jnp.where(on, p["R0"], 0.0))


def infusion_open(y, t, p):
    """Rate R0 times the number of windows with s < t < s + 0.1: off at both boundaries."""
    inside = jnp.where((t > _STARTS) & (t < _STARTS + TINF), 1.0, 0.0)
    return _pk(y, p, p["R0"] * jnp.sum(inside))


INFUSIONS = {"mod": infusion_mod, "closed": infusion_closed, "open": infusion_open}


def infusion_table(y, t, p):
    """Per-trajectory dosing table ``p["starts"]`` (padded with times outside the span)."""
    s = p["starts"]
    on = jnp.any((t >= s) & (t < s + TINF))
    return _pk(y, p, jnp.where(on, p["R0"], 0.0))


def no_infusion(y, t, p):
    return _pk(y, p, 0.0)


def bolus_to_depot(y, t, p):
    return y.at[DEPOT].add(p["dose"])


def bolus_to_central(y, t, p):
    return y.at[CENTRAL].add(p["dose"])


def conc(ys, p):
    """Central concentration (N, n_save) from ys (N, n_save, 3)."""
    return ys[..., CENTRAL] / jnp.asarray(p["V1"])[:, None]


# --------------------------------------------------------------------------------------------
# References
# --------------------------------------------------------------------------------------------

def _pk_np(y, q, rate):
    k10, k12, k21 = q["CL"] / q["V1"], q["Q"] / q["V1"], q["Q"] / q["V2"]
    absorbed = q["ka"] * y[DEPOT]
    return np.array([-absorbed,
                     absorbed + rate - (k10 + k12) * y[CENTRAL] + k21 * y[PERIPH],
                     k12 * y[CENTRAL] - k21 * y[PERIPH]])


def _piecewise(q, t_save, starts, boluses, into, propagate, y0=None):
    """One member's solution at t_save (n_save, 3): the interval split at every window boundary
    and bolus time inside (t_save[0], t_save[-1]); on each piece the rate is constant and
    ``propagate(y, a, b, ts, rate) -> (y at ts, y at b)`` integrates it; a bolus is added to
    compartment ``into`` between pieces. Times outside the open interval are ignored (as shoal
    ignores such stops)."""
    t_save = np.asarray(t_save, float)
    t0, t1 = t_save[0], t_save[-1]
    starts = np.asarray(starts, float).ravel()
    boluses = np.asarray(boluses, float).ravel()
    cuts = np.concatenate([starts, starts + TINF, boluses])
    cuts = np.unique(cuts[(cuts > t0) & (cuts < t1)])
    edges = np.concatenate([[t0], cuts, [t1]])
    assert not np.any(np.isin(t_save, boluses)), "a save at a bolus time is ambiguous"
    y = np.zeros(3) if y0 is None else np.array(y0, float)
    out = np.empty((t_save.size, 3))
    out[0] = y
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        if a > t0:
            y[into] += q["dose"] * np.count_nonzero(boluses == a)
        mid = 0.5 * (a + b)
        rate = q["R0"] * np.count_nonzero((starts < mid) & (mid < starts + TINF))
        sel = (t_save > a) & (t_save <= b)
        out[sel], y = propagate(y, a, b, t_save[sel], rate)
    return out


def _dop853(q):
    def propagate(y, a, b, ts, rate):
        sol = solve_ivp(lambda t, z: _pk_np(z, q, rate), (a, b), y, method="DOP853",
                        dense_output=True, **REF_TOL)
        assert sol.success, sol.message
        return sol.sol(ts).T if ts.size else np.empty((0, 3)), sol.y[:, -1].copy()

    return propagate


def _expm(q):
    k10, k12, k21 = q["CL"] / q["V1"], q["Q"] / q["V1"], q["Q"] / q["V2"]
    a_mat = np.array([[-q["ka"], 0.0, 0.0], [q["ka"], -(k10 + k12), k21], [0.0, k12, -k21]])

    def propagate(y, a, b, ts, rate):
        aug = np.zeros((4, 4))  # d/dt (y, 1) = [[A, rate e_central], [0, 0]] (y, 1)
        aug[:3, :3] = a_mat
        aug[CENTRAL, 3] = rate
        z = np.append(y, 1.0)
        at = [(scipy.linalg.expm(aug * (t - a)) @ z)[:3] for t in ts]
        return np.reshape(at, (-1, 3)), (scipy.linalg.expm(aug * (b - a)) @ z)[:3]

    return propagate


def reference(p, t_save=T_SAVE, starts=(), boluses=(), into=DEPOT, exact=False):
    """(N, n_save, 3) by segmented DOP853 (or the matrix exponential if ``exact``); t_save,
    starts and boluses either shared or one row per member."""
    out = []
    for i in range(len(p["CL"])):
        q = member(p, i)
        rows = [np.asarray(x, float) for x in (t_save, starts, boluses)]
        ts, st, bo = (x[i] if x.ndim == 2 else x for x in rows)
        out.append(_piecewise(q, ts, st, bo, into, (_expm if exact else _dop853)(q)))
    return np.stack(out)


def ref_conc(p, **kw):
    return reference(p, **kw)[..., CENTRAL] / np.asarray(p["V1"])[:, None]


def rel_err(c, c_ref):
    """max |c - c_ref| / (|c_ref| + 1e-3 max|c_ref|) per member, the max over members; the floor
    keeps the zero concentrations before the first dose from dividing by zero."""
    c, c_ref = np.asarray(c), np.asarray(c_ref)
    scale = np.abs(c_ref) + 1e-3 * np.max(np.abs(c_ref), axis=-1, keepdims=True)
    return float(np.max(np.abs(c - c_ref) / scale))


def assert_success(stats):
    status = np.asarray(stats["status"])
    assert np.all(status == Status.SUCCESS), status


# --------------------------------------------------------------------------------------------
# The reference itself
# --------------------------------------------------------------------------------------------

def _one_compartment(p):
    """Q = 0: the peripheral compartment stays empty, C follows one-compartment kinetics."""
    return {**p, "Q": np.zeros(N)}


def test_reference_iv_bolus_matches_closed_form():
    """C(t) = sum over doses t_d < t of D/V exp(-k (t - t_d)), k = CL/V."""
    p = _one_compartment(PARAMS)
    got = ref_conc(p, boluses=DOSE_TIMES, into=CENTRAL)
    dt = T_SAVE[None, :, None] - DOSE_TIMES[None, None, :]
    k, v, d = (p[x][:, None, None] for x in ("CL", "V1", "dose"))
    exact = np.sum(np.where(dt > 0, d / v * np.exp(-k / v * np.maximum(dt, 0)), 0.0), axis=-1)
    assert rel_err(got, exact) < 1e-10


def test_reference_short_infusion_matches_closed_form():
    """C(t) = sum over starts s < t of R0/CL (1 - exp(-k min(t-s, T))) exp(-k max(t-s-T, 0))."""
    p = _one_compartment(PARAMS)
    got = ref_conc(p, starts=DOSE_TIMES)
    dt = T_SAVE[None, :, None] - DOSE_TIMES[None, None, :]
    k = (p["CL"] / p["V1"])[:, None, None]
    r0, cl = p["R0"][:, None, None], p["CL"][:, None, None]
    during = 1.0 - np.exp(-k * np.clip(dt, 0.0, TINF))
    exact = np.sum(r0 / cl * during * np.exp(-k * np.maximum(dt - TINF, 0.0)), axis=-1)
    assert rel_err(got, exact) < 1e-10


def test_reference_depot_bolus_matches_bateman_function():
    """Oral doses: C(t) = sum over t_d < t of D ka / (V (ka - k)) (exp(-k dt) - exp(-ka dt))."""
    p = _one_compartment(PARAMS)
    got = ref_conc(p, boluses=DOSE_TIMES, into=DEPOT)
    dt = np.maximum(T_SAVE[None, :, None] - DOSE_TIMES[None, None, :], 0.0)
    k = (p["CL"] / p["V1"])[:, None, None]
    ka, v, d = (p[x][:, None, None] for x in ("ka", "V1", "dose"))
    exact = np.sum(d * ka / (v * (ka - k)) * (np.exp(-k * dt) - np.exp(-ka * dt)), axis=-1)
    assert rel_err(got, exact) < 1e-10


def test_reference_two_compartment_matches_matrix_exponential():
    kw = dict(starts=DOSE_TIMES, boluses=DOSE_TIMES[::2] + 6.0)
    got, exact = reference(PARAMS, **kw), reference(PARAMS, exact=True, **kw)
    scale = np.max(np.abs(exact), axis=1, keepdims=True)
    assert np.max(np.abs(got - exact) / scale) < 1e-10


def test_without_stops_the_windows_are_missed_by_scipy_too():
    """The same failure shoal shows without tstops (below), in SciPy: one unsegmented DOP853
    solve of the infusion model at rtol 1e-8 steps over most 0.1 h windows."""
    q = member(PARAMS, 0)

    def rhs(t, y):
        on = (t - T_FIRST) % TAU < TINF
        return _pk_np(y, q, q["R0"] if on else 0.0)

    sol = solve_ivp(rhs, (0.0, T_END), np.zeros(3), method="DOP853", t_eval=T_SAVE,
                    **SOLVER_TOL)
    got = sol.y[CENTRAL] / q["V1"]
    assert rel_err(got[None], ref_conc(member_params(0), starts=DOSE_TIMES)) > 1e-2


def member_params(i):
    return {k: v[i:i + 1] for k, v in PARAMS.items()}


# --------------------------------------------------------------------------------------------
# Infusions: discontinuities of f in t
# --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def infusion_ref():
    return ref_conc(PARAMS, starts=DOSE_TIMES)


@pytest.mark.parametrize("style", sorted(INFUSIONS))
@pytest.mark.parametrize("method", METHODS)
def test_infusion_with_tstops_matches_reference(method, style, infusion_ref):
    """Whichever side of a window boundary f switches on (t < s or t <= s), the integrator lands
    on the stop and evaluates f strictly on either side of it, so every style gives the same
    solution, the reference's to about the solver's tolerance."""
    ys, stats = solve(INFUSIONS[style], Y0, T_SAVE, jparams(PARAMS), method=method,
                      tstops=INFUSION_STOPS, return_stats=True, **SOLVER_TOL)
    assert_success(stats)
    assert ys.shape == (N, T_SAVE.size, 3)
    assert rel_err(conc(ys, PARAMS), infusion_ref) < ACCURACY


def infusion_on(y, t, p):
    return _pk(y, p, p["R0"])


def segmented_shoal(p, t_save, starts, method, **tol):
    """What a user wrote before tstops: one shoal solve per piece on which the rate is constant,
    with a rate-constant f (no t in it), the state carried over. Returns ys (N, n_save, 3) and
    the step attempts (N,) summed over the pieces."""
    cuts = np.concatenate([starts, starts + TINF])
    cuts = np.unique(cuts[(cuts > t_save[0]) & (cuts < t_save[-1])])
    edges = np.concatenate([[t_save[0]], cuts, [t_save[-1]]])
    y = jnp.asarray(Y0)
    out, attempts = [y[:, None]], 0
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        mid = 0.5 * (a + b)
        on = np.any((starts < mid) & (mid < starts + TINF))
        inner = t_save[(t_save > a) & (t_save < b)]
        ys, stats = solve(infusion_on if on else no_infusion, y, np.concatenate([[a], inner, [b]]),
                          p, method=method, return_stats=True, **tol)
        assert_success(stats)
        attempts = attempts + np.asarray(stats["accepted"]) + np.asarray(stats["rejected"])
        out.append(ys[:, 1:] if np.isin(b, t_save) else ys[:, 1:-1])
        y = ys[:, -1]
    return jnp.concatenate(out, axis=1), attempts


@pytest.fixture(scope="module")
def segmented():
    """Per method: (ys, attempts) of the segmented solve of the infusion schedule."""
    return {m: segmented_shoal(jparams(PARAMS), T_SAVE, DOSE_TIMES, m, **SOLVER_TOL)
            for m in METHODS}


@pytest.mark.parametrize("method", METHODS)
def test_segmented_shoal_solves_match_reference(method, segmented, infusion_ref):
    """The baseline tstops must reproduce: restarted at every boundary with the rate as a
    constant, shoal is within ~3e-9 of the reference at rtol 1e-8."""
    ys, _ = segmented[method]
    assert ys.shape == (N, T_SAVE.size, 3)
    assert rel_err(conc(ys, PARAMS), infusion_ref) < ACCURACY


@pytest.mark.parametrize("method", METHODS)
def test_infusion_styles_agree_and_cost_no_more_than_restarts(method, segmented):
    """Evaluated strictly left of a stop by the step before and strictly right of it by the step
    after, the three styles' f take the same values wherever they are evaluated, so the solves
    agree to rounding (they differ only exactly at the boundaries). A stop evaluated on the wrong
    side shows up as a discontinuity inside the step: errors of 4e-8 to 1.5e-6 and 4-5x the
    attempts of the restarted solve (rejections), which takes 160-330 per member."""
    runs = [solve(INFUSIONS[style], Y0, T_SAVE, jparams(PARAMS), method=method,
                  tstops=INFUSION_STOPS, return_stats=True, **SOLVER_TOL)
            for style in sorted(INFUSIONS)]
    base = np.asarray(runs[0][0])
    for ys, stats in runs:
        assert_success(stats)
        assert np.max(np.abs(np.asarray(ys) - base)) <= 1e-12 * np.max(np.abs(base))
        attempts = np.asarray(stats["accepted"]) + np.asarray(stats["rejected"])
        assert np.all(attempts <= 2 * segmented[method][1]), (attempts, segmented[method][1])


@pytest.mark.parametrize("method", METHODS)
def test_infusion_stops_in_any_order_and_outside_the_span(method, infusion_ref):
    """Stops are sorted by the solver; ones outside (t_span[0], t_span[-1]) -- here t = 0 itself,
    a negative time and one past the end -- change nothing."""
    rng = np.random.default_rng(0)
    stops = np.concatenate([rng.permutation(INFUSION_STOPS), [0.0, -5.0, T_END + 3.0]])
    ys, stats = solve(infusion_mod, Y0, T_SAVE, jparams(PARAMS), method=method, tstops=stops,
                      return_stats=True, **SOLVER_TOL)
    assert_success(stats)
    assert rel_err(conc(ys, PARAMS), infusion_ref) < ACCURACY


@pytest.mark.parametrize("method", METHODS)
def test_infusion_without_tstops_is_badly_wrong(method, infusion_ref):
    """Why tstops are needed. Before the first dose y = 0 and f = 0, so the error estimate is 0
    and the step grows by the controller's maximum factor each step, to several hours by
    t = 1 h; between doses the solution is a smooth decay and the steps grow to hours again. A
    step of hours samples f at a handful of stage times, which mostly fall outside a 0.1 h
    window: the solver never sees most of the doses (or sees one only partly), and nothing in
    its error estimate tells it so. The concentrations are then wrong by O(1), not by rtol."""
    ys, stats = solve(infusion_mod, Y0, T_SAVE, jparams(PARAMS), method=method,
                      return_stats=True, **SOLVER_TOL)
    assert_success(stats)  # it "succeeds": the failure is silent
    assert rel_err(conc(ys, PARAMS), infusion_ref) > 1e-2


@pytest.mark.parametrize("method", METHODS)
def test_max_step_alone_catches_the_windows(method, infusion_ref):
    """With steps capped below the 0.1 h window every window holds step ends and stages, so the
    error control sees each discontinuity and shrinks the steps around it (at many rejected
    steps and to a looser accuracy than with tstops: the boundaries fall inside steps)."""
    ys, stats = solve(infusion_mod, Y0, T_SAVE, jparams(PARAMS), method=method, max_step=0.05,
                      return_stats=True, **SOLVER_TOL)
    assert_success(stats)
    assert np.all(np.asarray(stats["accepted"]) >= T_END / 0.05)
    assert rel_err(conc(ys, PARAMS), infusion_ref) < 1e-4


@pytest.mark.parametrize("method", METHODS)
def test_max_step_with_tstops_changes_nothing_but_the_step_count(method, infusion_ref):
    ys, stats = solve(infusion_mod, Y0, T_SAVE, jparams(PARAMS), method=method, max_step=0.5,
                      tstops=INFUSION_STOPS, return_stats=True, **SOLVER_TOL)
    assert_success(stats)
    assert np.all(np.asarray(stats["accepted"]) >= T_END / 0.5)
    assert rel_err(conc(ys, PARAMS), infusion_ref) < ACCURACY


# Per-trajectory schedules: member 0 every 12 h from 1 h (6 doses), member 1 every 8 h from
# 2 h (9 doses), member 2 every 24 h from 0.5 h (3 doses), member 3 three doses 12 h apart from
# 30 h. Rows are padded to a common length with times outside the span (ignored).
_SCHEDULES = [1.0 + 12.0 * np.arange(6), 2.0 + 8.0 * np.arange(9), 0.5 + 24.0 * np.arange(3),
              30.0 + 12.0 * np.arange(3)]
_PAD = -100.0


def _padded(rows, pad=_PAD):
    width = max(len(r) for r in rows)
    return np.stack([np.concatenate([r, np.full(width - len(r), pad)]) for r in rows])


@pytest.mark.parametrize("method", METHODS)
def test_per_trajectory_infusion_schedules(method):
    starts = _padded(_SCHEDULES)  # (N, 9); the padding's windows are far before t = 0
    rng = np.random.default_rng(1)
    stops = np.stack([rng.permutation(np.concatenate([s, s + TINF])) for s in starts])  # (N, 18)
    p = {**PARAMS, "starts": starts}
    ys, stats = solve(infusion_table, Y0, T_SAVE, jparams(p), method=method, tstops=stops,
                      return_stats=True, **SOLVER_TOL)
    assert_success(stats)
    got = np.asarray(conc(ys, p))
    for i, sched in enumerate(_SCHEDULES):
        want = ref_conc(member_params(i), starts=sched)
        assert rel_err(got[i:i + 1], want) < ACCURACY, i
    # Members differ: a shared-schedule solve would not match the per-member references.
    assert rel_err(got[1:2], ref_conc(member_params(1), starts=_SCHEDULES[0])) > 1e-2


# --------------------------------------------------------------------------------------------
# Boluses: jumps of the state by jump_fn
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("method", METHODS)
def test_depot_boluses_by_jump_fn_match_reference(method):
    ys, stats = solve(no_infusion, Y0, T_SAVE, jparams(PARAMS), method=method,
                      tstops=DOSE_TIMES, jump_fn=bolus_to_depot, return_stats=True,
                      **SOLVER_TOL)
    assert_success(stats)
    assert rel_err(conc(ys, PARAMS), ref_conc(PARAMS, boluses=DOSE_TIMES)) < ACCURACY


@pytest.mark.parametrize("method", METHODS)
def test_iv_boluses_match_one_compartment_closed_form(method):
    """C(t) = sum over t_d < t of D/V exp(-k (t - t_d)): shoal against the closed form."""
    p = _one_compartment(PARAMS)
    ys, stats = solve(no_infusion, Y0, T_SAVE, jparams(p), method=method, tstops=DOSE_TIMES,
                      jump_fn=bolus_to_central, return_stats=True, **SOLVER_TOL)
    assert_success(stats)
    dt = T_SAVE[None, :, None] - DOSE_TIMES[None, None, :]
    k, v, d = (p[x][:, None, None] for x in ("CL", "V1", "dose"))
    exact = np.sum(np.where(dt > 0, d / v * np.exp(-k / v * np.maximum(dt, 0)), 0.0), axis=-1)
    assert rel_err(conc(ys, p), exact) < ACCURACY


@pytest.mark.parametrize("method", METHODS)
def test_per_trajectory_bolus_schedules_and_save_times(method):
    """(N, k) stops with different dose counts (padded outside the span) and (N, n_save) save
    times: member 3 starts observing at t = 3 h, so its stop at t = 1 h lies outside its span and
    that dose is never given (the reference skips it as well)."""
    schedules = [DOSE_TIMES, DOSE_TIMES[:3] + 0.7, 2.5 + 10.0 * np.arange(7), DOSE_TIMES]
    stops = _padded(schedules, pad=T_END + 10.0)
    starts = np.array([0.0, 0.0, 0.25, 3.0])
    t_save = np.stack([np.linspace(s, T_END, 41) for s in starts])  # spacing ~1.8 h
    ys, stats = solve(no_infusion, Y0, t_save, jparams(PARAMS), method=method, tstops=stops,
                      jump_fn=bolus_to_depot, return_stats=True, **SOLVER_TOL)
    assert_success(stats)
    assert ys.shape == (N, 41, 3)
    got = np.asarray(conc(ys, PARAMS))
    for i, sched in enumerate(schedules):
        want = ref_conc(member_params(i), t_save=t_save[i], boluses=sched)
        assert rel_err(got[i:i + 1], want) < ACCURACY, i


_BOLUS_TIMES = DOSE_TIMES + 6.0  # oral doses half-way between the infusions
_BOLUS_TIMES_J = jnp.asarray(_BOLUS_TIMES)


def bolus_at_dose_times(y, t, p):
    """jump_fn runs at every stop, window boundaries included: add the dose only at the stops
    that are dose times."""
    is_dose = jnp.any(jnp.abs(t - _BOLUS_TIMES_J) < 1e-9)
    return jnp.where(is_dose, y.at[DEPOT].add(p["dose"]), y)


@pytest.mark.parametrize("method", METHODS)
def test_infusions_and_boluses_together(method):
    stops = np.concatenate([INFUSION_STOPS, _BOLUS_TIMES])
    ys, stats = solve(infusion_closed, Y0, T_SAVE, jparams(PARAMS), method=method, tstops=stops,
                      jump_fn=bolus_at_dose_times, return_stats=True, **SOLVER_TOL)
    assert_success(stats)
    want = ref_conc(PARAMS, starts=DOSE_TIMES, boluses=_BOLUS_TIMES)
    assert rel_err(conc(ys, PARAMS), want) < ACCURACY


# --------------------------------------------------------------------------------------------
# Gradients through the stops
# --------------------------------------------------------------------------------------------

T_LATE = np.array([0.0, 60.0, 61.05, 66.0, T_END])  # inside the last window, then its decay
FD_EPS = 1e-5  # relative step of the central differences


def _late_conc(f, p, method, **kw):
    """C at the last save (N,)."""
    ys = solve(f, jnp.asarray(Y0), T_LATE, p, method=method, **GRAD_TOL, **kw)
    return conc(ys, p)[:, -1]


def _central_fd(fn, x, eps=FD_EPS):
    h = eps * np.abs(x)
    return (np.asarray(fn(x + h)) - np.asarray(fn(x - h))) / (2.0 * h)


def _rel(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b)) / np.abs(np.asarray(b))))


@pytest.mark.parametrize("method", METHODS)
def test_grad_clearance_with_tstops_matches_finite_differences(method):
    """d C(72 h) / d CL through six infusion windows. The members are independent, so the
    gradient of the sum is each member's own derivative. Against central differences of shoal
    itself (the solution is smooth in CL; the steps change smoothly with it) and of the matrix
    exponential (exact)."""
    base = jparams(PARAMS)

    def c_late(cl):
        return _late_conc(infusion_mod, {**base, "CL": cl}, method, tstops=INFUSION_STOPS)

    cl = jnp.asarray(PARAMS["CL"])
    grad = np.asarray(jax.grad(lambda x: jnp.sum(c_late(x)))(cl))
    fd = _central_fd(c_late, PARAMS["CL"])

    def exact(x):
        p = {**PARAMS, "CL": x}
        return ref_conc(p, t_save=T_LATE, starts=DOSE_TIMES, exact=True)[:, -1]

    assert np.all(grad < 0)  # more clearance, less drug
    assert _rel(grad, fd) < GRAD_ACCURACY
    assert _rel(grad, _central_fd(exact, PARAMS["CL"])) < GRAD_ACCURACY


def _exact_late(p, boluses):
    return (reference(p, t_save=T_LATE, boluses=boluses, exact=True)[:, -1, CENTRAL]
            / p["V1"])


@pytest.mark.parametrize("method", METHODS)
def test_grad_bolus_dose_through_jump_fn(method):
    """d C(72 h) / d dose, the dose a parameter read by jump_fn at each stop. C is linear in the
    dose, so the exact derivative is C at unit dose (matrix exponential)."""
    base = jparams(PARAMS)

    def c_late(dose):
        return _late_conc(no_infusion, {**base, "dose": dose}, method, tstops=DOSE_TIMES,
                          jump_fn=bolus_to_depot)

    dose = jnp.asarray(PARAMS["dose"])
    grad = np.asarray(jax.grad(lambda x: jnp.sum(c_late(x)))(dose))
    fd = _central_fd(c_late, PARAMS["dose"])
    unit = _exact_late({**PARAMS, "dose": np.ones(N)}, DOSE_TIMES)
    assert _rel(grad, fd) < GRAD_ACCURACY
    assert _rel(grad, unit) < GRAD_ACCURACY


@pytest.mark.parametrize("method", METHODS)
def test_grad_clearance_through_jump_fn(method):
    """d C(72 h) / d CL with depot boluses: the sensitivity is carried through every jump."""
    base = jparams(PARAMS)

    def c_late(cl):
        return _late_conc(no_infusion, {**base, "CL": cl}, method, tstops=DOSE_TIMES,
                          jump_fn=bolus_to_depot)

    grad = np.asarray(jax.grad(lambda x: jnp.sum(c_late(x)))(jnp.asarray(PARAMS["CL"])))
    exact = _central_fd(lambda x: _exact_late({**PARAMS, "CL": x}, DOSE_TIMES), PARAMS["CL"])
    assert _rel(grad, exact) < GRAD_ACCURACY
    assert _rel(grad, _central_fd(c_late, PARAMS["CL"])) < GRAD_ACCURACY
