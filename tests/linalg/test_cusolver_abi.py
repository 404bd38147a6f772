"""The CUDA eigensolver's host side, testable without a GPU: the cuSOLVER declarations against
the real header (when a toolkit is installed), the run-time loader and its messages, and the
CUDA handler registration leaving the CPU path untouched."""

import glob
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from shoal.linalg import _cuda, _ffi, eigh

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
ext = _ffi._linalg_ext
needs_ext = pytest.mark.skipif(ext is None, reason="compiled extension not built")


def _cuda_include_dirs():
    dirs = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", ""), "/usr/local/cuda"]
    out = [os.path.join(d, "include") for d in dirs if d]
    for p in sys.path:
        out += glob.glob(os.path.join(p, "nvidia", "**", "include"), recursive=True)
    return [d for d in out if os.path.isfile(os.path.join(d, "cusolverDn.h"))]


def _compiler():
    for cxx in (os.environ.get("CXX", ""), "c++", "g++", "clang++"):
        if cxx and shutil.which(cxx):
            return cxx
    return None


def _run_python(code: str, **env):
    """Run code in a fresh interpreter (the loader's first success sticks per process)."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu", **env}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=300,
    )


def _check_abi(declarations_dir):
    """Compile cusolver_abi.cc (static_asserts) with cusolver_api.hpp taken from that folder."""
    cmd = [
        _compiler(),
        "-std=c++17",
        "-fsyntax-only",
        f"-I{_cuda_include_dirs()[0]}",
        f"-I{declarations_dir}",
        str(HERE / "cusolver_abi.cc"),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


needs_toolkit = pytest.mark.skipif(
    not _cuda_include_dirs() or _compiler() is None,
    reason="no CUDA toolkit header cusolverDn.h, or no C++ compiler",
)


@needs_toolkit
def test_declarations_match_the_real_header():
    result = _check_abi(ROOT / "src" / "linalg")
    assert result.returncode == 0, result.stderr[-4000:]


@needs_toolkit
def test_abi_check_rejects_a_wrong_declaration(tmp_path):
    """The check above can fail: one wrong parameter type is a compile error."""
    src = (ROOT / "src" / "linalg" / "cusolver_api.hpp").read_text()
    broken = src.replace(
        "int ldb, R* w, T* work, int lwork, int* info);",
        "int ldb, R* w, T* work, long lwork, int* info);",
    )
    assert broken != src
    (tmp_path / "cusolver_api.hpp").write_text(broken)
    result = _check_abi(tmp_path)
    assert result.returncode != 0
    assert "cusolverDnSsygvd does not match" in result.stderr


def test_the_extension_does_not_link_cusolver():
    if ext is None:
        pytest.skip("compiled extension not built")
    ldd = shutil.which("ldd")
    if ldd is None:
        pytest.skip("no ldd")
    out = subprocess.run([ldd, ext.__file__], capture_output=True, text=True).stdout
    assert "cusolver" not in out and "cudart" not in out and "libcuda" not in out


@needs_ext
def test_handler_capsules_exist():
    regs = ext.cuda_registrations()
    assert set(regs) == {"shoal_linalg_eigh_cuda", "shoal_linalg_eigh_gen_cuda"}
    assert all(type(c).__name__ == "PyCapsule" for c in regs.values())


@needs_ext
def test_registering_cuda_targets_leaves_the_cpu_path_alone():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(6, 6))
    a = x + x.T
    b = x @ x.T + 6 * np.eye(6)
    before = [np.asarray(r) for r in eigh(a, b, type=2)]
    for name, capsule in ext.cuda_registrations().items():
        jax.ffi.register_ffi_target(name, capsule, platform="CUDA")
    after = [np.asarray(r) for r in eigh(a, b, type=2)]
    jitted = [np.asarray(r) for r in jax.jit(lambda a, b: eigh(a, b, type=2))(a, b)]
    for x0, x1, x2 in zip(before, after, jitted, strict=True):
        np.testing.assert_array_equal(x0, x1)
        np.testing.assert_allclose(x0, x2, rtol=0, atol=1e-12)


@pytest.mark.skipif(
    any(d.platform == "gpu" for d in jax.devices()), reason="a GPU is present: see test_eigh_gpu"
)
def test_no_gpu_means_no_cuda_branch():
    ok, why = _cuda.status()
    assert not ok
    assert "CUDA" in why or "disabled" in why or "extension" in why
    assert not _cuda.enabled()
    jaxpr = str(jax.make_jaxpr(lambda a: eigh(a))(jnp.eye(3)))
    assert "shoal_linalg_eigh_cuda" not in jaxpr
    assert "shoal_linalg_eigh_cpu" in jaxpr


def test_candidate_order(monkeypatch):
    monkeypatch.delenv("SHOAL_CUSOLVER", raising=False)
    cands = _cuda.cusolver_candidates()
    # already-loaded libraries first, then sonames on the loader path, then files
    assert cands[0] == ("libcusolver.so.12", True)
    noload = [c for c in cands if c[1]]
    assert cands[: len(noload)] == noload
    assert ("libcusolver.so.12", False) in cands and ("libcusolver.so.11", False) in cands
    files = [p for p, nl in cands if not nl and os.sep in p]
    assert len(files) == len(set(files))
    monkeypatch.setenv("SHOAL_CUSOLVER", "/opt/x/libcusolver.so.12")
    assert _cuda.cusolver_candidates() == [("/opt/x/libcusolver.so.12", False)]


@needs_ext
def test_loader_reports_a_missing_library_clearly():
    code = """
        from shoal.linalg import _cuda, _ffi
        ext = _ffi._linalg_ext
        print("NOLOAD:", ext.load_cusolver("libcusolver_missing.so.3", True))
        print("OPEN:", ext.load_cusolver("/nonexistent/libcusolver.so.12"))
        print("PATH:", repr(ext.cusolver_loaded_path()), ext.cusolver_version())
        print("PROBE:", ext.cusolver_probe())
        ok, why = _cuda.load_cusolver()
        print("LOAD:", ok, why)
        print("STATUS:", _cuda.status())
    """
    r = _run_python(code, SHOAL_CUSOLVER="/nonexistent/libcusolver.so.12")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "NOLOAD: libcusolver_missing.so.3 is not loaded in this process" in out
    assert "OPEN: cannot open /nonexistent/libcusolver.so.12:" in out
    assert "PATH: '' 0" in out
    assert "PROBE: cuSOLVER is not loaded" in out
    assert "LOAD: False cuSOLVER not found (cannot open /nonexistent/libcusolver.so.12" in out
    assert "SHOAL_CUSOLVER" in out  # the hint names the override
    # JAX_PLATFORMS=cpu: no CUDA backend, decided before any loading
    assert "STATUS: (False, " in out and "no CUDA backend" in out


@needs_ext
def test_a_library_without_the_symbols_is_rejected():
    # libm exists everywhere and has none of the symbols: the first missing one is named.
    code = """
        from shoal.linalg import _ffi
        ext = _ffi._linalg_ext
        print(ext.load_cusolver("libm.so.6"))
        print(repr(ext.cusolver_loaded_path()))
    """
    r = _run_python(code)
    assert r.returncode == 0, r.stderr
    assert "libm.so.6 lacks the symbol cusolverDnCreate" in r.stdout
    assert "''" in r.stdout


def _real_cusolver():
    ok_paths = [p for p, noload in _cuda.cusolver_candidates() if not noload and os.sep in p]
    return ok_paths[0] if ok_paths else None


@needs_ext
@pytest.mark.skipif(_real_cusolver() is None, reason="no libcusolver.so on this machine")
def test_loading_the_real_library_resolves_every_symbol():
    """Run with the toolkit's (or a wheel's) libcusolver: every dlsym succeeds and the version is
    read; without a GPU, creating a handle fails with a message saying so (no crash)."""
    code = """
        import jax
        from shoal.linalg import _cuda, _ffi
        ext = _ffi._linalg_ext
        ok, where = _cuda.load_cusolver()
        print("LOAD:", ok, where)
        print("VERSION:", ext.cusolver_version())
        print("PROBE:", repr(ext.cusolver_probe()))
        print("GPU:", any(d.platform == "gpu" for d in jax.devices()))
    """
    r = _run_python(code, SHOAL_CUSOLVER=_real_cusolver(), JAX_PLATFORMS="")
    assert r.returncode == 0, r.stderr
    lines = dict(line.split(": ", 1) for line in r.stdout.splitlines() if ": " in line)
    assert lines["LOAD"].startswith("True"), r.stdout
    assert int(lines["VERSION"]) >= 11000
    if lines["GPU"] == "False":
        assert "cusolverDnCreate failed: CUSOLVER_STATUS_NOT_INITIALIZED" in lines["PROBE"]
        assert "no usable CUDA device" in lines["PROBE"]
    else:
        assert lines["PROBE"] == "''"


@needs_ext
def test_status_messages_are_actionable():
    assert "out of GPU memory" in ext.cusolver_status_message(2)
    assert "no usable CUDA device" in ext.cusolver_status_message(1)
    assert ext.cusolver_status_message(12345) == "cuSOLVER status 12345"
