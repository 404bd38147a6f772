"""Host JIT: compile generated C++ into a shared library, once, through a disk cache.

Cache directory: ``$SHOAL_CACHE_DIR``, else ``$XDG_CACHE_HOME/shoal``, else ``~/.cache/shoal``
(created with mode 0700); where it cannot be written, a private temporary directory for this
process, with one warning. An entry's key hashes the source, the compiler's identity and version,
the flags, shoal's version and its core headers, so a change to any of them compiles afresh.
Concurrent processes and threads take a file lock (``flock``: it dies with its process, so a
killed one leaves no stale lock) so each entry is compiled once; the library is written under a
temporary name and renamed into place atomically. Every library embeds its own key and has its
SHA-256 beside it (``<entry>.sha256``), both checked before use, so a truncated, corrupted or
foreign file is rebuilt rather than trusted; one the loader still refuses is rebuilt once
(:func:`load_library`). The compiler runs at most ``$SHOAL_COMPILE_TIMEOUT`` seconds (600).

With g++, a model library includes the core headers through one precompiled header
(``shoal/ode/jit_prelude.hpp``, built into the cache once per compiler and flags:
:func:`precompiled_prelude`), which takes a third off a small model's compile;
``SHOAL_PRECOMPILED_HEADER=0`` turns it off. A library may be built from one source as several
translation units compiled at once and linked (``evaluation_units``: shoal/ode/_build.py).
"""

from __future__ import annotations

import atexit
import errno
import fcntl
import functools
import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import warnings
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

# Never -ffast-math: step rejection depends on NaN and Inf propagating. -ffp-contract=off keeps
# a*b+c as two roundings on every compiler, so results do not depend on which one was found.
CXX_FLAGS = ("-std=c++17", "-fPIC", "-shared", "-fno-math-errno", "-ffp-contract=off",
             "-fvisibility=hidden")
# The optimisation level of a solver library unless $SHOAL_OPTIMIZATION says otherwise. A library
# that runs once (the sparsity tracer) asks for "-O0": a 300-variable model's tracer compiles in
# 0.8 s instead of 50 s at -O3.
DEFAULT_OPTIMIZATION = "-O3"
OPTIMIZATION_LEVELS = ("-O0", "-O1", "-O2", "-O3", "-Os", "-Og")
# Seconds a compile may take before the compiler is stopped: generous, since a large model at -O3
# takes minutes on a loaded machine; it only has to catch a compiler that hangs.
DEFAULT_COMPILE_TIMEOUT = 600.0
# How much of a failing compiler's output an error message carries (its end: the verdict).
OUTPUT_TAIL_CHARS = 6000


@functools.lru_cache(maxsize=1)
def native_arch() -> tuple[tuple[str, ...], str]:
    """(flags, identity) for tuning models to this CPU: ``-march=native`` where the compiler
    accepts it, unless ``SHOAL_NATIVE_ARCH=0``.

    Safe for results: with ``-ffp-contract=off`` and no fast-math the compiler may vectorise but
    not reorder or fuse floating-point operations, so every ISA gives bit-identical answers
    (benchmarks/native_arch.py: Rodas5P 17-21 % faster with AVX2). The identity is what
    ``native`` expands to, as the compiler reports it: it enters the cache key, so a cache shared
    between different CPUs never hands one of them a library built for another.
    """
    if os.environ.get("SHOAL_NATIVE_ARCH", "1").strip() == "0":
        return (), ""
    exe, _ = find_compiler()
    try:
        proc = _run([exe, "-march=native", "-###", "-x", "c++", "-c", os.devnull,
                     "-o", os.devnull], timeout=60)
    except (OSError, subprocess.SubprocessError):
        return (), ""
    if proc.returncode != 0:
        return (), ""
    # What the driver passes on: gcc's -march=<cpu> -m<feature>..., clang's -target-cpu <cpu>
    # and -target-feature <+feature>... (temporary file names vary per run: left out).
    tokens = " ".join(proc.stderr.splitlines()).replace('"', " ").replace("'", " ").split()
    kept = []
    for i, token in enumerate(tokens):
        previous = tokens[i - 1] if i else ""
        if (token.startswith("-m") or previous in ("-target-cpu", "-target-feature")
                or token in ("-target-cpu", "-target-feature")):
            kept.append(token)
    return ("-march=native",), " ".join(kept)


def native_vector_bytes() -> int:
    """The SIMD register width in bytes that models compiled here use for ``lanes=0``: what
    ``simd::native_vector_bytes()`` (simd/lanes.hpp) evaluates to under these flags, read from the
    features ``-march=native`` expands to: 64 with AVX-512F, 32 with AVX, else 16."""
    features = set(native_arch()[1].split())
    if features & {"-mavx512f", "+avx512f"}:
        return 64
    if features & {"-mavx", "+avx"}:
        return 32
    return 16


def compiler_flags(optimization: str | None = None) -> tuple[str, ...]:
    """The flags a model library is built with at this optimisation level (None: the
    configured one, :func:`optimization_level`)."""
    return (optimization or optimization_level(), *CXX_FLAGS, *native_arch()[0])


class CompileError(RuntimeError):
    """The C++ compiler rejected generated source (the message names the source file), or could
    not be found, run or finished."""


class CacheError(OSError):
    """The cache directory could not take a compiled model (``errno`` says why, e.g. ENOSPC)."""


def _run(cmd: list[str], timeout: float,
         started: list[subprocess.Popen] | None = None) -> subprocess.CompletedProcess:
    """Run a tool, capturing its output (undecodable bytes replaced), stopped after ``timeout`` s.

    The tool gets a process group of its own and the whole group is killed on timeout: a
    compiler driver's children (cc1plus, as, ld), or a wrapper script's, hold the output pipes,
    so killing only the driver would leave the wait hanging until they finish. ``started``
    collects the process, for a caller in another thread to stop (:func:`_kill_group`).
    """
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          errors="replace", start_new_session=True) as proc:
        if started is not None:
            started.append(proc)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            try:
                out, err = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:  # a child that left the group holds the pipes
                out, err = "", ""
            raise subprocess.TimeoutExpired(cmd, timeout, out, err) from None
        except BaseException:  # KeyboardInterrupt: leave no compiler running
            _kill_group(proc)
            raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:  # already gone
        proc.kill()


def optimization_level() -> str:
    """The -O flag solver libraries are built with: ``$SHOAL_OPTIMIZATION``, default -O3.

    Results do not depend on it (``-ffp-contract=off`` and no fast-math leave the compiler no
    freedom over floating-point operations; tests/ode/test_optimization_level.py checks -O1
    against -O3 bit for bit): a lower level trades run time for compile time. It enters the
    cache key with the other flags.
    """
    value = os.environ.get("SHOAL_OPTIMIZATION", "").strip()
    if not value:
        return DEFAULT_OPTIMIZATION
    if value not in OPTIMIZATION_LEVELS:
        raise ValueError(f"SHOAL_OPTIMIZATION must be one of {', '.join(OPTIMIZATION_LEVELS)}, "
                         f"got {value!r}")
    return value


def compile_timeout() -> float:
    """Seconds one compile may take: ``$SHOAL_COMPILE_TIMEOUT``, default 600."""
    value = os.environ.get("SHOAL_COMPILE_TIMEOUT", "").strip()
    if not value:
        return DEFAULT_COMPILE_TIMEOUT
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise ValueError(f"SHOAL_COMPILE_TIMEOUT must be a positive number of seconds, got "
                         f"{value!r}")
    return seconds


def include_dir() -> Path:
    """The core headers: installed inside the package, or in the source checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "include", here.parent / "include"):
        if (candidate / "shoal" / "config.hpp").is_file():
            return candidate
    raise RuntimeError(f"shoal's C++ headers were not found next to {here}")


def configured_cache_dir() -> Path:
    """Where the cache is meant to be: $SHOAL_CACHE_DIR, $XDG_CACHE_HOME/shoal, ~/.cache/shoal."""
    if os.environ.get("SHOAL_CACHE_DIR"):
        return Path(os.environ["SHOAL_CACHE_DIR"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "shoal"
    return Path.home() / ".cache" / "shoal"


# Configured cache directories found unwritable in this process -> the private one used instead.
_fallbacks: dict[Path, Path] = {}
_fallbacks_lock = threading.Lock()


def cache_dir() -> Path:
    """The cache directory, created if needed; where it cannot be written, a private temporary
    directory for this process (removed at exit), with one warning per configured directory."""
    path = configured_cache_dir()
    with _fallbacks_lock:
        if path in _fallbacks:
            return _fallbacks[path]
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            # Creating a file proves more than the mode bits: root ignores them, a read-only
            # mount does not.
            tempfile.TemporaryFile(dir=path).close()
            return path
        except OSError as exc:
            reason = exc.strerror or str(exc)
        fallback = Path(tempfile.mkdtemp(prefix="shoal-cache-"))
        atexit.register(shutil.rmtree, fallback, True)
        _fallbacks[path] = fallback
    warnings.warn(
        f"shoal cannot write its compile cache to {path} ({reason}); compiled models go to the "
        f"private temporary directory {fallback} instead, removed when this process exits, so "
        f"the next process compiles them again. Set SHOAL_CACHE_DIR to a writable directory to "
        f"keep them.", RuntimeWarning, stacklevel=2)
    return fallback


@functools.lru_cache(maxsize=1)
def find_compiler() -> tuple[str, str]:
    """(path, identity): $CXX, then c++, g++, clang++; identity is its --version banner."""
    requested = os.environ.get("CXX", "").strip()
    candidates = [requested] if requested else []
    candidates += ["c++", "g++", "clang++"]
    for name in candidates:
        exe = shutil.which(name)
        if exe is None:
            continue
        try:
            proc = _run([exe, "--version"], timeout=60)
        except (OSError, subprocess.SubprocessError):
            continue
        if proc.returncode != 0:
            continue
        if requested and name != requested:
            warnings.warn(f"$CXX={requested} is not a compiler that runs (not found, or "
                          f"'--version' fails); shoal uses {exe} instead", RuntimeWarning,
                          stacklevel=2)
        return exe, proc.stdout.strip()
    raise CompileError("shoal needs a C++17 compiler to build models and found none: install "
                       "g++ or clang++, or set $CXX to the compiler's path (tried "
                       f"{', '.join(candidates)} on PATH={os.environ.get('PATH', '')})")


@functools.lru_cache(maxsize=1)
def _headers_digest() -> str:
    h = hashlib.sha256()
    root = include_dir()
    for path in sorted(root.rglob("*.hpp")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def cache_key(source: str, identity: str | None = None) -> str:
    """Key of one cache entry: hashes the source, the toolchain's identity (default: the host
    compiler, its flags and what -march=native means here), shoal's version and its core
    headers."""
    from shoal import __version__

    if identity is None:
        identity = _library_identity()
    h = hashlib.sha256()
    for part in (source, identity, __version__, _headers_digest()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


_loaded: dict[str, Path] = {}


def _digest_path(artifact: Path) -> Path:
    return artifact.with_name(artifact.name + ".sha256")


def _valid(artifact: Path, key: str) -> bool:
    """The artifact embeds this entry's key (not a foreign file) and has the SHA-256 recorded
    beside it when it was built (not truncated or corrupted since)."""
    try:
        data = artifact.read_bytes()
        recorded = _digest_path(artifact).read_text().strip()
    except OSError:
        return False
    return (f"shoal-key:{key}".encode() in data
            and hashlib.sha256(data).hexdigest() == recorded)


def _write_file(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary name, so a failed write (a full disk)
    never leaves a partial file under ``path``."""
    fd, tmp = tempfile.mkstemp(prefix=f"{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _cache_write_error(code: int | None, directory: Path, detail: str) -> CacheError:
    if code in (errno.ENOSPC, errno.EDQUOT):
        what = "the disk quota is exceeded" if code == errno.EDQUOT else "no space left on device"
        message = (f"shoal could not write a compiled model into its cache directory {directory}: "
                   f"{what}. Free space there, or set SHOAL_CACHE_DIR to a directory on another "
                   f"disk.")
    else:
        message = (f"shoal could not write a compiled model into its cache directory {directory}; "
                   f"set SHOAL_CACHE_DIR to a writable directory.")
    return CacheError(code, f"{message}\n{detail}")


def cached_build(source: str, suffix: str, identity: str,
                 build: Callable[[Path, Path], None]) -> Path:
    """Path of the artifact ``<key><suffix>`` built from ``source``, building it if needed.

    ``build(source_file, output)`` compiles the source written to ``source_file`` into ``output``.
    The written source has the marker ``SHOAL_CACHE_KEY`` replaced by the key string, which the
    artifact must embed (as the initialiser of an exported char array) so that a truncated or
    foreign file is rebuilt.
    The output is written under a temporary name and renamed into place, after its SHA-256.
    A full disk raises :class:`CacheError` naming the directory, and leaves nothing under the
    entry's names.
    """
    key = cache_key(source, identity)
    if key in _loaded:
        return _loaded[key]
    directory = cache_dir()
    artifact = directory / f"{key}{suffix}"
    if not _valid(artifact, key):
        try:
            lock = open(directory / f"{key}.lock", "w")  # closed by the with below
        except OSError as exc:  # no inode left, say
            raise _cache_write_error(exc.errno, directory, str(exc)) from exc
        with lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not _valid(artifact, key):  # another process may have built it while we waited
                _build_entry(source, key, artifact, build)
    _loaded[key] = artifact
    return artifact


def _build_entry(source: str, key: str, artifact: Path,
                 build: Callable[[Path, Path], None]) -> None:
    directory = artifact.parent
    src = directory / f"{key}{'.cu' if artifact.suffix == '.cubin' else '.cc'}"
    tmp = None
    try:
        # Kept after the build: a compile error names it.
        _write_file(src, source.replace("SHOAL_CACHE_KEY", f'"shoal-key:{key}"').encode())
        fd, tmp = tempfile.mkstemp(prefix=f"{key}.", suffix=f"{artifact.suffix}.tmp",
                                   dir=directory)
        os.close(fd)
        build(src, Path(tmp))
        os.chmod(tmp, 0o700)
        # The digest first: a reader that sees the new library sees its digest too, and one
        # that sees the new digest beside the old library takes the lock and waits for us.
        _write_file(_digest_path(artifact),
                    hashlib.sha256(Path(tmp).read_bytes()).hexdigest().encode())
        os.replace(tmp, artifact)
    except CompileError as exc:
        output = getattr(exc, "output", "")
        if "No space left on device" in output:  # the compiler could not write its output
            raise _cache_write_error(errno.ENOSPC, directory, output) from exc
        raise
    except CacheError:
        raise
    except OSError as exc:
        raise _cache_write_error(exc.errno, directory, str(exc)) from exc
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def discard(artifact: Path) -> None:
    """Remove a cached artifact (one the loader refused), so that the next build compiles it
    afresh instead of finding it valid."""
    for key, path in list(_loaded.items()):
        if path == artifact:
            del _loaded[key]
    key = artifact.name.split(".")[0]
    with open(artifact.parent / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        artifact.unlink(missing_ok=True)
        _digest_path(artifact).unlink(missing_ok=True)


def compile_library(source: str, optimization: str | None = None,
                    evaluation_units: tuple[int, ...] = ()) -> Path:
    """Return the path of a shared library built from ``source`` (compiling it if needed).

    The source must contain the marker ``SHOAL_CACHE_KEY`` where the key string is to be embedded
    (as the initialiser of an exported char array). ``optimization`` is the -O flag (None: the
    configured one). ``evaluation_units``: the source is compiled once more for each unit k, with
    ``SHOAL_EVALUATIONS_PART=k`` defined, all at once, and the objects linked (a generated model
    whose dual-number evaluations are compiled apart: shoal/ad/evaluations_apart.hpp).
    """
    optimization = optimization or optimization_level()
    return cached_build(
        source, ".so", _library_identity(optimization),
        lambda src, output: _build_library(src, output, optimization,
                                           evaluation_units=evaluation_units))


def load_library(source: str, load: Callable[[Path], T],
                 optimization: str | None = None, evaluation_units: tuple[int, ...] = ()) -> T:
    """``load(path)`` of the library built from ``source`` (:func:`compile_library`); a cached
    library that the loader refuses (``OSError`` or ``RuntimeError``: damaged in a way its key
    and digest did not show) is rebuilt once and loaded again."""
    path = compile_library(source, optimization, evaluation_units)
    try:
        return load(path)
    except (OSError, RuntimeError) as exc:
        first = exc
    discard(path)
    path = compile_library(source, optimization, evaluation_units)
    try:
        return load(path)
    except (OSError, RuntimeError) as exc:
        raise CompileError(f"the compiled model {path} cannot be loaded, even freshly rebuilt: "
                           f"{exc}") from first


def _library_identity(optimization: str | None = None) -> str:
    _, banner = find_compiler()
    return "\0".join([banner, " ".join(compiler_flags(optimization)), native_arch()[1]])


# A generated library's first line when it includes the core through the precompiled prelude
# (shoal/ode/jit_prelude.hpp; see precompiled_prelude).
PRELUDE_INCLUDE = '#include "shoal/ode/jit_prelude.hpp"'


@functools.lru_cache(maxsize=1)
def uses_precompiled_prelude() -> bool:
    """Whether host libraries include the core through a precompiled header: with g++ (clang's
    precompiled headers work differently), unless ``SHOAL_PRECOMPILED_HEADER=0``."""
    if os.environ.get("SHOAL_PRECOMPILED_HEADER", "1").strip() == "0":
        return False
    try:
        banner = find_compiler()[1].lower()
    except CompileError:
        return False
    return "clang" not in banner and ("free software foundation" in banner or "gcc" in banner)


_prelude_warned = False
# (optimization, cache directory) -> the include directory precompiled_prelude returned.
_preludes: dict[tuple[str, Path], Path] = {}


def precompiled_prelude(optimization: str | None = None) -> Path | None:
    """A directory to put first on the include path, holding ``shoal/ode/jit_prelude.hpp.gch``
    built once (through the cache, like a library) for these flags; None where it cannot be
    built (then the headers are parsed as usual: same code, slower compile).

    g++ uses a ``.gch`` found next to where it looks for the header only if it was built with
    compatible flags and the include is the translation unit's first; otherwise it reads the
    header itself, so a stale or foreign file costs time, never correctness.
    """
    global _prelude_warned
    optimization = optimization or optimization_level()
    memo = (optimization, configured_cache_dir())
    if memo in _preludes and _preludes[memo].is_dir():
        return _preludes[memo]
    source = f"{PRELUDE_INCLUDE}\n#define SHOAL_PRELUDE_KEY SHOAL_CACHE_KEY\n"
    try:
        gch = cached_build(source, ".gch", _library_identity(optimization) + "\0prelude",
                           lambda src, output: _build_prelude(src, output, optimization))
        root = gch.with_suffix(".prelude")
        link = root / "shoal" / "ode" / "jit_prelude.hpp.gch"
        if not link.exists():
            link.parent.mkdir(parents=True, exist_ok=True)
            tmp = link.with_name(f"{link.name}.{os.getpid()}.tmp")
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(os.path.relpath(gch, link.parent))  # the cache may move
            os.replace(tmp, link)
        _preludes[memo] = root
        return root
    except (CompileError, OSError) as exc:
        if not _prelude_warned:
            _prelude_warned = True
            warnings.warn(f"shoal could not precompile its core headers ({exc}); models compile "
                          f"without them, a little slower", RuntimeWarning, stacklevel=2)
        return None


def _build_prelude(src: Path, output: Path, optimization: str) -> None:
    exe, _ = find_compiler()
    flags = [f for f in compiler_flags(optimization) if f != "-shared"]
    cmd = [exe, *flags, "-x", "c++-header", f"-I{include_dir()}", str(src), "-o", str(output)]
    try:
        proc = _run(cmd, compile_timeout())
    except subprocess.TimeoutExpired:  # the caller compiles without it
        raise CompileError(f"precompiling {src} did not finish within {compile_timeout():g} s "
                           "and was stopped") from None
    if proc.returncode != 0:
        raise CompileError(f"precompiling {src} failed: {_tail(proc.stdout, proc.stderr)}")


def _build_library(src: Path, output: Path, optimization: str | None = None,
                   evaluation_units: tuple[int, ...] = ()) -> None:
    exe, _ = find_compiler()
    prelude = None
    if uses_precompiled_prelude():
        with open(src) as f:
            if f.readline().strip() == PRELUDE_INCLUDE:
                prelude = precompiled_prelude(optimization)
    flags = [*compiler_flags(optimization), *([f"-I{prelude}"] if prelude else []),
             f"-I{include_dir()}"]
    if not evaluation_units:
        _compile(src, [exe, *flags, str(src), "-o", str(output)])
        return
    # One object per unit, compiled at once, then linked: the compile takes the slowest unit's
    # time, not their sum. -z defs: a unit missing from the list fails here, not at load.
    objects = {unit: output.with_name(f"{output.name}.{unit}.o") for unit in (0, *evaluation_units)}
    commands = [[exe, *flags, *([f"-DSHOAL_EVALUATIONS_PART={unit}"] if unit else []), "-c",
                 str(src), "-o", str(obj)] for unit, obj in objects.items()]
    started: list[subprocess.Popen] = []
    try:
        with ThreadPoolExecutor(max_workers=len(commands)) as pool:
            running = [pool.submit(_compile, src, cmd, "compiling", started) for cmd in commands]
            try:
                finished, _ = wait(running, return_when=FIRST_EXCEPTION)
                for done in [*finished, *running]:  # a failure first, before waiting on the rest
                    done.result()
            except BaseException:  # a unit failed, or Ctrl-C: stop the others, not wait for them
                for proc in started:
                    _kill_group(proc)
                raise
        _compile(src, [exe, *compiler_flags(optimization), "-Wl,-z,defs",
                       *map(str, objects.values()), "-o", str(output)], "linking")
    finally:
        for obj in objects.values():
            obj.unlink(missing_ok=True)


def _compile(src: Path, cmd: list[str], doing: str = "compiling",
             started: list[subprocess.Popen] | None = None) -> None:
    """Run one compiler command (``doing``: compiling or linking) for the generated source
    ``src``; a failure, a timeout or a compiler that cannot run is a :class:`CompileError`
    naming the source and the command."""
    timeout = compile_timeout()
    fix = f"install g++ or clang++, or set $CXX to a working C++17 compiler (this one: {cmd[0]})"
    try:
        proc = _run(cmd, timeout, started)
    except subprocess.TimeoutExpired as exc:
        raise CompileError(
            f"the C++ compiler did not finish {doing} the generated model within {timeout:g} s "
            f"and was stopped (source: {src})\ncommand: {' '.join(cmd)}\n"
            f"{_tail(exc.stdout, exc.stderr)}\nIf the model is just large, raise the limit with "
            f"SHOAL_COMPILE_TIMEOUT=<seconds>; if the compiler hangs, {fix}.") from None
    except OSError as exc:
        raise CompileError(f"shoal could not run the C++ compiler ({exc}; source: {src}): "
                           f"{fix}.") from exc
    if proc.returncode == 0:
        return
    output = _tail(proc.stdout, proc.stderr)
    if proc.returncode < 0:
        try:
            how = f"was killed by {signal.Signals(-proc.returncode).name}"
        except ValueError:
            how = f"was killed by signal {-proc.returncode}"
        error = CompileError(
            f"the C++ compiler {how} {doing} the generated model (source: {src})\n"
            f"command: {' '.join(cmd)}\n{output}\n"
            f"It may have run out of memory, or be broken: {fix}.")
    else:
        error = CompileError(
            f"{doing} the generated model failed with exit status {proc.returncode} "
            f"(source: {src})\ncommand: {' '.join(cmd)}\n{output}\n"
            f"If the compiler itself is broken, {fix}.")
    error.output = output
    raise error


def _tail(stdout: str | bytes | None, stderr: str | bytes | None) -> str:
    """The end of a compiler's output, for an error message."""
    parts = []
    for text in (stdout, stderr):
        if isinstance(text, bytes):
            text = text.decode(errors="replace")
        if text and text.strip():
            parts.append(text.strip())
    output = "\n".join(parts)
    if not output:
        return "(the compiler printed nothing)"
    if len(output) > OUTPUT_TAIL_CHARS:
        output = "[...]" + output[-OUTPUT_TAIL_CHARS:]
    return "compiler output:\n" + output
