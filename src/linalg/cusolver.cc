// cuSOLVER loaded at run time (dlopen), status messages, and the per-stream handle pool.
#include <dlfcn.h>

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cusolver_api.hpp"

namespace shoal::linalg::cusolver {
namespace {

std::mutex load_mutex;
Api loaded_api;                            // filled once under load_mutex, then read-only
std::atomic<const Api*> api_ptr{nullptr};  // published after loaded_api is complete
std::string loaded_from;
int loaded_version = 0;

struct Symbol {
  const char* name;
  void** slot;
};

template <typename F>
Symbol sym(const char* name, F* slot) {
  return {name, reinterpret_cast<void**>(slot)};
}

std::vector<Symbol> symbols(Api& a) {
  return {
      sym("cusolverDnCreate", &a.create),
      sym("cusolverDnDestroy", &a.destroy),
      sym("cusolverDnSetStream", &a.set_stream),
      sym("cusolverGetVersion", &a.get_version),
      sym("cusolverDnCreateSyevjInfo", &a.create_syevj_info),
      sym("cusolverDnDestroySyevjInfo", &a.destroy_syevj_info),
      sym("cusolverDnXsyevjSetSortEig", &a.syevj_set_sort_eig),
      sym("cusolverDnSsyevd_bufferSize", &a.s.syevd_buffer_size),
      sym("cusolverDnSsyevd", &a.s.syevd),
      sym("cusolverDnSsygvd_bufferSize", &a.s.sygvd_buffer_size),
      sym("cusolverDnSsygvd", &a.s.sygvd),
      sym("cusolverDnSsyevjBatched_bufferSize", &a.s.syevj_batched_buffer_size),
      sym("cusolverDnSsyevjBatched", &a.s.syevj_batched),
      sym("cusolverDnDsyevd_bufferSize", &a.d.syevd_buffer_size),
      sym("cusolverDnDsyevd", &a.d.syevd),
      sym("cusolverDnDsygvd_bufferSize", &a.d.sygvd_buffer_size),
      sym("cusolverDnDsygvd", &a.d.sygvd),
      sym("cusolverDnDsyevjBatched_bufferSize", &a.d.syevj_batched_buffer_size),
      sym("cusolverDnDsyevjBatched", &a.d.syevj_batched),
      sym("cusolverDnCheevd_bufferSize", &a.c.syevd_buffer_size),
      sym("cusolverDnCheevd", &a.c.syevd),
      sym("cusolverDnChegvd_bufferSize", &a.c.sygvd_buffer_size),
      sym("cusolverDnChegvd", &a.c.sygvd),
      sym("cusolverDnCheevjBatched_bufferSize", &a.c.syevj_batched_buffer_size),
      sym("cusolverDnCheevjBatched", &a.c.syevj_batched),
      sym("cusolverDnZheevd_bufferSize", &a.z.syevd_buffer_size),
      sym("cusolverDnZheevd", &a.z.syevd),
      sym("cusolverDnZhegvd_bufferSize", &a.z.sygvd_buffer_size),
      sym("cusolverDnZhegvd", &a.z.sygvd),
      sym("cusolverDnZheevjBatched_bufferSize", &a.z.syevj_batched_buffer_size),
      sym("cusolverDnZheevjBatched", &a.z.syevj_batched),
  };
}

}  // namespace

std::string load(const std::string& path, bool noload) {
  std::lock_guard<std::mutex> lock(load_mutex);
  if (api_ptr.load() != nullptr) return "";
  dlerror();
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | (noload ? RTLD_NOLOAD : 0));
  if (lib == nullptr) {
    const char* why = dlerror();
    return noload ? path + " is not loaded in this process"
                  : "cannot open " + path + ": " + (why != nullptr ? why : "unknown dlopen error");
  }
  Api candidate;
  for (const Symbol& s : symbols(candidate)) {
    void* fn = dlsym(lib, s.name);
    if (fn == nullptr) {
      dlclose(lib);
      return path + " lacks the symbol " + s.name + " (cuSOLVER too old?)";
    }
    *s.slot = fn;
  }
  int version = 0;
  if (candidate.get_version(&version) != kStatusSuccess) version = 0;
  // The library stays open for the life of the process: handlers may run at any time.
  loaded_api = candidate;
  loaded_from = path;
  loaded_version = version;
  api_ptr.store(&loaded_api);
  return "";
}

const Api* api() { return api_ptr.load(); }

std::string loaded_path() {
  std::lock_guard<std::mutex> lock(load_mutex);
  return loaded_from;
}

int version() {
  std::lock_guard<std::mutex> lock(load_mutex);
  return loaded_version;
}

std::string status_message(Status status) {
  switch (status) {
    case kStatusSuccess:
      return "CUSOLVER_STATUS_SUCCESS";
    case kStatusNotInitialized:
      return "CUSOLVER_STATUS_NOT_INITIALIZED (cuSOLVER could not initialize: no usable CUDA "
             "device, or a driver older than the cuSOLVER library; check nvidia-smi and that "
             "the driver supports this CUDA version)";
    case kStatusAllocFailed:
      return "CUSOLVER_STATUS_ALLOC_FAILED (out of GPU memory: use a smaller batch, or leave "
             "cuSOLVER room with XLA_PYTHON_CLIENT_MEM_FRACTION / XLA_PYTHON_CLIENT_PREALLOCATE)";
    case kStatusInvalidValue:
      return "CUSOLVER_STATUS_INVALID_VALUE (cuSOLVER rejected an argument: internal error, "
             "please report with the matrix shape and dtype)";
    case kStatusArchMismatch:
      return "CUSOLVER_STATUS_ARCH_MISMATCH (this GPU's compute capability is not supported by "
             "the loaded cuSOLVER)";
    case kStatusMappingError:
      return "CUSOLVER_STATUS_MAPPING_ERROR";
    case kStatusExecutionFailed:
      return "CUSOLVER_STATUS_EXECUTION_FAILED (a cuSOLVER kernel failed to launch: the GPU "
             "may be in an error state from earlier work)";
    case kStatusInternalError:
      return "CUSOLVER_STATUS_INTERNAL_ERROR (internal cuSOLVER failure, often out of GPU "
             "memory for its internal buffers)";
    case kStatusMatrixTypeNotSupported:
      return "CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED";
    case kStatusNotSupported:
      return "CUSOLVER_STATUS_NOT_SUPPORTED (this operation is not supported by the loaded "
             "cuSOLVER version)";
    case kStatusInvalidWorkspace:
      return "CUSOLVER_STATUS_INVALID_WORKSPACE";
    default:
      return "cuSOLVER status " + std::to_string(status);
  }
}

std::string probe() {
  const Api* a = api();
  if (a == nullptr) return "cuSOLVER is not loaded";
  Handle h = nullptr;
  Status s = a->create(&h);
  if (s != kStatusSuccess) return "cusolverDnCreate failed: " + status_message(s);
  a->destroy(h);
  return "";
}

namespace {

// Free handles per stream. A leaked handle per stream is the price of never racing a destroy
// against work still queued on its stream; XLA uses a handful of streams per device.
std::mutex pool_mutex;
std::unordered_map<Stream, std::vector<Handle>>& pool() {
  static auto* p = new std::unordered_map<Stream, std::vector<Handle>>();
  return *p;
}

}  // namespace

PooledHandle::PooledHandle(Stream stream) : stream_(stream) {
  const Api* a = api();
  if (a == nullptr) {
    error_ = "cuSOLVER is not loaded (shoal.linalg loads it when the CUDA path is first used)";
    return;
  }
  {
    std::lock_guard<std::mutex> lock(pool_mutex);
    auto& free_list = pool()[stream];
    if (!free_list.empty()) {
      handle_ = free_list.back();
      free_list.pop_back();
    }
  }
  if (handle_ == nullptr) {
    Status s = a->create(&handle_);
    if (s != kStatusSuccess) {
      handle_ = nullptr;
      error_ = "cusolverDnCreate: " + status_message(s);
      return;
    }
  }
  Status s = a->set_stream(handle_, stream);
  if (s != kStatusSuccess) {
    error_ = "cusolverDnSetStream: " + status_message(s);
    // The handle is fine, only the binding failed: keep it for later.
    std::lock_guard<std::mutex> lock(pool_mutex);
    pool()[stream_].push_back(handle_);
    handle_ = nullptr;
  }
}

PooledHandle::~PooledHandle() {
  if (handle_ == nullptr) return;
  std::lock_guard<std::mutex> lock(pool_mutex);
  pool()[stream_].push_back(handle_);
}

}  // namespace shoal::linalg::cusolver
