#include "driver_api.hpp"

#include <dlfcn.h>

#include <cstdlib>

namespace shoal {
namespace cuda {
namespace {

struct Loader {
  DriverApi api{};
  std::string error;
  bool ok = false;
};

// Resolves `name` at the requested ABI: cuGetProcAddress where the driver has it (11.3+), else
// the exported symbol (`fallback` names the ABI-versioned export, e.g. cuCtxPushCurrent_v2).
template <class Fn>
bool resolve(void* lib, CuGetProcAddressV2 get_v2, CuGetProcAddressV1 get_v1, const char* name,
             const char* fallback, Fn* out) {
  void* pfn = nullptr;
  if (get_v2 != nullptr) {
    int found = 0;
    if (get_v2(name, &pfn, kRequestedDriverAbi, 0, &found) != CUDA_SUCCESS) pfn = nullptr;
  } else if (get_v1 != nullptr) {
    if (get_v1(name, &pfn, kRequestedDriverAbi, 0) != CUDA_SUCCESS) pfn = nullptr;
  }
  if (pfn == nullptr) pfn = dlsym(lib, fallback);
  *out = reinterpret_cast<Fn>(pfn);
  return pfn != nullptr;
}

Loader load() {
  Loader r;
  const char* override_path = std::getenv("SHOAL_LIBCUDA");
  const char* path = override_path != nullptr && *override_path ? override_path : "libcuda.so.1";
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    r.error = std::string("no CUDA driver: ") + path + " could not be opened (" +
              (why ? why : "unknown reason") + "); shoal's GPU path needs an NVIDIA driver and GPU";
    return r;
  }
  auto get_v2 = reinterpret_cast<CuGetProcAddressV2>(dlsym(lib, "cuGetProcAddress_v2"));
  auto get_v1 = reinterpret_cast<CuGetProcAddressV1>(dlsym(lib, "cuGetProcAddress"));
  DriverApi& a = r.api;
  struct Entry {
    bool ok;
    const char* name;
  };
  // Each entry point by its name at the 12.0 ABI (cuGetProcAddress) and its versioned symbol
  // (the dlsym fallback).
#define SHOAL_CUDA_ENTRY(name, symbol) \
  { resolve(lib, get_v2, get_v1, #name, symbol, &a.name), #name }
  const Entry entries[] = {
      SHOAL_CUDA_ENTRY(cuInit, "cuInit"),
      SHOAL_CUDA_ENTRY(cuDriverGetVersion, "cuDriverGetVersion"),
      SHOAL_CUDA_ENTRY(cuDeviceGetCount, "cuDeviceGetCount"),
      SHOAL_CUDA_ENTRY(cuDeviceGet, "cuDeviceGet"),
      SHOAL_CUDA_ENTRY(cuGetErrorName, "cuGetErrorName"),
      SHOAL_CUDA_ENTRY(cuGetErrorString, "cuGetErrorString"),
      SHOAL_CUDA_ENTRY(cuStreamGetCtx, "cuStreamGetCtx"),
      SHOAL_CUDA_ENTRY(cuCtxPushCurrent, "cuCtxPushCurrent_v2"),
      SHOAL_CUDA_ENTRY(cuCtxPopCurrent, "cuCtxPopCurrent_v2"),
      SHOAL_CUDA_ENTRY(cuCtxGetDevice, "cuCtxGetDevice"),
      SHOAL_CUDA_ENTRY(cuDeviceGetAttribute, "cuDeviceGetAttribute"),
      SHOAL_CUDA_ENTRY(cuModuleLoadData, "cuModuleLoadData"),
      SHOAL_CUDA_ENTRY(cuModuleGetFunction, "cuModuleGetFunction"),
      SHOAL_CUDA_ENTRY(cuModuleGetGlobal, "cuModuleGetGlobal_v2"),
      SHOAL_CUDA_ENTRY(cuMemcpyDtoH, "cuMemcpyDtoH_v2"),
      SHOAL_CUDA_ENTRY(cuMemcpyAsync, "cuMemcpyAsync"),
      SHOAL_CUDA_ENTRY(cuFuncGetAttribute, "cuFuncGetAttribute"),
      SHOAL_CUDA_ENTRY(cuLaunchKernel, "cuLaunchKernel"),
  };
#undef SHOAL_CUDA_ENTRY

  for (const Entry& e : entries) {
    if (!e.ok) {
      r.error = std::string("the CUDA driver at ") + path + " lacks " + e.name +
                " (shoal needs a CUDA 12 or newer driver)";
      return r;
    }
  }
  const CUresult init = a.cuInit(0);
  if (init != CUDA_SUCCESS) {
    r.error = "no usable CUDA device: cuInit failed with " + describe(a, init);
    return r;
  }
  int count = 0;
  if (a.cuDeviceGetCount(&count) != CUDA_SUCCESS || count == 0) {
    r.error = "no CUDA device: the driver reports none";
    return r;
  }
  r.ok = true;
  return r;  // the library stays open for the life of the process
}

}  // namespace

const DriverApi* driver(std::string* error) {
  static const Loader loaded = load();
  if (!loaded.ok) {
    if (error != nullptr) *error = loaded.error;
    return nullptr;
  }
  return &loaded.api;
}

std::string device_architectures(std::string* error) {
  const DriverApi* api = driver(error);
  if (api == nullptr) return "";
  int count = 0;
  api->cuDeviceGetCount(&count);
  std::string out;
  for (int i = 0; i < count; ++i) {
    CUdevice device = 0;
    int major = 0, minor = 0;
    if (api->cuDeviceGet(&device, i) != CUDA_SUCCESS ||
        api->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device) !=
            CUDA_SUCCESS ||
        api->cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device) !=
            CUDA_SUCCESS) {
      continue;
    }
    out += (out.empty() ? "" : ",") + std::string("sm_") + std::to_string(major) +
           std::to_string(minor);
  }
  return out;
}

std::string describe(const DriverApi& api, CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName == nullptr || api.cuGetErrorName(result, &name) != CUDA_SUCCESS) {
    name = nullptr;
  }
  if (api.cuGetErrorString == nullptr || api.cuGetErrorString(result, &text) != CUDA_SUCCESS) {
    text = nullptr;
  }
  std::string out = name ? name : "CUDA error " + std::to_string(result);
  if (text != nullptr) out += std::string(" (") + text + ")";
  return out;
}

ScopedStreamContext::ScopedStreamContext(const DriverApi& api, CUstream stream) : api_(api) {
  status_ = api_.cuStreamGetCtx(stream, &context_);
  if (status_ != CUDA_SUCCESS) return;
  status_ = api_.cuCtxPushCurrent(context_);
  pushed_ = status_ == CUDA_SUCCESS;
}

ScopedStreamContext::~ScopedStreamContext() {
  if (pushed_) {
    CUcontext popped = nullptr;
    api_.cuCtxPopCurrent(&popped);
  }
}

}  // namespace cuda
}  // namespace shoal
