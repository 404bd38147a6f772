"""shoal.ode.solve on a GPU against the same solve on the CPU (issue 7).

Every test runs one function twice: jitted with its inputs committed to the CPU, and jitted with
them committed to the GPU (under ``jax.default_device`` of that device too), and checks that the
GPU results live on the GPU and agree with the CPU's:

* models made of + − × ÷ (and sqrt) only, float64: the same arithmetic on both sides (the host
  build has no FP contraction, NVRTC compiles with -fmad=false), so step counts
  (accepted/rejected) and statuses must be identical and values agree to 1e-12 relative;
* float32: values to 1e-5 relative, step counts within ±2;
* models with transcendental functions (here sin): CUDA's libdevice and glibc may differ by an
  ulp, so values agree loosely (1e-6 relative at rtol 1e-10) and step counts within ±2.

Relative agreement is per component, with a floor of the same relative size times the largest
magnitude that component takes in the CPU result (Robertson's y2 is 1e-5 of the others).

Skipped, and reported as skipped, where JAX sees no GPU. For checking this file's plumbing on a
machine without one, ``SHOAL_TEST_GPU_AS_CPU=1`` runs every test with the CPU standing in for the
GPU (CPU compared against itself; it proves nothing about a GPU).

Ensembles are kept moderate (≤ ~4k trajectories) and the set of compiled models small, because
each distinct (model, dtype, method, options) compiles twice: g++ for the CPU, NVRTC for the GPU.
"""

from __future__ import annotations

import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shoal.ode import Event, Status, solve

from ode_problems import blow_up, lorenz, sqrt_domain
from stiff_problems import forced_bateman, robertson_expiring

CPU = jax.devices("cpu")[0]


def _find_gpu():
    if os.environ.get("SHOAL_TEST_GPU_AS_CPU") == "1":
        return CPU
    for backend in ("cuda", "gpu"):
        try:
            devices = jax.devices(backend)
        except RuntimeError:  # "Unknown backend": no GPU plugin or no device
            continue
        if devices:
            return devices[0]
    return None


GPU = _find_gpu()
pytestmark = pytest.mark.skipif(GPU is None, reason="no GPU: jax.devices('cuda') found none")

F64_RTOL = 1e-12
F32_RTOL = 1e-5


# ---------------------------------------------------------------------------------------------
# Running on a device and comparing


def on(device, fn, *args):
    """``jax.jit(fn)(*args)`` with args committed to ``device``; results as NumPy.

    Checks that every output was produced on ``device`` (no silent fallback to the host)."""
    args = jax.device_put(args, device)
    with jax.default_device(device):
        out = jax.jit(fn)(*args)
    for leaf in jax.tree.leaves(out):
        assert leaf.devices() == {device}, f"output on {leaf.devices()}, expected {device}"
    return jax.tree.map(np.asarray, out)


def both(fn, *args):
    """(CPU result, GPU result) of the same jitted function."""
    return on(CPU, fn, *args), on(GPU, fn, *args)


def assert_values_close(cpu, gpu, rtol):
    """Same shape, dtype and NaN pattern; finite entries within rtol per component (last axis)."""
    cpu, gpu = np.asarray(cpu), np.asarray(gpu)
    assert gpu.shape == cpu.shape and gpu.dtype == cpu.dtype, (gpu.shape, gpu.dtype, cpu.dtype)
    np.testing.assert_array_equal(np.isnan(gpu), np.isnan(cpu), err_msg="NaN patterns differ")
    finite = np.where(np.isfinite(cpu), cpu, 0.0).astype(np.float64)
    axes = tuple(range(cpu.ndim - 1))
    scale = np.max(np.abs(finite), axis=axes, keepdims=True) if cpu.ndim > 1 else \
        np.max(np.abs(finite), initial=0.0)
    tol = rtol * (np.abs(finite) + scale) + np.finfo(cpu.dtype).tiny
    diff = np.abs(np.where(np.isfinite(gpu), gpu, 0.0).astype(np.float64) - finite)
    worst = np.unravel_index(np.argmax(diff / tol), diff.shape) if diff.size else ()
    assert np.all(diff <= tol), (
        f"GPU differs from CPU beyond rtol {rtol}: worst at {worst}: cpu {cpu[worst]!r}, "
        f"gpu {gpu[worst]!r}; {int(np.sum(diff > tol))} of {diff.size} entries out")


def assert_stats(cpu, gpu, steps="exact"):
    """Statuses identical; accepted/rejected identical ("exact") or within ±2 ("loose")."""
    np.testing.assert_array_equal(gpu["status"], cpu["status"], err_msg="statuses differ")
    for key in ("accepted", "rejected"):
        if steps == "exact":
            np.testing.assert_array_equal(gpu[key], cpu[key], err_msg=f"{key} counts differ")
        else:
            worst = int(np.max(np.abs(gpu[key].astype(np.int64) - cpu[key]), initial=0))
            assert worst <= 2, f"{key} counts differ by up to {worst} (allowed ±2)"


def assert_same_solve(cpu, gpu, rtol=F64_RTOL, steps="exact"):
    (ys_c, st_c), (ys_g, st_g) = cpu, gpu
    assert_stats(st_c, st_g, steps)
    assert_values_close(ys_c, ys_g, rtol)


def custom_calls(fn, *args) -> list[str]:
    """The shoal custom-call targets in fn's lowering for the device args are committed to."""
    text = jax.jit(fn).lower(*args).as_text()
    return re.findall(r"custom_call\s*@(shoal\w*)", text) + \
        re.findall(r'custom_call_target\s*=\s*"(shoal\w*)"', text)


# ---------------------------------------------------------------------------------------------
# Problems (right-hand sides from ode_problems / stiff_problems where they exist)

LORENZ_T = np.linspace(0.0, 1.0, 11)


def lorenz_inputs(n: int, seed: int = 0, dtype=np.float64):
    """y0 (n, 3) and p (n, 3) = (σ, ρ, β) spread around the classical values, ρ ≤ 21 (not
    chaotic over t ∈ [0, 1], so float32 agreement is meaningful)."""
    rng = np.random.default_rng(seed)
    y0 = np.array([1.0, 0.0, 0.0]) + rng.uniform(-0.5, 0.5, (n, 3))
    p = np.stack([rng.uniform(8.0, 12.0, n), rng.uniform(0.0, 21.0, n),
                  rng.uniform(2.0, 3.0, n)], axis=1)
    return y0.astype(dtype), p.astype(dtype)


def tsit5_lorenz(rtol=1e-8, atol=1e-8, **kw):
    def run(y0, t, p):
        return solve(lorenz, y0, t, p, method="tsit5", rtol=rtol, atol=atol, return_stats=True,
                     **kw)
    return run


ROBERTSON_Y0 = np.array([1.0, 0.0, 0.0])
ROBERTSON_T = np.concatenate([[0.0], np.logspace(-6.0, 5.0, 20)])


# Robertson is robertson_expiring with t_fail = 1e30 (its factor sqrt(1e30 − t)/sqrt(1e30) is
# exactly 1 in float32 and float64 for t ≤ 1e5), so that one compiled model also serves the
# non-finite test (t_fail = 5): each distinct model compiles twice, with g++ and NVRTC.
NEVER = 1e30


def robertson_params(n: int, seed: int = 1) -> np.ndarray:
    """(k1, k2, k3, t_fail): k1 ±5 %, k2 log-uniform in [3e3, 3e7] (mixed stiffness across the
    ensemble, so neighbouring threads take very different step counts), k3 = 1e4."""
    rng = np.random.default_rng(seed)
    k1 = 0.04 * rng.uniform(0.95, 1.05, n)
    k2 = 3.0 * 10.0 ** rng.uniform(3.0, 7.0, n)
    return np.stack([k1, k2, np.full(n, 1e4), np.full(n, NEVER)], axis=1)


def rodas_robertson(rtol=1e-6, atol=1e-10, lu_precision="fp64", **kw):
    def run(y0, t, p):
        return solve(robertson_expiring, y0, t, p, method="rodas5p", rtol=rtol, atol=atol,
                     lu_precision=lu_precision, return_stats=True, **kw)
    return run


def pendulum(y, t, p):
    """Damped pendulum, p = (g/l, damping): sin makes libdevice and glibc results differ."""
    return jnp.stack([y[1], -p[0] * jnp.sin(y[0]) - p[1] * y[1]])


def vdp_ring(y, t, p):
    """Stiff Van der Pol ring (as in test_ode_sparse); y = (x_0, v_0, x_1, v_1, …), p = (μ, d, ω).
    """
    mu, d, omega = p[0], p[1], p[2]
    x, v = y[0::2], y[1::2]
    lap = jnp.roll(x, 1) - 2.0 * x + jnp.roll(x, -1)
    dv = mu * (1.0 - x * x) * v - omega * omega * x + d * lap
    return jnp.stack([v, dv], axis=1).reshape(-1)


RING_M = 8  # oscillators: 16 variables
RING_P = np.array([100.0, 10.0, 1.0])
RING_T = np.linspace(0.0, 1.0, 6)


def ring_y0(n: int, seed: int = 2) -> np.ndarray:
    rng = np.random.default_rng(seed)
    phase = rng.uniform(0.0, 2.0 * np.pi, (n, 1)) + 2.0 * np.pi * np.arange(RING_M) / RING_M
    x = 2.0 + 0.2 * np.sin(phase)
    v = 0.1 * np.cos(phase)
    return np.stack([x, v], axis=2).reshape(n, 2 * RING_M)


# A 24-variable linear model whose constant matrix (576 multiply-adds > the code generator's
# threshold of 512) becomes a table-driven loop: a constant table read from device code.
A24 = np.where(np.random.default_rng(3).random((24, 24)) < 0.3,
               np.random.default_rng(4).standard_normal((24, 24)), 0.0) - 3.0 * np.eye(24)


def linear24(y, t, p):
    return jnp.dot(A24, y) * p[0]


# ---------------------------------------------------------------------------------------------
# Tsit5


@pytest.mark.parametrize("n", [1, 33, 1000, 4099])
def test_tsit5_lorenz_float64_identical_steps(n):
    y0, p = lorenz_inputs(n)
    cpu, gpu = both(tsit5_lorenz(), y0, LORENZ_T, p)
    assert gpu[0].shape == (n, LORENZ_T.size, 3)
    assert np.all(cpu[1]["status"] == Status.SUCCESS)
    assert_same_solve(cpu, gpu)


def test_tsit5_lorenz_float32():
    y0, p = lorenz_inputs(512, dtype=np.float32)
    cpu, gpu = both(tsit5_lorenz(rtol=1e-5, atol=1e-6), y0, LORENZ_T.astype(np.float32), p)
    assert gpu[0].dtype == np.float32
    assert np.all(cpu[1]["status"] == Status.SUCCESS)
    assert_same_solve(cpu, gpu, rtol=F32_RTOL, steps="loose")


def test_tsit5_dense_output_at_irregular_saves():
    # 101 save times, irregular, most of them inside steps (the free interpolant), N = 64.
    rng = np.random.default_rng(5)
    t = np.concatenate([[0.0], np.sort(rng.uniform(0.0, 2.0, 99)), [2.0]])
    t = np.unique(t)
    y0, p = lorenz_inputs(64, seed=6)
    cpu, gpu = both(tsit5_lorenz(rtol=1e-10, atol=1e-10), y0, t, p)
    assert gpu[0].shape == (64, t.size, 3)
    assert_same_solve(cpu, gpu)


@pytest.mark.parametrize("method", ["vern7", "vern9"])
def test_verner_lorenz_and_its_interpolant_at_irregular_saves(method):
    # Verner's pairs: the same engine as Tsit5, their controller roots by shoal's pow, and the
    # interpolants' extra stages computed on the device for the steps that serve a save.
    rng = np.random.default_rng(8)
    t = np.unique(np.concatenate([[0.0], np.sort(rng.uniform(0.0, 2.0, 49)), [2.0]]))
    y0, p = lorenz_inputs(257, seed=9)

    def run(y0, t, p):
        return solve(lorenz, y0, t, p, method=method, rtol=1e-11, atol=1e-11,
                     return_stats=True)

    cpu, gpu = both(run, y0, t, p)
    assert np.all(cpu[1]["status"] == Status.SUCCESS)
    assert_same_solve(cpu, gpu)


def test_tsit5_options_weights_pid_first_step():
    y0, p = lorenz_inputs(128, seed=7)
    w = np.random.default_rng(8).uniform(0.0, 2.0, (128, 3))
    w[:, 2] = np.where(np.arange(128) % 3 == 0, 0.0, w[:, 2])  # some components left out

    def run(y0, t, p, w):
        return solve(lorenz, y0, t, p, method="tsit5", rtol=1e-7, atol=1e-9, first_step=1e-3,
                     pcoeff=0.2, icoeff=0.4, dcoeff=0.1, error_weights=w, max_steps=5000,
                     return_stats=True)

    cpu, gpu = both(run, y0, LORENZ_T, p, w)
    assert np.all(cpu[1]["status"] == Status.SUCCESS)
    assert_same_solve(cpu, gpu)


def test_tsit5_table_driven_constant_matrix():
    y0 = np.random.default_rng(9).standard_normal((100, 24))
    p = np.random.default_rng(10).uniform(0.5, 1.5, (100, 1))

    def run(y0, t, p):
        return solve(linear24, y0, t, p, method="tsit5", rtol=1e-9, atol=1e-12,
                     return_stats=True)

    cpu, gpu = both(run, y0, np.linspace(0.0, 1.0, 5), p)
    assert np.all(cpu[1]["status"] == Status.SUCCESS)
    assert_same_solve(cpu, gpu)


def test_transcendental_model_agrees_loosely():
    method = "tsit5"  # one compile; Rodas5P's device math is the same libdevice
    rng = np.random.default_rng(11)
    y0 = np.stack([rng.uniform(-2.0, 2.0, 256), rng.uniform(-1.0, 1.0, 256)], axis=1)
    p = np.stack([rng.uniform(1.0, 9.0, 256), rng.uniform(0.0, 1.0, 256)], axis=1)

    def run(y0, t, p):
        return solve(pendulum, y0, t, p, method=method, rtol=1e-10, atol=1e-12,
                     return_stats=True)

    cpu, gpu = both(run, y0, np.linspace(0.0, 3.0, 7), p)
    assert np.all(cpu[1]["status"] == Status.SUCCESS)
    assert_same_solve(cpu, gpu, rtol=1e-6, steps="loose")


# ---------------------------------------------------------------------------------------------
# Rodas5P


@pytest.mark.parametrize("lu_precision", ["fp64", "fp32"])
def test_rodas5p_robertson_float64_identical_steps(lu_precision):
    p = robertson_params(512)
    cpu, gpu = both(rodas_robertson(lu_precision=lu_precision), ROBERTSON_Y0, ROBERTSON_T, p)
    assert np.all(cpu[1]["status"] == Status.SUCCESS)
    assert len(set(cpu[1]["accepted"].tolist())) > 10  # mixed stiffness: really divergent
    assert_same_solve(cpu, gpu)


def test_rodas5p_robertson_float32_fp32_lu():
    f32 = np.float32
    p = robertson_params(256).astype(f32)
    run = rodas_robertson(rtol=1e-4, atol=1e-8, lu_precision="fp32")
    cpu, gpu = both(run, ROBERTSON_Y0.astype(f32), ROBERTSON_T.astype(f32), p)
    assert gpu[0].dtype == np.float32
    assert np.all(cpu[1]["status"] == Status.SUCCESS)
    assert_same_solve(cpu, gpu, rtol=F32_RTOL, steps="loose")


def test_rodas5p_non_autonomous_chain():
    # forced_bateman: 6 species, a source F·t (∂f/∂t terms), decay rates spread over 4 decades.
    rng = np.random.default_rng(12)
    n = 128
    lam = 10.0 ** rng.uniform(-1.0, 3.0, (n, 6))
    lam[:, -1] = 0.0
    p = np.concatenate([lam, rng.uniform(0.0, 2.0, (n, 1))], axis=1)
    y0 = np.zeros((n, 6))
    y0[:, 0] = 1.0

    def run(y0, t, p):
        return solve(forced_bateman, y0, t, p, method="rodas5p", rtol=1e-9, atol=1e-12,
                     return_stats=True)

    cpu, gpu = both(run, y0, np.linspace(0.0, 5.0, 11), p)
    assert np.all(cpu[1]["status"] == Status.SUCCESS)
    assert_same_solve(cpu, gpu)


# ---------------------------------------------------------------------------------------------
# Statuses: failures are per trajectory, identical on both devices


def test_status_max_steps_tsit5():
    y0, p = lorenz_inputs(64, seed=13)
    cpu, gpu = both(tsit5_lorenz(max_steps=100), y0, np.array([0.0, 0.05, 0.5, 2.0]), p)
    status = cpu[1]["status"]
    assert np.any(status == Status.MAX_STEPS_REACHED) and np.any(status == Status.SUCCESS)
    assert np.all(gpu[1]["accepted"] + gpu[1]["rejected"] <= 100)
    assert_same_solve(cpu, gpu)


def test_status_max_steps_rodas5p():
    p = robertson_params(64, seed=14)
    cpu, gpu = both(rodas_robertson(max_steps=130), ROBERTSON_Y0, ROBERTSON_T, p)
    status = cpu[1]["status"]
    assert np.any(status == Status.MAX_STEPS_REACHED) and np.any(status == Status.SUCCESS)
    assert np.all(gpu[1]["accepted"] + gpu[1]["rejected"] <= 130)
    assert_same_solve(cpu, gpu)


def test_status_nan_initial_state():
    y0, p = lorenz_inputs(40, seed=15)
    y0[[3, 17, 39], 1] = np.nan
    cpu, gpu = both(tsit5_lorenz(), y0, LORENZ_T, p)
    status = cpu[1]["status"]
    assert set(np.flatnonzero(status == Status.NON_FINITE)) == {3, 17, 39}
    assert np.all(np.isnan(gpu[0][[3, 17, 39]]))
    assert_same_solve(cpu, gpu)


def test_status_nan_initial_state_rodas5p():
    y0 = np.tile(ROBERTSON_Y0, (16, 1))
    y0[5, 0] = np.nan
    cpu, gpu = both(rodas_robertson(), y0, ROBERTSON_T, robertson_params(16))
    assert list(np.flatnonzero(cpu[1]["status"] != Status.SUCCESS)) == [5]
    assert_same_solve(cpu, gpu)


def test_status_step_size_underflow_singularity():
    # y' = y² blows up at t = 1/y0: the first fails before t = 2, the others do not.
    y0 = np.array([[1.0], [0.1], [0.2], [0.75]])

    def run(y0, t):
        return solve(blow_up, y0, t, method="tsit5", return_stats=True)

    cpu, gpu = both(run, y0, np.array([0.0, 0.5, 2.0]))
    status = cpu[1]["status"]
    assert status[0] != Status.SUCCESS and status[3] != Status.SUCCESS
    assert list(status[1:3]) == [Status.SUCCESS, Status.SUCCESS]
    assert_same_solve(cpu, gpu)


def test_status_non_finite_rhs_tsit5():
    # sqrt(y0) leaves its domain at t = 1 (trial steps go NaN and are rejected, then give up).
    y0 = np.array([[1.0, 0.0], [4.0, 0.0], [9.0, 0.0]])

    def run(y0, t):
        return solve(sqrt_domain, y0, t, method="tsit5", return_stats=True)

    cpu, gpu = both(run, y0, np.array([0.0, 0.5, 3.0]))
    assert list(cpu[1]["status"]) == [Status.NON_FINITE, Status.SUCCESS, Status.SUCCESS]
    assert_same_solve(cpu, gpu)


def test_status_non_finite_rhs_rodas5p():
    # Member 1's k1 carries sqrt(5 − t): NaN after t = 5; the others are plain Robertson.
    t = np.concatenate([[0.0], np.logspace(-6, 5, 12)])
    p = np.array([[0.04, 3e7, 1e4, NEVER], [0.04, 3e7, 1e4, 5.0], [0.04, 3e5, 1e4, NEVER]])

    def run(y0, t, p):
        return solve(robertson_expiring, y0, t, p, method="rodas5p", rtol=1e-8, atol=1e-12,
                     return_stats=True)

    cpu, gpu = both(run, ROBERTSON_Y0, t, p)
    assert list(cpu[1]["status"]) == [Status.SUCCESS, Status.NON_FINITE, Status.SUCCESS]
    assert_same_solve(cpu, gpu)


def test_status_invalid_t_span_inside_jit():
    y0, p = lorenz_inputs(4, seed=16)
    cpu, gpu = both(tsit5_lorenz(), y0, np.array([0.0, 1.0, 0.5]), p)
    assert np.all(gpu[1]["status"] == Status.INVALID_INPUT)
    assert np.all(np.isnan(gpu[0]))
    assert_same_solve(cpu, gpu)


# ---------------------------------------------------------------------------------------------
# No change to user code; jit; vmap


def test_eager_solve_under_default_device_runs_on_the_gpu():
    """Plain user code: NumPy inputs, no jit, only ``jax.default_device``."""
    y0, p = lorenz_inputs(50, seed=17)
    with jax.default_device(GPU):
        ys, stats = solve(lorenz, y0, LORENZ_T, p, method="tsit5", return_stats=True)
    assert ys.devices() == {GPU}
    with jax.default_device(CPU):
        ys_c, stats_c = solve(lorenz, y0, LORENZ_T, p, method="tsit5", return_stats=True)
    assert ys_c.devices() == {CPU}
    assert_same_solve((np.asarray(ys_c), jax.tree.map(np.asarray, stats_c)),
                      (np.asarray(ys), jax.tree.map(np.asarray, stats)))


def test_eager_solve_follows_committed_inputs():
    y0, p = lorenz_inputs(50, seed=18)
    ys = solve(lorenz, jax.device_put(y0, GPU), jax.device_put(LORENZ_T, GPU),
               jax.device_put(p, GPU), method="tsit5", rtol=1e-8, atol=1e-8)
    assert ys.devices() == {GPU}
    ys_c = solve(lorenz, jax.device_put(y0, CPU), jax.device_put(LORENZ_T, CPU),
                 jax.device_put(p, CPU), method="tsit5", rtol=1e-8, atol=1e-8)
    assert_values_close(np.asarray(ys_c), np.asarray(ys), F64_RTOL)


def test_jit_equals_eager_on_the_gpu():
    y0, p = lorenz_inputs(64, seed=19)
    run = tsit5_lorenz()
    jitted = on(GPU, run, y0, LORENZ_T, p)
    eager = jax.tree.map(np.asarray, run(*jax.device_put((y0, LORENZ_T, p), GPU)))
    np.testing.assert_array_equal(jitted[0], eager[0])
    for key in ("accepted", "rejected", "status"):
        np.testing.assert_array_equal(jitted[1][key], eager[1][key])


def test_vmap_over_y0_is_one_call_and_matches_the_cpu():
    y0, p = lorenz_inputs(96, seed=20)
    y0 = y0.reshape(4, 24, 3)
    p = p[:24]

    def run(y0s, t, p):
        return jax.vmap(lambda y: tsit5_lorenz()(y, t, p))(y0s)

    cpu, gpu = both(run, y0, LORENZ_T, p)
    assert gpu[0].shape == (4, 24, LORENZ_T.size, 3)
    assert_same_solve(cpu, gpu)
    # One ensemble call, and the same numbers as the flat ensemble on the GPU.
    args = jax.device_put((y0, LORENZ_T, p), GPU)
    assert len(custom_calls(run, *args)) == 1, custom_calls(run, *args)
    flat = on(GPU, tsit5_lorenz(), y0.reshape(96, 3), LORENZ_T, np.tile(p, (4, 1)))
    np.testing.assert_array_equal(gpu[0].reshape(96, LORENZ_T.size, 3), flat[0])


def test_vmap_over_t_span_matches_the_cpu_and_each_span_alone():
    spans = np.stack([LORENZ_T, 0.5 * LORENZ_T, 2.0 * LORENZ_T])
    y0, p = lorenz_inputs(32, seed=21)

    def run(spans, y0, p):
        return jax.vmap(lambda t: tsit5_lorenz()(y0, t, p))(spans)

    cpu, gpu = both(run, spans, y0, p)
    assert gpu[0].shape == (3, 32, LORENZ_T.size, 3)
    assert_same_solve(cpu, gpu)
    alone = on(GPU, tsit5_lorenz(), y0, spans[2], p)
    np.testing.assert_array_equal(gpu[0][2], alone[0])


def test_vmap_over_single_trajectory_rodas5p():
    p = robertson_params(48, seed=22)

    def run(ps, y0, t):
        return jax.vmap(lambda k: rodas_robertson()(y0, t, k))(ps)

    cpu, gpu = both(run, p, ROBERTSON_Y0, ROBERTSON_T)
    assert gpu[0].shape == (48, 1, ROBERTSON_T.size, 3)
    assert_same_solve(cpu, gpu)


# ---------------------------------------------------------------------------------------------
# Gradients (forward sensitivities)

ROB_GRAD_T = np.array([0.0, 1e-3, 0.1, 1.0, 10.0, 100.0])
ROB_GRAD_W = (np.random.default_rng(23).uniform(0.5, 1.5, (ROB_GRAD_T.size, 3))
              * np.array([1.0, 1e4, 1.0]))


# Every Rodas5P gradient here differentiates y0 and params together: one compiled sensitivity
# variant (columns for y0 and params) serves them all.


@pytest.mark.parametrize("sens_error_control", [True, False])
def test_grad_robertson_y0_and_params_rodas5p(sens_error_control):
    k = robertson_params(64, seed=24)
    y0 = np.tile(ROBERTSON_Y0, (64, 1))

    def loss(y0, k):
        ys = solve(robertson_expiring, y0, ROB_GRAD_T, k, method="rodas5p", rtol=1e-8,
                   atol=1e-12, sens_error_control=sens_error_control)
        return jnp.sum(ys * ROB_GRAD_W)

    (v_c, g_c), (v_g, g_g) = both(jax.value_and_grad(loss, argnums=(0, 1)), y0, k)
    np.testing.assert_allclose(v_g, v_c, rtol=1e-12)
    # grad sums over saves and components in XLA (device-specific reduction order): 1e-11.
    for c, g in zip(g_c, g_g, strict=True):
        assert np.all(np.isfinite(c[:, :3]))
        assert_values_close(c[:, :3], g[:, :3], 1e-11)  # ∂/∂t_fail is ~0: not compared


def test_jacfwd_robertson_y0_and_params_rodas5p():
    k = np.array([0.04, 3e7, 1e4, NEVER])

    def sol(y0, k):
        return solve(robertson_expiring, y0, ROB_GRAD_T, k, method="rodas5p", rtol=1e-10,
                     atol=1e-16)[0]

    (jy_c, jk_c), (jy_g, jk_g) = both(jax.jacfwd(sol, argnums=(0, 1)), ROBERTSON_Y0, k)
    assert jk_g.shape == (ROB_GRAD_T.size, 3, 4)
    # Columns differ by orders of magnitude (k2 = 3e7): compare per column.
    for j in range(3):
        assert_values_close(jy_c[..., j], jy_g[..., j], F64_RTOL)
        assert_values_close(jk_c[..., j], jk_g[..., j], F64_RTOL)


def test_grad_lorenz_params_tsit5():
    y0, p = lorenz_inputs(128, seed=25)
    w = np.random.default_rng(26).uniform(0.5, 1.5, (LORENZ_T.size, 3))

    def loss(p, y0):
        return jnp.sum(solve(lorenz, y0, LORENZ_T, p, method="tsit5", rtol=1e-9, atol=1e-9) * w)

    g_c, g_g = both(jax.grad(loss, argnums=(0, 1)), p, y0)
    for c, g in zip(g_c, g_g, strict=True):
        assert np.all(np.isfinite(c))
        assert_values_close(c, g, 1e-11)


def test_value_and_grad_under_vmap_rodas5p():
    k = robertson_params(16, seed=27)
    y0 = np.tile(ROBERTSON_Y0, (16, 1)) * np.linspace(0.5, 1.0, 16)[:, None]

    def one(y0, k):
        return jnp.sum(solve(robertson_expiring, y0, ROB_GRAD_T, k, method="rodas5p",
                             rtol=1e-8, atol=1e-12) * ROB_GRAD_W)

    (v_c, g_c), (v_g, g_g) = both(jax.vmap(jax.value_and_grad(one, argnums=(0, 1))), y0, k)
    assert_values_close(v_c[:, None], v_g[:, None], 1e-12)
    for c, g in zip(g_c, g_g, strict=True):
        assert_values_close(c[:, :3], g[:, :3], 1e-11)


# ---------------------------------------------------------------------------------------------
# Sparse Jacobians (sparsity="auto")


def _ordering_available(ordering):
    if ordering == "amd":
        pytest.importorskip("cvxopt", reason="ordering='amd' needs cvxopt, not installed")


@pytest.mark.parametrize("ordering", ["natural", "amd"])
def test_sparse_ring_matches_cpu(ordering):
    _ordering_available(ordering)
    y0 = ring_y0(64)

    def run(y0, t, p):
        return solve(vdp_ring, y0, t, p, method="rodas5p", rtol=1e-8, atol=1e-8,
                     sparsity="auto", ordering=ordering, return_stats=True)

    cpu, gpu = both(run, y0, RING_T, RING_P)
    assert np.all(cpu[1]["status"] == Status.SUCCESS)
    assert_same_solve(cpu, gpu)


def test_sparse_ring_grad_matches_cpu():
    y0 = ring_y0(16, seed=28)

    def loss(p):
        ys = solve(vdp_ring, y0, RING_T, p, method="rodas5p", rtol=1e-8, atol=1e-8,
                   sparsity="auto", ordering="natural")
        return jnp.sum(ys[:, -1, 0::2])

    (v_c, g_c), (v_g, g_g) = both(jax.value_and_grad(loss), RING_P)
    assert np.all(np.isfinite(g_c))
    np.testing.assert_allclose(v_g, v_c, rtol=1e-11)
    np.testing.assert_allclose(g_g, g_c, rtol=1e-10)


# ---------------------------------------------------------------------------------------------
# Features added after the first GPU checks: every Rosenbrock tableau, mass matrices, stops with
# jumps, save functions and events, and the adjoint's refusal (CPU only)


@pytest.mark.parametrize("method", ["rodas4", "rosenbrock23"])
def test_other_rosenbrock_tableaus_robertson_float64_identical_steps(method):
    p = robertson_params(257)

    def run(y0, t, p):
        return solve(robertson_expiring, y0, t, p, method=method, rtol=1e-6, atol=1e-10,
                     return_stats=True)

    assert_same_solve(*both(run, np.tile(ROBERTSON_Y0, (257, 1)), ROBERTSON_T, p))


def robertson_dae(y, t, k):
    """Robertson with the conservation law y1 + y2 + y3 = 1 as its third (algebraic) equation."""
    a = -k[0] * y[0] + k[2] * y[1] * y[2]
    return jnp.stack([a, -a - k[1] * y[1] * y[1], y[0] + y[1] + y[2] - 1.0])


@pytest.mark.parametrize("method", ["rodas5p", "rodas4"])
def test_mass_matrix_dae_identical_steps(method):
    p = robertson_params(257)[:, :3]

    def run(y0, t, p):
        return solve(robertson_dae, y0, t, p, method=method, rtol=1e-6, atol=1e-10,
                     mass=np.diag([1.0, 1.0, 0.0]), return_stats=True)

    cpu, gpu = both(run, np.tile(ROBERTSON_Y0, (257, 1)), ROBERTSON_T, p)
    assert_same_solve(cpu, gpu)
    np.testing.assert_allclose(cpu[0].sum(axis=-1), 1.0, rtol=0, atol=1e-9)  # the algebraic law


def dosed_decay(y, t, p):
    """Two compartments: absorption k_a from the depot y0 into y1, elimination k_e."""
    return jnp.stack([-p[0] * y[0], p[0] * y[0] - p[1] * y[1]])


def test_stops_jumps_save_fn_and_a_terminal_event_match_the_cpu():
    # Doses at stops (jump_fn), a save function, and a terminal event (the level falling below
    # a threshold after the last dose): integrate.hpp's other paths, one model.
    n = 64
    rng = np.random.default_rng(5)
    p = np.stack([rng.uniform(0.5, 2.0, n), rng.uniform(0.2, 0.5, n), rng.uniform(0.5, 1.5, n)],
                 axis=1)
    event = Event(lambda y, t, p: y[1] - 0.05, direction=-1)

    def run(y0, t, stops, p):
        return solve(dosed_decay, y0, t, p, tstops=stops,
                     jump_fn=lambda y, t, p: y + jnp.stack([p[2], 0.0 * p[2]]),
                     save_fn=lambda y, t, p: jnp.stack([y[1], y[0] + y[1]]), event=event,
                     method="rodas5p", rtol=1e-8, atol=1e-10, return_stats=True)

    args = (np.tile([1.0, 0.0], (n, 1)), np.linspace(0.0, 60.0, 31), np.array([6.0, 12.0]), p)
    (ys_c, st_c), (ys_g, st_g) = both(run, *args)
    assert_stats(st_c, st_g)
    assert_values_close(ys_c, ys_g, F64_RTOL)
    assert np.all(np.isfinite(st_c["event_time"]))  # every member stops at its event
    assert np.any(st_c["event_time"] > 12.0) and np.any(st_c["event_time"] < 12.0)
    assert_values_close(st_c["event_time"], st_g["event_time"], F64_RTOL)
    assert_values_close(st_c["event_state"], st_g["event_state"], F64_RTOL)


@pytest.mark.skipif(GPU == CPU, reason="SHOAL_TEST_GPU_AS_CPU: the CPU stand-in runs the adjoint")
def test_adjoint_is_refused_on_the_gpu_and_auto_takes_forward_mode():
    y0, p = lorenz_inputs(16)

    def loss(adjoint):
        return lambda p: jnp.sum(solve(lorenz, y0, LORENZ_T, p, method="tsit5", rtol=1e-8,
                                       atol=1e-8, adjoint=adjoint)[:, -1])

    with pytest.raises(NotImplementedError, match="adjoint"):
        on(GPU, jax.grad(loss(True)), p)
    # "auto" picks forward sensitivities on a GPU whatever the count (48 entries here).
    g_cpu = on(CPU, jax.grad(loss(False)), p)
    g_gpu = on(GPU, jax.grad(loss("auto")), p)
    assert_values_close(g_cpu, g_gpu, F64_RTOL)
