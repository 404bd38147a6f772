// XLA FFI handler for ensemble ODE solves on the CPU.
//
// One static target serves every model: the call's attributes name the compiled model library and
// its entry point, the buffers carry the ensemble. Leading dimensions are flattened into the
// ensemble axis, which is how a vmapped solve (vmap_method="broadcast_all") becomes one call.
#include <algorithm>
#include <exception>
#include <string>
#include <string_view>

#include "ensemble_call.hpp"
#include "model_registry.hpp"
#include "ode_ffi.hpp"
#include "thread_pool.hpp"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace shoal {
namespace {

ffi::Error solve_impl(ffi::AnyBuffer y0, ffi::AnyBuffer params, ffi::AnyBuffer t_span,
                      ffi::AnyBuffer weights, std::string_view model_path, std::string_view entry,
                      double rtol, double atol, double first_step, double pcoeff, double icoeff,
                      double dcoeff, int64_t max_steps, int64_t n_error,
                      ffi::Result<ffi::AnyBuffer> ys, ffi::Result<ffi::AnyBuffer> accepted,
                      ffi::Result<ffi::AnyBuffer> rejected, ffi::Result<ffi::AnyBuffer> status) {
  LoadedModel model;
  std::string error;
  if (!load_model(std::string(model_path), std::string(entry), &model, &error)) {
    return ffi::Error(ffi::ErrorCode::kFailedPrecondition, error);
  }
  const ModelShape shape{model.n_vars, model.n_params, model.dtype_bits};
  const SolveOptions options{rtol, atol, first_step, pcoeff, icoeff, dcoeff, max_steps, n_error};
  ShoalEnsembleArgs a;
  ffi::Error filled = fill_ensemble_args(shape, y0, params, t_span, weights, options, ys,
                                         accepted, rejected, status, &a);
  if (filled.failure()) return filled;
  const int64_t n_traj = a.n_traj;
  if (n_traj == 0) return ffi::Error::Success();

  // Small chunks keep the load balanced when step counts differ wildly between trajectories.
  const int64_t threads = parallel_threads();
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(64, n_traj / (16 * threads)));
  const SolveRangeFn fn = model.solve_range;
  parallel_for(n_traj, chunk, [&](int64_t begin, int64_t end) { fn(&a, begin, end); });
  return ffi::Error::Success();
}

ffi::Error solve_guarded(ffi::AnyBuffer y0, ffi::AnyBuffer params, ffi::AnyBuffer t_span,
                         ffi::AnyBuffer weights, std::string_view model_path,
                         std::string_view entry, double rtol, double atol, double first_step,
                         double pcoeff, double icoeff, double dcoeff, int64_t max_steps,
                         int64_t n_error, ffi::Result<ffi::AnyBuffer> ys,
                         ffi::Result<ffi::AnyBuffer> accepted, ffi::Result<ffi::AnyBuffer> rejected,
                         ffi::Result<ffi::AnyBuffer> status) {
  return without_exceptions([&] {
    return solve_impl(y0, params, t_span, weights, model_path, entry, rtol, atol, first_step,
                      pcoeff, icoeff, dcoeff, max_steps, n_error, ys, accepted, rejected, status);
  });
}

}  // namespace
}  // namespace shoal

XLA_FFI_DEFINE_HANDLER_SYMBOL(ShoalOdeSolveCpu, shoal::solve_guarded,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::AnyBuffer>()  // y0
                                  .Arg<ffi::AnyBuffer>()  // params
                                  .Arg<ffi::AnyBuffer>()  // t_span
                                  .Arg<ffi::AnyBuffer>()  // error_weights
                                  .Attr<std::string_view>("model_path")
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
