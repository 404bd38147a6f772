"""The core headers and generated models compile as CUDA device code (sm_90), without a GPU.

shoal's headers are written host-and-device; this keeps them so between GPU runs. Every stepper a
generated model can be solved with — Tsit5, Rodas5P with dense fp64/fp32 and sparse
factorisations, Rodas4 and Rosenbrock23 (the engine's other tableaus), the joint sensitivity
steppers, and Rodas5P with a mass matrix (dense, joint, sparse) — is instantiated in a
__global__ kernel (one trajectory per thread) and compiled by nvcc, also for a model with a jump,
a save function and an event. A reference model (Robertson) must not spill
registers. Skipped, and reported as skipped, only where nvcc is not installed.
"""

import functools
import os
import re
import shutil
import subprocess

import jax.numpy as jnp
import numpy as np
import pytest

from shoal._jit import include_dir
from shoal.ode import _codegen, _kernel_source, _params
from shoal.ode._kernel_source import Variant
from shoal.ode._mass import MassMatrix
from shoal.ode._model import detect_pattern
from shoal.ode._options import Method, Ordering, SparsityPattern

from worker_shared import run_directory, shared_results

NVCC = shutil.which("nvcc")
pytestmark = pytest.mark.skipif(NVCC is None, reason="nvcc (CUDA toolkit) is not installed")


def robertson(y, t, k):
    a = -k[0] * y[0] + k[2] * y[1] * y[2]
    c = k[1] * y[1] ** 2
    return jnp.stack([a, -a - c, c])


def ring(y, t, p):
    n = y.shape[0] // 2
    x, v = y[:n], y[n:]
    lap = jnp.roll(x, 1) - 2 * x + jnp.roll(x, -1)
    return jnp.concatenate([v, p[0] * (1 - x**2) * v - x + 10.0 * lap])


KERNEL = """
template <template <class, class> class Stepper, class Model>
__global__ void {name}(ShoalEnsembleArgs a) {{
  const int64_t m = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (m >= a.n_traj) return;
  const auto opt = shoal::ode::IntegrateOptions<double>::from(a.options);
  shoal::ode::solve_one<Stepper, Model, double>(a, opt, m);
}}
"""


def _namespaced(model: _codegen.GeneratedModel, namespace: str) -> str:
    return model.source.replace("namespace shoal_generated", f"namespace {namespace}")


def _translation_units(count: int) -> list[str]:
    """The kernels split over ``count`` translation units (nvcc uses one core per unit, and this
    is the suite's longest compile: the workers that need it share the units out)."""
    rob = _codegen.generate_model(robertson, 3, 3, np.float64)
    ring_model = _codegen.generate_model(ring, 16, 1, np.float64)
    # A model with shared parameters (a run-time table): solve_one assembles its p.
    # 10 knots: 20 differentiated entries. nvcc's optimiser time grows steeply with the joint
    # system (README, "The GPU path"): 40 entries take over 8 minutes.
    shared = _params.split({"k": jnp.ones(1), "grid": jnp.linspace(0.0, 1.0, 10),
                            "table": jnp.ones(10)}, None, None, np.float64)
    table_model = _codegen.generate_model(
        lambda y, t, p: -p["k"] * y + jnp.interp(t, p["grid"], p["table"]), 1, shared.layout,
        np.float64)
    # A model with a jump at stops, a save function and an event (integrate.hpp's other paths).
    workflow_model = _codegen.generate_model(
        lambda y, t, p: -p[0] * y, 2, 2, np.float64,
        (_codegen.ModelFunction("jump", lambda y, t, p: y + p[1]),
         _codegen.ModelFunction("save", lambda y, t, p: jnp.stack([y[0] * y[1], t])),
         _codegen.ModelFunction("event", lambda y, t, p: y[0] - 0.5)))
    pattern = detect_pattern(ring, 16, 1, np.float64) | np.eye(16, dtype=bool)
    structure = _kernel_source.sparse_structure(SparsityPattern(pattern), Ordering.AMD)
    parts = [
        _namespaced(rob, "rob"), _namespaced(ring_model, "ring"),
        _namespaced(table_model, "tab"), _namespaced(workflow_model, "flow"),
        '#include "shoal/ode/ensemble.hpp"', '#include "shoal/ode/tsit5.hpp"',
        '#include "shoal/ode/vern7.hpp"', '#include "shoal/ode/vern9.hpp"',
        '#include "shoal/ode/directional_sensitivity.hpp"',
        '#include "shoal/ode/rodas5p.hpp"',
        '#include "shoal/ode/rodas4.hpp"',
        '#include "shoal/ode/rosenbrock23.hpp"',
        '#include "shoal/ode/sparse_iteration_matrix.hpp"',
        structure.emit_cpp("RingStructure"),
        "template <class M> using RingSparse = "
        "shoal::ode::SparseIterationMatrix<M, RingStructure, double>;",
        # Mass matrices (mass.hpp): Robertson as a DAE, the ring with a diagonal M, sparse.
        MassMatrix(np.diag([1.0, 1.0, 0.0])).emit_cpp("RobMass"),
        "using RobDae = shoal::ode::WithMass<rob::Model, RobMass>;",
        MassMatrix(np.diag(np.linspace(1.0, 2.0, 16))).emit_cpp("RingMass"),
        "using RingMassModel = shoal::ode::WithMass<ring::Model, RingMass>;",
        KERNEL.format(name="solve_kernel"),
    ]
    instances = [
        ("shoal::ode::Tsit5", "rob::Model"),
        ("shoal::ode::Rodas5PLu64", "rob::Model"),
        ("shoal::ode::Rodas5PLu32", "rob::Model"),
        ("shoal::ode::Rodas4", "rob::Model"),
        ("shoal::ode::Rosenbrock23", "rob::Model"),
        ("shoal::ode::Vern7", "rob::Model"),
        ("shoal::ode::Vern9", "rob::Model"),
        ("shoal::ode::Tsit5", "shoal::ode::Sensitivity<rob::Model, true, 0, 3>"),
        ("shoal::ode::Rodas5PSensitivityLu64", "shoal::ode::Sensitivity<rob::Model, false, 0, 3>"),
        ("shoal::ode::Tsit5", "tab::Model"),
        ("shoal::ode::Rodas5PSensitivityLu64", "shoal::ode::Sensitivity<tab::Model, false, 1, 21>"),
        ("shoal::ode::Rodas5PSensitivityLu64", "shoal::ode::DirectionalSensitivity<tab::Model, 2>"),
        ("shoal::ode::Tsit5", "flow::Model"),
        ("shoal::ode::Rodas5PLu64", "flow::Model"),
        ("shoal::ode::Tsit5", "shoal::ode::Sensitivity<flow::Model, true, 0, 2>"),
        ("shoal::ode::Rodas5PSensitivityLu64", "shoal::ode::Sensitivity<flow::Model, true, 0, 2>"),
        ("shoal::ode::Rodas5PSensitivityLu64",
         "shoal::ode::DirectionalSensitivity<flow::Model, 2>"),
        ("shoal::ode::Rodas5PUsing<RingSparse>::Stepper", "ring::Model"),
        ("shoal::ode::Rodas5PUsing<RingSparse>::JointStepper",
         "shoal::ode::Sensitivity<ring::Model, false, 0, 1>"),
        ("shoal::ode::Rodas5PLu64", "RobDae"),
        ("shoal::ode::Rodas5PSensitivityLu64", "shoal::ode::Sensitivity<RobDae, false, 0, 3>"),
        ("shoal::ode::Rodas5PUsing<RingSparse>::Stepper", "RingMassModel"),
    ]
    units = []
    for k in range(count):
        kernels = [f"template __global__ void solve_kernel<{stepper}, {model}>"
                   "(ShoalEnsembleArgs);" for stepper, model in instances[k::count]]
        units.append("\n".join(parts + kernels))
    return units


@pytest.fixture(scope="module")
def ptxas_report(tmp_path_factory):
    """nvcc's ptxas report of every kernel, the units compiled once per run whichever workers
    need them (worker_shared.py): about 80 s of nvcc."""
    folder = run_directory(tmp_path_factory, "nvcc-kernels")
    count = max(2, min(4, os.cpu_count() or 1))
    units = functools.cache(lambda: _translation_units(count))  # only where a unit is built

    def build(key):
        src = folder / f"kernels{key}.cu"
        src.write_text(units()[int(key)])
        proc = subprocess.run(
            [NVCC, "-std=c++17", "-arch=sm_90", "--fmad=false", f"-I{include_dir()}", "-c",
             str(src), "-o", str(src.with_suffix(".o")), "-Xptxas", "-v"],
            capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, f"nvcc failed on {src}:\n{proc.stderr[-6000:]}"
        return proc.stderr

    reports = shared_results(folder, [str(k) for k in range(count)], build,
                             parallel=min(count, os.cpu_count() or 1))
    return "\n".join(reports.values())


def test_every_stepper_compiles_for_sm90(ptxas_report):
    entries = re.findall(r"Compiling entry function '(\w+)' for 'sm_90'", ptxas_report)
    assert len(entries) == 22


def test_reference_model_does_not_spill(ptxas_report):
    # ptxas reports each entry's "Compiling entry function" line followed by its spill line.
    blocks = re.split(r"Compiling entry function ", ptxas_report)[1:]
    spills = {}
    for block in blocks:
        name = block.split("'")[1]
        stores = re.search(r"(\d+) bytes spill stores", block)
        spills[name] = int(stores.group(1)) if stores else 0
    reference = {k: v for k, v in spills.items() if "3rob5Model" in k and "Sensitivity" not in k}
    # Tsit5, Vern7, Vern9, Rodas5P (fp64, fp32 LU), Rodas4, Rosenbrock23; Rodas5P on the DAE
    assert len(reference) == 8, spills
    assert all(v == 0 for v in reference.values()), reference


def test_constant_tables_compile_cleanly_with_nvcc_and_read_right_on_the_host(tmp_path):
    # A large constant matrix becomes a table read from host+device code. nvcc compiles the same
    # source twice; the host pass must read the host copy (checked by evaluating the model on the
    # host from the nvcc-built program against JAX) and neither pass may warn.
    m = np.random.default_rng(0).standard_normal((40, 40))

    def f(y, t, p):
        return jnp.asarray(m) @ jnp.tanh(y) * p[0]

    model = _codegen.generate_model(f, 40, 1, np.float64)
    kernel = _kernel_source.library_source(model, Variant(Method.TSIT5), "cuda")
    y = np.linspace(-1.0, 1.0, 40)
    main = "\n".join([
        "#include <cstdio>",
        "int main() {",
        f"  const double y[40] = {{{', '.join(repr(float(v)) for v in y)}}};",
        "  const double p[1] = {0.5};",
        "  double dy[40];",
        "  shoal_generated::Model::rhs<double>(y, 0.0, p, dy);",
        '  for (int i = 0; i < 40; ++i) std::printf("%.17g\\n", dy[i]);',
        "}",
    ])
    src = tmp_path / "tables.cu"
    src.write_text(kernel.replace("SHOAL_CACHE_KEY", '"shoal-key:test"') + "\n" + main)
    exe = tmp_path / "tables"
    proc = subprocess.run(
        [NVCC, "-std=c++17", "-arch=sm_90", "--fmad=false", "-Xcompiler", "-ffp-contract=off",
         f"-I{include_dir()}", str(src), "-o", str(exe)],
        capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "warning" not in proc.stderr.lower(), proc.stderr[-4000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    got = np.array([float(v) for v in run.stdout.split()])
    np.testing.assert_allclose(got, np.asarray(f(jnp.asarray(y), 0.0, jnp.array([0.5]))),
                               rtol=1e-12, atol=1e-12)
