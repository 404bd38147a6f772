// XLA FFI handler for ensemble ODE solves on the CPU.
//
// One static target serves every model: the call's attributes name the compiled model library and
// its entry point, the buffers carry the ensemble (signature: bind_ensemble_solve). Trajectories
// are handed out in small chunks to the thread pool.
#include <algorithm>
#include <string>
#include <string_view>

#include "../common/ffi_guard.hpp"
#include "ensemble_call.hpp"
#include "model_registry.hpp"
#include "ode_ffi.hpp"
#include "thread_pool.hpp"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace shoal {
namespace {

ffi::Error solve_impl(const EnsembleBuffers& buffers, std::string_view model_path,
                      std::string_view entry, const ShoalSolveOptions& options) {
  LoadedModel model;
  std::string error;
  if (!load_model(std::string(model_path), std::string(entry), &model, &error)) {
    return ffi::Error(ffi::ErrorCode::kFailedPrecondition, error);
  }
  const ModelShape shape{model.n_vars, model.n_params, model.dtype_bits};
  ShoalEnsembleArgs a;
  ffi::Error filled = fill_ensemble_args(shape, buffers, options, &a);
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

ffi::Error solve(ffi::AnyBuffer y0, ffi::AnyBuffer params, ffi::AnyBuffer t_span,
                 ffi::AnyBuffer weights, std::string_view model, std::string_view entry,
                 ShoalSolveOptions options, ffi::Result<ffi::AnyBuffer> ys,
                 ffi::Result<ffi::AnyBuffer> accepted, ffi::Result<ffi::AnyBuffer> rejected,
                 ffi::Result<ffi::AnyBuffer> status) {
  return without_exceptions("shoal.ode.solve", [&] {
    return solve_impl({y0, params, t_span, weights, ys, accepted, rejected, status}, model, entry,
                      options);
  });
}

}  // namespace
}  // namespace shoal

XLA_FFI_DEFINE_HANDLER_SYMBOL(ShoalOdeSolveCpu, shoal::solve,
                              shoal::bind_ensemble_solve(ffi::Ffi::Bind()));
