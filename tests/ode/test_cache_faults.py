"""Faults of the compile cache and the compiler: concurrent compiles, damaged entries, a killed
lock holder, an unwritable cache directory, a full disk, a missing, failing, crashing or hanging
compiler. Every case ends with a correct solve, or an error that says what to do."""

import errno
import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shoal
from shoal import _jit
from shoal.ode import _build

ROOT = Path(__file__).resolve().parents[2]
T = np.linspace(0.0, 1.0, 3)
K = np.array([0.5, 1.0, 2.0])


def decay(y, t, p):
    return -p[0] * y


def faster_decay(y, t, p):  # another model: a second entry for the "foreign" case
    return -(p[0] + 1.0) * y


def _solve(f):
    ys = shoal.ode.solve(f, jnp.ones((len(K), 1)), jnp.asarray(T), jnp.asarray(K)[:, None],
                         method="tsit5", rtol=1e-10, atol=1e-12)
    return np.asarray(ys)[..., 0]


def _assert_decays(ys, extra_rate=0.0):
    np.testing.assert_allclose(ys, np.exp(-(K[:, None] + extra_rate) * T[None, :]), rtol=1e-7)


def _forget_loaded_models(monkeypatch):
    # Per process, a model is compiled and loaded once and JAX keeps the lowered solve: forget
    # both, so the next solve goes through the disk cache again (a new cache directory also
    # gives it a new path to dlopen).
    monkeypatch.setattr(_jit, "_loaded", {})
    monkeypatch.setattr(_jit, "_fallbacks", {})
    _build._host_library.cache_clear()
    jax.clear_caches()


@pytest.fixture(scope="module")
def prelude_entry():
    """The precompiled core headers' cache entry (.gch and its digest) in the run's own cache,
    or () where models compile without them (clang). Copied into a fresh cache, it spares each
    test the 3-4 s of precompiling them again, which is not what these tests are about; the two
    that are (a hanging header compile, eight threads racing to the first build) start empty."""
    root = _jit.precompiled_prelude() if _jit.uses_precompiled_prelude() else None
    if root is None:
        return ()
    gch = root.with_suffix(".gch")
    return gch, _jit._digest_path(gch)


def _with_prelude(cache, prelude_entry):
    cache.mkdir(parents=True, exist_ok=True)
    for path in prelude_entry:
        shutil.copy(path, cache / path.name)
    return cache


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("SHOAL_CACHE_DIR", str(cache))
    _forget_loaded_models(monkeypatch)
    yield cache
    _build._host_library.cache_clear()


@pytest.fixture
def fresh_cache(empty_cache, prelude_entry):
    """A new cache directory holding only the precompiled core headers."""
    return _with_prelude(empty_cache, prelude_entry)


@pytest.fixture(scope="module")
def seed_entries(tmp_path_factory, prelude_entry):
    """One good cache entry (.so and .sha256) per model, each in a directory of its own."""
    entries = {}
    with pytest.MonkeyPatch.context() as mp:
        for f in (decay, faster_decay):
            directory = _with_prelude(tmp_path_factory.mktemp(f.__name__), prelude_entry)
            mp.setenv("SHOAL_CACHE_DIR", str(directory))
            _forget_loaded_models(mp)
            _solve(f)
            (library,) = directory.glob("*.so")
            entries[f.__name__] = library
    _build._host_library.cache_clear()
    return entries


def _real_compiler() -> str:
    for name in ("c++", "g++", "clang++"):
        if shutil.which(name):
            return shutil.which(name)
    pytest.skip("no C++ compiler")


@pytest.fixture
def fake_cxx(tmp_path, monkeypatch):
    """A $CXX that answers --version like the real compiler, logs each compile of a library,
    and compiles or fails as its mode file says. Returns (set_mode, compile_count)."""
    log, mode, child = tmp_path / "compiles.log", tmp_path / "mode", tmp_path / "child.pid"
    script = tmp_path / "cxx"
    script.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        # Queries, and the precompiled core headers (shoal/_jit.py), go to the real compiler
        # (the headers hang instead in mode header-hang).
        case "$*" in *--version*|*-###*) exec {_real_compiler()} "$@" ;; esac
        case "$*" in *c++-header*)
          if [ "$(cat {mode} 2>/dev/null)" = header-hang ]; then sleep 300 & wait; exit 0; fi
          exec {_real_compiler()} "$@" ;;
        esac
        echo compile >> {log}
        out=; src=; prev=
        for a in "$@"; do
          [ "$prev" = -o ] && out=$a
          case "$a" in *.cc) src=$a ;; esac
          prev=$a
        done
        ulimit -c 0
        case "$(cat {mode} 2>/dev/null)" in
          garbage)
            printf 'noise \\377\\376 on stdout\\n'
            echo 'cc1plus: internal compiler error: Segmentation fault, in the middle' >&2
            exit 1 ;;
          segv) kill -SEGV $$ ;;
          hang)  # a child holds the output pipes, as cc1plus does under the driver
            sleep 300 & echo $! > {child}; wait; exit 0 ;;
          enospc)
            printf '\\177ELF, cut short' > "$out"
            echo "fatal error: error writing to $out: No space left on device" >&2
            exit 1 ;;
          unloadable)  # carries the key, so only the loader can tell
            grep -o 'shoal-key:[0-9a-f]*' "$src" > "$out"; exit 0 ;;
        esac
        exec {_real_compiler()} "$@"
        """))
    script.chmod(0o755)
    monkeypatch.setenv("CXX", str(script))
    _jit.find_compiler.cache_clear()
    yield (lambda m: mode.write_text(m)), (lambda: log.read_text().count("compile")
                                           if log.exists() else 0)
    _jit.find_compiler.cache_clear()


def test_precompiled_headers_that_do_not_finish_are_skipped(empty_cache, fake_cxx, monkeypatch):
    """The precompiled core headers only save time: a header compile that hangs is stopped at the
    compile timeout, warned about, and the model compiles and runs without them."""
    if not _jit.uses_precompiled_prelude():
        pytest.skip("the precompiled prelude is built with g++ only")
    set_mode, _ = fake_cxx
    set_mode("header-hang")
    monkeypatch.setenv("SHOAL_COMPILE_TIMEOUT", "15")
    monkeypatch.setattr(_jit, "_prelude_warned", False)
    with pytest.warns(RuntimeWarning, match="could not precompile its core headers"):
        ys = _solve(decay)
    _assert_decays(ys)
    assert not list(empty_cache.glob("*.gch"))


# --- concurrency -----------------------------------------------------------------------------

_CONCURRENT_SOLVE = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    import jax, jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    import shoal

    go, ready, rate = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
    ready.touch()
    while not go.exists():  # start together, so the compiles really contend
        time.sleep(0.01)

    def f(y, t, p):
        return -(p[0] + rate) * y

    ys = shoal.ode.solve(f, jnp.ones((3, 1)), jnp.linspace(0.0, 1.0, 3),
                         jnp.array([[0.5], [1.0], [2.0]]), method="tsit5", rtol=1e-10,
                         atol=1e-12)
    print(json.dumps(ys[..., 0].tolist()))
""")


def test_four_processes_compile_a_new_model_once(tmp_path, fake_cxx):
    set_mode, compile_count = fake_cxx
    set_mode("ok")
    rate = 1e-3 * (uuid.uuid4().int % 1000 + 1)  # a constant baked into f: a model never cached
    env = dict(os.environ, SHOAL_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT),
               SHOAL_NATIVE_ARCH="0")
    go = tmp_path / "go"
    procs = [subprocess.Popen([sys.executable, "-c", _CONCURRENT_SOLVE, str(go),
                               str(tmp_path / f"ready{i}"), repr(rate)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(4)]
    try:
        deadline = time.monotonic() + 120
        while len(list(tmp_path.glob("ready*"))) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        go.touch()
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            p.kill()
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]
    for out, _ in outs:
        _assert_decays(np.array(json.loads(out)), rate)
    assert compile_count() == 1


def test_eight_threads_solve_different_models(empty_cache):
    # Each thread's f bakes in its own rate: eight models, eight compiles, one process.
    rates = [0.125 * (i + 1) for i in range(8)]
    results, errors = {}, []
    barrier = threading.Barrier(len(rates))

    def worker(rate):
        def f(y, t, p):
            return -(p[0] + rate) * y

        try:
            barrier.wait(timeout=60)
            results[rate] = _solve(f)
        except BaseException as exc:  # reported below, from the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(r,), daemon=True) for r in rates]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=180)
    assert not any(t.is_alive() for t in threads), "a solving thread is stuck (deadlock?)"
    assert not errors, errors
    for rate in rates:
        _assert_decays(results[rate], rate)
    assert len(list(empty_cache.glob("*.so"))) == len(rates)


# --- damaged entries and a killed lock holder ------------------------------------------------

def _truncate(library, seeds):
    data = library.read_bytes()
    end = data.index(b"shoal-key:") + 60  # cut after the embedded key, so the key test passes
    library.write_bytes(data[:end + (len(data) - end) // 2])


def _flip_bytes(library, seeds):
    # The same size and the key intact: only the digest shows it (an unchecked load of this
    # crashed with SIGILL).
    data = bytearray(library.read_bytes())
    start = data.index(b"shoal-key:")
    for i in range(len(data) // 3, 2 * len(data) // 3):
        if not start <= i < start + 60:
            data[i] ^= 0xFF
    library.write_bytes(bytes(data))


def _foreign(library, seeds):
    # Another model's whole entry (library and digest) renamed to this key.
    other = seeds["faster_decay"]
    shutil.copy(other, library)
    shutil.copy(_jit._digest_path(other), _jit._digest_path(library))


def _unloadable(library, seeds):
    # Key and digest both right, yet no library: the loader's refusal must rebuild it too.
    key = library.name.split(".")[0]
    data = f"not a shared library, shoal-key:{key}".encode()
    library.write_bytes(data)
    _jit._digest_path(library).write_text(hashlib.sha256(data).hexdigest())


@pytest.mark.parametrize("damage", [_truncate, _flip_bytes, _foreign, _unloadable],
                         ids=["truncated", "bytes-flipped", "foreign", "unloadable"])
def test_damaged_entry_is_rebuilt(fresh_cache, seed_entries, damage):
    seed = seed_entries["decay"]
    library = fresh_cache / seed.name
    shutil.copy(seed, library)
    shutil.copy(_jit._digest_path(seed), _jit._digest_path(library))
    key = library.name.split(".")[0]
    damage(library, seed_entries)
    # Only the unloadable entry gets past the key and digest checks: the loader catches it.
    assert _jit._valid(library, key) == (damage is _unloadable)
    _assert_decays(_solve(decay))
    assert _jit._valid(library, key)  # rebuilt in place


def test_library_the_loader_refuses_twice_is_a_clear_error(fresh_cache, fake_cxx):
    set_mode, compile_count = fake_cxx
    set_mode("unloadable")
    with pytest.raises(shoal.ode.CompileError, match="cannot be loaded, even freshly rebuilt"):
        _solve(decay)
    assert compile_count() == 2  # rebuilt once, not in a loop


def test_lock_of_a_killed_process_does_not_block(fresh_cache, seed_entries):
    key = seed_entries["decay"].name.split(".")[0]
    lock = fresh_cache / f"{key}.lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys, time\n"
         "f = open(sys.argv[1], 'w'); fcntl.flock(f, fcntl.LOCK_EX)\n"
         "print('locked', flush=True); time.sleep(600)", str(lock)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with open(lock) as probe:  # really held: a compile now would wait
            with pytest.raises(BlockingIOError):
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    assert lock.exists()  # the stale file stays behind
    with open(lock) as probe:  # ...but its lock died with the process (fails fast, not a hang)
        fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(probe, fcntl.LOCK_UN)
    _assert_decays(_solve(decay))


# --- unwritable directory, full disk ---------------------------------------------------------

def test_unwritable_cache_directory_falls_back_with_one_warning(tmp_path, monkeypatch):
    if os.geteuid() == 0:  # root writes through any mode: a path under a file cannot be made
        (tmp_path / "a-file").write_text("")
        configured = tmp_path / "a-file" / "cache"
    else:
        configured = tmp_path / "read-only"
        configured.mkdir(mode=0o500)
    monkeypatch.setenv("SHOAL_CACHE_DIR", str(configured))
    _forget_loaded_models(monkeypatch)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")  # count every warning, not one per call site
            _assert_decays(_solve(decay))
            _assert_decays(_solve(faster_decay), 1.0)
        ours = [w for w in caught if "compile cache" in str(w.message)]
        assert len(ours) == 1, [str(w.message) for w in caught]
        fallback = _jit._fallbacks[configured]
        message = str(ours[0].message)
        assert str(configured) in message and str(fallback) in message
        assert "SHOAL_CACHE_DIR" in message
        assert len(list(fallback.glob("*.so"))) == 2
        assert not configured.exists() or not list(configured.iterdir())
    finally:
        _build._host_library.cache_clear()
        if configured.is_dir():
            configured.chmod(0o700)  # so that tmp_path can be removed


def _compiler_runs_out_of_space(monkeypatch, fake_cxx):
    fake_cxx[0]("enospc")


def _writing_runs_out_of_space(monkeypatch, fake_cxx):
    def build(src, output, optimization=None, evaluation_units=()):
        output.write_bytes(b"\x7fELF, cut short")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(output))

    monkeypatch.setattr(_jit, "_build_library", build)


@pytest.mark.parametrize("fill", [_compiler_runs_out_of_space, _writing_runs_out_of_space],
                         ids=["compiler-reports-it", "write-raises-it"])
def test_full_disk_says_what_to_do_and_leaves_no_partial_entry(fresh_cache, fake_cxx,
                                                               monkeypatch, fill):
    with monkeypatch.context() as mp:
        fill(mp, fake_cxx)
        with pytest.raises(_jit.CacheError) as info:
            _solve(decay)
    assert info.value.errno == errno.ENOSPC
    message = str(info.value)
    assert str(fresh_cache) in message and "Free space" in message
    assert "SHOAL_CACHE_DIR" in message
    # The precompiled core headers (shoal/_jit.py), built before the library, are complete.
    prelude = {p.name.split(".")[0] for p in fresh_cache.glob("*.gch")}
    left = sorted(p.suffix for p in fresh_cache.iterdir() if p.name.split(".")[0] not in prelude)
    assert left == [".cc", ".lock"], left  # no library, digest or temporary file
    fake_cxx[0]("ok")  # space again: the same solve now compiles and runs
    _assert_decays(_solve(decay))


# --- the compiler: missing, failing, crashing, hanging ---------------------------------------

def test_missing_compiler_says_what_to_install(tmp_path):
    # find_compiler is cached per process: a fresh one, with no compiler on its PATH.
    script = textwrap.dedent("""
        import jax.numpy as jnp
        import shoal
        try:
            shoal.ode.solve(lambda y, t, p: -p[0] * y, jnp.ones(1), jnp.linspace(0, 1, 3),
                            jnp.ones(1))
        except shoal.ode.CompileError as exc:
            print(exc)
    """)
    empty = tmp_path / "bin"
    empty.mkdir()
    env = dict(os.environ, CXX="/nonexistent/c++", PATH=str(empty), PYTHONPATH=str(ROOT),
               SHOAL_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "install g++ or clang++" in proc.stdout and "$CXX" in proc.stdout
    assert "/nonexistent/c++" in proc.stdout  # what was tried


@pytest.mark.parametrize("mode, says", [
    ("garbage", ["exit status 1", "internal compiler error: Segmentation fault, in the middle"]),
    ("segv", ["killed by SIGSEGV"]),
    ("hang", ["did not finish", "within 2 s", "SHOAL_COMPILE_TIMEOUT"]),
])
def test_broken_compiler_says_what_to_do(fresh_cache, fake_cxx, monkeypatch, tmp_path, mode,
                                         says):
    set_mode, _ = fake_cxx
    set_mode(mode)
    start = time.monotonic()
    with monkeypatch.context() as mp, pytest.raises(shoal.ode.CompileError) as info:
        if mode == "hang":
            mp.setenv("SHOAL_COMPILE_TIMEOUT", "2")
        _solve(decay)
    assert time.monotonic() - start < 60  # the hang is cut short (its compiler sleeps 300 s)
    message = str(info.value)
    for text in [*says, "set $CXX to a working C++17 compiler", "source: "]:
        assert text in message, message
    if mode == "hang":  # the compiler's child was killed with it, not left running
        pid = int((tmp_path / "child.pid").read_text())
        status = Path(f"/proc/{pid}/status")
        assert not status.exists() or "State:\tZ" in status.read_text()
    assert not list(fresh_cache.glob("*.so*"))
    set_mode("ok")
    _assert_decays(_solve(decay))
