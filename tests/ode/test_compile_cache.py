"""The host JIT cache: location, keys, one compile per entry across processes, corrupt entries
rebuilt, compiler errors shown with the generated source's path."""

import os
import stat
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import numpy as np
import pytest

from shoal import _jit
from shoal.ode import _build

ROOT = Path(__file__).resolve().parents[2]


def _source(tag: str, body: str = "return 42;") -> str:
    return textwrap.dedent(f"""
        // {tag}
        extern "C" __attribute__((visibility("default"), used))
        const char shoal_cache_key[] = SHOAL_CACHE_KEY;
        extern "C" __attribute__((visibility("default"))) int answer() {{ {body} }}
    """)


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SHOAL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(_jit, "_loaded", {})
    # A model another test in this process already loaded would otherwise be served from the
    # in-memory memo, and nothing would be compiled into the fresh cache.
    _build._host_library.cache_clear()
    return tmp_path / "cache"


def test_cache_dir_precedence(tmp_path, monkeypatch):
    monkeypatch.delenv("SHOAL_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert _jit.cache_dir() == tmp_path / "xdg" / "shoal"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert _jit.cache_dir() == tmp_path / "home" / ".cache" / "shoal"
    monkeypatch.setenv("SHOAL_CACHE_DIR", str(tmp_path / "explicit"))
    path = _jit.cache_dir()
    assert path == tmp_path / "explicit"
    assert stat.S_IMODE(path.stat().st_mode) == 0o700


def test_flags_never_include_fast_math():
    flags = _jit.compiler_flags()
    assert not any("fast-math" in flag or flag == "-Ofast" for flag in flags)
    assert "-ffp-contract=off" in flags


def test_native_tuning_is_part_of_the_key_and_can_be_turned_off(monkeypatch):
    src = _source(uuid.uuid4().hex)
    _jit.native_arch.cache_clear()
    tuned_flags, tuned_identity = _jit.native_arch()
    tuned_key = _jit.cache_key(src)
    monkeypatch.setenv("SHOAL_NATIVE_ARCH", "0")
    _jit.native_arch.cache_clear()
    try:
        assert _jit.native_arch() == ((), "")
        assert "-march=native" not in _jit.compiler_flags()
        if tuned_flags:  # the compiler accepts -march=native: its expansion is in the key
            assert "-march=native" in tuned_flags and tuned_identity
            assert _jit.cache_key(src) != tuned_key
    finally:
        monkeypatch.delenv("SHOAL_NATIVE_ARCH")
        _jit.native_arch.cache_clear()


def test_key_depends_on_source_and_library_is_reused(fresh_cache):
    src = _source(uuid.uuid4().hex)
    assert _jit.cache_key(src) == _jit.cache_key(src)
    assert _jit.cache_key(src) != _jit.cache_key(src + " ")
    lib = _jit.compile_library(src)
    mtime = lib.stat().st_mtime_ns
    _jit._loaded.clear()
    assert _jit.compile_library(src) == lib
    assert lib.stat().st_mtime_ns == mtime  # found valid on disk, not rebuilt
    import ctypes

    assert ctypes.CDLL(str(lib)).answer() == 42


def test_corrupt_entry_is_rebuilt(fresh_cache):
    src = _source(uuid.uuid4().hex)
    lib = _jit.compile_library(src)
    lib.write_bytes(b"not an ELF file")
    _jit._loaded.clear()
    again = _jit.compile_library(src)
    assert again == lib
    assert f"shoal-key:{_jit.cache_key(src)}".encode() in lib.read_bytes()


def test_compile_error_names_the_generated_source(fresh_cache):
    src = _source(uuid.uuid4().hex, body="return this_is_not_declared;")
    with pytest.raises(_jit.CompileError) as info:
        _jit.compile_library(src)
    message = str(info.value)
    assert "this_is_not_declared" in message
    path = Path(message.split("source: ")[1].split(")")[0])
    assert path.is_file() and "this_is_not_declared" in path.read_text()
    assert not list(fresh_cache.glob("*.so"))  # nothing half-written is left as an entry


def test_compiler_fallback_when_cxx_is_missing(monkeypatch):
    monkeypatch.setenv("CXX", "/nonexistent/compiler")
    _jit.find_compiler.cache_clear()
    try:
        with pytest.warns(RuntimeWarning, match="CXX=/nonexistent/compiler"):
            exe, banner = _jit.find_compiler()
        assert Path(exe).name in ("c++", "g++", "clang++") and banner
    finally:
        _jit.find_compiler.cache_clear()


def test_native_tuning_does_not_change_results(tmp_path):
    # -march=native may vectorise but, without contraction or fast-math, not reorder arithmetic:
    # a Tsit5 and a dense Rodas5P solve are bit-identical with and without it.
    script = textwrap.dedent("""
        import sys
        import jax, jax.numpy as jnp, numpy as np
        jax.config.update("jax_enable_x64", True)
        import shoal

        def ring(y, t, p):
            n = y.shape[0] // 2
            x, v = y[:n], y[n:]
            return jnp.concatenate([v, p[0] * (1 - x**2) * v - x
                                    + 10.0 * (jnp.roll(x, 1) - 2 * x + jnp.roll(x, -1))])

        def lorenz(y, t, p):
            return jnp.stack([p[0] * (y[1] - y[0]), y[0] * (p[1] - y[2]) - y[1],
                              y[0] * y[1] - p[2] * y[2]])

        t = jnp.linspace(0.0, 1.0, 5)
        y0 = jnp.concatenate([2 * jnp.ones((20, 8)), jnp.zeros((20, 8))], axis=1)
        a = shoal.ode.solve(ring, y0, t, jnp.linspace(50, 150, 20)[:, None], rtol=1e-7,
                            sparsity="dense")
        b = shoal.ode.solve(lorenz, jnp.ones((20, 3)) + jnp.arange(20.0)[:, None], t,
                            jnp.array([10.0, 28.0, 8.0 / 3.0]), method="tsit5")
        np.save(sys.argv[1], np.concatenate([np.asarray(a).ravel(), np.asarray(b).ravel()]))
    """)
    results = []
    for native in ("1", "0"):
        out = tmp_path / f"native{native}.npy"
        env = dict(os.environ, SHOAL_NATIVE_ARCH=native, SHOAL_CACHE_DIR=str(tmp_path / "cache"),
                   PYTHONPATH=str(ROOT))
        proc = subprocess.run([sys.executable, "-c", script, str(out)], env=env,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-4000:]
        results.append(np.load(out))
    assert len(list((tmp_path / "cache").glob("*.so"))) == 4  # two models, built twice
    assert np.all(np.isfinite(results[0]))
    np.testing.assert_array_equal(results[0], results[1])


def _lorenz_solve():
    import jax.numpy as jnp

    from shoal.ode import solve

    def lorenz(y, t, p):
        return jnp.stack([p[0] * (y[1] - y[0]), y[0] * (p[1] - y[2]) - y[1],
                          y[0] * y[1] - p[2] * y[2]])

    y0 = np.array([[1.0, 0.5, 0.0], [0.3, 0.2, 0.1]])
    return np.asarray(solve(lorenz, y0, np.linspace(0, 2, 5), np.array([10.0, 28.0, 8 / 3]),
                            rtol=1e-9, atol=1e-11, method="tsit5"))


@pytest.fixture
def prelude_state(monkeypatch):
    """Fresh memo of precompiled preludes and of the compiler kind, restored after."""
    monkeypatch.setattr(_jit, "_preludes", {})
    _jit.uses_precompiled_prelude.cache_clear()
    yield
    _jit.uses_precompiled_prelude.cache_clear()


@pytest.mark.skipif(not _jit.uses_precompiled_prelude(), reason="the host compiler is not g++")
def test_precompiled_prelude_is_built_once_used_and_changes_no_result(fresh_cache,
                                                                      prelude_state,
                                                                      monkeypatch):
    with_prelude = _lorenz_solve()
    (gch,) = fresh_cache.glob("*.gch")
    sources = [s for s in fresh_cache.glob("*.cc") if "Generated by shoal" in s.read_text()]
    assert sources and all(s.read_text().splitlines()[0] == _jit.PRELUDE_INCLUDE
                           for s in sources)
    root = _jit.precompiled_prelude()
    assert (root / "shoal" / "ode" / "jit_prelude.hpp.gch").resolve() == gch.resolve()
    # g++ reports the precompiled header it used ("! path.gch") under -H.
    exe, _ = _jit.find_compiler()
    proc = subprocess.run([exe, *_jit.compiler_flags(), f"-I{root}", f"-I{_jit.include_dir()}",
                           "-H", "-fsyntax-only", str(sources[0])], capture_output=True,
                          text=True)
    assert proc.returncode == 0 and f"! {root}" in proc.stderr, proc.stderr[:2000]
    # Off: the core is parsed as before, into another library with the same results.
    monkeypatch.setenv("SHOAL_PRECOMPILED_HEADER", "0")
    _jit.uses_precompiled_prelude.cache_clear()
    assert _lorenz_solve().tobytes() == with_prelude.tobytes()
    assert len(list(fresh_cache.glob("*.gch"))) == 1


@pytest.mark.skipif(not _jit.uses_precompiled_prelude(), reason="the host compiler is not g++")
def test_corrupt_precompiled_prelude_is_rebuilt(fresh_cache, prelude_state, monkeypatch):
    root = _jit.precompiled_prelude()
    (gch,) = fresh_cache.glob("*.gch")
    gch.write_bytes(b"not a precompiled header")
    monkeypatch.setattr(_jit, "_preludes", {})
    monkeypatch.setattr(_jit, "_loaded", {})
    assert _jit.precompiled_prelude() == root
    assert gch.stat().st_size > 1_000_000
    _lorenz_solve()
