// The in-process map of cubins loaded for CUDA contexts, keyed by (context, path, entry).
//
// Python compiles a model with NVRTC to a cubin in the disk cache and names it in the call's
// attributes; the handler loads it into the context of XLA's stream on first use and keeps it:
// an executable may launch it again at any time.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "../cuda/driver_api.hpp"
#include "ensemble_call.hpp"
#include "xla/ffi/api/ffi.h"

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

// Checks the caller's buffers against the model and fills the kernel argument.
using FillEnsembleArgs = std::function<xla::ffi::Error(const ModelShape&, ShoalEnsembleArgs*)>;

// Solves an ensemble on `stream`: opens the driver, makes the stream's context current, picks the
// cubin for its device from `cubins` ("sm_90=/a.cubin;sm_80=/b.cubin"), loads it, lets `fill`
// describe the buffers (device pointers) and launches `entry` one thread per trajectory. The
// launch is asynchronous; errors are messages a user can act on.
xla::ffi::Error solve_on_stream(cuda::CUstream stream, std::string_view cubins,
                                std::string_view entry, const FillEnsembleArgs& fill);

}  // namespace shoal
