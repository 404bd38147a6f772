import os

import jax
import pytest

# The solver tests compare against float64 references; float32 cases pass float32 arrays
# explicitly (shoal computes in the input's dtype either way).
jax.config.update("jax_enable_x64", True)

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
