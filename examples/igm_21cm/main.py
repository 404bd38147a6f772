"""The global 21cm signal from a 3-state IGM thermal and ionisation history, solved with shoal.

States over the clock s = ln((1 + z0) / (1 + z)) (e-folds of expansion since z0 = 300):
log T_k (gas kinetic temperature), logit x_e (ionised fraction of the neutral, "bulk" IGM) and
logit Q (volume filling factor of ionised bubbles). Physics: adiabatic cooling, Compton heating by
the CMB, X-ray heating and ionisation, case-B recombination, Lya coupling (Wouthuysen-Field) and
collisional coupling of the spin temperature; star formation follows the Press-Schechter
collapsed fraction. Three parameters per trajectory, drawn from the prior: f_X (X-ray efficiency),
f_alpha (Lya efficiency) and zeta (ionising efficiency).

50 000 prior samples in ONE ensemble solve (Rodas5P, per-component error_weights), an envelope plot
(median, 68 % and 95 % bands) of the brightness temperature dT_b(z); diffrax Kvaerno5 and SciPy
Radau on a subset at the same tolerances; errors of dT_b against a tight shoal reference.

    PYTHONPATH=. .venv/bin/python examples/igm_21cm/main.py            # full run
    PYTHONPATH=. .venv/bin/python examples/igm_21cm/main.py --smoke    # tiny, for tests
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

# -- cosmology (Planck 2018) and constants (cgs) ------------------------------------------------
H_LITTLE, OMEGA_M, OMEGA_B, OMEGA_R = 0.674, 0.315, 0.0493, 9.1e-5
OMEGA_L = 1.0 - OMEGA_M - OMEGA_R
Y_HE = 0.245
T_CMB0 = 2.7255  # K
H0 = H_LITTLE * 3.2407793e-18  # s^-1
M_P, K_B, C_LIGHT = 1.67262192e-24, 1.380649e-16, 2.99792458e10
SIGMA_T, M_E, A_RAD = 6.6524587e-25, 9.1093837e-28, 7.5657e-15
EV = 1.602176634e-12
RHO_CRIT0 = 1.87847e-29 * H_LITTLE**2  # g cm^-3
N_B0 = OMEGA_B * RHO_CRIT0 / M_P  # baryons per comoving cm^3
N_H0 = (1.0 - Y_HE) * N_B0
F_HE = Y_HE / (4.0 * (1.0 - Y_HE))  # n_He / n_H
# astrophysics (fixed)
F_STAR = 0.1  # fraction of collapsed baryons turned into stars
SIGMA_MIN = 5.6  # sigma(M_min) of the smallest star-forming haloes (T_vir ~ 1e4 K), at z = 0
GROWTH0 = 0.78  # D(z) (1 + z) -> 1 / GROWTH0 in matter domination (D(0) = 1)
# X-ray energy per baryon turned into stars (erg), from L_X / SFR = 3.4e40 erg/s per Msun/yr
E_X_PER_STELLAR_BARYON = 3.4e40 * 3.15576e7 / 1.989e33 * M_P
N_ALPHA = 9690.0  # Lya-Lyb photons per stellar baryon (Pop II; Barkana & Loeb 2005)
NU_ALPHA = 2.46607e15  # Hz
CLUMPING = 3.0  # of the ionised bubbles
T_STAR, A_10 = 0.0682, 2.85e-15  # 21cm: h nu / k_B (K), Einstein coefficient (s^-1)

Z0, Z_END = 300.0, 6.0
X_E0 = 1.0e-3  # x_e at z0: the residual ionisation after recombination (approximately RECFAST's)
RTOL, ATOL = 1e-6, 1e-8
WEIGHTS = (1.0, 1.0, 0.1)  # error_weights: log T_k, logit x_e, logit Q (see README)


def s_of_z(z):
    return np.log((1.0 + Z0) / (1.0 + np.asarray(z)))


def hubble(zp1):
    return H0 * jnp.sqrt(OMEGA_M * zp1**3 + OMEGA_R * zp1**4 + OMEGA_L)


def log_source(zp1):
    """ln of (1+z) |d f_coll / dz| (collapse per e-fold of expansion), Press-Schechter:
    f_coll = erfc(nu / sqrt 2), nu = 1.686 / (sigma_min D(z)), D = 1 / (GROWTH0 (1 + z))."""
    nu = 1.686 * zp1 * GROWTH0 / SIGMA_MIN
    return 0.5 * jnp.log(2.0 / jnp.pi) + jnp.log(nu) - 0.5 * nu**2


def alpha_b(t):
    """Case-B recombination coefficient (cm^3 s^-1), Pequignot et al. 1991 fit with RECFAST's
    fudge factor 1.14 (Seager, Sasselov & Scott 1999)."""
    t4 = t / 1e4
    return 1.14e-13 * 4.309 * t4**-0.6166 / (1.0 + 0.6703 * t4**0.5300)


def igm_rhs(y, s, p):
    """d(log T_k, logit x_e, logit Q)/ds, p = (f_X, f_alpha, zeta). Furlanetto 2006 (MNRAS 371,
    867) and Furlanetto, Oh & Briggs 2006 (Phys. Rep. 433, 181), sections 2-3."""
    f_x, zeta = p[0], p[2]
    log_tk, lx, lq = y[0], y[1], y[2]
    tk = jnp.exp(log_tk)
    x_e = jax.nn.sigmoid(lx)
    zp1 = (1.0 + Z0) * jnp.exp(-s)
    hub = hubble(zp1)
    t_cmb = T_CMB0 * zp1
    n_h = N_H0 * zp1**3
    src = jnp.exp(log_source(zp1))  # (1+z)|df_coll/dz|
    # energy deposition fractions of X-rays in a partly ionised medium (Shull & van Steenberg 1985)
    f_heat = 0.9971 * (1.0 - (1.0 - x_e**0.2663) ** 1.3163)
    f_ion = 0.3908 * (1.0 - x_e**0.4092) ** 1.7592
    e_x = f_x * F_STAR * E_X_PER_STELLAR_BARYON * src  # X-ray energy per baryon per e-fold (erg)
    # x_e: X-ray ionisation (13.6 eV per ionisation) and recombination in the bulk IGM
    dx = f_ion * e_x / ((1.0 - Y_HE) * 13.6 * EV) - alpha_b(tk) * x_e**2 * n_h / hub
    # T_k: adiabatic cooling, Compton heating, X-ray heating (per particle: n_tot / n_b below)
    particles = (1.0 - Y_HE) * (1.0 + x_e) + Y_HE / 4.0
    compton = 8 * SIGMA_T * A_RAD * t_cmb**4 / (3 * M_E * C_LIGHT) * x_e / (1 + F_HE + x_e) / hub
    heat_x = 2.0 / 3.0 * f_heat * e_x / (K_B * particles)
    dlog_tk = (
        -2.0 + compton * (t_cmb / tk - 1.0) + heat_x / tk - dx / (1.0 + x_e)
    )  # the last term: heat shared with the new free electrons
    # Q: dQ/ds = zeta src (1 - Q) - C alpha_B(1e4 K) n_e Q / H (sources ionise neutral regions),
    # as a logit: dL/ds = zeta src (1 + e^{-L}) - R (1 + e^{L}); zeta src e^{-L} in logs, since
    # Q ~ e^{-L} is astronomically small before the first haloes form
    rec = CLUMPING * alpha_b(1e4) * n_h * (1.0 + F_HE) / hub
    d_lq = (
        zeta * src
        + jnp.exp(jnp.log(zeta) + log_source(zp1) - lq)
        - rec * (1.0 + jnp.exp(jnp.minimum(lq, 50.0)))
    )
    d_lx = dx / (x_e * (1.0 - x_e))
    return jnp.stack([dlog_tk, d_lx, d_lq])


def brightness_temperature(ys, z, f_alpha):
    """dT_b (mK) of saved states ys (..., n_z, 3) at redshifts z, Lya efficiencies f_alpha (...).

    dT_b = 27 mK x_HI (Omega_b h^2 / 0.023) sqrt(0.15 / (Omega_m h^2) (1+z)/10) (1 - T_cmb/T_S),
    1/T_S = (1/T_cmb + (x_c + x_alpha)/T_k) / (1 + x_c + x_alpha) (colour temperature = T_k);
    x_c from H-H collisions (kappa fit of Kuhlen, Madau & Montgomery 2006), x_alpha = S_alpha J_a
    / J_c with S_alpha = 1, J_c = 5.54e-12 (1+z) photons cm^-2 s^-1 Hz^-1 sr^-1 (Furlanetto 2006),
    J_a from the Lya-Lyb photons emitted within the redshift range that lands them at Lya."""
    zp1 = 1.0 + jnp.asarray(z)
    tk = jnp.exp(ys[..., 0])
    x_e, q = jax.nn.sigmoid(ys[..., 1]), jax.nn.sigmoid(ys[..., 2])
    t_cmb = T_CMB0 * zp1
    x_hi = (1.0 - q) * (1.0 - x_e)
    kappa = 3.1e-11 * tk**0.357 * jnp.exp(-32.0 / tk)
    x_c = T_STAR / (A_10 * t_cmb) * N_H0 * zp1**3 * (1.0 - x_e) * kappa
    j_a = (
        C_LIGHT
        / (4 * np.pi)
        * zp1**3
        * jnp.asarray(f_alpha)[..., None]
        * N_ALPHA
        * F_STAR
        * N_B0
        * jnp.exp(log_source(zp1))
        / NU_ALPHA
    )  # zp1^3: (1+z)^4 |df/dz| = zp1^3 src
    x_a = j_a / (5.54e-12 * zp1)
    inv_ts = (1.0 / t_cmb + (x_c + x_a) / tk) / (1.0 + x_c + x_a)
    pref = (
        27.0
        * (OMEGA_B * H_LITTLE**2 / 0.023)
        * jnp.sqrt(0.15 / (OMEGA_M * H_LITTLE**2) * zp1 / 10.0)
    )
    return pref * x_hi * (1.0 - t_cmb * inv_ts), 1.0 / inv_ts


def initial_state(params):
    """T_k = T_cmb (Compton-coupled), x_e = X_E0, and logit Q at its source-recombination balance
    at z0 (Q ~ e^{-2400}: no haloes yet), per trajectory since it depends on zeta."""
    params = np.asarray(params)
    zp1 = 1.0 + Z0
    rec = float(CLUMPING * alpha_b(1e4) * N_H0 * zp1**3 * (1.0 + F_HE) / hubble(zp1))
    lq0 = np.log(params[:, 2]) + float(log_source(zp1)) - np.log(rec)
    y0 = np.empty((len(params), 3))
    y0[:, 0] = np.log(T_CMB0 * zp1)
    y0[:, 1] = np.log(X_E0 / (1.0 - X_E0))
    y0[:, 2] = lq0
    return y0


def prior_samples(key, n):
    """log10 f_X ~ U(-1, 1), log10 f_alpha ~ U(-1, 1), zeta ~ U(10, 50)."""
    u = np.asarray(jax.random.uniform(key, (n, 3)))
    return np.stack([10 ** (2 * u[:, 0] - 1), 10 ** (2 * u[:, 1] - 1), 10 + 40 * u[:, 2]], axis=1)


def save_grid(n_z):
    z = np.linspace(45.0, Z_END, n_z)
    return z, np.concatenate([[0.0], s_of_z(z)])


def shoal_history(t_span, method="rodas5p", rtol=RTOL, atol=ATOL, weights=WEIGHTS):
    def run(y0, params):
        ys, st = solve(
            igm_rhs,
            y0,
            t_span,
            params,
            method=method,
            rtol=rtol,
            atol=atol,
            error_weights=jnp.asarray(weights),
            first_step=1e-4,
            max_steps=100_000,
            return_stats=True,
        )
        return ys[:, 1:], st["accepted"] + st["rejected"], st["status"]

    return jax.jit(run)


def diffrax_history(t_span, rtol=RTOL, atol=ATOL, weights=WEIGHTS):
    """Kvaerno5 with the same controller; diffrax's PIDController has no per-component weights,
    so the weights enter through its norm (the same RMS norm, weighted)."""
    import diffrax

    w = jnp.asarray(weights)
    term = diffrax.ODETerm(lambda s, y, p: igm_rhs(y, s, p))

    def norm(e):
        return jnp.sqrt(jnp.mean((w * e) ** 2))

    ctrl = diffrax.PIDController(
        rtol=rtol, atol=atol, pcoeff=0.0, icoeff=1.0, dcoeff=0.0, norm=norm
    )
    ts = jnp.asarray(t_span)

    def one(y0, p):
        sol = diffrax.diffeqsolve(
            term,
            diffrax.Kvaerno5(),
            t0=ts[0],
            t1=ts[-1],
            dt0=1e-4,
            y0=y0,
            args=p,
            stepsize_controller=ctrl,
            saveat=diffrax.SaveAt(ts=ts[1:]),
            max_steps=100_000,
        )
        return sol.ys, sol.stats["num_steps"]

    return jax.jit(jax.vmap(one))


def scipy_history(t_span, y0, params, rtol=RTOL, atol=ATOL):
    from scipy.integrate import solve_ivp

    f = jax.jit(lambda s, y, p: igm_rhs(y, s, p))
    jac = jax.jit(jax.jacfwd(lambda s, y, p: igm_rhs(y, s, p), argnums=1))
    f(0.0, jnp.asarray(y0[0]), jnp.asarray(params[0]))
    jac(0.0, jnp.asarray(y0[0]), jnp.asarray(params[0]))
    out = []
    t0 = time.perf_counter()
    for y, p in zip(y0, params, strict=True):
        pj = jnp.asarray(p)
        sol = solve_ivp(
            lambda s, yy, pj=pj: np.asarray(f(s, yy, pj)),
            (t_span[0], t_span[-1]),
            y,
            method="Radau",
            t_eval=t_span[1:],
            rtol=rtol,
            atol=atol / np.asarray(WEIGHTS),
            first_step=1e-4,
            jac=lambda s, yy, pj=pj: np.asarray(jac(s, yy, pj)),
        )
        if not sol.success:
            raise RuntimeError(f"SciPy Radau failed: {sol.message}")
        out.append(sol.y.T)
    return np.array(out), time.perf_counter() - t0


def best_time(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes; plot to a temporary dir")
    ap.add_argument("--samples", type=int, default=None, help="prior samples (default 50 000)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    smoke = args.smoke
    n = args.samples or (200 if smoke else 50_000)
    n_peer = 8 if smoke else 200
    repeats = 1 if smoke else 3
    out = args.out or (
        Path(tempfile.mkdtemp()) / "igm_21cm.png" if smoke else HERE / "igm_21cm.png"
    )

    z, t_span_np = save_grid(40 if smoke else 118)
    t_span = jnp.asarray(t_span_np)
    params = prior_samples(jax.random.PRNGKey(1), n)
    y0 = initial_state(params)
    p_j, y0_j = jnp.asarray(params), jnp.asarray(y0)

    fn = shoal_history(t_span)
    t0 = time.perf_counter()
    ys, att, status = jax.block_until_ready(fn(y0_j, p_j))
    t_first = time.perf_counter() - t0
    bad = int(np.sum(np.asarray(status) != 0))
    if bad:
        raise RuntimeError(f"shoal: {bad} of {n} trajectories failed")
    t_shoal = best_time(lambda: jax.block_until_ready(fn(y0_j, p_j)), 1)
    att = np.asarray(att)
    print(
        f"shoal Rodas5P: {n} prior samples in one ensemble, {t_shoal:.3f} s warm (one "
        f"call), first call {t_first:.2f} s; {att.mean():.0f} step attempts per "
        f"trajectory ({att.min()}..{att.max()}); error_weights {WEIGHTS}"
    )
    tb, _ = brightness_temperature(ys, z, p_j[:, 1])
    tb = np.asarray(tb)
    q = np.percentile(tb, [2.5, 16, 50, 84, 97.5], axis=0)
    i_min = int(np.argmin(q[2]))
    print(
        f"median dT_b: trough {q[2][i_min]:.1f} mK at z = {z[i_min]:.1f} "
        f"(68 %: {q[1][i_min]:.1f} .. {q[3][i_min]:.1f} mK); deepest sample "
        f"{tb.min():.1f} mK; median dT_b at z = {z[-1]:.0f}: {q[2][-1]:.2f} mK"
    )
    print(f"CHECK trough_mK {q[2][i_min]:.2f}")
    print(f"CHECK trough_z {z[i_min]:.2f}")

    # accuracy against a tight reference, and the peers, on a subset
    idx = np.linspace(0, n - 1, n_peer).round().astype(int)
    ys_ref, _, st_ref = shoal_history(t_span, rtol=1e-11, atol=1e-13)(y0_j[idx], p_j[idx])
    if np.any(np.asarray(st_ref) != 0):
        raise RuntimeError("the reference solve failed")
    tb_ref = np.asarray(brightness_temperature(ys_ref, z, p_j[idx, 1])[0])

    def err(ys_x):
        return float(
            np.max(np.abs(np.asarray(brightness_temperature(ys_x, z, p_j[idx, 1])[0]) - tb_ref))
        )

    sub = shoal_history(t_span)
    y_sub, _, _ = jax.block_until_ready(sub(y0_j[idx], p_j[idx]))
    t_sub = best_time(lambda: jax.block_until_ready(sub(y0_j[idx], p_j[idx])), repeats)
    e_shoal = err(y_sub)
    print(
        f"max |dT_b error| against Rodas5P rtol 1e-11 on {n_peer} samples: shoal "
        f"{e_shoal:.2e} mK ({t_sub * 1e3:.1f} ms for the {n_peer})"
    )
    print(f"CHECK dTb_error_mK {e_shoal:.3e}")
    unweighted = shoal_history(t_span, weights=(1.0, 1.0, 1.0))
    y_u, att_u, _ = jax.block_until_ready(unweighted(y0_j[idx], p_j[idx]))
    t_u = best_time(lambda: jax.block_until_ready(unweighted(y0_j[idx], p_j[idx])), repeats)
    _, att_w, _ = sub(y0_j[idx], p_j[idx])
    print(
        f"  unweighted (1, 1, 1): {np.mean(att_u):.0f} step attempts vs {np.mean(att_w):.0f} "
        f"weighted, {t_u * 1e3:.1f} ms, error {err(y_u):.2e} mK"
    )
    if not smoke:
        dfx = diffrax_history(t_span_np)
        t0 = time.perf_counter()
        y_d, steps_d = jax.block_until_ready(dfx(y0_j[idx], p_j[idx]))
        t_dfirst = time.perf_counter() - t0
        t_d = best_time(lambda: jax.block_until_ready(dfx(y0_j[idx], p_j[idx])), repeats)
        print(
            f"  diffrax Kvaerno5 jit(vmap): {t_d * 1e3:.1f} ms ({t_d / t_sub:.0f}x shoal), "
            f"first call {t_dfirst:.1f} s, {np.mean(np.asarray(steps_d)):.0f} steps, error "
            f"{err(y_d):.2e} mK"
        )
        tight = shoal_history(t_span, rtol=1e-8, atol=1e-10)
        y_t, att_t, _ = jax.block_until_ready(tight(y0_j[idx], p_j[idx]))
        t_t = best_time(lambda: jax.block_until_ready(tight(y0_j[idx], p_j[idx])), repeats)
        print(
            f"  shoal at rtol 1e-8, atol 1e-10: {t_t * 1e3:.1f} ms (diffrax / this: "
            f"{t_d / t_t:.0f}x), {np.mean(np.asarray(att_t)):.0f} step attempts, error "
            f"{err(y_t):.2e} mK (about diffrax's achieved error)"
        )
        n_sc = 10
        y_sc, t_sc = scipy_history(t_span_np, y0[idx[:n_sc]], params[idx[:n_sc]])
        t_sc *= n_peer / n_sc
        e_sc = float(
            np.max(
                np.abs(
                    np.asarray(brightness_temperature(jnp.asarray(y_sc), z, p_j[idx[:n_sc], 1])[0])
                    - tb_ref[:n_sc]
                )
            )
        )
        print(
            f"  SciPy Radau loop: {t_sc * 1e3:.0f} ms for {n_peer} (timed on {n_sc}, scaled; "
            f"{t_sc / t_sub:.0f}x shoal), error {e_sc:.2e} mK"
        )
        print(
            f"  per trajectory: shoal {t_shoal / n * 1e6:.0f} us (50 000-member ensemble), "
            f"diffrax {t_d / n_peer * 1e6:.0f} us, SciPy {t_sc / n_peer * 1e6:.0f} us"
        )

    plot(z, q, ys, params, tb, out)
    print(f"plot: {out}")
    return 0


def plot(z, q, ys, params, tb, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    ax = axes[0]
    ax.fill_between(z, q[0], q[4], color="C0", alpha=0.2, label="95 %")
    ax.fill_between(z, q[1], q[3], color="C0", alpha=0.4, label="68 %")
    ax.plot(z, q[2], "C0", lw=2, label="median")
    ax.axhline(0.0, color="k", lw=0.5)
    ax.set_xlabel("redshift z")
    ax.set_ylabel(r"$\delta T_b$ [mK]")
    ax.set_title(f"global 21cm signal, {len(params)} prior samples (one shoal solve)")
    ax.invert_xaxis()
    top = ax.secondary_xaxis(
        "top",
        functions=(lambda zz: 1420.4 / (1 + zz), lambda nu: 1420.4 / np.maximum(nu, 1e-9) - 1),
    )
    top.set_xticks([40, 50, 60, 80, 100, 150, 200])
    top.set_xlabel(r"$\nu$ [MHz]")
    ax.legend(loc="lower left")

    ax = axes[1]
    tk = np.exp(np.asarray(ys[..., 0]))
    qf = np.asarray(jax.nn.sigmoid(ys[..., 2]))
    for arr, name, c in ((tk, r"$T_k$", "C3"),):
        lo, mid, hi = np.percentile(arr, [16, 50, 84], axis=0)
        ax.fill_between(z, lo, hi, color=c, alpha=0.3)
        ax.semilogy(z, mid, c, label=f"{name} (median, 68 %)")
    ax.semilogy(z, T_CMB0 * (1 + z), "k--", label=r"$T_{\rm CMB}$")
    ax.set_xlabel("redshift z")
    ax.set_ylabel("temperature [K]")
    ax.invert_xaxis()
    ax2 = ax.twinx()
    lo, mid, hi = np.percentile(qf, [16, 50, 84], axis=0)
    ax2.fill_between(z, lo, hi, color="C2", alpha=0.2)
    ax2.plot(z, mid, "C2", label="Q (ionised volume)")
    ax2.set_ylabel("Q")
    ax2.set_ylim(0, 1.02)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, loc="upper center")
    ax.set_title("gas temperature and reionisation")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
