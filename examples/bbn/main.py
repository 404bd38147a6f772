"""Big-Bang nucleosynthesis with a 4-species network (n, p, D, 4He), solved with shoal Rodas5P.

The clock is x = Q / T (Q = m_n - m_p, T the photon temperature), from T = 12.9 MeV to 8.6 keV.
Parameters per universe: the baryon-to-photon ratio today eta_10 = 1e10 eta and the effective
number of neutrino species N_eff.

1. A chi^2 map over (log10 eta_10, N_eff) on a grid of 100 x 100 = 10^4 universes in ONE ensemble
   solve, against Y_p = 0.245 +- 0.003 and D/H = (2.53 +- 0.03)e-5.
2. Posterior inference with NUTS (blackjax), the gradient of the log-likelihood by jax.grad through
   shoal's solve (forward sensitivities with respect to the two parameters; y0 does not depend on
   them: the network starts in weak equilibrium n/p = e^-x with no D or 4He).
3. The same network by diffrax Kvaerno5 (jit of vmap) and SciPy Radau (a loop) at the same
   tolerance, on a subset of the grid; errors of all three against SciPy Radau at rtol 1e-12.

    PYTHONPATH=. .venv/bin/python examples/bbn/main.py            # full run
    PYTHONPATH=. .venv/bin/python examples/bbn/main.py --smoke    # tiny, for tests
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

# -- constants (MeV, s, cm; PDG 2024) ----------------------------------------------------------
Q_NP = 1.29333  # m_n - m_p
M_E = 0.51099895
M_N = 938.92  # mean nucleon mass
B_D = 2.224566  # deuteron binding energy
TAU_N = 878.4  # neutron lifetime (s)
HBAR = 6.582119569e-22  # MeV s
HBARC = 1.973269804e-11  # MeV cm
M_PL = 1.220890e22  # Planck mass, MeV (G = 1 / M_PL^2)
N_AVOGADRO = 6.02214076e23
ZETA3 = 1.2020569031595942
MEV_TO_T9 = 11.604518  # T9 = T / 1e9 K

X0, X1 = 0.1, 150.0  # T = 12.9 MeV ... 8.6 keV
OBS = {"Yp": (0.245, 0.003), "DH": (2.53e-5, 0.03e-5)}
RTOL, ATOL = 1e-6, 1e-13  # the grid solve, every solver
REF_RTOL, REF_ATOL = 1e-11, 1e-18  # the reference: shoal Rodas5P, tight (agrees with SciPy Radau
# at rtol 1e-12, atol 1e-20 to 9 digits in Y_p and D/H; Radau takes ~15 s per universe)


# -- tables that depend on T only (NumPy, once) -----------------------------------------------


def _fermi_integrals(z):
    """e+e- (g = 4) energy density and entropy relative to massless, at z = m_e / T.

    rho = g/(2 pi^2) T^4 int u^2 E/(e^E + 1) du, P = g/(6 pi^2) T^4 int u^4/(E (e^E + 1)) du,
    E = sqrt(u^2 + z^2), s = (rho + P)/T; massless: rho = 7/8 pi^2/30 g T^4, s = 7/8 2pi^2/45 g T^3.
    """
    u = np.linspace(1e-6, 60.0, 6001)[None, :]
    e = np.sqrt(u**2 + z[:, None] ** 2)
    occ = 1.0 / (np.exp(e) + 1.0)
    rho = np.trapezoid(u**2 * e * occ, u, axis=1) * 4 / (2 * np.pi**2)
    pres = np.trapezoid(u**4 / e * occ, u, axis=1) * 4 / (6 * np.pi**2)
    rho0 = 7 / 8 * np.pi**2 / 30 * 4
    s0 = 7 / 8 * 2 * np.pi**2 / 45 * 4
    return rho / rho0, (rho + pres) / s0


def _weak_rates(z, z_nu):
    """Born-approximation n <-> p rates (s^-1), normalised to the free neutron lifetime.

    With eps the electron energy / m_e, q = Q / m_e, z = m_e / T, z_nu = m_e / T_nu
    (Bernstein, Brown & Feinberg 1989, Rev. Mod. Phys. 61, 25, section IV; Weinberg 1972):
      lambda(n->p) = K int_1^inf d eps eps sqrt(eps^2-1)
                       [ (eps-q)^2 / ((1+e^{-eps z})(1+e^{(eps-q) z_nu}))
                       + (eps+q)^2 / ((1+e^{eps z})(1+e^{-(eps+q) z_nu})) ]
    (n + nu -> p + e-, n -> p + e- + nubar; n + e+ -> p + nubar), lambda(p->n) the same with
    q -> -q, and K = 1 / (tau_n lambda_0) with lambda_0 = int_1^q eps (eps-q)^2 sqrt(eps^2-1) so
    that lambda(n->p) -> 1/tau_n at T -> 0. No Coulomb, radiative or finite-mass corrections.
    """
    from scipy.special import expit

    q = Q_NP / M_E
    v = np.linspace(0.0, 25.0, 8001)[None, :]  # eps = 1 + v^2: a smooth integrand at eps = 1
    eps = 1.0 + v**2
    jac = 2.0 * v * eps * v * np.sqrt(2.0 + v**2)  # d eps * eps * sqrt(eps^2 - 1)
    ze, zn = z[:, None], z_nu[:, None]

    def fd(a):  # 1 / (1 + e^a) = expit(-a): accurate down to e^{-700}, never exactly 0 early
        return expit(-a)

    def rate(qq):
        integrand = jac * (
            (eps - qq) ** 2 * fd(-eps * ze) * fd((eps - qq) * zn)
            + (eps + qq) ** 2 * fd(eps * ze) * fd(-(eps + qq) * zn)
        )
        return np.trapezoid(integrand, v, axis=1)

    w = np.linspace(1.0, q, 20001)
    lam0 = np.trapezoid(w * (w - q) ** 2 * np.sqrt(w**2 - 1.0), w)
    k = 1.0 / (TAU_N * lam0)
    return k * rate(q), k * rate(-q)


# -- nuclear rates: N_A <sigma v> in cm^3 mol^-1 s^-1 (NumPy; tabulated below) ---------------


def rate_npg(t9):
    """p(n, gamma)d, Smith, Kawano & Malaney 1993 (ApJS 85, 219), table 2."""
    s = np.sqrt(t9)
    return 4.742e4 * (
        1.0 - 0.8504 * s + 0.4895 * t9 - 0.09623 * t9 * s + 8.471e-3 * t9**2 - 2.80e-4 * t9**2 * s
    )


def rate_dd(t9):
    """d(d, n)3He + d(d, p)t, Caughlan & Fowler 1988 (At. Data Nucl. Data Tables 40, 283)."""
    c = np.cbrt(t9)
    pre = t9 ** (-2.0 / 3.0)
    ddn = (
        3.95e8
        * pre
        * np.exp(-4.259 / c)
        * (1 + 0.098 * c + 0.765 * c**2 + 0.525 * t9 + 9.61e-3 * t9 * c + 0.0167 * t9 * c**2)
    )
    ddp = (
        4.17e8
        * pre
        * np.exp(-4.258 / c)
        * (1 + 0.098 * c + 0.518 * c**2 + 0.355 * t9 - 0.010 * t9 * c - 0.018 * t9 * c**2)
    )
    return ddn + ddp


def thermal_tables(n_grid=1000):
    """Every function of T alone, on a uniform grid in ln x (linear interpolation between points):

      0  ln lambda(n->p)      1  ln lambda(p->n)                                   (s^-1)
      2  ln rho_ge            rho of photons + e+e-: pi^2/30 T^4 (2 + 7/2 f_rho)    (MeV^4)
      3  ln rho_nu1           rho of one neutrino species: pi^2/30 T^4 7/4 (T_nu/T)^4
      4  h                    1 + (1/3) d ln g_s / d ln T: d ln T / dt = -H / h
      5  ln(n_B <sigma v>_npg / eta_0)    (s^-1), n_B = eta(T) n_gamma, eta(T) = eta_0 g_s / 2
      6  ln(n_B <sigma v>_dd / eta_0)     (s^-1), both dd branches
      7  ln(1/S) + B_D/T + ln eta_0       with S = Y_D/(Y_n Y_p) in Saha equilibrium

    f_rho, g_s: the e+e- energy density and entropy (relative to massless) at m_e/T; entropy
    conservation of the photon-e+e- plasma after neutrino decoupling gives
    (T_nu / T)^3 = g_s(T) / (11/2) (Kolb & Turner 1990, sections 3.4 and 4.2). The steep
    e^{-B_D/T} of the photodissociation rate is kept analytic in the right-hand side."""
    lnx = np.linspace(np.log(X0) - 0.05, np.log(X1) + 0.05, n_grid)
    x = np.exp(lnx)
    temp = Q_NP / x
    z = M_E / temp
    f_rho, f_s = _fermi_integrals(z)
    g_s = 2.0 + 7 / 8 * 4 * f_s
    r_nu = (g_s / 5.5) ** (1 / 3)
    h = 1.0 - np.gradient(np.log(g_s), lnx) / 3.0  # d ln T = -d ln x
    lam_np, lam_pn = _weak_rates(z, z / r_nu)
    # a floor keeps the logarithms finite should a rate underflow (it does not on this grid: a
    # jump to the floor would make the spline ring and put spikes into the rates)
    if np.any(lam_pn < 1e-290) or np.any(lam_np < 1e-290):
        raise ValueError("a weak rate underflows on the table grid")
    ln_np, ln_pn = np.log(np.maximum(lam_np, 1e-300)), np.log(np.maximum(lam_pn, 1e-300))
    rho_ge = np.pi**2 / 30 * temp**4 * (2.0 + 3.5 * f_rho)
    rho_nu = np.pi**2 / 30 * temp**4 * 1.75 * r_nu**4
    n_b_per_eta = g_s / 2 * 2 * ZETA3 / np.pi**2 * (temp / HBARC) ** 3  # cm^-3
    t9 = temp * MEV_TO_T9
    ln_npg = np.log(n_b_per_eta * rate_npg(t9) / N_AVOGADRO)
    ln_dd = np.log(n_b_per_eta * rate_dd(t9) / N_AVOGADRO)
    ln_inv_s = -np.log(g_s / 2 * 2 * ZETA3 / np.pi**2 * 0.75 * (4 * np.pi * temp / M_N) ** 1.5)
    rows = np.stack([ln_np, ln_pn, np.log(rho_ge), np.log(rho_nu), h, ln_npg, ln_dd, ln_inv_s])
    return {"lnx": lnx, "rows": rows}


def spline_tables(tables):
    """Natural cubic splines through every row (SciPy's coefficients), so that the right-hand
    side is twice continuously differentiable in x: a piecewise-linear table puts a kink at
    every grid point, which an adaptive solver at tight tolerance pays for with rejected steps."""
    from scipy.interpolate import CubicSpline

    spl = CubicSpline(tables["lnx"], tables["rows"], axis=1, bc_type="natural")
    return {"lnx": tables["lnx"], "coef": np.transpose(spl.c, (0, 2, 1))}  # (4, rows, grid-1)


def _lookup(lnx):
    """All table rows at ln x: one binary search, then each row's cubic on that interval."""
    grid, coef = jnp.asarray(SPLINES["lnx"]), jnp.asarray(SPLINES["coef"])
    i = jnp.clip(jnp.searchsorted(grid, lnx, side="right") - 1, 0, grid.size - 2)
    d = lnx - grid[i]
    c = coef[:, :, i]
    return ((c[0] * d + c[1]) * d + c[2]) * d + c[3]


TABLES = thermal_tables()
SPLINES = spline_tables(TABLES)


# -- the network -------------------------------------------------------------------------------


def bbn_rhs(y, x, p):
    """dY/dx for Y = (Y_n, Y_p, Y_D, Y_He4), Y_i = n_i / n_B; p = (eta_10, N_eff).

    dY/dt:  n <-> p weak rates; n + p <-> D + gamma with the reverse rate from detailed balance
    (Saha: Y_D / (Y_n Y_p) = S(T) = eta(T) (2 zeta3/pi^2) (3/4) (4 pi T / m_N)^{3/2} e^{B_D/T});
    D + D -> 4He through 3He and t, each DD reaction followed at once by (3He or t) + D -> 4He + N,
    so the lumped reaction 3 D -> 4He + n + p. dx/dt = x H / h with
    H^2 = 8 pi G (rho_ge + N_eff rho_nu1) / 3 (radiation domination).
    """
    eta0, n_eff = p[0] * 1e-10, p[1]
    yn, yp, yd = y[0], y[1], y[2]
    ln_lnp, ln_lpn, ln_rho_ge, ln_rho_nu, h, ln_npg, ln_dd, ln_inv_s = _lookup(jnp.log(x))
    rho = jnp.exp(ln_rho_ge) + n_eff * jnp.exp(ln_rho_nu)  # MeV^4
    hubble = jnp.sqrt(8 * np.pi / 3 * rho) / M_PL / HBAR  # s^-1
    gam_npg = eta0 * jnp.exp(ln_npg)  # s^-1 per unit Y_n Y_p
    photodis = jnp.exp(ln_npg + ln_inv_s - B_D / Q_NP * x)  # s^-1, independent of eta
    r_npg = gam_npg * yn * yp - photodis * yd
    r_dd = 0.5 * eta0 * jnp.exp(ln_dd) * yd**2
    r_weak = jnp.exp(ln_lnp) * yn - jnp.exp(ln_lpn) * yp
    dydt = jnp.stack([-r_weak - r_npg + r_dd, r_weak - r_npg + r_dd, r_npg - 3 * r_dd, r_dd])
    return dydt * h / (x * hubble)


def y0_equilibrium():
    """Weak equilibrium at X0: n/p = e^{-x}; no D or 4He yet (D reaches Saha within the first
    steps). Independent of (eta, N_eff), so gradients need no sensitivity with respect to y0."""
    yn = 1.0 / (1.0 + np.exp(X0))
    return np.array([yn, 1.0 - yn, 0.0, 0.0])


def observables(y_end):
    """Y_p = 4 n_He / n_B (mass fraction of 4He) and D/H = Y_D / Y_p(protons)."""
    y_end = jnp.asarray(y_end)
    return 4.0 * y_end[..., 3], y_end[..., 2] / y_end[..., 1]


def chi2(yp, dh):
    return ((yp - OBS["Yp"][0]) / OBS["Yp"][1]) ** 2 + ((dh - OBS["DH"][0]) / OBS["DH"][1]) ** 2


def shoal_final(params, rtol=RTOL, atol=ATOL, y0=None, method="rodas5p", **kw):
    """Final abundances (M, 4) of a (M, 2) parameter batch, and the solve's stats."""
    y0 = jnp.asarray(y0_equilibrium() if y0 is None else y0)
    ys, st = solve(
        bbn_rhs,
        y0,
        jnp.array([X0, X1]),
        params,
        method=method,
        rtol=rtol,
        atol=atol,
        first_step=1e-6,
        max_steps=100_000,
        return_stats=True,
        **kw,
    )
    return ys[:, -1], st


# -- peers -------------------------------------------------------------------------------------


def diffrax_final(rtol=RTOL, atol=ATOL):
    import diffrax

    term = diffrax.ODETerm(lambda x, y, p: bbn_rhs(y, x, p))
    ctrl = diffrax.PIDController(rtol=rtol, atol=atol, pcoeff=0.0, icoeff=1.0, dcoeff=0.0)
    y0 = jnp.asarray(y0_equilibrium())

    def one(p):
        sol = diffrax.diffeqsolve(
            term,
            diffrax.Kvaerno5(),
            t0=X0,
            t1=X1,
            dt0=1e-6,
            y0=y0,
            args=p,
            stepsize_controller=ctrl,
            saveat=diffrax.SaveAt(t1=True),
            max_steps=100_000,
        )
        return sol.ys[-1], sol.stats["num_steps"]

    return jax.jit(jax.vmap(one))


def scipy_final(params, rtol, atol, method="Radau"):
    """A loop of solve_ivp over universes, f and its Jacobian (jax.jacfwd) jitted once."""
    from scipy.integrate import solve_ivp

    out, nfev = [], 0
    for p in np.asarray(params):
        pj = jnp.asarray(p)
        sol = solve_ivp(
            lambda x, y, pj=pj: np.asarray(_F_JIT(x, y, pj)),
            (X0, X1),
            y0_equilibrium(),
            method=method,
            rtol=rtol,
            atol=atol,
            first_step=1e-6,
            jac=lambda x, y, pj=pj: np.asarray(_JAC_JIT(x, y, pj)),
        )
        if not sol.success:
            raise RuntimeError(f"SciPy {method} failed at {p}: {sol.message}")
        out.append(sol.y[:, -1])
        nfev += sol.nfev
    return np.array(out), nfev


_F_JIT = jax.jit(lambda x, y, p: bbn_rhs(y, x, p))
_JAC_JIT = jax.jit(jax.jacfwd(lambda x, y, p: bbn_rhs(y, x, p), argnums=1))


# -- inference ---------------------------------------------------------------------------------


def log_posterior(theta, **solve_kw):
    """theta = (log10 eta_10, N_eff); flat priors on 0.3 < log10 eta_10 < 1.1, 1 < N_eff < 6
    written as smooth walls (so NUTS sees a finite gradient everywhere)."""
    params = jnp.stack([10.0 ** theta[0], theta[1]])[None, :]
    y_end, _ = shoal_final(params, **solve_kw)
    yp, dh = observables(y_end[0])
    wall = (
        jax.nn.softplus(50 * (0.3 - theta[0]))
        + jax.nn.softplus(50 * (theta[0] - 1.1))
        + jax.nn.softplus(20 * (1.0 - theta[1]))
        + jax.nn.softplus(20 * (theta[1] - 6.0))
    )
    return -0.5 * chi2(yp, dh) - 10.0 * wall


def run_nuts(key, n_warmup, n_samples, n_chains, theta0, cov0):
    """Window adaptation (dense mass matrix, started from the grid's posterior covariance cov0)
    on one chain, then n_chains chains vmapped: each gradient is one ensemble solve."""
    import blackjax

    logdensity = jax.jit(log_posterior)
    warmup = blackjax.window_adaptation(
        blackjax.nuts,
        logdensity,
        is_mass_matrix_diagonal=False,
        initial_inverse_mass_matrix=jnp.asarray(cov0),
        initial_step_size=0.5,
        target_acceptance_rate=0.8,
        max_num_doublings=6,
    )
    k_warm, k_sample = jax.random.split(key)
    (state, tuned), _ = warmup.run(k_warm, theta0, num_steps=n_warmup)
    kernel = blackjax.nuts(logdensity, **{"max_num_doublings": 6, **tuned})

    def one_step(states, k):
        keys = jax.random.split(k, n_chains)
        states, infos = jax.vmap(kernel.step)(keys, states)
        return states, (states.position, infos.is_divergent, infos.num_integration_steps)

    # chains start at the adapted state, jittered by the grid's posterior width
    chol = jnp.linalg.cholesky(jnp.asarray(cov0))
    starts = state.position + 0.3 * jax.random.normal(k_sample, (n_chains, 2)) @ chol.T
    states = jax.vmap(kernel.init)(starts)
    _, (pos, div, n_int) = jax.lax.scan(one_step, states, jax.random.split(k_sample, n_samples))
    return np.asarray(pos), np.asarray(div), np.asarray(n_int), tuned


def grid_moments(log_eta, n_eff, c2):
    """Mean and covariance of (log10 eta_10, N_eff) under exp(-chi^2/2) on the grid."""
    w = np.exp(-0.5 * (c2 - c2.min()))
    w /= w.sum()
    le, ne = np.meshgrid(log_eta, n_eff, indexing="ij")
    pts = np.stack([le.ravel(), ne.ravel()], axis=1)
    mean = w.ravel() @ pts
    d = pts - mean
    cells = np.diag([(log_eta[1] - log_eta[0]) ** 2, (n_eff[1] - n_eff[0]) ** 2]) / 12
    return mean, (d * w.ravel()[:, None]).T @ d + cells  # a coarse grid cannot resolve less


def compare_peers(sub, n_peer, t_s_sub, e_s, errors, t_grid, n_side, shoal_attempts, repeats):
    """diffrax Kvaerno5 and SciPy Radau on the same universes at the same tolerances."""
    dfx = diffrax_final()
    t0 = time.perf_counter()
    y_d, steps_d = jax.block_until_ready(dfx(sub))
    t_d_first = time.perf_counter() - t0
    t_d = best_time(lambda: jax.block_until_ready(dfx(sub)), repeats)
    e_d = errors(y_d)
    n_sc = 4
    scipy_final(sub[:1], RTOL, ATOL)  # compiles f and its Jacobian
    t0 = time.perf_counter()
    y_sc, nfev = scipy_final(sub[:n_sc], RTOL, ATOL)
    t_sc = (time.perf_counter() - t0) / n_sc * n_peer
    e_sc = errors(y_sc)
    print(
        f"peers on {n_peer} universes of the grid (rtol {RTOL:g}, atol {ATOL:g}); max relative "
        f"error of (Y_p, D/H) against Rodas5P at rtol {REF_RTOL:g}, atol {REF_ATOL:g}:"
    )
    print(
        f"  shoal Rodas5P              {t_s_sub * 1e3:9.2f} ms                     errors "
        f"{e_s[0]:.1e}, {e_s[1]:.1e}"
    )
    print(
        f"  diffrax Kvaerno5 jit(vmap) {t_d * 1e3:9.2f} ms ({t_d / t_s_sub:5.0f}x shoal)    "
        f"errors {e_d[0]:.1e}, {e_d[1]:.1e}; first call {t_d_first:.1f} s; "
        f"{np.mean(np.asarray(steps_d)):.0f} steps (shoal {shoal_attempts.mean():.0f})"
    )
    tight = jax.jit(lambda p: shoal_final(p, rtol=1e-8)[0])
    jax.block_until_ready(tight(sub))
    t_s8 = best_time(lambda: jax.block_until_ready(tight(sub)), repeats)
    e_s8 = errors(tight(sub))
    print(
        f"  shoal Rodas5P at rtol 1e-8 {t_s8 * 1e3:9.2f} ms (diffrax / this: {t_d / t_s8:.0f}x)  "
        f"errors {e_s8[0]:.1e}, {e_s8[1]:.1e} (about diffrax's achieved error)"
    )
    print(
        f"  SciPy Radau loop           {t_sc * 1e3:9.1f} ms ({t_sc / t_s_sub:5.0f}x shoal)    "
        f"errors {e_sc[0]:.1e}, {e_sc[1]:.1e} (timed on {n_sc}, scaled; "
        f"{nfev / n_sc:.0f} f evaluations each)"
    )
    print(
        f"  per universe: shoal {t_grid / n_side**2 * 1e6:.0f} us in the grid solve, "
        f"{t_s_sub / n_peer * 1e6:.0f} us in the {n_peer}-universe solve; diffrax "
        f"{t_d / n_peer * 1e6:.0f} us; SciPy {t_sc / n_peer * 1e6:.0f} us"
    )


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
    ap.add_argument("--grid", type=int, default=None, help="grid points per axis (default 100)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    smoke = args.smoke
    n_side = args.grid or (6 if smoke else 100)
    n_peer = 2 if smoke else 8  # universes solved by every peer (a subset of the grid)
    repeats = 1 if smoke else 2
    out = args.out or (Path(tempfile.mkdtemp()) / "bbn.png" if smoke else HERE / "bbn.png")

    # 1. the chi^2 grid: one ensemble solve of n_side^2 universes
    log_eta = np.linspace(np.log10(3.0), np.log10(10.0), n_side)
    n_eff = np.linspace(1.5, 5.0, n_side)
    le, ne = np.meshgrid(log_eta, n_eff, indexing="ij")
    params = jnp.asarray(np.stack([10.0 ** le.ravel(), ne.ravel()], axis=1))
    grid_fn = jax.jit(lambda p: shoal_final(p))
    t0 = time.perf_counter()
    y_end, st = jax.block_until_ready(grid_fn(params))
    t_first = time.perf_counter() - t0
    status = np.asarray(st["status"])
    if np.any(status != 0):
        raise RuntimeError(f"shoal: {int(np.sum(status != 0))} universes failed")
    t_grid = best_time(lambda: jax.block_until_ready(grid_fn(params)), repeats)
    attempts = np.asarray(st["accepted"] + st["rejected"])
    yp, dh = (np.asarray(a).reshape(n_side, n_side) for a in observables(y_end))
    c2 = np.asarray(chi2(yp, dh))
    print(
        f"grid: {n_side}x{n_side} = {n_side**2} universes in one Rodas5P ensemble: "
        f"{t_grid:.3f} s warm (min of {repeats}), first call {t_first:.2f} s; "
        f"mean {attempts.mean():.0f} step attempts ({attempts.min()}..{attempts.max()})"
    )
    i_std = (int(np.argmin(np.abs(log_eta - np.log10(6.1)))), int(np.argmin(np.abs(n_eff - 3.0))))
    print(
        f"at eta_10 = {10 ** log_eta[i_std[0]]:.2f}, N_eff = {n_eff[i_std[1]]:.2f}: "
        f"Y_p = {yp[i_std]:.4f}, D/H = {dh[i_std]:.3e}"
    )
    i_best = np.unravel_index(np.argmin(c2), c2.shape)
    print(
        f"grid minimum chi^2 = {c2[i_best]:.2f} at eta_10 = {10 ** log_eta[i_best[0]]:.3f}, "
        f"N_eff = {n_eff[i_best[1]]:.3f} (Y_p = {yp[i_best]:.4f}, D/H = {dh[i_best]:.3e})"
    )
    print(f"CHECK Yp_standard {yp[i_std]:.5f}")
    print(f"CHECK DH_standard {dh[i_std]:.4e}")

    # 2. peers on a subset, and the accuracy of each against a tight Radau
    idx = np.linspace(0, n_side**2 - 1, n_peer).round().astype(int)
    sub = jnp.asarray(np.asarray(params)[idx])
    y_ref = np.asarray(shoal_final(sub, REF_RTOL, REF_ATOL)[0])

    def errors(y):
        n = len(y)
        yp_r, dh_r = observables(y_ref[:n])
        yp_y, dh_y = observables(np.asarray(y))
        return (float(np.max(np.abs(yp_y / yp_r - 1))), float(np.max(np.abs(dh_y / dh_r - 1))))

    sub_fn = jax.jit(lambda p: shoal_final(p)[0])
    jax.block_until_ready(sub_fn(sub))
    t_s_sub = best_time(lambda: jax.block_until_ready(sub_fn(sub)), repeats)
    e_s = errors(sub_fn(sub))
    if smoke:  # diffrax Kvaerno5 takes ~15 s to compile: the smoke run skips the peers
        print(
            f"shoal Rodas5P on {n_peer} universes: errors of (Y_p, D/H) {e_s[0]:.1e}, "
            f"{e_s[1]:.1e} against rtol {REF_RTOL:g}; peers skipped (--smoke)"
        )
    else:
        compare_peers(sub, n_peer, t_s_sub, e_s, errors, t_grid, n_side, attempts[idx], repeats)
    print(f"CHECK shoal_DH_rel_error {e_s[1]:.2e}")

    # 3. gradient check and NUTS
    theta = jnp.array([np.log10(6.1), 3.0])
    g = jax.jit(jax.grad(log_posterior))(theta)
    tight = jax.jit(lambda th: log_posterior(th, rtol=1e-11, atol=1e-18))
    hstep = np.array([1e-5, 1e-4])
    fd = [
        (tight(theta + hstep[i] * jnp.eye(2)[i]) - tight(theta - hstep[i] * jnp.eye(2)[i]))
        / (2 * hstep[i])
        for i in range(2)
    ]
    rel = np.abs(np.asarray(g) / np.asarray(fd) - 1)
    print(
        f"grad log posterior at (log10 eta_10, N_eff) = (0.785, 3) by shoal (rtol {RTOL:g}): "
        f"{np.asarray(g)}; central differences of tight solves {np.asarray(fd)}; "
        f"relative difference {rel.max():.1e}"
    )
    print(f"CHECK grad_rel_error {rel.max():.2e}")
    n_warm, n_samp, n_chains = (5, 5, 2) if smoke else (100, 100, 4)
    g_mean, g_cov = grid_moments(log_eta, n_eff, c2)
    print(
        f"grid posterior: log10 eta_10 = {g_mean[0]:.4f} +- {np.sqrt(g_cov[0, 0]):.4f}, "
        f"N_eff = {g_mean[1]:.3f} +- {np.sqrt(g_cov[1, 1]):.3f}"
    )
    t0 = time.perf_counter()
    pos, div, n_int, _ = run_nuts(
        jax.random.PRNGKey(0), n_warm, n_samp, n_chains, jnp.asarray(g_mean), g_cov
    )
    t_nuts = time.perf_counter() - t0
    flat = pos.reshape(-1, 2)
    mean, std = flat.mean(axis=0), flat.std(axis=0)
    print(
        f"NUTS: {n_chains} chains x {n_samp} samples after {n_warm} warm-up steps in "
        f"{t_nuts:.1f} s (incl. compile); {int(div.sum())} divergent; {n_int.sum()} leapfrog "
        f"steps in all chains; log10 eta_10 = {mean[0]:.4f} +- {std[0]:.4f} "
        f"(eta_10 = {10 ** mean[0]:.3f}), N_eff = {mean[1]:.3f} +- {std[1]:.3f}"
    )
    print(f"CHECK nuts_divergent {int(div.sum())}")

    plot(log_eta, n_eff, c2, yp, dh, flat, out)
    print(f"plot: {out}")
    return 0


def plot(log_eta, n_eff, c2, yp, dh, samples, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    eta = 10**log_eta
    ax = axes[0]
    im = ax.pcolormesh(eta, n_eff, np.log10(c2.T + 1e-2), cmap="viridis", shading="nearest")
    ax.set_xscale("log")
    fig.colorbar(im, ax=ax, label=r"$\log_{10}\chi^2$")
    ax.contour(eta, n_eff, c2.T - c2.min(), levels=[2.30, 6.18], colors="w", linewidths=1)
    ax.set_xlabel(r"$\eta_{10}$")
    ax.set_ylabel(r"$N_{\rm eff}$")
    ax.set_title(r"$\chi^2(Y_p, {\rm D/H})$, $10^4$ universes, one solve")
    ax = axes[1]
    cs = ax.contour(eta, n_eff, yp.T, levels=np.arange(0.22, 0.28, 0.005), cmap="autumn")
    ax.clabel(cs, fmt="%.3f", fontsize=7)
    cs2 = ax.contour(eta, n_eff, 1e5 * dh.T, levels=[1, 1.5, 2, 2.53, 3, 4, 5, 7], cmap="winter")
    ax.clabel(cs2, fmt="%.2f", fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel(r"$\eta_{10}$")
    ax.set_ylabel(r"$N_{\rm eff}$")
    ax.set_title(r"$Y_p$ (warm colours), $10^5\,$D/H (cool colours)")
    ax = axes[2]
    ax.plot(10 ** samples[:, 0], samples[:, 1], ".", ms=2, alpha=0.4, label="NUTS samples")
    ax.contour(eta, n_eff, c2.T - c2.min(), levels=[2.30, 6.18], colors="k", linewidths=1)
    ax.set_xlabel(r"$\eta_{10}$")
    ax.set_ylabel(r"$N_{\rm eff}$")
    ax.set_title(r"posterior (NUTS) and grid 68/95% contours")
    pad = 4 * samples.std(axis=0)
    ax.set_xlim(10 ** (samples[:, 0].mean() - pad[0]), 10 ** (samples[:, 0].mean() + pad[0]))
    ax.set_ylim(samples[:, 1].mean() - pad[1], samples[:, 1].mean() + pad[1])
    ax.legend()
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
