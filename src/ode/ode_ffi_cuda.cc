// XLA FFI handler for ensemble ODE solves on CUDA GPUs: one thread per trajectory.
//
// The call's attributes name the model's cubins, one per architecture ("sm_90=/path;sm_80=/path"),
// and the kernel entry; the handler picks the cubin for the device behind XLA's stream, loads it
// once per context and launches on that stream. Buffers are device memory and are checked exactly
// as on the CPU (ensemble_call.hpp); the launch is asynchronous like any XLA kernel.
#include <cstddef>
#include <exception>
#include <string>
#include <string_view>

#include "../cuda/driver_api.hpp"
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

ffi::Error failed(const std::string& msg) {
  return ffi::Error(ffi::ErrorCode::kFailedPrecondition, "shoal.ode.solve on CUDA: " + msg);
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

ffi::Error solve_impl(cuda::CUstream stream, ffi::AnyBuffer y0, ffi::AnyBuffer params,
                      ffi::AnyBuffer t_span, ffi::AnyBuffer weights, std::string_view cubins,
                      std::string_view entry, double rtol, double atol, double first_step,
                      double pcoeff, double icoeff, double dcoeff, int64_t max_steps,
                      int64_t n_error, ffi::Result<ffi::AnyBuffer> ys,
                      ffi::Result<ffi::AnyBuffer> accepted, ffi::Result<ffi::AnyBuffer> rejected,
                      ffi::Result<ffi::AnyBuffer> status) {
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
  const SolveOptions options{rtol, atol, first_step, pcoeff, icoeff, dcoeff, max_steps, n_error};
  ShoalEnsembleArgs a;
  ffi::Error filled = fill_ensemble_args(kernel.shape, y0, params, t_span, weights, options, ys,
                                         accepted, rejected, status, &a);
  if (filled.failure()) return filled;
  if (a.n_traj == 0) return ffi::Error::Success();
  const int64_t blocks = (a.n_traj + kernel.block - 1) / kernel.block;
  if (blocks > 0x7fffffff) return failed("ensemble too large for one launch");
  void* kernel_params[] = {&a};
  const cuda::CUresult launched =
      api->cuLaunchKernel(kernel.function, static_cast<unsigned int>(blocks), 1, 1, kernel.block,
                          1, 1, 0, stream, kernel_params, nullptr);
  if (launched != cuda::CUDA_SUCCESS) {
    return failed("launching " + std::string(entry) + " failed: " +
                  cuda::describe(*api, launched));
  }
  return ffi::Error::Success();
}

ffi::Error solve_guarded(cuda::CUstream stream, ffi::AnyBuffer y0, ffi::AnyBuffer params,
                         ffi::AnyBuffer t_span, ffi::AnyBuffer weights, std::string_view cubins,
                         std::string_view entry, double rtol, double atol, double first_step,
                         double pcoeff, double icoeff, double dcoeff, int64_t max_steps,
                         int64_t n_error, ffi::Result<ffi::AnyBuffer> ys,
                         ffi::Result<ffi::AnyBuffer> accepted, ffi::Result<ffi::AnyBuffer> rejected,
                         ffi::Result<ffi::AnyBuffer> status) {
  // No C++ exception may cross into XLA.
  try {
    return solve_impl(stream, y0, params, t_span, weights, cubins, entry, rtol, atol, first_step,
                      pcoeff, icoeff, dcoeff, max_steps, n_error, ys, accepted, rejected, status);
  } catch (const std::exception& e) {
    return ffi::Error(ffi::ErrorCode::kInternal, std::string("shoal.ode.solve: ") + e.what());
  } catch (...) {
    return ffi::Error(ffi::ErrorCode::kInternal, "shoal.ode.solve: unknown C++ exception");
  }
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
