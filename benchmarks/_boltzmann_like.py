"""A DISCO-EB-sized right-hand side for compile-latency measurements (issue 12).

Shaped like DISCO-EB's ``model_synchronous``: 72 state variables (scale factor, matter and metric
perturbations, photon temperature and polarisation hierarchies, massless neutrinos, three momentum
bins of massive neutrinos), three natural cubic splines of 512, 256 and 384 knots in log a, written
in jax.numpy with ``searchsorted`` and gathers over closed-over coefficient arrays, and 3
parameters (k, a baryon scale, a neutrino-mass scale). The physics is simplified (a toy background
and recombination); what matters here is that the program has the size and the constructs of the
real one.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import scipy.interpolate

LMAX = 15  # photon temperature, polarisation and massless-neutrino multipoles 0..LMAX
NU_BINS = 3  # massive-neutrino momentum bins ...
NU_L = 6  # ... of multipoles 0..NU_L-1 each
N_VARS = 6 + 3 * (LMAX + 1) + NU_BINS * NU_L  # = 72
N_PARAMS = 3
LOG_A = (-14.0, 0.5)


def natural_cubic_spline(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, ...]:
    """(knots, then the cubic, quadratic, linear and constant coefficient of each interval) of
    the natural cubic spline through (x, y)."""
    return (x, *scipy.interpolate.CubicSpline(x, y, bc_type="natural").c)


def spline_eval(coefficients, s):
    """The spline at scalar s (clamped to its knots), in jax.numpy: searchsorted + gathers."""
    x, c3, c2, c1, c0 = (jnp.asarray(c) for c in coefficients)
    s = jnp.clip(s, x[0], x[-1])
    i = jnp.clip(jnp.searchsorted(x, s, side="right") - 1, 0, x.size - 2)
    dx = s - x[i]
    return c0[i] + dx * (c1[i] + dx * (c2[i] + dx * c3[i]))


def _tables():
    def grid(knots):
        return np.linspace(*LOG_A, knots)

    la = grid(512)
    a = np.exp(la)
    # log(a^2 H) for radiation + matter + Lambda (H0 = 1).
    log_a2h = np.log(a**2 * np.sqrt(8.5e-5 / a**4 + 0.31 / a**3 + 0.69))
    lo = grid(256)
    xe = 0.5 * (1 + np.tanh((lo + 7.0) / 0.1)) + 2e-4
    log_opacity = np.log(xe * 2.3e5 * np.exp(-2 * lo))  # x_e n_e sigma_T a, toy units
    lc = grid(384)
    cs2 = 1e-9 * (1 + np.tanh(-(lc + 7.0) / 0.3)) * np.exp(-lc) + 1e-12
    return (natural_cubic_spline(la, log_a2h), natural_cubic_spline(lo, log_opacity),
            natural_cubic_spline(lc, np.log(cs2)))


EXPANSION, OPACITY, SOUND_SPEED = _tables()


def _streaming(f, kv):
    """k v / (2l+1) (l f_{l-1} - (l+1) f_{l+1}) for l = 1 .. len(f)-2 (a hierarchy's middle)."""
    ell = jnp.arange(1, f.shape[0] - 1, dtype=f.dtype)
    return kv * (ell * f[:-2] - (ell + 1) * f[2:]) / (2 * ell + 1)


def rhs(y, tau, p, splines=None):
    """The right-hand side; ``splines`` (expansion, opacity, sound speed), each ``spline_eval``'s
    coefficients, default to the module's tables (closed over: compile-time constants)."""
    expansion, opacity_spline, sound_speed = splines or (EXPANSION, OPACITY, SOUND_SPEED)
    k, omega_b, m_nu = p[0], p[1], p[2]
    a, delta_c, delta_b, theta_b, eta, h = (y[i] for i in range(6))
    off = 6
    fg = y[off : off + LMAX + 1]
    gg = y[off + LMAX + 1 : off + 2 * (LMAX + 1)]
    fn = y[off + 2 * (LMAX + 1) : off + 3 * (LMAX + 1)]
    nu = y[off + 3 * (LMAX + 1) :].reshape(NU_BINS, NU_L)

    log_a = jnp.log(a)
    a_prime = jnp.exp(spline_eval(expansion, log_a))
    conformal_h = a_prime / a
    opacity = jnp.exp(spline_eval(opacity_spline, log_a))
    cs2 = jnp.exp(spline_eval(sound_speed, log_a))
    rho_g = 8.5e-5 * 0.6 / a**4
    rho_n = 8.5e-5 * 0.4 / a**4
    rho_b = 0.05 * omega_b / a**3
    rho_c = 0.26 / a**3
    q = jnp.arange(1, NU_BINS + 1, dtype=y.dtype)
    eps = jnp.sqrt(q**2 + (a * m_nu * 1e3) ** 2)
    rho_m = rho_n * jnp.sum(eps * nu[:, 0]) / NU_BINS

    # Einstein equations (synchronous gauge, schematic).
    delta_rho = rho_c * delta_c + rho_b * delta_b + rho_g * fg[0] + rho_n * fn[0] + rho_m
    theta_tot = rho_b * theta_b + (rho_g * fg[1] + rho_n * fn[1]) * 0.75 * k
    h_prime = (k**2 * eta + 1.5 * delta_rho * a**2) / (0.5 * conformal_h)
    eta_prime = 1.5 * a**2 * theta_tot / k**2
    sigma = (rho_g * fg[2] + rho_n * fn[2]) * a**2 / k**2
    alpha_prime = h_prime + 6 * eta_prime
    r = 4 * rho_g / (3 * rho_b)
    theta_g = 0.75 * k * fg[1]

    d_a = a_prime
    d_delta_c = -0.5 * h_prime
    d_delta_b = -theta_b - 0.5 * h_prime
    d_theta_b = -conformal_h * theta_b + cs2 * k**2 * delta_b + r * opacity * (theta_g - theta_b)

    # Photon temperature hierarchy: monopole, dipole, streaming, Thomson damping, truncation.
    pol = fg[2] + gg[0] + gg[2]
    d_fg0 = -k * fg[1] * 4 / 3 - 2 * h_prime / 3
    d_fg1 = k / 3 * (fg[0] - 2 * fg[2]) + opacity * (4 * theta_b / (3 * k) - fg[1])
    d_fg2 = 0.4 * k * fg[1] - 0.6 * k * fg[3] + 0.4 * alpha_prime - opacity * (fg[2] - 0.1 * pol)
    d_fg_mid = _streaming(fg, k)[2:] - opacity * fg[3:-1]
    d_fg_last = k * fg[-2] - (LMAX + 1) * fg[-1] / tau - opacity * fg[-1]
    # Polarisation.
    d_gg0 = -k * gg[1] - opacity * (gg[0] - 0.5 * pol)
    d_gg_mid = _streaming(gg, k) - opacity * gg[1:-1]
    d_gg_last = k * gg[-2] - (LMAX + 1) * gg[-1] / tau - opacity * gg[-1]
    # Massless neutrinos.
    d_fn0 = -k * fn[1] * 4 / 3 - 2 * h_prime / 3
    d_fn1 = k / 3 * (fn[0] - 2 * fn[2])
    d_fn2 = 0.4 * k * fn[1] - 0.6 * k * fn[3] + 0.4 * alpha_prime
    d_fn_mid = _streaming(fn, k)[2:]
    d_fn_last = k * fn[-2] - (LMAX + 1) * fn[-1] / tau
    # Massive neutrinos: per momentum bin, velocity q / eps.
    d_nu = []
    for b in range(NU_BINS):
        psi = nu[b]
        kv = k * q[b] / eps[b]
        d_nu += [
            -kv * psi[1] - h_prime / 6,
            kv / 3 * (psi[0] - 2 * psi[2]),
            *(_streaming(psi, kv)[1:]),
            kv * psi[-2] - NU_L * psi[-1] / tau,
        ]
        d_nu[-NU_L + 2] = d_nu[-NU_L + 2] + alpha_prime / 15
    d_h = h_prime
    d_eta = eta_prime - 1e-3 * sigma

    # DISCO-EB fills this vector with 26 .at[k].set(...) scatters; scatters are being added to
    # the translator separately, so this builds it with stack/concatenate (same values).
    return jnp.concatenate([
        jnp.stack([d_a, d_delta_c, d_delta_b, d_theta_b, d_eta, d_h,
                   d_fg0, d_fg1, d_fg2]),
        d_fg_mid, d_fg_last[None],
        d_gg0[None], d_gg_mid, d_gg_last[None],
        jnp.stack([d_fn0, d_fn1, d_fn2]), d_fn_mid, d_fn_last[None],
        jnp.stack(d_nu),
    ])


def initial_state() -> np.ndarray:
    """Adiabatic-looking initial conditions at a = 1e-6 (schematic)."""
    y = np.zeros(N_VARS)
    y[0] = 1e-6
    y[1] = y[2] = -1e-3
    y[6] = y[6 + 2 * (LMAX + 1)] = -4e-3 / 3
    for b in range(NU_BINS):
        y[6 + 3 * (LMAX + 1) + b * NU_L] = -1e-3
    return y


PARAMS = np.array([0.1, 1.0, 0.1])
TAU_SPAN = (1.1e-4, 2e-4)
