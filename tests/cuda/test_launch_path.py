"""The CUDA handler's path from driver to launch, run on the CPU through a stand-in driver.

tests/cuda/fake_cuda/fake_libcuda.cc implements the driver calls shoal makes and runs "cubins" that
are host shared objects compiled from the very CUDA source the lowering hands to NVRTC. shoal's
own loader (cuGetProcAddress at the 12.0 ABI), context handling, choice of cubin by architecture,
model checks and launch grid then run for real, and the results must equal the CPU solve bit for
bit (same source, same arithmetic). The device itself is not exercised: that is
tests/cuda/test_ode_gpu.py's job on a machine with a GPU. Each scenario runs in a fresh process
because the driver is opened once per process.
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CXX = shutil.which(os.environ.get("CXX", "c++")) or shutil.which("g++")

pytestmark = pytest.mark.skipif(CXX is None, reason="no C++ compiler")


def _compile(args, cwd):
    proc = subprocess.run([CXX, *args], capture_output=True, text=True, cwd=cwd, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory):
    out = tmp_path_factory.mktemp("fake_cuda") / "libcuda_fake.so"
    _compile(["-std=c++17", "-O1", "-fPIC", "-shared", f"-I{ROOT / 'include'}",
              str(HERE / "fake_cuda" / "fake_libcuda.cc"), "-o", str(out), "-ldl"], ROOT)
    return out


def _fake_cubin(name, f, n, n_params, variant, directory: Path) -> Path:
    """The CUDA translation unit of (f, variant), compiled for the fake driver."""
    import jax

    jax.config.update("jax_enable_x64", True)
    from shoal.ode import _codegen, _kernel_source

    model = _codegen.generate_model(f, n, n_params, np.float64)
    source = _kernel_source.library_source(model, variant, "cuda")
    src = directory / f"{name}.cu"
    src.write_text(source.replace("SHOAL_CACHE_KEY", '"shoal-key:fake"'))
    out = directory / f"{name}.cubin"
    _compile(["-std=c++17", "-O2", "-ffp-contract=off", "-fPIC", "-shared", "-x", "c++",
              "-include", str(HERE / "fake_cuda" / "kernel_shim.h"), f"-I{ROOT / 'include'}",
              str(src), "-o", str(out)], ROOT)
    return out


SCENARIO = textwrap.dedent("""
    import json, sys
    import numpy as np
    import jax
    jax.config.update("jax_enable_x64", True)
    from shoal.ode import _ode_ext
    spec = json.loads(sys.argv[1])
    data = np.load(spec["data"])
    n_traj, n = data["y0"].shape
    t_span = data["t_span"]
    ys = np.full((n_traj, t_span.size, n), np.nan)
    stats = [np.full(n_traj, -7, np.int32) for _ in range(3)]
    out = {"driver": list(_ode_ext.cuda_driver_status()), "errors": []}
    for cubins, entry in spec["calls"]:
        out["errors"].append(_ode_ext._solve_on_cuda_stream_for_testing(
            cubins, entry, data["y0"], data["params"], np.zeros(0), t_span,
            np.ones_like(data["y0"]), np.full(n_traj, spec["first_step"]), ys, *stats,
            spec["options"]))
    np.savez(spec["result"], ys=ys, accepted=stats[0], rejected=stats[1], status=stats[2])
    lib = __import__("ctypes").CDLL(spec["driver"])
    lib.fake_cuda_threads.restype = __import__("ctypes").c_longlong
    out["launches"] = lib.fake_cuda_launches()
    out["threads"] = lib.fake_cuda_threads()
    print(json.dumps(out))
""")


def _run(fake_driver, tmp_path, calls, y0, params, t_span, *, rtol=1e-8, atol=1e-10,
         first_step=1e-6, max_steps=100_000, sm="90"):
    data = tmp_path / "data.npz"
    np.savez(data, y0=y0, params=params, t_span=t_span)
    from shoal.ode._options import SolveOptions

    kernel_options = SolveOptions(rtol=rtol, atol=atol, max_steps=max_steps).kernel_attributes()
    spec = dict(data=str(data), result=str(tmp_path / "result.npz"), calls=calls,
                first_step=first_step,
                options={k: v.item() for k, v in kernel_options.items()},
                driver=str(fake_driver))
    env = dict(os.environ, SHOAL_LIBCUDA=str(fake_driver), FAKE_CUDA_SM=sm,
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", SCENARIO, json.dumps(spec)], capture_output=True,
                          text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    return report, np.load(spec["result"])


def _cpu_solve(f, y0, params, t_span, method, *, rtol=1e-8, atol=1e-10, first_step=1e-6,
               max_steps=100_000):
    import jax.numpy as jnp

    import shoal

    ys, st = shoal.ode.solve(f, jnp.asarray(y0), jnp.asarray(t_span), jnp.asarray(params),
                             method=method, rtol=rtol, atol=atol, first_step=first_step,
                             max_steps=max_steps, return_stats=True)
    return np.asarray(ys), {k: np.asarray(v) for k, v in st.items()}


def _lorenz_case():
    from ode_problems import lorenz

    rng = np.random.default_rng(1)
    n_traj = 150  # not a multiple of the 64-thread block: the last block is partial
    y0 = rng.uniform(-10, 10, (n_traj, 3))
    params = np.tile([10.0, 28.0, 8.0 / 3.0], (n_traj, 1)) * rng.uniform(0.9, 1.1, (n_traj, 1))
    return lorenz, y0, params, np.linspace(0.0, 1.0, 5)


def test_tsit5_through_the_fake_driver_equals_the_cpu_solve(fake_driver, tmp_path):
    import jax

    jax.config.update("jax_enable_x64", True)
    from shoal.ode._kernel_source import Variant
    from shoal.ode._options import Method

    f, y0, params, t_span = _lorenz_case()
    variant = Variant(Method.TSIT5)
    cubin = _fake_cubin("lorenz", f, 3, 3, variant, tmp_path)
    report, got = _run(fake_driver, tmp_path, [[f"sm_80=/absent.cubin;sm_90={cubin}",
                                                variant.entry]], y0, params, t_span)
    assert report["driver"] == [True, "CUDA driver and device found"]
    assert report["errors"] == [""]
    assert report["launches"] == 1
    assert report["threads"] == 3 * 64  # ceil(150 / 64) blocks of 64 threads
    want, stats = _cpu_solve(f, y0, params, t_span, "tsit5")
    np.testing.assert_array_equal(got["ys"], want)
    for key in ("accepted", "rejected", "status"):
        np.testing.assert_array_equal(got[key], stats[key])


def test_rodas5p_with_sensitivities_through_the_fake_driver(fake_driver, tmp_path):
    import jax

    jax.config.update("jax_enable_x64", True)
    from shoal.ode import _model, _primitive
    from shoal.ode._build import ModelBuild
    from shoal.ode._kernel_source import Variant
    from shoal.ode._options import Method, SolveOptions

    from stiff_problems import robertson

    # The plain Rodas5P kernel against the CPU solve, and the joint sensitivity kernel against
    # the CPU library built from the same variant.
    n_traj = 70
    y0 = np.tile([1.0, 0.0, 0.0], (n_traj, 1))
    params = np.tile([0.04, 3e7, 1e4], (n_traj, 1)) * np.linspace(0.5, 1.5, n_traj)[:, None]
    t_span = np.array([0.0, 1.0, 10.0, 100.0])
    plain = Variant(Method.RODAS5P)
    cubin = _fake_cubin("robertson", robertson, 3, 3, plain, tmp_path)
    report, got = _run(fake_driver, tmp_path, [[f"sm_90={cubin}", plain.entry]], y0, params,
                       t_span, rtol=1e-7, atol=1e-12, first_step=1e-6)
    assert report["errors"] == [""]
    want, stats = _cpu_solve(robertson, y0, params, t_span, "rodas5p", rtol=1e-7, atol=1e-12,
                             first_step=1e-6)
    np.testing.assert_array_equal(got["ys"], want)
    np.testing.assert_array_equal(got["accepted"], stats["accepted"])

    sens = Variant(Method.RODAS5P, sens=(False, True))
    cubin = _fake_cubin("robertson_sens", robertson, 3, 3, sens, tmp_path)
    n_joint = 3 + 3 * 3
    z0 = np.zeros((n_traj, n_joint))
    z0[:, :3] = y0
    report, got = _run(fake_driver, tmp_path, [[f"sm_90={cubin}", sens.entry]], z0, params,
                       t_span, rtol=1e-7, atol=1e-12, first_step=1e-6)
    assert report["errors"] == [""]
    model, _ = _model.generated_model(robertson, 3, 3, np.float64)
    ys, acc, rej, status, _, _ = _primitive.ensemble_solve(
        z0, params, np.zeros(0), t_span, np.ones_like(z0), np.full_like(z0, 1e-12),
        np.zeros((1, 0)),
        np.full((n_traj, 1), 1e-6), build=ModelBuild(model, sens),
        options=SolveOptions(rtol=1e-7, atol=1e-12))
    np.testing.assert_array_equal(got["ys"], np.asarray(ys))
    np.testing.assert_array_equal(got["accepted"], np.asarray(acc))
    assert np.all(np.asarray(status) == 0)


def test_launch_path_errors_are_messages(fake_driver, tmp_path):
    import jax

    jax.config.update("jax_enable_x64", True)
    from shoal.ode._kernel_source import Variant
    from shoal.ode._options import Method

    f, y0, params, t_span = _lorenz_case()
    variant = Variant(Method.TSIT5)
    cubin = _fake_cubin("lorenz", f, 3, 3, variant, tmp_path)
    not_a_cubin = tmp_path / "garbage.cubin"
    not_a_cubin.write_bytes(b"\x7fELF garbage")
    wrong_abi = tmp_path / "wrong_abi.cu"
    wrong_abi.write_text(
        '#include "shoal/ode/ensemble.hpp"\n'
        'extern "C" __device__ const int32_t shoal_model_info[7] = {1, 3, 3, 0, 64, 3, 0};\n'
        'extern "C" __global__ void k(ShoalEnsembleArgs) {}\n')
    _compile(["-std=c++17", "-fPIC", "-shared", "-x", "c++", "-include",
              str(HERE / "fake_cuda" / "kernel_shim.h"), f"-I{ROOT / 'include'}",
              str(wrong_abi), "-o", str(tmp_path / "wrong_abi.cubin")], ROOT)
    calls = [
        [f"sm_80={cubin}", variant.entry],                      # no cubin for the device
        [f"sm_90={cubin}", "shoal_ode_no_such_kernel"],          # wrong entry
        [f"sm_90={tmp_path / 'missing.cubin'}", variant.entry],  # file gone
        [f"sm_90={tmp_path / 'wrong_abi.cubin'}", "k"],          # built for another ABI
        [f"sm_90={cubin}", variant.entry],                      # and a good call still works
    ]
    report, got = _run(fake_driver, tmp_path, calls, y0, params, t_span)
    errors = report["errors"]
    assert "compiled for sm_80" in errors[0] and "runs on sm_90" in errors[0]
    assert "has no kernel shoal_ode_no_such_kernel" in errors[1]
    assert "cannot read the compiled model" in errors[2]
    assert "ensemble ABI 1" in errors[3]
    assert errors[4] == ""
    assert report["launches"] == 1
    assert np.all(got["status"] == 0)
