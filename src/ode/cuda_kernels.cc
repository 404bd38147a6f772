#include "cuda_kernels.hpp"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
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
  int32_t info[4] = {0, 0, 0, 0};
  if (r != cuda::CUDA_SUCCESS || info_bytes != sizeof(info) ||
      api.cuMemcpyDtoH(info, info_ptr, sizeof(info)) != cuda::CUDA_SUCCESS) {
    return fail(error, path + " is not a shoal model (no readable shoal_model_info)");
  }
  if (info[0] != SHOAL_ODE_ABI_VERSION) {
    return fail(error, path + " was built for ensemble ABI " + std::to_string(info[0]) +
                           ", this shoal uses " + std::to_string(SHOAL_ODE_ABI_VERSION));
  }
  kernel.shape = ModelShape{info[1], info[2], info[3]};
  int max_threads = kThreadsPerBlock;
  api.cuFuncGetAttribute(&max_threads, cuda::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                         kernel.function);
  kernel.block = static_cast<unsigned int>(std::max(1, std::min(kThreadsPerBlock, max_threads)));
  registry()[key] = kernel;
  *out = kernel;
  return true;
}

}  // namespace shoal
