"""An epidemic ensemble with a switch, a jump and an event: shoal against SciPy's events.

SEIR with, per member, a lockdown day t_lock (transmission × 0.3 from then on, written as a
``jnp.where`` on t, a stop), a vaccination pulse on day 50 (20 % of S moved to R: ``jump_fn`` at
that stop) and a falling event when I drops below 1e-4 (non-terminal); 61 saves over 300 days.

shoal: one ``solve`` of the ensemble with ``tstops``, ``jump_fn`` and ``event``, Tsit5 at
``--rtol`` (default 1e-10). SciPy: ``solve_ivp(DOP853, rtol 1e-12, atol 1e-14)`` per member,
restarted at its lockdown and at the vaccination (the pulse applied in between), with its own
event detection. Printed: both times, the max state error and the max relative event-time error
of shoal against SciPy, and whether both found the same events. This is a correctness check with
a time beside it; the tolerances are not matched.

    PYTHONPATH=. .venv/bin/python benchmarks/seir_events.py [--n 200] [--smoke]
"""

from __future__ import annotations

import argparse
import time

import _common  # noqa: I001 - puts the repository root on sys.path before shoal is imported
import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from scipy.integrate import solve_ivp  # noqa: E402

from shoal.ode import Event, solve  # noqa: E402

SIGMA, GAMMA, T_VAX, T_END, LEVEL = 0.2, 0.1, 50.0, 300.0, 1e-4
Y0 = np.array([0.999, 0.0, 0.001, 0.0])


def seir(y, t, p):
    S, E, I = y[0], y[1], y[2]
    beta = jnp.where(t < p["t_lock"], p["beta"], 0.3 * p["beta"])
    return jnp.stack([-beta * S * I, beta * S * I - SIGMA * E, SIGMA * E - GAMMA * I, GAMMA * I])


def vaccinate(y, t, p):  # only at the vaccination stop, not at the lockdown one
    pulse = jnp.stack([0.8 * y[0], y[1], y[2], y[3] + 0.2 * y[0]])
    return jnp.where(t == T_VAX, pulse, y)


def scipy_member(beta: float, t_lock: float, ts: np.ndarray):
    def f(t, y, b):
        infection = b * y[0] * y[2]
        return [-infection, infection - SIGMA * y[1], SIGMA * y[1] - GAMMA * y[2], GAMMA * y[2]]

    def below(t, y, b):
        return y[2] - LEVEL

    below.direction = -1
    out, t_event, y = np.full((ts.size, 4), np.nan), np.nan, Y0.copy()
    for a, c, b in [(0.0, t_lock, beta), (t_lock, T_VAX, 0.3 * beta), (T_VAX, T_END, 0.3 * beta)]:
        if a == T_VAX:
            y = np.array([0.8 * y[0], y[1], y[2], y[3] + 0.2 * y[0]])
        sol = solve_ivp(f, (a, c), y, method="DOP853", rtol=1e-12, atol=1e-14, args=(b,),
                        dense_output=True, events=below)
        # A save at a stop records the state before it (shoal's convention).
        inside = (ts >= a) & (ts <= c) if a == 0.0 else (ts > a) & (ts <= c)
        out[inside] = sol.sol(ts[inside]).T
        if np.isnan(t_event) and sol.t_events[0].size:
            t_event = sol.t_events[0][0]
        y = sol.y[:, -1]
    return out, t_event


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--rtol", type=float, default=1e-10)
    ap.add_argument("--smoke", action="store_true", help="N = 8")
    args = ap.parse_args()
    n = 8 if args.smoke else args.n
    print("\n".join(_common.header_lines({"members": str(n)})))
    rng = np.random.default_rng(1)
    beta, t_lock = rng.uniform(0.4, 0.8, n), rng.uniform(20.0, 40.0, n)
    params = {"beta": jnp.asarray(beta), "t_lock": jnp.asarray(t_lock)}
    ts = np.linspace(0.0, T_END, 61)
    stops = jnp.stack([params["t_lock"], jnp.full(n, T_VAX)], axis=1)
    # Made once: like f, the event's function is keyed by identity (a new lambda per call would
    # be traced again each time).
    event = Event(lambda y, t, p: y[2] - LEVEL, terminal=False, direction=-1)

    def run():
        return solve(seir, jnp.tile(jnp.asarray(Y0), (n, 1)), jnp.asarray(ts), params,
                     tstops=stops, jump_fn=vaccinate, event=event, method="tsit5",
                     rtol=args.rtol, atol=args.rtol * 1e-2, return_stats=True)

    start = time.perf_counter()
    jax.block_until_ready(run())
    first = time.perf_counter() - start
    shoal_s = min(_common.time_calls(lambda: jax.block_until_ready(run()), 3))
    ys, stats = run()
    start = time.perf_counter()
    refs = [scipy_member(beta[i], t_lock[i], ts) for i in range(n)]
    scipy_s = time.perf_counter() - start
    state_error = max(float(np.max(np.abs(np.asarray(ys[i]) - refs[i][0]))) for i in range(n))
    t_ref = np.array([r[1] for r in refs])
    t_shoal = np.asarray(stats["event_time"])
    same = np.array_equal(np.isfinite(t_ref), np.isfinite(t_shoal))
    event_error = float(np.nanmax(np.abs(t_shoal - t_ref) / t_ref))
    print(f"shoal Tsit5 rtol {args.rtol:g}: {_common.fmt_time(shoal_s)} (first call "
          f"{_common.fmt_time(first)}); SciPy DOP853 rtol 1e-12, one member at a time: "
          f"{_common.fmt_time(scipy_s)} ({scipy_s / shoal_s:.0f}x)")
    print(f"max |state error| {state_error:.1e}; event time max relative error "
          f"{event_error:.1e}; events found: shoal {int(np.isfinite(t_shoal).sum())}, SciPy "
          f"{int(np.isfinite(t_ref).sum())} of {n} (same members: {same}); statuses "
          f"{sorted(set(np.asarray(stats['status']).tolist()))}")


if __name__ == "__main__":
    main()
