import os

# XLA compiles every jitted function and every eager jax.numpy operation the tests run (over a
# thousand per worker), about 35 ms each with its default pipeline: more of `make test`'s time
# than shoal's own model builds. Its simpler emitters at backend level 0 take less than half
# that. They only change how XLA compiles the tests' glue and references, never shoal's kernels
# (custom calls compiled by shoal) or what the tests assert: `SHOAL_TEST_XLA_FLAGS=` (empty)
# runs the suite with XLA's defaults. Read when JAX starts its backend, so set before that.
TEST_XLA_FLAGS = os.environ.get(
    "SHOAL_TEST_XLA_FLAGS",
    "--xla_cpu_use_fusion_emitters=false --xla_backend_optimization_level=0")
os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {TEST_XLA_FLAGS}".strip()

import jax  # noqa: E402
import pytest  # noqa: E402

# The solver tests compare against float64 references; float32 cases pass float32 arrays
# explicitly (shoal computes in the input's dtype either way).
jax.config.update("jax_enable_x64", True)

# Models compile at -O1 here, users' at -O3: about half the compile time, which is most of `make
# test`'s, and the same bits (tests/ode/test_optimization_level.py holds the two levels to that,
# scalar and in the lanes). `SHOAL_OPTIMIZATION=-O3 make test` runs the suite at the users' level.
os.environ.setdefault("SHOAL_OPTIMIZATION", "-O1")

# SHOAL_TEST_DEVICE=cuda runs every test with that platform's first device as JAX's default
# device, so the CPU suites (against SciPy, closed forms, finite differences) check the GPU path
# too: scripts/gpu_check.sh does this on a GPU machine. Unset, tests run where JAX puts them.
_DEVICE_PLATFORM = os.environ.get("SHOAL_TEST_DEVICE", "").strip()


@pytest.fixture(autouse=True)
def _default_device():
    if not _DEVICE_PLATFORM:
        yield
        return
    with jax.default_device(jax.devices(_DEVICE_PLATFORM)[0]):
        yield


# SHOAL_TEST_COMPILE_LOG=<file> appends one line per model built during the run (seconds, artifact
# kind, the test that asked for it): where `make test`'s time goes is mostly compiling models.
_COMPILE_LOG = os.environ.get("SHOAL_TEST_COMPILE_LOG", "").strip()
if _COMPILE_LOG:
    import time

    from shoal import _jit

    _build_entry = _jit._build_entry

    def _logged_build_entry(source, key, artifact, build):
        start = time.perf_counter()
        try:
            return _build_entry(source, key, artifact, build)
        finally:
            seconds = time.perf_counter() - start
            test = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0]
            with open(_COMPILE_LOG, "a") as log:
                log.write(f"{seconds:.2f}\t{artifact.suffix}\t{len(source)}\t{test}\n")

    _jit._build_entry = _logged_build_entry
