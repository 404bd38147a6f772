"""shoal's own declarations of the CUDA driver API match the toolkit's, wherever one is installed.

shoal builds without CUDA headers (src/cuda/driver_api.hpp spells out the types and signatures it
uses, and resolves them at run time through cuGetProcAddress at the CUDA 12.0 ABI). This compiles
a translation unit holding both and static_asserts that every function pointer has the type of
the toolkit's versioned PFN typedef, and that the constants agree. Skipped only without a toolkit.
"""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CUDA_INCLUDE = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include"
CXX = shutil.which(os.environ.get("CXX", "c++")) or shutil.which("g++")

pytestmark = pytest.mark.skipif(
    not (CUDA_INCLUDE / "cudaTypedefs.h").is_file() or CXX is None,
    reason="the CUDA toolkit headers (cudaTypedefs.h) or a C++ compiler are not installed")

# (field in shoal::cuda::DriverApi, the toolkit's PFN typedef of the ABI resolved at 12.0)
FUNCTIONS = [
    ("cuInit", "PFN_cuInit_v2000"),
    ("cuDriverGetVersion", "PFN_cuDriverGetVersion_v2020"),
    ("cuDeviceGetCount", "PFN_cuDeviceGetCount_v2000"),
    ("cuDeviceGet", "PFN_cuDeviceGet_v2000"),
    ("cuGetErrorName", "PFN_cuGetErrorName_v6000"),
    ("cuGetErrorString", "PFN_cuGetErrorString_v6000"),
    ("cuStreamGetCtx", "PFN_cuStreamGetCtx_v9020"),
    ("cuCtxPushCurrent", "PFN_cuCtxPushCurrent_v4000"),
    ("cuCtxPopCurrent", "PFN_cuCtxPopCurrent_v4000"),
    ("cuCtxGetDevice", "PFN_cuCtxGetDevice_v2000"),
    ("cuDeviceGetAttribute", "PFN_cuDeviceGetAttribute_v2000"),
    ("cuModuleLoadData", "PFN_cuModuleLoadData_v2000"),
    ("cuModuleGetFunction", "PFN_cuModuleGetFunction_v2000"),
    ("cuModuleGetGlobal", "PFN_cuModuleGetGlobal_v3020"),
    ("cuMemcpyDtoH", "PFN_cuMemcpyDtoH_v3020"),
    ("cuMemcpyAsync", "PFN_cuMemcpyAsync_v4000"),
    ("cuFuncGetAttribute", "PFN_cuFuncGetAttribute_v2020"),
    ("cuLaunchKernel", "PFN_cuLaunchKernel_v4000"),
]


def _same_shape(ours: str, theirs: str) -> str:
    # CUresult is an enum in cuda.h and an int for shoal; handles are the same pointer types.
    return (f"static_assert(sizeof(decltype(shoal::cuda::DriverApi::{ours})) == "
            f"sizeof({theirs}), \"{ours}\");\n"
            f"static_assert(std::is_same<Adapt<decltype(shoal::cuda::DriverApi::{ours})>::type, "
            f"Adapt<{theirs}>::type>::value, \"{ours} does not match {theirs}\");\n")


def test_driver_declarations_match_the_toolkit(tmp_path):
    lines = [
        "#include <cuda.h>",
        "#include <cudaTypedefs.h>",
        "#include <type_traits>",
        '#include "src/cuda/driver_api.hpp"',
        # Map both spellings to one: enum CUresult -> int, CUdeviceptr_v2 -> unsigned long long.
        "template <class T> struct Norm { using type = T; };",
        "template <> struct Norm<CUresult> { using type = int; };",
        "template <> struct Norm<CUdevice_attribute> { using type = int; };",
        "template <> struct Norm<CUfunction_attribute> { using type = int; };",
        "template <class F> struct Adapt;",
        "template <class R, class... A> struct Adapt<R (*)(A...)> {",
        "  using type = typename Norm<R>::type (*)(typename Norm<A>::type...);",
        "};",
        "static_assert(std::is_same<CUdeviceptr, shoal::cuda::CUdeviceptr>::value, \"ptr\");",
        "static_assert(std::is_same<CUcontext, shoal::cuda::CUcontext>::value, \"ctx\");",
        "static_assert(std::is_same<CUmodule, shoal::cuda::CUmodule>::value, \"module\");",
        "static_assert(std::is_same<CUfunction, shoal::cuda::CUfunction>::value, \"function\");",
        "static_assert(std::is_same<CUstream, shoal::cuda::CUstream>::value, \"stream\");",
        "static_assert(shoal::cuda::CUDA_ERROR_NO_DEVICE == CUDA_ERROR_NO_DEVICE, \"enum\");",
        "static_assert(shoal::cuda::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR == "
        "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, \"enum\");",
        "static_assert(shoal::cuda::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR == "
        "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, \"enum\");",
        "static_assert(shoal::cuda::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK == "
        "CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, \"enum\");",
        "static_assert(shoal::cuda::kRequestedDriverAbi == 12000, \"abi\");",
    ]
    lines += [_same_shape(ours, theirs) for ours, theirs in FUNCTIONS]
    lines += [
        "template <> struct Norm<CUdriverProcAddressQueryResult*> { using type = int*; };",
        "static_assert(std::is_same<Adapt<shoal::cuda::CuGetProcAddressV2>::type, "
        "Adapt<PFN_cuGetProcAddress_v12000>::type>::value, \"cuGetProcAddress_v2\");",
        "static_assert(std::is_same<Adapt<shoal::cuda::CuGetProcAddressV1>::type, "
        "Adapt<PFN_cuGetProcAddress_v11030>::type>::value, \"cuGetProcAddress\");",
    ]
    src = tmp_path / "abi.cc"
    src.write_text("\n".join(lines) + "\n")
    proc = subprocess.run([CXX, "-std=c++17", "-fsyntax-only", f"-I{CUDA_INCLUDE}", f"-I{ROOT}",
                           str(src)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
