"""The CUDA path without a GPU: NVRTC compiles what the handler would load, and lowering works.

Every kernel variant ``solve`` can ask for (Tsit5, Rodas5P with fp64/fp32 LU, dense and sparse,
with and without sensitivities, float64 and float32) is compiled by NVRTC for sm_90 exactly as
the CUDA lowering compiles it, and a reference model (Robertson, Rodas5P) must stay within a
register budget with no spills. The lowering for CUDA is exercised end to end with
SHOAL_CUDA_ARCHS (no device needed) and the driver loader must report the missing GPU cleanly.
Skipped, and reported as skipped, only where NVRTC cannot be found.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import shoal
from shoal import _nvrtc
from shoal.ode import _build, _codegen, _kernel_source, _ode_ext
from shoal.ode._kernel_source import Variant
from shoal.ode._mass import MassMatrix
from shoal.ode._model import detect_pattern
from shoal.ode._options import LuPrecision, Method, Ordering, SparsityPattern

from ode_problems import lorenz
from stiff_problems import robertson
from worker_shared import run_directory, shared_results

pytestmark = pytest.mark.skipif(not _nvrtc.available(), reason="NVRTC (CUDA toolkit or "
                                "JAX's CUDA wheels) is not installed")

ARCH = "sm_90"
# Robertson with Rodas5P (fp64 LU) needs about 155 registers on sm_90 with nvcc and NVRTC alike.
# Above this budget (or with any spill) the reference kernel has regressed; far below it, the
# step has been optimised away (a recursion or undefined behaviour in a header).
REFERENCE_REGISTER_BUDGET = 200
REFERENCE_REGISTER_FLOOR = 64


def ring(y, t, p):
    n = y.shape[0] // 2
    x, v = y[:n], y[n:]
    lap = jnp.roll(x, 1) - 2 * x + jnp.roll(x, -1)
    return jnp.concatenate([v, p[0] * (1 - x**2) * v - x + 10.0 * lap])


def _ring_sparse() -> dict:
    pattern = detect_pattern(ring, 16, 1, np.float64) | np.eye(16, dtype=bool)
    return dict(sparsity=SparsityPattern(pattern), ordering=Ordering.NATURAL)


def _variants():
    sparse = _ring_sparse()
    dae_mass = MassMatrix(np.diag([1.0, 1.0, 0.0]))
    return {
        "tsit5": (lorenz, 3, 3, Variant(Method.TSIT5)),
        "tsit5_sens": (lorenz, 3, 3, Variant(Method.TSIT5, sens=(True, True))),
        "vern7": (lorenz, 3, 3, Variant(Method.VERN7)),
        "vern9": (lorenz, 3, 3, Variant(Method.VERN9)),
        "rodas5p_lu64": (robertson, 3, 3, Variant(Method.RODAS5P)),
        "rodas5p_lu32": (robertson, 3, 3, Variant(Method.RODAS5P, LuPrecision.FP32)),
        "rodas4_lu64": (robertson, 3, 3, Variant(Method.RODAS4)),
        "rosenbrock23_lu64": (robertson, 3, 3, Variant(Method.ROSENBROCK23)),
        "rodas5p_sens": (robertson, 3, 3, Variant(Method.RODAS5P, sens=(False, True))),
        "rodas5p_sparse": (ring, 16, 1, Variant(Method.RODAS5P, **sparse)),
        "rodas5p_sparse_sens": (ring, 16, 1,
                                Variant(Method.RODAS5P, sens=(True, True), **sparse)),
        # M y' = f (mass.hpp): compiled only, so the ODE form's f serves.
        "rodas5p_mass": (robertson, 3, 3, Variant(Method.RODAS5P, mass=dae_mass)),
        "rodas5p_mass_sens": (robertson, 3, 3,
                              Variant(Method.RODAS5P, sens=(False, True), mass=dae_mass)),
    }


VARIANTS = list(_variants())


def _source(name: str, dtype=np.float64) -> tuple[str, Variant]:
    f, n, n_params, variant = _variants()[name]
    model = _codegen.generate_model(f, n, n_params, dtype)
    return _kernel_source.library_source(model, variant, "cuda"), variant


def _keyed(source: str) -> str:
    """The source as the cache would compile it (its key marker filled in)."""
    return source.replace("SHOAL_CACHE_KEY", '"shoal-key:test"')


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """name -> (cubin bytes, ptxas report) for every variant, float64; built once per run
    whichever workers need it (worker_shared.py): about 100 s of NVRTC."""

    def build(name):
        source, _ = _source(name)
        return _nvrtc.compile_source(_keyed(source), ARCH, extra=("-Xptxas=-v",))

    return shared_results(run_directory(tmp_path_factory, "nvrtc-variants"), VARIANTS, build,
                          parallel=min(4, os.cpu_count() or 1))


def _resources(log: str) -> dict[str, tuple[int, int]]:
    """entry -> (registers, spill store bytes) from a ptxas -v report."""
    out = {}
    for block in re.split(r"Compiling entry function ", log)[1:]:
        name = block.split("'")[1]
        registers = re.search(r"Used (\d+) registers", block)
        spills = re.search(r"(\d+) bytes spill stores", block)
        out[name] = (int(registers.group(1)) if registers else 0,
                     int(spills.group(1)) if spills else 0)
    return out


@pytest.mark.parametrize("name", VARIANTS)
def test_every_variant_compiles_to_a_cubin_with_its_kernel(compiled, name):
    cubin, log = compiled[name]
    entry = _variants()[name][3].entry
    assert cubin[:4] == b"\x7fELF"
    assert entry.encode() in cubin
    assert b"shoal_model_info" in cubin
    assert entry in _resources(log), log


def test_reference_model_register_budget(compiled):
    registers, spills = _resources(compiled["rodas5p_lu64"][1])["shoal_ode_rodas5p_lu64"]
    assert spills == 0
    assert REFERENCE_REGISTER_FLOOR < registers <= REFERENCE_REGISTER_BUDGET, registers


@pytest.mark.parametrize("name", ["rodas5p_sens", "rodas5p_sparse_sens"])
def test_joint_solves_stay_out_of_line(compiled, name):
    # The joint system's per-stage solve is a function of its own on the device
    # (SHOAL_DEVICE_NOINLINE): inlined into every stage, it tripled the optimiser's time on the
    # 288-variable sparse joint system. ptxas lists every function it compiles.
    functions = re.findall(r"Function properties for (\w+)", compiled[name][1])
    joint_solves = [f for f in functions if "JointSystem" in f and "5solve" in f]
    assert len(joint_solves) == 1, functions


def test_float32_models_compile():
    for name in ("tsit5", "rodas5p_lu32"):
        source, variant = _source(name, np.float32)
        cubin, _ = _nvrtc.compile_source(_keyed(source), ARCH)
        assert variant.entry.encode() in cubin


def test_a_model_with_a_jump_a_save_and_an_event_compiles_with_nvrtc():
    # The same translation units solve() builds for CUDA, with integrate.hpp's stop, save and
    # event paths (nvcc covers them in test_device_compile.py; NVRTC is what runs them).
    extras = (_codegen.ModelFunction("jump", lambda y, t, p: y + p[1]),
              _codegen.ModelFunction("save", lambda y, t, p: jnp.stack([y[0] * y[1], t])),
              _codegen.ModelFunction("event", lambda y, t, p: y[0] - 0.5))
    model = _codegen.generate_model(lambda y, t, p: -p[0] * y, 2, 2, np.float64, extras)
    for variant in (Variant(Method.TSIT5), Variant(Method.RODAS5P, sens=(True, True)),
                    Variant(Method.RODAS5P, directions=2)):
        source = _kernel_source.library_source(model, variant, "cuda")
        cubin, _ = _nvrtc.compile_source(_keyed(source), ARCH)
        assert variant.entry.encode() in cubin


def test_constant_tables_compile_for_host_and_device():
    # A large constant matrix becomes a table read from host+device code: the host pass must
    # read the host copy and device code the __device__ copy, without warnings from either.
    rng = np.random.default_rng(0)
    m = rng.standard_normal((40, 40))

    def f(y, t, p):
        return jnp.asarray(m) @ jnp.tanh(y) * p[0]

    model = _codegen.generate_model(f, 40, 1, np.float64)
    assert "namespace device" in model.source and "namespace host" in model.source
    source = _kernel_source.library_source(model, Variant(Method.TSIT5), "cuda")
    cubin, log = _nvrtc.compile_source(_keyed(source), ARCH)
    assert b"shoal_ode_tsit5" in cubin
    assert "warning" not in log.lower(), log


def test_scans_argmax_and_sort_compile_for_the_device():
    # Cumulative scans, argmax and the sorting network emit `const auto` primal temporaries and
    # select(): both must exist in device code, for Rodas5P's dual numbers too.
    def f(y, t, p):
        return jnp.cumsum(jnp.sort(y)) * jnp.argmax(y) + lax.cummax(y) * p[0]

    model = _codegen.generate_model(f, 5, 1, np.float64)
    for variant in (Variant(Method.TSIT5), Variant(Method.RODAS5P)):
        source = _kernel_source.library_source(model, variant, "cuda")
        cubin, log = _nvrtc.compile_source(_keyed(source), ARCH)
        assert variant.entry.encode() in cubin
        assert "warning" not in log.lower(), log


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_table_lookups_compile_for_the_device(dtype):
    # search_sorted, reads of a __device__ table, of a computed grid and of a local array at
    # run-time indices, under the dual numbers of Rodas5P's Jacobian.
    xp = np.linspace(0.0, 1.0, 300)

    def f(y, t, p):
        fp = jnp.asarray(np.sin(xp), dtype)
        k = jnp.searchsorted(jnp.asarray(xp, dtype), y[2], side="right")
        return jnp.stack(
            [jnp.interp(t, jnp.asarray(xp, dtype), fp) * y[0], fp[k] - y[1], y[k % 3] * p[0]]
        )

    model = _codegen.generate_model(f, 3, 1, dtype)
    # The float64 grid, a linspace, is computed (math.hpp: Linspace), not read.
    assert ("shoal::math::Linspace{300" in model.source) == (dtype == np.float64)
    for variant in (Variant(Method.TSIT5), Variant(Method.RODAS5P)):
        source = _kernel_source.library_source(model, variant, "cuda")
        cubin, log = _nvrtc.compile_source(_keyed(source), ARCH)
        assert variant.entry.encode() in cubin
        assert "warning" not in log.lower(), log


def test_compile_cubin_is_cached_and_keyed(tmp_path, monkeypatch):
    from shoal import _jit

    monkeypatch.setenv("SHOAL_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(_jit, "_loaded", {})
    source, _ = _source("tsit5")
    path = _nvrtc.compile_cubin(source, ARCH)
    assert path.suffix == ".cubin" and path.parent == tmp_path
    key = path.stem
    assert f"shoal-key:{key}".encode() in path.read_bytes()
    mtime = path.stat().st_mtime_ns
    monkeypatch.setattr(_jit, "_loaded", {})
    assert _nvrtc.compile_cubin(source, ARCH) == path
    assert path.stat().st_mtime_ns == mtime
    path.write_bytes(b"truncated")  # corrupt: rebuilt, not trusted
    monkeypatch.setattr(_jit, "_loaded", {})
    assert _nvrtc.compile_cubin(source, ARCH) == path
    assert f"shoal-key:{key}".encode() in path.read_bytes()


def test_fast_compile_level_reaches_nvrtc_and_keys_the_cache(compiled, tmp_path, monkeypatch):
    # $SHOAL_NVRTC_FAST_COMPILE is passed to NVRTC (ptxas allocates the reference kernel
    # differently: 144 registers by default, 76 at "max" with NVRTC 13.0) and is part of a cached
    # cubin's key, so a fast-compiled cubin never serves a default compile or the reverse.
    from shoal import _jit

    monkeypatch.setenv("SHOAL_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(_jit, "_loaded", {})
    source, variant = _source("rodas5p_lu64")
    default = _nvrtc.compile_cubin(source, ARCH)
    monkeypatch.setenv(_nvrtc.FAST_COMPILE_ENV, "max")
    assert "-Ofc=max" in _nvrtc.compile_options(ARCH)
    _, log = _nvrtc.compile_source(_keyed(source), ARCH, extra=("-Xptxas=-v",))
    fast_resources = _resources(log)[variant.entry]
    assert fast_resources != _resources(compiled["rodas5p_lu64"][1])[variant.entry]
    monkeypatch.setattr(_jit, "_loaded", {})
    fast = _nvrtc.compile_cubin(source, ARCH)
    assert fast != default and variant.entry.encode() in fast.read_bytes()
    monkeypatch.delenv(_nvrtc.FAST_COMPILE_ENV)
    monkeypatch.setattr(_jit, "_loaded", {})
    assert _nvrtc.compile_cubin(source, ARCH) == default


def test_fast_compile_level_is_checked(monkeypatch):
    monkeypatch.setenv(_nvrtc.FAST_COMPILE_ENV, "fastest")
    with pytest.raises(ValueError, match="SHOAL_NVRTC_FAST_COMPILE='fastest'.*0, min, mid, max"):
        _nvrtc.compile_options(ARCH)
    monkeypatch.setenv(_nvrtc.FAST_COMPILE_ENV, " ")
    assert not any(option.startswith("-Ofc") for option in _nvrtc.compile_options(ARCH))
    monkeypatch.setenv(_nvrtc.FAST_COMPILE_ENV, "mid")
    monkeypatch.setattr(_nvrtc, "version", lambda: (12, 6))
    with pytest.raises(_nvrtc.DeviceCompileError, match="needs NVRTC 12.8 or newer.*12.6"):
        _nvrtc.compile_options(ARCH)


def test_ensemble_args_layout_on_the_device_matches_the_host():
    # The handler passes ShoalEnsembleArgs by value; src/ode/ode_ffi_cuda.cc asserts the same
    # size and offsets for the host compiler. NVRTC has no offsetof, but a standard-layout struct
    # whose member types have the same sizes has the same offsets.
    source = "\n".join([
        '#include "shoal/ode/ensemble.hpp"',
        "static_assert(sizeof(ShoalEnsembleArgs) == 224 + sizeof(ShoalSolveOptions), \"size\");",
        "static_assert(shoal::ode::solve_options_layout() >= 0, \"constexpr on the device\");",
        "static_assert(sizeof(int64_t) == 8 && sizeof(int32_t) == 4, \"integers\");",
        "static_assert(sizeof(void*) == 8 && sizeof(double) == 8, \"pointers, doubles\");",
        "__global__ void k(ShoalEnsembleArgs a) { a.status[0] = a.n_vars; }",
    ])
    _nvrtc.compile_source(source, ARCH)


def test_nvrtc_errors_name_the_problem():
    with pytest.raises(_nvrtc.DeviceCompileError, match="undefined_symbol_xyz"):
        _nvrtc.compile_source("__global__ void k() { undefined_symbol_xyz(); }", ARCH)


def test_arch_names():
    assert _nvrtc.arch_name("9.0") == "sm_90"
    assert _nvrtc.arch_name((8, 6)) == "sm_86"


def test_lowering_for_cuda_emits_the_cuda_target(monkeypatch):
    # No device is needed to lower for CUDA when the architectures are named.
    monkeypatch.setenv("SHOAL_CUDA_ARCHS", ARCH)
    y0 = jnp.ones((4, 3))
    params = jnp.tile(jnp.array([0.04, 3e7, 1e4]), (4, 1))

    def run(y0, params):
        return shoal.ode.solve(robertson, y0, jnp.array([0.0, 1.0]), params)

    exported = jax.export.export(
        jax.jit(run), platforms=["cuda"],
        disabled_checks=[jax.export.DisabledSafetyCheck.custom_call("shoal_ode_solve_cuda")],
    )(y0, params)
    text = exported.mlir_module()
    assert "shoal_ode_solve_cuda" in text
    assert re.search(r"sm_90=[^;\"]+\.cubin", text)


def test_gradients_and_vmap_lower_for_cuda(monkeypatch):
    # grad runs the joint [y, S] kernel and vmap folds into one call: both lower to the CUDA
    # target with the sensitivity entry point, with no host library built.
    monkeypatch.setenv("SHOAL_CUDA_ARCHS", ARCH)
    t = jnp.linspace(0.0, 1.0, 3)
    p = jnp.array([10.0, 28.0, 8.0 / 3.0])

    def loss(p, y0):
        return jnp.sum(shoal.ode.solve(lorenz, y0, t, p, method="tsit5") ** 2)

    batched = jax.vmap(jax.grad(loss), in_axes=(None, 0))
    y0 = jnp.ones((5, 3))
    exported = jax.export.export(
        jax.jit(batched), platforms=["cuda"],
        disabled_checks=[jax.export.DisabledSafetyCheck.custom_call("shoal_ode_solve_cuda")],
    )(p, y0)
    text = exported.mlir_module()
    assert text.count("stablehlo.custom_call @shoal_ode_solve_cuda") == 1
    assert "shoal_ode_tsit5_sens_p" in text
    assert "shoal_ode_solve_cpu" not in text


def test_lowering_for_cuda_without_a_device_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("SHOAL_CUDA_ARCHS", raising=False)
    try:
        jax.devices("cuda")
        pytest.skip("a CUDA device is present")
    except RuntimeError:
        pass
    with pytest.raises(RuntimeError, match="CUDA device"):
        _build.cuda_architectures()


def test_driver_loader_reports_no_gpu_cleanly():
    usable, message = _ode_ext.cuda_driver_status()
    if usable:
        pytest.skip("a CUDA driver and device are present")
    assert "CUDA" in message and ("driver" in message or "device" in message)


def test_driver_stub_library_is_reported_not_crashed():
    # The toolkit's link stub exports every symbol but cannot initialise: the loader resolves
    # its entry points and reports cuInit's failure. Run in a fresh process: the loader caches.
    stubs = [Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "lib64/stubs/libcuda.so"]
    stub = next((s for s in stubs if s.is_file()), None)
    if stub is None:
        pytest.skip("no CUDA driver stub library here")
    code = "from shoal.ode import _ode_ext; print(_ode_ext.cuda_driver_status())"
    env = dict(os.environ, SHOAL_LIBCUDA=str(stub))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "False" in out.stdout and "cuInit" in out.stdout, out.stdout


def test_missing_nvrtc_is_a_clear_error():
    # Without NVRTC, shoal imports and runs on the CPU; only compiling for a GPU fails, saying
    # what to install. A fresh process: the library is opened once per process.
    code = "\n".join([
        "from shoal import _nvrtc",
        "assert not _nvrtc.available()",
        "try:",
        "    _nvrtc.compile_cubin('x', 'sm_90')",
        "except _nvrtc.NvrtcUnavailable as e:",
        "    print(e)",
    ])
    env = dict(os.environ, SHOAL_NVRTC="/nonexistent/libnvrtc.so")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "NVRTC" in out.stdout and "/nonexistent/libnvrtc.so" in out.stdout


def test_one_export_serves_cpu_and_cuda(monkeypatch):
    # Lowered for both platforms, the artefact holds both FFI calls (each with its own compiled
    # model) and runs here on the CPU.
    monkeypatch.setenv("SHOAL_CUDA_ARCHS", ARCH)
    t = jnp.linspace(0.0, 1.0, 3)
    p = jnp.array([10.0, 28.0, 8.0 / 3.0])
    y0 = jnp.ones((4, 3)) + jnp.arange(4.0)[:, None]

    def run(y0):
        return shoal.ode.solve(lorenz, y0, t, p, method="tsit5")

    exported = jax.export.export(
        jax.jit(run), platforms=["cpu", "cuda"],
        disabled_checks=[jax.export.DisabledSafetyCheck.custom_call(name)
                         for name in ("shoal_ode_solve_cpu", "shoal_ode_solve_cuda")],
    )(y0)
    text = exported.mlir_module()
    assert "shoal_ode_solve_cpu" in text and "shoal_ode_solve_cuda" in text
    np.testing.assert_array_equal(np.asarray(exported.call(y0)), np.asarray(jax.jit(run)(y0)))
