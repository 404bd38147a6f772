// A stand-in for libcuda.so.1 that runs "cubins" on the CPU: shoal's CUDA launch path (driver
// loading through cuGetProcAddress, context handling, cubin choice, model checks, launch grid) is
// then exercised without a GPU. A "cubin" here is a host shared object compiled from the same
// CUDA source with kernel_shim.h; device pointers are host pointers; launches run serially.
// Only what shoal calls is implemented. Test use only (tests/cuda/test_launch_path.py).
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "shoal/ode/ensemble.hpp"

namespace {

int g_context_depth = 0;
int g_launches = 0;
long long g_threads = 0;
void* const kContext = reinterpret_cast<void*>(0xC7);

struct Dim3 {
  unsigned x, y, z;
};

}  // namespace

extern "C" {

using CUresult = int;

CUresult cuInit(unsigned) { return 0; }
CUresult cuDriverGetVersion(int* v) {
  *v = 12000;
  return 0;
}
CUresult cuDeviceGetCount(int* c) {
  *c = 1;
  return 0;
}
CUresult cuDeviceGet(int* d, int ordinal) {
  *d = ordinal;
  return ordinal == 0 ? 0 : 101;  // CUDA_ERROR_INVALID_DEVICE
}
CUresult cuGetErrorName(CUresult e, const char** s) {
  *s = e == 0 ? "CUDA_SUCCESS" : "CUDA_ERROR_FAKE";
  return 0;
}
CUresult cuGetErrorString(CUresult, const char** s) {
  *s = "reported by the fake driver";
  return 0;
}
CUresult cuStreamGetCtx(void* stream, void** context) {
  if (stream == nullptr) return 400;  // CUDA_ERROR_INVALID_HANDLE
  *context = kContext;
  return 0;
}
CUresult cuCtxPushCurrent_v2(void* context) {
  if (context != kContext) return 201;  // CUDA_ERROR_INVALID_CONTEXT
  ++g_context_depth;
  return 0;
}
CUresult cuCtxPopCurrent_v2(void** context) {
  if (g_context_depth <= 0) return 201;
  --g_context_depth;
  *context = kContext;
  return 0;
}
CUresult cuCtxGetDevice(int* device) {
  if (g_context_depth <= 0) return 201;  // shoal must have made a context current
  *device = 0;
  return 0;
}
CUresult cuDeviceGetAttribute(int* value, int attribute, int) {
  const char* sm = std::getenv("FAKE_CUDA_SM");  // e.g. "90"
  const int cc = sm ? std::atoi(sm) : 90;
  if (attribute == 75) {
    *value = cc / 10;
  } else if (attribute == 76) {
    *value = cc % 10;
  } else {
    return 1;
  }
  return 0;
}
CUresult cuModuleLoadData(void** module, const void* image) {
  if (g_context_depth <= 0) return 201;
  // The image is an ELF shared object: its section header table ends the file.
  const auto* header = static_cast<const ElfW(Ehdr)*>(image);
  if (std::memcmp(header->e_ident, ELFMAG, SELFMAG) != 0) return 200;  // CUDA_ERROR_INVALID_IMAGE
  const size_t size = header->e_shoff + size_t{header->e_shnum} * header->e_shentsize;
  char path[] = "/tmp/fake_cubin_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return 2;
  const bool written = write(fd, image, size) == static_cast<ssize_t>(size);
  close(fd);
  void* handle = written ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : nullptr;
  unlink(path);
  if (handle == nullptr) return 200;
  *module = handle;
  return 0;
}
CUresult cuModuleGetFunction(void** function, void* module, const char* name) {
  *function = dlsym(module, name);
  return *function ? 0 : 500;  // CUDA_ERROR_NOT_FOUND
}
CUresult cuModuleGetGlobal_v2(unsigned long long* pointer, size_t* bytes, void* module,
                              const char* name) {
  void* symbol = dlsym(module, name);
  if (symbol == nullptr) return 500;
  Dl_info info;
  ElfW(Sym)* entry = nullptr;
  if (dladdr1(symbol, &info, reinterpret_cast<void**>(&entry), RTLD_DL_SYMENT) == 0 || !entry) {
    return 500;
  }
  *pointer = reinterpret_cast<uintptr_t>(symbol);
  *bytes = entry->st_size;
  return 0;
}
CUresult cuMemcpyDtoH_v2(void* host, unsigned long long device, size_t bytes) {
  std::memcpy(host, reinterpret_cast<const void*>(device), bytes);
  return 0;
}
CUresult cuMemcpyAsync(unsigned long long dst, unsigned long long src, size_t bytes, void*) {
  std::memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
  return 0;
}
CUresult cuFuncGetAttribute(int* value, int attribute, void*) {
  if (attribute != 0) return 1;
  *value = 1024;
  return 0;
}
CUresult cuLaunchKernel(void* function, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned, void* stream, void** params,
                        void** extra) {
  if (g_context_depth <= 0 || stream == nullptr || extra != nullptr) return 1;
  if (gy != 1 || gz != 1 || by != 1 || bz != 1 || bx == 0 || bx > 1024) return 1;
  Dl_info info;
  if (dladdr(function, &info) == 0) return 400;
  void* module = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
  auto* block_idx = static_cast<Dim3*>(dlsym(module, "blockIdx"));
  auto* block_dim = static_cast<Dim3*>(dlsym(module, "blockDim"));
  auto* thread_idx = static_cast<Dim3*>(dlsym(module, "threadIdx"));
  if (!block_idx || !block_dim || !thread_idx) return 400;
  auto kernel = reinterpret_cast<void (*)(ShoalEnsembleArgs)>(function);
  const ShoalEnsembleArgs args = *static_cast<const ShoalEnsembleArgs*>(params[0]);
  *block_dim = Dim3{bx, 1, 1};
  for (unsigned b = 0; b < gx; ++b) {
    for (unsigned t = 0; t < bx; ++t) {
      *block_idx = Dim3{b, 0, 0};
      *thread_idx = Dim3{t, 0, 0};
      kernel(args);
      ++g_threads;
    }
  }
  dlclose(module);  // drops only the NOLOAD reference
  ++g_launches;
  return 0;
}

// What the test reads back: launches made and threads run.
int fake_cuda_launches() { return g_launches; }
long long fake_cuda_threads() { return g_threads; }

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, unsigned long long,
                             int* status) {
  if (version != 12000) return 1;  // shoal asks for the CUDA 12.0 ABI
  struct Entry {
    const char* name;
    void* fn;
  };
  static const Entry table[] = {
      {"cuInit", reinterpret_cast<void*>(&cuInit)},
      {"cuDriverGetVersion", reinterpret_cast<void*>(&cuDriverGetVersion)},
      {"cuDeviceGetCount", reinterpret_cast<void*>(&cuDeviceGetCount)},
      {"cuDeviceGet", reinterpret_cast<void*>(&cuDeviceGet)},
      {"cuGetErrorName", reinterpret_cast<void*>(&cuGetErrorName)},
      {"cuGetErrorString", reinterpret_cast<void*>(&cuGetErrorString)},
      {"cuStreamGetCtx", reinterpret_cast<void*>(&cuStreamGetCtx)},
      {"cuCtxPushCurrent", reinterpret_cast<void*>(&cuCtxPushCurrent_v2)},
      {"cuCtxPopCurrent", reinterpret_cast<void*>(&cuCtxPopCurrent_v2)},
      {"cuCtxGetDevice", reinterpret_cast<void*>(&cuCtxGetDevice)},
      {"cuDeviceGetAttribute", reinterpret_cast<void*>(&cuDeviceGetAttribute)},
      {"cuModuleLoadData", reinterpret_cast<void*>(&cuModuleLoadData)},
      {"cuModuleGetFunction", reinterpret_cast<void*>(&cuModuleGetFunction)},
      {"cuModuleGetGlobal", reinterpret_cast<void*>(&cuModuleGetGlobal_v2)},
      {"cuMemcpyDtoH", reinterpret_cast<void*>(&cuMemcpyDtoH_v2)},
      {"cuMemcpyAsync", reinterpret_cast<void*>(&cuMemcpyAsync)},
      {"cuFuncGetAttribute", reinterpret_cast<void*>(&cuFuncGetAttribute)},
      {"cuLaunchKernel", reinterpret_cast<void*>(&cuLaunchKernel)},
  };
  for (const Entry& e : table) {
    if (std::strcmp(e.name, symbol) == 0) {
      *pfn = e.fn;
      if (status) *status = 0;
      return 0;
    }
  }
  *pfn = nullptr;
  if (status) *status = 1;  // CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
  return 500;
}

}  // extern "C"
