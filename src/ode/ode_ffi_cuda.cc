// XLA FFI handler for ensemble ODE solves on CUDA GPUs: one thread per trajectory.
//
// The call's `model` attribute names the model's cubins, one per architecture
// ("sm_90=/path;sm_80=/path"), and `entry` the kernel (signature: bind_ensemble_solve, after the
// stream); solve_on_stream (cuda_kernels.hpp) picks the cubin for the device behind XLA's stream,
// loads it once per context and launches on that stream. Buffers are device memory and are
// checked exactly as on the CPU (ensemble_call.hpp); the launch is asynchronous like any XLA
// kernel. The progress operand (a device buffer) is ignored: a GPU solve's progress bar jumps to
// done when the solve's results reach the host (shoal/ode/_progress.py).
#include <cstddef>
#include <string_view>

#include "../common/ffi_guard.hpp"
#include "cuda_kernels.hpp"
#include "ensemble_call.hpp"
#include "ode_ffi.hpp"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace shoal {
namespace {

// The kernel takes ShoalEnsembleArgs by value, so host and device layouts must agree; these
// figures are asserted for the device side by tests/cuda/test_nvrtc.py.
static_assert(offsetof(ShoalEnsembleArgs, y0) == 24, "ShoalEnsembleArgs layout: bump the ABI");
static_assert(offsetof(ShoalEnsembleArgs, options) == 96, "ShoalEnsembleArgs layout");
static_assert(offsetof(ShoalEnsembleArgs, n_vars) == 96 + sizeof(ShoalSolveOptions),
              "ShoalEnsembleArgs layout");
static_assert(sizeof(ShoalEnsembleArgs) == 224 + sizeof(ShoalSolveOptions),
              "ShoalEnsembleArgs layout");

ffi::Error solve(cuda::CUstream stream, ffi::AnyBuffer y0, ffi::AnyBuffer params,
                 ffi::AnyBuffer shared, ffi::AnyBuffer t_span, ffi::AnyBuffer weights,
                 ffi::AnyBuffer atol, ffi::AnyBuffer tstops, ffi::AnyBuffer first_step,
                 ffi::AnyBuffer /*progress: not counted on GPUs*/, std::string_view cubins,
                 std::string_view entry, ShoalSolveOptions options, ffi::Result<ffi::AnyBuffer> ys,
                 ffi::Result<ffi::AnyBuffer> accepted, ffi::Result<ffi::AnyBuffer> rejected,
                 ffi::Result<ffi::AnyBuffer> status, ffi::Result<ffi::AnyBuffer> event_time,
                 ffi::Result<ffi::AnyBuffer> event_state) {
  return without_exceptions("shoal.ode.solve", [&] {
    const EnsembleBuffers buffers{y0,     params,     shared,   t_span,     weights,
                                  atol,   tstops,     first_step, ys,     accepted,
                                  rejected, status, event_time, event_state};
    return solve_on_stream(stream, cubins, entry,
                           [&](const ModelShape& shape, ShoalEnsembleArgs* a) {
                             return fill_ensemble_args(shape, buffers, options, a);
                           });
  });
}

}  // namespace
}  // namespace shoal

XLA_FFI_DEFINE_HANDLER_SYMBOL(
    ShoalOdeSolveCuda, shoal::solve,
    shoal::bind_ensemble_solve(ffi::Ffi::Bind().Ctx<ffi::PlatformStream<shoal::cuda::CUstream>>()));
