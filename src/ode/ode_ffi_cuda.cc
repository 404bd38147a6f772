// XLA FFI handler for ensemble ODE solves on CUDA GPUs: one thread per trajectory.
//
// The call's attributes name the model's cubins, one per architecture ("sm_90=/path;sm_80=/path"),
// and the kernel entry; solve_on_stream (cuda_kernels.hpp) picks the cubin for the device behind
// XLA's stream, loads it once per context and launches on that stream. Buffers are device memory
// and are checked exactly as on the CPU (ensemble_call.hpp); the launch is asynchronous like any
// XLA kernel.
#include <cstddef>
#include <exception>
#include <string>
#include <string_view>

#include "cuda_kernels.hpp"
#include "ensemble_call.hpp"
#include "ode_ffi.hpp"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace shoal {
namespace {

// The kernel takes ShoalEnsembleArgs by value, so host and device layouts must agree; these
// figures are asserted for the device side by tests/test_nvrtc.py.
static_assert(sizeof(ShoalEnsembleArgs) == 152, "ShoalEnsembleArgs layout changed: bump the ABI");
static_assert(offsetof(ShoalEnsembleArgs, y0) == 32, "ShoalEnsembleArgs layout");
static_assert(offsetof(ShoalEnsembleArgs, rtol) == 96, "ShoalEnsembleArgs layout");
static_assert(offsetof(ShoalEnsembleArgs, max_steps) == 144, "ShoalEnsembleArgs layout");

ffi::Error solve_impl(cuda::CUstream stream, ffi::AnyBuffer y0, ffi::AnyBuffer params,
                      ffi::AnyBuffer t_span, ffi::AnyBuffer weights, std::string_view cubins,
                      std::string_view entry, double rtol, double atol, double first_step,
                      double pcoeff, double icoeff, double dcoeff, int64_t max_steps,
                      int64_t n_error, ffi::Result<ffi::AnyBuffer> ys,
                      ffi::Result<ffi::AnyBuffer> accepted, ffi::Result<ffi::AnyBuffer> rejected,
                      ffi::Result<ffi::AnyBuffer> status) {
  const SolveOptions options{rtol, atol, first_step, pcoeff, icoeff, dcoeff, max_steps, n_error};
  return solve_on_stream(stream, cubins, entry, [&](const ModelShape& shape, ShoalEnsembleArgs* a) {
    return fill_ensemble_args(shape, y0, params, t_span, weights, options, ys, accepted, rejected,
                              status, a);
  });
}

ffi::Error solve_guarded(cuda::CUstream stream, ffi::AnyBuffer y0, ffi::AnyBuffer params,
                         ffi::AnyBuffer t_span, ffi::AnyBuffer weights, std::string_view cubins,
                         std::string_view entry, double rtol, double atol, double first_step,
                         double pcoeff, double icoeff, double dcoeff, int64_t max_steps,
                         int64_t n_error, ffi::Result<ffi::AnyBuffer> ys,
                         ffi::Result<ffi::AnyBuffer> accepted, ffi::Result<ffi::AnyBuffer> rejected,
                         ffi::Result<ffi::AnyBuffer> status) {
  return without_exceptions([&] {
    return solve_impl(stream, y0, params, t_span, weights, cubins, entry, rtol, atol, first_step,
                      pcoeff, icoeff, dcoeff, max_steps, n_error, ys, accepted, rejected, status);
  });
}

}  // namespace
}  // namespace shoal

XLA_FFI_DEFINE_HANDLER_SYMBOL(ShoalOdeSolveCuda, shoal::solve_guarded,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<shoal::cuda::CUstream>>()
                                  .Arg<ffi::AnyBuffer>()  // y0
                                  .Arg<ffi::AnyBuffer>()  // params
                                  .Arg<ffi::AnyBuffer>()  // t_span
                                  .Arg<ffi::AnyBuffer>()  // error_weights
                                  .Attr<std::string_view>("cubins")
                                  .Attr<std::string_view>("entry")
                                  .Attr<double>("rtol")
                                  .Attr<double>("atol")
                                  .Attr<double>("first_step")
                                  .Attr<double>("pcoeff")
                                  .Attr<double>("icoeff")
                                  .Attr<double>("dcoeff")
                                  .Attr<int64_t>("max_steps")
                                  .Attr<int64_t>("n_error")
                                  .Ret<ffi::AnyBuffer>()  // ys
                                  .Ret<ffi::AnyBuffer>()  // accepted
                                  .Ret<ffi::AnyBuffer>()  // rejected
                                  .Ret<ffi::AnyBuffer>()  // status
);
