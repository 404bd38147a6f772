// The slice of the CUDA driver API that shoal uses, opened at run time.
//
// Nothing links to libcuda and no CUDA header is needed to build: the types below are the driver's
// own ABI (opaque handles are pointers, CUdeviceptr is 64-bit, CUresult an int), and the entry
// points are resolved from libcuda.so.1 through cuGetProcAddress at the ABI of CUDA 12.0, so the
// signatures never change under us when a newer driver adds versions. A machine without a driver
// or a GPU gets a message, not a crash; tests/cuda/test_driver_abi.py checks these
// signatures against the toolkit's cudaTypedefs.h wherever a toolkit is installed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace shoal {
namespace cuda {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;

constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
constexpr int CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0;
// The driver ABI requested from cuGetProcAddress (CUDA 12.0).
constexpr int kRequestedDriverAbi = 12000;

// cuGetProcAddress as CUDA 12.0 exports it (cuGetProcAddress_v2), and the 11.3 original.
using CuGetProcAddressV2 = CUresult (*)(const char* symbol, void** pfn, int driver_version,
                                        uint64_t flags, int* symbol_status);
using CuGetProcAddressV1 = CUresult (*)(const char* symbol, void** pfn, int driver_version,
                                        uint64_t flags);

struct DriverApi {
  CUresult (*cuInit)(unsigned int flags);
  CUresult (*cuDriverGetVersion)(int* version);
  CUresult (*cuDeviceGetCount)(int* count);
  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal);
  CUresult (*cuGetErrorName)(CUresult error, const char** name);
  CUresult (*cuGetErrorString)(CUresult error, const char** text);
  CUresult (*cuStreamGetCtx)(CUstream stream, CUcontext* context);
  CUresult (*cuCtxPushCurrent)(CUcontext context);
  CUresult (*cuCtxPopCurrent)(CUcontext* context);
  CUresult (*cuCtxGetDevice)(CUdevice* device);
  CUresult (*cuDeviceGetAttribute)(int* value, int attribute, CUdevice device);
  CUresult (*cuModuleLoadData)(CUmodule* module, const void* image);
  CUresult (*cuModuleGetFunction)(CUfunction* function, CUmodule module, const char* name);
  CUresult (*cuModuleGetGlobal)(CUdeviceptr* pointer, size_t* bytes, CUmodule module,
                                const char* name);
  CUresult (*cuMemcpyDtoH)(void* host, CUdeviceptr device, size_t bytes);
  CUresult (*cuMemcpyAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream);
  CUresult (*cuFuncGetAttribute)(int* value, int attribute, CUfunction function);
  CUresult (*cuLaunchKernel)(CUfunction function, unsigned int grid_x, unsigned int grid_y,
                             unsigned int grid_z, unsigned int block_x, unsigned int block_y,
                             unsigned int block_z, unsigned int shared_bytes, CUstream stream,
                             void** params, void** extra);
};

// The driver, opened and initialised once per process; nullptr if there is none usable, with
// `error` saying why ("libcuda.so.1 could not be opened", "no CUDA device", ...).
const DriverApi* driver(std::string* error);

// "sm_XY" of every device the driver sees (empty if there is no usable driver).
std::string device_architectures(std::string* error);

// "CUDA_ERROR_NAME (description)" for a driver result.
std::string describe(const DriverApi& api, CUresult result);

// Pushes the stream's context for the lifetime of the object (XLA's thread normally has it
// current already; this makes module loads and launches independent of that).
class ScopedStreamContext {
 public:
  ScopedStreamContext(const DriverApi& api, CUstream stream);
  ~ScopedStreamContext();
  ScopedStreamContext(const ScopedStreamContext&) = delete;
  ScopedStreamContext& operator=(const ScopedStreamContext&) = delete;
  CUresult status() const { return status_; }
  CUcontext context() const { return context_; }

 private:
  const DriverApi& api_;
  CUcontext context_ = nullptr;
  CUresult status_ = CUDA_SUCCESS;
  bool pushed_ = false;
};

}  // namespace cuda
}  // namespace shoal
