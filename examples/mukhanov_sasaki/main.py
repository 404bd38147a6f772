"""Primordial power spectrum of single-field inflation (quadratic potential), solved with shoal.

1. The inflaton background phi(N), e-folds N as the clock, one trajectory by shoal Tsit5.
2. Tables of epsilon(N), log(aH)(N) and (z''/z)/(aH)^2 (N) from it, closed over by the mode
   right-hand side and read with ``jnp.interp``.
3. The Mukhanov-Sasaki equation for the complex mode u_k (real and imaginary parts split), one
   trajectory per k, all modes in one ensemble solve, from k/aH = 100 (Bunch-Davies) to
   k/aH ~ 1e-4 (frozen); P_R(k) = k^3 |u_k / z|^2 / (2 pi^2) and n_s - 1 = d ln P_R / d ln k
   against the slow-roll n_s - 1 = -4 / (2 N_* + 1).
4. The same ensemble by diffrax Tsit5 (jit of vmap) and SciPy DOP853 (a loop over modes) at the
   same tolerance; the error of each against a tight DOP853 reference.

Units: reduced Planck mass M_p = 1, a = e^N (a = 1 at N = 0).

    PYTHONPATH=. .venv/bin/python examples/mukhanov_sasaki/main.py            # full run
    PYTHONPATH=. .venv/bin/python examples/mukhanov_sasaki/main.py --smoke    # tiny, for tests
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))  # the repository root, for a checkout without install

from shoal.ode import solve  # noqa: E402

M_INFLATON = 6.0e-6  # V = m^2 phi^2 / 2, m in units of M_p: P_R ~ 2e-9 at N_* ~ 55
PHI0 = 17.0  # initial field: about phi0^2 / 4 ~ 72 e-folds of inflation
N_TABLE = 20_001  # background table points (linear interpolation between them)
X_START = 100.0  # k / aH where a mode starts (Bunch-Davies)
S_SPAN = 14.0  # e-folds each mode is integrated for: from k/aH = 100 to ~1e-4
RTOL, ATOL = 1e-8, 1e-10  # the modes, every solver
REF_TOL = 1e-12  # the DOP853 reference


# -- background --------------------------------------------------------------------------------


def background_rhs(y, n, p):
    """phi_NN = -(3 - eps)(phi_N + V'/V), eps = phi_N^2 / 2, V = m^2 phi^2 / 2 (V'/V = 2 / phi).

    The Klein-Gordon equation phi'' + 3 H phi' + V' = 0 in e-folds, with H^2 = V / (3 - eps)."""
    phi, dphi = y[0], y[1]
    eps = 0.5 * dphi**2
    return jnp.stack([dphi, -(3.0 - eps) * (dphi + 2.0 / phi)])


def background(n_table: int = N_TABLE):
    """Solve the background once (shoal Tsit5, rtol 1e-12) and build the mode tables.

    Returns a dict of NumPy arrays on the N grid: eps, lnaH, w = (z''/z)/(aH)^2, and N_end."""
    n_max = PHI0**2 / 4.0 + 0.8  # just past the end (eps = 1 near phi ~ 1; phi = 0 ~0.5 later)
    grid = np.linspace(0.0, n_max, n_table)
    y0 = jnp.array([PHI0, -2.0 / PHI0])  # slow-roll attractor phi_N = -V'/V
    ys, stats = solve(
        background_rhs,
        y0,
        jnp.asarray(grid),
        method="tsit5",
        rtol=1e-12,
        atol=1e-14,
        return_stats=True,
    )
    if int(stats["status"][0]) != 0:
        raise RuntimeError(f"background solve failed: status {int(stats['status'][0])}")
    phi, dphi = np.asarray(ys[0, :, 0]), np.asarray(ys[0, :, 1])
    eps = 0.5 * dphi**2
    if not np.any(eps >= 1.0):
        raise RuntimeError("inflation did not end within the background grid")
    i_end = int(np.argmax(eps >= 1.0))  # first save with eps >= 1; N_end by linear interpolation
    n_end = float(np.interp(1.0, eps[i_end - 1 : i_end + 1], grid[i_end - 1 : i_end + 1]))

    # z = a phi_N, so z_N / z = 1 + phi_NN / phi_N =: g and (z''/z)/(aH)^2 = g_N + g^2 + (1-eps) g
    # (' = d/dtau = aH d/dN, d(aH)/dN = (1 - eps) aH). phi_NNN by a JVP of the right-hand side.
    def rhs_np(phi, dphi):
        return background_rhs(jnp.stack([phi, dphi]), 0.0, None)

    y = jnp.stack([jnp.asarray(phi), jnp.asarray(dphi)])
    dy = rhs_np(y[0], y[1])
    _, ddy = jax.jvp(rhs_np, (y[0], y[1]), (dy[0], dy[1]))
    ddphi, dddphi = np.asarray(dy[1]), np.asarray(ddy[1])
    g = 1.0 + ddphi / dphi
    g_n = (dddphi * dphi - ddphi**2) / dphi**2
    w = g_n + g**2 + (1.0 - eps) * g
    hubble2 = 0.5 * M_INFLATON**2 * phi**2 / (3.0 - eps)
    lnah = grid + 0.5 * np.log(hubble2)
    keep = grid <= n_end  # the tables cover inflation only
    return {
        "N": grid[keep],
        "eps": eps[keep],
        "lnaH": lnah[keep],
        "w": w[keep],
        "dphi": dphi[keep],
        "H2": hubble2[keep],
        "N_end": n_end,
        "steps": int(stats["accepted"][0]),
    }


# -- modes -------------------------------------------------------------------------------------


def make_mode_rhs(bg):
    """The Mukhanov-Sasaki equation u'' + (k^2 - z''/z) u = 0 in e-folds,

        u_NN + (1 - eps) u_N + (k^2 / (aH)^2 - (z''/z) / (aH)^2) u = 0,

    with the clock s = N - N_i (each mode starts at its own N_i; t_span is shared). State
    (Re u, Im u, Re u_N, Im u_N); p = (N_i, ln k). The three tables are closed-over constants."""
    n_tab = np.asarray(bg["N"])
    eps_tab, lnah_tab, w_tab = (np.asarray(bg[k]) for k in ("eps", "lnaH", "w"))

    def rhs(y, s, p):
        n = p[0] + s
        eps = jnp.interp(n, n_tab, eps_tab)
        x2 = jnp.exp(2.0 * (p[1] - jnp.interp(n, n_tab, lnah_tab)))  # (k / aH)^2
        omega2 = x2 - jnp.interp(n, n_tab, w_tab)
        damp = 1.0 - eps
        return jnp.stack([y[2], y[3], -damp * y[2] - omega2 * y[0], -damp * y[3] - omega2 * y[1]])

    return rhs


def mode_setup(bg, n_star):
    """k for modes leaving the horizon N_* e-folds before the end, their start N_i, and y0."""
    n_cross = bg["N_end"] - np.asarray(n_star, dtype=float)
    ln_k = np.interp(n_cross, bg["N"], bg["lnaH"])
    n_i = np.interp(ln_k - np.log(X_START), bg["lnaH"], bg["N"])  # k / aH(N_i) = X_START
    if np.any(n_i <= bg["N"][0]) or np.any(n_i + S_SPAN >= bg["N_end"]):
        raise ValueError("a mode starts before the background table or ends after inflation")
    x = X_START
    # de Sitter Bunch-Davies mode sqrt(2k) u = e^{-ik tau} (1 - i/(k tau)) at k tau = -x, the
    # common phase dropped: u = 1 + i/x, u_N = (du/dtau)/(aH) = 1 + i (1/x - x).
    y0 = np.tile([1.0, 1.0 / x, 1.0, 1.0 / x - x], (len(n_i), 1))
    params = np.stack([n_i, ln_k], axis=1)
    return ln_k, params, y0


def power_spectrum(bg, params, y_end):
    """P_R = k^3 |u_k|^2 / (2 pi^2 z^2) with u_k = u / sqrt(2k), z = a |phi_N|, a = e^N."""
    n_f = params[:, 0] + S_SPAN
    dphi = np.interp(n_f, bg["N"], bg["dphi"])
    ln_k = params[:, 1]
    u2 = y_end[:, 0] ** 2 + y_end[:, 1] ** 2
    return np.exp(2.0 * ln_k - 2.0 * n_f) * u2 / (4.0 * np.pi**2 * dphi**2)


def shoal_modes(rhs, rtol=RTOL, atol=ATOL, method="tsit5"):
    """jit: (y0 (M, 4), params (M, 2)) -> (y(S_SPAN) (M, 4), step attempts, status)."""
    t_span = jnp.array([0.0, S_SPAN])

    def run(y0, params):
        ys, st = solve(
            rhs,
            y0,
            t_span,
            params,
            method=method,
            rtol=rtol,
            atol=atol,
            first_step=1e-4,
            max_steps=200_000,
            return_stats=True,
        )
        return ys[:, -1], st["accepted"] + st["rejected"], st["status"]

    return jax.jit(run)


def diffrax_modes(rhs, rtol=RTOL, atol=ATOL):
    """jit(vmap(diffeqsolve)) with Tsit5 and the same integral controller, first step, limit."""
    import diffrax

    term = diffrax.ODETerm(lambda s, y, p: rhs(y, s, p))
    controller = diffrax.PIDController(rtol=rtol, atol=atol, pcoeff=0.0, icoeff=1.0, dcoeff=0.0)

    def one(y0, p):
        sol = diffrax.diffeqsolve(
            term,
            diffrax.Tsit5(),
            t0=0.0,
            t1=S_SPAN,
            dt0=1e-4,
            y0=y0,
            args=p,
            stepsize_controller=controller,
            saveat=diffrax.SaveAt(t1=True),
            max_steps=200_000,
        )
        return sol.ys[-1], sol.stats["num_steps"]

    return jax.jit(jax.vmap(one))


def numpy_mode_rhs(bg):
    """The same right-hand side for SciPy (np.interp on the same tables)."""
    n_tab, eps_tab, lnah_tab, w_tab = (np.asarray(bg[k]) for k in ("N", "eps", "lnaH", "w"))

    def make(p):
        def f(s, y):
            n = p[0] + s
            damp = 1.0 - np.interp(n, n_tab, eps_tab)
            omega2 = np.exp(2.0 * (p[1] - np.interp(n, n_tab, lnah_tab))) - np.interp(
                n, n_tab, w_tab
            )
            return [y[2], y[3], -damp * y[2] - omega2 * y[0], -damp * y[3] - omega2 * y[1]]

        return f

    return make


def scipy_modes(bg, y0, params, rtol, atol, method="DOP853"):
    from scipy.integrate import solve_ivp

    make = numpy_mode_rhs(bg)
    out = np.empty_like(y0)
    for i in range(len(y0)):
        sol = solve_ivp(make(params[i]), (0.0, S_SPAN), y0[i], method=method, rtol=rtol, atol=atol)
        if not sol.success:
            raise RuntimeError(f"SciPy {method} failed on mode {i}: {sol.message}")
        out[i] = sol.y[:, -1]
    return out


def best_time(fn, repeats):
    """Minimum wall time of ``repeats`` calls (fn blocks until its result is ready)."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def spectral_index(ln_k, power):
    """n_s - 1 = d ln P / d ln k by central differences (one-sided at the ends)."""
    return np.gradient(np.log(power), ln_k)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes; plot to a temporary dir")
    ap.add_argument("--modes", type=int, default=None, help="number of k-modes (default 81)")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--out", type=Path, default=None, help="PNG path")
    ap.add_argument("--method", default="tsit5", choices=("tsit5", "vern7", "vern9"),
                    help="shoal's method for the modes (diffrax stays Tsit5)")
    args = ap.parse_args(argv)
    n_modes = args.modes or (41 if args.smoke else 81)
    repeats = args.repeats or (1 if args.smoke else 5)
    out = args.out or (
        Path(tempfile.mkdtemp()) / "mukhanov_sasaki.png"
        if args.smoke
        else HERE / "mukhanov_sasaki.png"
    )

    t0 = time.perf_counter()
    bg = background(4001 if args.smoke else N_TABLE)
    t_bg = time.perf_counter() - t0
    print(
        f"background: N_end = {bg['N_end']:.3f} e-folds, {bg['steps']} Tsit5 steps, "
        f"{len(bg['N'])}-point tables, {t_bg:.2f} s (incl. compile)"
    )

    n_star = np.linspace(65.0, 40.0, n_modes)  # ascending k
    ln_k, params, y0 = mode_setup(bg, n_star)
    rhs = make_mode_rhs(bg)
    y0_j, p_j = jnp.asarray(y0), jnp.asarray(params)

    fn = shoal_modes(rhs, method=args.method)
    t0 = time.perf_counter()
    y_s, att_s, status = jax.block_until_ready(fn(y0_j, p_j))
    t_first = time.perf_counter() - t0
    if np.any(np.asarray(status) != 0):
        raise RuntimeError(f"shoal: mode statuses {np.asarray(status)}")
    t_shoal = best_time(lambda: jax.block_until_ready(fn(y0_j, p_j)), repeats)
    y_s = np.asarray(y_s)
    print(
        f"shoal {args.method}: {n_modes} modes in one ensemble, {t_shoal * 1e3:.2f} ms warm "
        f"(min of {repeats}), first call {t_first:.2f} s (trace + compile), "
        f"mean {np.mean(att_s):.0f} step attempts per mode"
    )

    # the reference: DOP853 at 1e-12 on every mode (smoke: every 8th)
    ref_idx = np.arange(0, n_modes, 8 if args.smoke else 1)
    y_ref = scipy_modes(bg, y0[ref_idx], params[ref_idx], REF_TOL, REF_TOL * 1e-2)
    p_ref = power_spectrum(bg, params[ref_idx], y_ref)

    def p_err(y):
        return float(np.max(np.abs(power_spectrum(bg, params[ref_idx], y[ref_idx]) / p_ref - 1)))

    power = power_spectrum(bg, params, y_s)
    err_shoal = p_err(y_s)
    print(f"  max relative error of P_R vs DOP853 (rtol {REF_TOL:g}): {err_shoal:.2e}")
    print(f"CHECK P_R_rel_error {err_shoal:.3e}")

    timings = {"shoal": (t_shoal, err_shoal)}
    dfn = diffrax_modes(rhs)
    t0 = time.perf_counter()
    y_d, att_d = jax.block_until_ready(dfn(y0_j, p_j))
    t_dfirst = time.perf_counter() - t0
    t_diffrax = best_time(lambda: jax.block_until_ready(dfn(y0_j, p_j)), repeats)
    err_d = p_err(np.asarray(y_d))
    timings["diffrax"] = (t_diffrax, err_d)
    print(
        f"diffrax Tsit5 jit(vmap): {t_diffrax * 1e3:.2f} ms warm, first call {t_dfirst:.2f} s, "
        f"mean {np.mean(att_d):.0f} steps; P_R error {err_d:.2e}; "
        f"diffrax / shoal = {t_diffrax / t_shoal:.1f}x"
    )

    sc_idx = np.arange(0, n_modes, 8 if args.smoke else 2)  # SciPy is slow: every other mode
    t0 = time.perf_counter()
    y_sc = scipy_modes(bg, y0[sc_idx], params[sc_idx], RTOL, ATOL)
    t_scipy = (time.perf_counter() - t0) * n_modes / len(sc_idx)
    common = np.intersect1d(sc_idx, ref_idx)
    y_sc_full = np.full_like(y_s, np.nan)
    y_sc_full[sc_idx] = y_sc
    err_sc = float(
        np.max(
            np.abs(
                power_spectrum(bg, params[common], y_sc_full[common])
                / power_spectrum(bg, params[common], y_ref[np.searchsorted(ref_idx, common)])
                - 1
            )
        )
    )
    print(
        f"SciPy DOP853 loop: {t_scipy * 1e3:.1f} ms for {n_modes} modes (timed on "
        f"{len(sc_idx)}, scaled); P_R error {err_sc:.2e}; SciPy / shoal = "
        f"{t_scipy / t_shoal:.0f}x"
    )

    # spectral index against slow roll, at each mode's N_*
    ns_minus_1 = spectral_index(ln_k, power)
    sr = -4.0 / (2.0 * n_star + 1.0)
    i_pivot = int(np.argmin(np.abs(n_star - 55.0)))
    print(
        f"n_s at N_* = {n_star[i_pivot]:.1f}: {1 + ns_minus_1[i_pivot]:.5f}; slow roll "
        f"1 - 4/(2N_*+1) = {1 + sr[i_pivot]:.5f}, 1 - 2/N_* = {1 - 2 / n_star[i_pivot]:.5f}"
    )
    dev = float(np.max(np.abs(ns_minus_1[1:-1] - sr[1:-1])))
    print(f"CHECK n_s_deviation_from_slow_roll {dev:.5f}")
    print(f"CHECK P_R_at_pivot {power[i_pivot]:.4e}")

    plot(bg, n_star, ln_k, power, ns_minus_1, out)
    print(f"plot: {out}")
    return 0


def plot(bg, n_star, ln_k, power, ns_minus_1, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
    ax = axes[0]
    n_before_end = bg["N_end"] - bg["N"]
    ax.semilogy(n_before_end, bg["eps"], label=r"$\epsilon = \phi_N^2/2$")
    ax.semilogy(n_before_end, bg["w"], label=r"$(z''/z)/(aH)^2$")
    ax.set_xlim(bg["N_end"], 0)
    ax.set_xlabel(r"e-folds before the end of inflation, $N_{\rm end} - N$")
    ax.set_title(r"background, $V = m^2\phi^2/2$ (shoal Tsit5)")
    ax.legend()

    ax = axes[1]
    k = np.exp(ln_k)
    n_cross = bg["N_end"] - n_star
    h2 = np.interp(n_cross, bg["N"], bg["H2"])
    eps = np.interp(n_cross, bg["N"], bg["eps"])
    ax.loglog(k, power, "o", ms=3, label="Mukhanov–Sasaki modes (shoal)")
    ax.loglog(
        k,
        h2 / (8 * np.pi**2 * eps),
        "-",
        lw=1,
        label=r"slow roll $H^2/(8\pi^2\epsilon)$ at $k = aH$",
    )
    ax.set_xlabel(r"$k$ [$M_p$, with $a = e^N$]")
    ax.set_ylabel(r"$\mathcal{P}_\mathcal{R}(k)$")
    ax.set_title("primordial power spectrum")
    ax.legend()

    ax = axes[2]
    ax.plot(n_star[1:-1], 1 + ns_minus_1[1:-1], "o", ms=3, label=r"$1 + d\ln\mathcal{P}/d\ln k$")
    ax.plot(n_star, 1 - 4 / (2 * n_star + 1), "-", label=r"$1 - 4/(2N_*+1)$")
    ax.plot(n_star, 1 - 2 / n_star, "--", label=r"$1 - 2/N_*$")
    ax.invert_xaxis()
    ax.set_xlabel(r"$N_*$ (e-folds before the end at horizon exit)")
    ax.set_ylabel(r"$n_s$")
    ax.set_title("spectral index vs slow roll")
    ax.legend()
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
