// The in-process map of loaded model libraries, keyed by path.
//
// A compiled model is a shared object in the disk cache. Python compiles it and loads it before
// lowering; the FFI handler looks it up by the path recorded in the call's attributes, and loads it
// itself if needed (an executable deserialized in a fresh process). Loaded once, never unloaded:
// an executable may still hold the entry point.
#pragma once

#include <cstdint>
#include <string>

#include "shoal/ode/ensemble.hpp"

namespace shoal {

using SolveRangeFn = void (*)(const ShoalEnsembleArgs*, int64_t, int64_t);

struct LoadedModel {
  SolveRangeFn solve_range = nullptr;
  int32_t n_vars = 0;
  int32_t n_params = 0;
  int32_t n_shared = 0;  // the trailing n_shared of n_params are shared by the ensemble
  int32_t dtype_bits = 0;  // 32 or 64
  int32_t n_saved = 0;     // numbers per save (model_traits.hpp)
  int32_t has_event = 0;
};

// Loads (or finds) the library at `path` and resolves `entry`. On failure returns false and sets
// `error` to a message naming the path and the cause.
bool load_model(const std::string& path, const std::string& entry, LoadedModel* out,
                std::string* error);

}  // namespace shoal
