"""Constant tables in generated C++: one host copy and, under CUDA, one ``__device__`` copy.

One source serves g++, nvcc and NVRTC. The host pass of nvcc must not read a ``__device__``
variable and device code cannot read a host one, so every table exists twice: in
``namespace host`` (not compiled for the device) and in ``namespace device`` (compiled only by
nvcc or NVRTC). Each table's initialiser is spelled once, as a macro, and the code that reads
the tables aliases ``tab`` to the right namespace by ``__CUDA_ARCH__``.

Used by the model generator (``_codegen``: contraction tables) and the sparse LU emitter
(``_sparse``: index tables). Plain strings in, lines out; nothing here imports JAX.
"""

from __future__ import annotations

from collections.abc import Sequence


def host_and_device_tables(tables: Sequence[tuple[str, str, str]], macro_prefix: str) -> list[str]:
    """Lines defining each ``(C type, name, braced initialiser)`` as ``host::name`` and, under
    CUDA, ``device::name``; the initialiser macros are ``macro_prefix + name`` and are undefined
    again at the end. No tables, no lines."""
    if not tables:
        return []
    out = [f"#define {macro_prefix}{name} {init}" for _, name, init in tables]
    out += ["#if !defined(__CUDA_ARCH__)", "namespace host {"]
    out += [f"static const {ctype} {name}[] = {macro_prefix}{name};" for ctype, name, _ in tables]
    out += [
        "}  // namespace host",
        "#endif",
        "#if defined(__CUDACC__) || defined(__CUDACC_RTC__)",
        "namespace device {",
    ]
    out += [
        f"__device__ static const {ctype} {name}[] = {macro_prefix}{name};"
        for ctype, name, _ in tables
    ]
    out += ["}  // namespace device", "#endif"]
    out += [f"#undef {macro_prefix}{name}" for _, name, _ in tables]
    return out


def table_namespace_alias(scope: str = "", indent: str = "") -> list[str]:
    """Lines aliasing ``tab`` to ``{scope}device`` in device code and to ``{scope}host`` in host
    code; ``indent`` goes before the two aliases (the preprocessor lines stay flush left)."""
    return [
        "#if defined(__CUDA_ARCH__)",
        f"{indent}namespace tab = {scope}device;",
        "#else",
        f"{indent}namespace tab = {scope}host;",
        "#endif",
    ]
