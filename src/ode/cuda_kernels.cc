#include "cuda_kernels.hpp"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <string_view>
#include <tuple>
#include <vector>

namespace shoal {
namespace {

// One trajectory per thread. Trajectories in a warp diverge as their step counts differ, and a
// small block lets the scheduler retire short ones early; register pressure (about 150 per
// thread for Rodas5P) caps residency well below 2048 threads per SM anyway.
constexpr int kThreadsPerBlock = 64;

using Key = std::tuple<cuda::CUcontext, std::string, std::string>;

std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

std::map<Key, CudaKernel>& registry() {
  static std::map<Key, CudaKernel> r;
  return r;
}

std::map<std::pair<cuda::CUcontext, std::string>, cuda::CUmodule>& modules() {
  static std::map<std::pair<cuda::CUcontext, std::string>, cuda::CUmodule> m;
  return m;
}

bool fail(std::string* error, const std::string& msg) {
  *error = msg;
  return false;
}

xla::ffi::Error failed(const std::string& msg) {
  return xla::ffi::Error(xla::ffi::ErrorCode::kFailedPrecondition,
                         "shoal.ode.solve on CUDA: " + msg);
}

// The path listed for `arch` in "sm_90=/a.cubin;sm_80=/b.cubin", or "" if there is none.
std::string cubin_for(std::string_view cubins, const std::string& arch) {
  while (!cubins.empty()) {
    const size_t end = cubins.find(';');
    const std::string_view item = cubins.substr(0, end);
    const size_t eq = item.find('=');
    if (eq != std::string_view::npos && item.substr(0, eq) == arch) {
      return std::string(item.substr(eq + 1));
    }
    if (end == std::string_view::npos) break;
    cubins.remove_prefix(end + 1);
  }
  return "";
}

}  // namespace

bool load_cuda_kernel(const cuda::DriverApi& api, cuda::CUcontext context, const std::string& path,
                      const std::string& entry, CudaKernel* out, std::string* error) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  const Key key{context, path, entry};
  auto found = registry().find(key);
  if (found != registry().end()) {
    *out = found->second;
    return true;
  }
  cuda::CUmodule& module = modules()[{context, path}];
  if (module == nullptr) {
    std::ifstream file(path, std::ios::binary);
    if (!file) return fail(error, "cannot read the compiled model " + path);
    std::vector<char> image((std::istreambuf_iterator<char>(file)),
                            std::istreambuf_iterator<char>());
    const cuda::CUresult loaded = api.cuModuleLoadData(&module, image.data());
    if (loaded != cuda::CUDA_SUCCESS) {
      module = nullptr;
      return fail(error, "loading " + path + " failed: " + cuda::describe(api, loaded));
    }
  }
  CudaKernel kernel;
  cuda::CUresult r = api.cuModuleGetFunction(&kernel.function, module, entry.c_str());
  if (r != cuda::CUDA_SUCCESS) {
    return fail(error, path + " has no kernel " + entry + ": " + cuda::describe(api, r));
  }
  cuda::CUdeviceptr info_ptr = 0;
  size_t info_bytes = 0;
  r = api.cuModuleGetGlobal(&info_ptr, &info_bytes, module, "shoal_model_info");
  int32_t info[7] = {0, 0, 0, 0, 0, 0, 0};
  if (r != cuda::CUDA_SUCCESS || info_bytes != sizeof(info) ||
      api.cuMemcpyDtoH(info, info_ptr, sizeof(info)) != cuda::CUDA_SUCCESS) {
    return fail(error, path + " is not a shoal model (no readable shoal_model_info)");
  }
  if (info[0] != SHOAL_ODE_ABI_VERSION) {
    return fail(error, path + " was built for ensemble ABI " + std::to_string(info[0]) +
                           ", this shoal uses " + std::to_string(SHOAL_ODE_ABI_VERSION));
  }
  kernel.shape = ModelShape{info[1], info[2], info[3], info[4], info[5], info[6]};
  int max_threads = kThreadsPerBlock;
  api.cuFuncGetAttribute(&max_threads, cuda::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                         kernel.function);
  kernel.block = static_cast<unsigned int>(std::max(1, std::min(kThreadsPerBlock, max_threads)));
  registry()[key] = kernel;
  *out = kernel;
  return true;
}

xla::ffi::Error solve_on_stream(cuda::CUstream stream, std::string_view cubins,
                                std::string_view entry, const FillEnsembleArgs& fill) {
  std::string error;
  const cuda::DriverApi* api = cuda::driver(&error);
  if (api == nullptr) return failed(error);
  cuda::ScopedStreamContext scope(*api, stream);
  if (scope.status() != cuda::CUDA_SUCCESS) {
    return failed("cannot make the stream's context current: " +
                  cuda::describe(*api, scope.status()));
  }
  cuda::CUdevice device = 0;
  int major = 0, minor = 0;
  if (api->cuCtxGetDevice(&device) != cuda::CUDA_SUCCESS ||
      api->cuDeviceGetAttribute(&major, cuda::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                device) != cuda::CUDA_SUCCESS ||
      api->cuDeviceGetAttribute(&minor, cuda::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                device) != cuda::CUDA_SUCCESS) {
    return failed("cannot read the device's compute capability");
  }
  const std::string arch = "sm_" + std::to_string(major) + std::to_string(minor);
  const std::string path = cubin_for(cubins, arch);
  if (path.empty()) {
    return failed("the model was compiled for " + std::string(cubins) + " but runs on " + arch +
                  "; recompile (jax.jit) with this device visible");
  }
  CudaKernel kernel;
  if (!load_cuda_kernel(*api, scope.context(), path, std::string(entry), &kernel, &error)) {
    return failed(error);
  }
  ShoalEnsembleArgs a;
  xla::ffi::Error filled = fill(kernel.shape, &a);
  if (filled.failure()) return filled;
  if (a.n_traj == 0) return xla::ffi::Error::Success();
  const int64_t blocks = (a.n_traj + kernel.block - 1) / kernel.block;
  if (blocks > 0x7fffffff) return failed("ensemble too large for one launch");
  void* kernel_params[] = {&a};
  const cuda::CUresult launched =
      api->cuLaunchKernel(kernel.function, static_cast<unsigned int>(blocks), 1, 1, kernel.block, 1,
                          1, 0, stream, kernel_params, nullptr);
  if (launched != cuda::CUDA_SUCCESS) {
    return failed("launching " + std::string(entry) + " failed: " + cuda::describe(*api, launched));
  }
  return xla::ffi::Error::Success();
}

}  // namespace shoal
