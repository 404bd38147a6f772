"""Host JIT: compile generated C++ into a shared library, once, through a disk cache.

Cache directory: ``$SHOAL_CACHE_DIR``, else ``$XDG_CACHE_HOME/shoal``, else ``~/.cache/shoal``
(created with mode 0700). An entry's key hashes the source, the compiler's identity and version,
the flags, shoal's version and its core headers, so a change to any of them compiles afresh.
Concurrent processes take a file lock so each entry is compiled once; the library is written
under a temporary name and renamed into place atomically. Every library embeds its own key and is
checked for it before use, so a truncated or foreign file is rebuilt rather than trusted.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

# Never -ffast-math: step rejection depends on NaN and Inf propagating. -ffp-contract=off keeps
# a*b+c as two roundings on every compiler, so results do not depend on which one was found.
CXX_FLAGS = ("-std=c++17", "-fPIC", "-shared", "-fno-math-errno", "-ffp-contract=off",
             "-fvisibility=hidden")
# The optimisation level of a solver library. A library that runs once (the sparsity tracer)
# asks for "-O0": a 300-variable model's tracer compiles in 0.8 s instead of 50 s at -O3.
DEFAULT_OPTIMIZATION = "-O3"


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
        proc = subprocess.run([exe, "-march=native", "-###", "-x", "c++", "-c", os.devnull,
                               "-o", os.devnull], capture_output=True, text=True, timeout=60)
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


def compiler_flags(optimization: str = DEFAULT_OPTIMIZATION) -> tuple[str, ...]:
    """The flags a model library is built with at this optimisation level."""
    return (optimization, *CXX_FLAGS, *native_arch()[0])


class CompileError(RuntimeError):
    """The C++ compiler rejected generated source (the message names the source file)."""


def include_dir() -> Path:
    """The core headers: installed inside the package, or in the source checkout."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "include", here.parent / "include"):
        if (candidate / "shoal" / "config.hpp").is_file():
            return candidate
    raise RuntimeError(f"shoal's C++ headers were not found next to {here}")


def cache_dir() -> Path:
    if os.environ.get("SHOAL_CACHE_DIR"):
        path = Path(os.environ["SHOAL_CACHE_DIR"])
    elif os.environ.get("XDG_CACHE_HOME"):
        path = Path(os.environ["XDG_CACHE_HOME"]) / "shoal"
    else:
        path = Path.home() / ".cache" / "shoal"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


@functools.lru_cache(maxsize=1)
def find_compiler() -> tuple[str, str]:
    """(path, identity): $CXX, then c++, g++, clang++; identity is its --version banner."""
    candidates = [os.environ["CXX"]] if os.environ.get("CXX") else []
    candidates += ["c++", "g++", "clang++"]
    for name in candidates:
        exe = shutil.which(name)
        if exe is None:
            continue
        try:
            banner = subprocess.run([exe, "--version"], capture_output=True, text=True,
                                    timeout=60, check=True).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            continue
        return exe, banner
    raise CompileError("shoal needs a C++17 compiler to build models: set $CXX or install g++ "
                       f"or clang++ (tried {', '.join(candidates)})")


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


def _valid(artifact: Path, key: str) -> bool:
    try:
        return artifact.is_file() and f"shoal-key:{key}".encode() in artifact.read_bytes()
    except OSError:
        return False


def cached_build(source: str, suffix: str, identity: str,
                 build: Callable[[Path, Path], None]) -> Path:
    """Path of the artifact ``<key><suffix>`` built from ``source``, building it if needed.

    ``build(source_file, output)`` compiles the source written to ``source_file`` into ``output``.
    The written source has the marker ``SHOAL_CACHE_KEY`` replaced by the key string, which the
    artifact must embed (as the initialiser of an exported char array) so that a truncated or
    foreign file is rebuilt.
    The output is written under a temporary name and renamed into place.
    """
    key = cache_key(source, identity)
    if key in _loaded:
        return _loaded[key]
    directory = cache_dir()
    artifact = directory / f"{key}{suffix}"
    if not _valid(artifact, key):
        with open(directory / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not _valid(artifact, key):  # another process may have built it while we waited
                src = directory / f"{key}{'.cu' if suffix == '.cubin' else '.cc'}"
                src.write_text(source.replace("SHOAL_CACHE_KEY", f'"shoal-key:{key}"'))
                fd, tmp = tempfile.mkstemp(prefix=f"{key}.", suffix=f"{suffix}.tmp",
                                           dir=directory)
                os.close(fd)
                try:
                    build(src, Path(tmp))
                    os.chmod(tmp, 0o700)
                    os.replace(tmp, artifact)
                finally:
                    if os.path.exists(tmp):
                        os.unlink(tmp)
    _loaded[key] = artifact
    return artifact


def compile_library(source: str, optimization: str = DEFAULT_OPTIMIZATION) -> Path:
    """Return the path of a shared library built from ``source`` (compiling it if needed).

    The source must contain the marker ``SHOAL_CACHE_KEY`` where the key string is to be embedded
    (as the initialiser of an exported char array). ``optimization`` is the -O flag.
    """
    return cached_build(source, ".so", _library_identity(optimization),
                        lambda src, output: _build_library(src, output, optimization))


def _library_identity(optimization: str = DEFAULT_OPTIMIZATION) -> str:
    _, banner = find_compiler()
    return "\0".join([banner, " ".join(compiler_flags(optimization)), native_arch()[1]])


def _build_library(src: Path, output: Path, optimization: str = DEFAULT_OPTIMIZATION) -> None:
    exe, _ = find_compiler()
    cmd = [exe, *compiler_flags(optimization), f"-I{include_dir()}", str(src), "-o", str(output)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise CompileError(
            f"compiling the generated model failed (source: {src})\n"
            f"command: {' '.join(cmd)}\n{proc.stderr.strip()}")
