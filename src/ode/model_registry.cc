#include "model_registry.hpp"

#include <dlfcn.h>

#include <map>
#include <mutex>
#include <utility>

namespace shoal {
namespace {

std::mutex& registry_mutex() {
  static std::mutex mu;
  return mu;
}
std::map<std::pair<std::string, std::string>, LoadedModel>& registry() {
  static auto* m = new std::map<std::pair<std::string, std::string>, LoadedModel>();
  return *m;
}

}  // namespace

bool load_model(const std::string& path, const std::string& entry, LoadedModel* out,
                std::string* error) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto key = std::make_pair(path, entry);
  auto it = registry().find(key);
  if (it != registry().end()) {
    *out = it->second;
    return true;
  }
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    *error = "shoal: cannot load compiled model '" + path + "': " + (why ? why : "unknown error");
    return false;
  }
  using AbiFn = int32_t (*)();
  using InfoFn = void (*)(int32_t*, int32_t*, int32_t*, int32_t*, int32_t*, int32_t*);
  auto abi = reinterpret_cast<AbiFn>(dlsym(handle, "shoal_abi_version"));
  auto info = reinterpret_cast<InfoFn>(dlsym(handle, "shoal_model_info"));
  auto solve = reinterpret_cast<SolveRangeFn>(dlsym(handle, entry.c_str()));
  if (!abi || !info || !solve) {
    *error = "shoal: compiled model '" + path + "' lacks the symbol '" +
             (!abi    ? "shoal_abi_version"
              : !info ? "shoal_model_info"
                      : entry) +
             "'; delete it from the cache so it is rebuilt";
    return false;
  }
  if (abi() != SHOAL_ODE_ABI_VERSION) {
    *error = "shoal: compiled model '" + path + "' was built for ABI version " +
             std::to_string(abi()) + ", this build expects " +
             std::to_string(SHOAL_ODE_ABI_VERSION) + "; delete it from the cache";
    return false;
  }
  LoadedModel m;
  m.solve_range = solve;
  info(&m.n_vars, &m.n_params, &m.n_shared, &m.dtype_bits, &m.n_saved, &m.has_event);
  registry().emplace(key, m);
  *out = m;
  return true;
}

}  // namespace shoal
