// The in-process map of cubins loaded for CUDA contexts, keyed by (context, path, entry).
//
// Python compiles a model with NVRTC to a cubin in the disk cache and names it in the call's
// attributes; the handler loads it into the context of XLA's stream on first use and keeps it:
// an executable may launch it again at any time.
#pragma once

#include <string>

#include "../cuda/driver_api.hpp"
#include "ensemble_call.hpp"

namespace shoal {

struct CudaKernel {
  cuda::CUfunction function = nullptr;
  ModelShape shape;
  unsigned int block = 0;  // threads per block
};

// Loads (or finds) `path` in `context` (which must be current) and resolves `entry`, checking
// the ABI version and model facts the cubin carries in `shoal_model_info`. On failure returns
// false with `error` naming the path and the cause.
bool load_cuda_kernel(const cuda::DriverApi& api, cuda::CUcontext context, const std::string& path,
                      const std::string& entry, CudaKernel* out, std::string* error);

}  // namespace shoal
