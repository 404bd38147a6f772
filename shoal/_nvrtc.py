"""Device JIT: compile generated CUDA C++ to a cubin with NVRTC, once, through the disk cache.

NVRTC is opened at run time (ctypes), never linked: from ``$SHOAL_NVRTC`` if set, else from the
NVIDIA wheels that ``jax[cuda]`` installs (``site-packages/nvidia/**/libnvrtc.so*``), else from the
CUDA toolkit (``$CUDA_HOME``, ``$CUDA_PATH``, ``/usr/local/cuda``), else through the dynamic
loader's own search. A machine without NVRTC imports shoal and runs every CPU path; only compiling
for a GPU raises :class:`NvrtcUnavailable`.

The cubin is built for one exact architecture (``sm_90`` for compute capability 9.0) with the same
arithmetic rules as the host build: no fast math, and ``-fmad=false`` so that ``a*b + c`` rounds
twice as on the CPU (results then agree to rounding, and step counts match for float64 models
without transcendental functions).
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import site
import sys
from pathlib import Path

from shoal import _jit

NVRTC_OPTIONS = ("-std=c++17", "-fmad=false", "-default-device", "-DSHOAL_NVRTC=1")
# $SHOAL_NVRTC_FAST_COMPILE: NVRTC's -Ofast-compile level (CUDA 12.8 on), which trades device-code
# optimisation for compile time. Unset: NVRTC's full optimisation. Measured with NVRTC 13.0 for
# sm_90 (README, "The GPU path"): a Rodas5P sensitivity kernel of a 16-variable sparse model, 57 s
# and 69 KB of register spills by default, 4.1 s and 7.6 KB at "max"; small kernels that spill
# nothing by default spill a few KB at "max". Run-time cost not yet measured.
FAST_COMPILE_ENV = "SHOAL_NVRTC_FAST_COMPILE"
FAST_COMPILE_LEVELS = ("0", "min", "mid", "max")
FAST_COMPILE_SINCE = (12, 8)


class NvrtcUnavailable(RuntimeError):
    """NVRTC (the CUDA runtime compiler) could not be found or opened."""


class DeviceCompileError(_jit.CompileError):
    """NVRTC rejected generated source (the message names the source file and holds the log)."""


def _candidates() -> list[str]:
    if os.environ.get("SHOAL_NVRTC"):
        return [os.environ["SHOAL_NVRTC"]]
    found: list[str] = []
    roots = list(site.getsitepackages()) + [site.getusersitepackages()] + sys.path
    for root in dict.fromkeys(roots):
        found += sorted(glob.glob(os.path.join(root, "nvidia", "**", "libnvrtc.so*"),
                                  recursive=True), reverse=True)
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            found += sorted(glob.glob(os.path.join(os.environ[env], "lib*", "libnvrtc.so*")),
                            reverse=True)
    found += sorted(glob.glob("/usr/local/cuda/lib64/libnvrtc.so*"), reverse=True)
    found += ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"]
    # The builtins companion library is not the compiler itself.
    return [c for c in dict.fromkeys(found) if "builtins" not in os.path.basename(c)
            and ".alt." not in os.path.basename(c)]


@functools.lru_cache(maxsize=1)
def _library() -> ctypes.CDLL:
    tried = []
    for candidate in _candidates():
        _preload_builtins(candidate)
        try:
            lib = ctypes.CDLL(candidate)
        except OSError as exc:
            tried.append(f"{candidate} ({exc})")
            continue
        _declare(lib)
        return lib
    raise NvrtcUnavailable(
        "shoal needs NVRTC (the CUDA runtime compiler) to compile models for a GPU, and found "
        "none. Install JAX's CUDA wheels (pip install 'jax[cuda13]') or the CUDA toolkit, or set "
        "SHOAL_NVRTC to the path of libnvrtc.so. Tried: " + "; ".join(tried))


def _preload_builtins(candidate: str) -> None:
    """Load the libnvrtc-builtins beside ``candidate`` first, so that NVRTC finds it by soname
    even where the library directory is not on the loader's search path (pip wheels)."""
    directory = os.path.dirname(candidate)
    if not directory:
        return
    for builtins in sorted(glob.glob(os.path.join(directory, "libnvrtc-builtins.so.*")),
                           reverse=True):
        if ".alt." in os.path.basename(builtins):
            continue
        try:
            ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
        except OSError:
            continue
        return


def _declare(lib: ctypes.CDLL) -> None:
    p, sz, i, cp = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_char_p
    signatures = {
        "nvrtcVersion": [ctypes.POINTER(i), ctypes.POINTER(i)],
        "nvrtcCreateProgram": [ctypes.POINTER(p), cp, cp, i, ctypes.POINTER(cp),
                               ctypes.POINTER(cp)],
        "nvrtcCompileProgram": [p, i, ctypes.POINTER(cp)],
        "nvrtcDestroyProgram": [ctypes.POINTER(p)],
        "nvrtcGetProgramLogSize": [p, ctypes.POINTER(sz)],
        "nvrtcGetProgramLog": [p, ctypes.c_char_p],
        "nvrtcGetCUBINSize": [p, ctypes.POINTER(sz)],
        "nvrtcGetCUBIN": [p, ctypes.c_char_p],
    }
    for name, argtypes in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes = argtypes
        fn.restype = ctypes.c_int
    lib.nvrtcGetErrorString.argtypes = [ctypes.c_int]
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p


def available() -> bool:
    """True when NVRTC can be opened."""
    try:
        _library()
    except NvrtcUnavailable:
        return False
    return True


def library_path() -> str:
    """The NVRTC shared library in use (raises NvrtcUnavailable if there is none)."""
    lib = _library()
    return lib._name


@functools.lru_cache(maxsize=1)
def version() -> tuple[int, int]:
    lib = _library()
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(lib, lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
    return major.value, minor.value


def _check(lib: ctypes.CDLL, code: int, what: str) -> None:
    if code != 0:
        raise DeviceCompileError(f"{what} failed: {lib.nvrtcGetErrorString(code).decode()}")


def arch_name(compute_capability: str | tuple[int, int]) -> str:
    """'9.0' or (9, 0) -> 'sm_90'."""
    if isinstance(compute_capability, str):
        major, _, minor = compute_capability.partition(".")
        compute_capability = (int(major), int(minor or 0))
    major, minor = compute_capability
    return f"sm_{major}{minor}"


def fast_compile_level() -> str | None:
    """``$SHOAL_NVRTC_FAST_COMPILE`` checked: one of FAST_COMPILE_LEVELS, or None (unset)."""
    level = os.environ.get(FAST_COMPILE_ENV, "").strip()
    if not level:
        return None
    if level not in FAST_COMPILE_LEVELS:
        raise ValueError(f"{FAST_COMPILE_ENV}={level!r}: expected one of "
                         f"{', '.join(FAST_COMPILE_LEVELS)}, or unset for NVRTC's full "
                         "optimisation")
    return level


def compile_options(arch: str, extra: tuple[str, ...] = ()) -> list[str]:
    """NVRTC's options for ``arch``; part of every cached cubin's key (compile_cubin)."""
    fast = []
    level = fast_compile_level()
    if level is not None:
        if version() < FAST_COMPILE_SINCE:
            raise DeviceCompileError(
                f"{FAST_COMPILE_ENV}={level} needs NVRTC {'.'.join(map(str, FAST_COMPILE_SINCE))} "
                f"or newer (this one is {'.'.join(map(str, version()))}): unset it")
        fast = [f"-Ofc={level}"]
    return [f"--gpu-architecture={arch}", *NVRTC_OPTIONS, *fast, f"-I{_jit.include_dir()}",
            *extra]


def compile_source(source: str, arch: str, name: str = "shoal.cu",
                   extra: tuple[str, ...] = ()) -> tuple[bytes, str]:
    """Compile ``source`` for ``arch`` (e.g. 'sm_90'): returns (cubin, NVRTC log)."""
    lib = _library()
    prog = ctypes.c_void_p()
    _check(lib, lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0,
                                       None, None), "nvrtcCreateProgram")
    try:
        options = [o.encode() for o in compile_options(arch, extra)]
        argv = (ctypes.c_char_p * len(options))(*options)
        code = lib.nvrtcCompileProgram(prog, len(options), argv)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log_buffer = ctypes.create_string_buffer(max(size.value, 1))
        lib.nvrtcGetProgramLog(prog, log_buffer)
        log = log_buffer.value.decode(errors="replace")
        if code != 0:
            raise DeviceCompileError(
                f"NVRTC could not compile {name} for {arch} "
                f"({lib.nvrtcGetErrorString(code).decode()}):\n{log.strip()}")
        _check(lib, lib.nvrtcGetCUBINSize(prog, ctypes.byref(size)), "nvrtcGetCUBINSize")
        cubin = ctypes.create_string_buffer(size.value)
        _check(lib, lib.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
        return cubin.raw, log
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def compile_cubin(source: str, arch: str) -> Path:
    """Path of the cached cubin built from ``source`` for ``arch``, compiling it if needed.

    The source must contain the marker ``SHOAL_CACHE_KEY`` as the initialiser of an
    ``extern "C" __device__`` char array, as for host libraries.
    """
    major, minor = version()
    identity = f"nvrtc {major}.{minor}\0{' '.join(compile_options(arch))}"

    def build(src: Path, output: Path) -> None:
        cubin, _ = compile_source(src.read_text(), arch, name=str(src))
        output.write_bytes(cubin)

    return _jit.cached_build(source, ".cubin", identity, build)
