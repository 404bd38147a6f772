// XLA FFI handler for ensemble ODE solves on the CPU.
//
// One static target serves every model: the call's attributes name the compiled model library and
// its entry point, the buffers carry the ensemble. Leading dimensions are flattened into the
// ensemble axis, which is how a vmapped solve (vmap_method="broadcast_all") becomes one call.
#include <algorithm>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>

#include "model_registry.hpp"
#include "ode_ffi.hpp"
#include "thread_pool.hpp"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace shoal {
namespace {

int64_t leading_count(const ffi::AnyBuffer& b, int trailing) {
  auto dims = b.dimensions();
  int64_t count = 1;
  for (size_t i = 0; i + trailing < dims.size(); ++i) count *= dims[i];
  return count;
}

int64_t last_dim(const ffi::AnyBuffer& b) {
  auto dims = b.dimensions();
  return dims.size() == 0 ? 1 : dims[dims.size() - 1];
}

ffi::Error invalid(std::string msg) {
  return ffi::Error(ffi::ErrorCode::kInvalidArgument, "shoal.ode.solve: " + msg);
}

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
  const auto dtype = y0.element_type();
  const int bits = dtype == ffi::DataType::F64 ? 64 : dtype == ffi::DataType::F32 ? 32 : 0;
  if (bits == 0 || bits != model.dtype_bits) {
    return invalid("y0 has an element type the compiled model was not built for (model is float" +
                   std::to_string(model.dtype_bits) + ")");
  }
  for (const ffi::AnyBuffer* b : {&params, &t_span, &weights}) {
    if (b->element_type() != dtype) return invalid("all floating inputs must share y0's dtype");
  }
  if (last_dim(y0) != model.n_vars || last_dim(weights) != model.n_vars) {
    return invalid("state size " + std::to_string(last_dim(y0)) + " does not match the model's " +
                   std::to_string(model.n_vars) + " variables");
  }
  if (last_dim(params) != model.n_params) {
    return invalid("params size " + std::to_string(last_dim(params)) +
                   " does not match the model's " + std::to_string(model.n_params));
  }
  const int64_t n_traj = leading_count(y0, 1);
  const int64_t n_t_rows = leading_count(t_span, 1);
  if (leading_count(params, 1) != n_traj || leading_count(weights, 1) != n_traj) {
    return invalid("y0, params and error_weights must have the same number of trajectories");
  }
  if (n_t_rows <= 0 || n_traj % n_t_rows != 0) {
    return invalid("t_span rows do not divide the ensemble");
  }
  const int64_t n_save = last_dim(t_span);
  if (ys->element_count() != static_cast<size_t>(n_traj * n_save * model.n_vars)) {
    return invalid("output buffer has the wrong size");
  }

  ShoalEnsembleArgs a;
  std::memset(&a, 0, sizeof(a));
  a.n_traj = n_traj;
  a.t_span_group = n_t_rows > 0 ? n_traj / n_t_rows : 1;
  a.n_vars = model.n_vars;
  a.n_params = model.n_params;
  a.n_save = static_cast<int32_t>(n_save);
  a.y0 = y0.untyped_data();
  a.params = params.untyped_data();
  a.t_span = t_span.untyped_data();
  a.weights = weights.untyped_data();
  a.ys = ys->untyped_data();
  a.accepted = static_cast<int32_t*>(accepted->untyped_data());
  a.rejected = static_cast<int32_t*>(rejected->untyped_data());
  a.status = static_cast<int32_t*>(status->untyped_data());
  a.rtol = rtol;
  a.atol = atol;
  a.first_step = first_step;
  a.pcoeff = pcoeff;
  a.icoeff = icoeff;
  a.dcoeff = dcoeff;
  a.max_steps = max_steps;
  a.n_error = static_cast<int32_t>(n_error);
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
  // No C++ exception may cross into XLA.
  try {
    return solve_impl(y0, params, t_span, weights, model_path, entry, rtol, atol, first_step,
                      pcoeff, icoeff, dcoeff, max_steps, n_error, ys, accepted, rejected, status);
  } catch (const std::exception& e) {
    return ffi::Error(ffi::ErrorCode::kInternal, std::string("shoal.ode.solve: ") + e.what());
  } catch (...) {
    return ffi::Error(ffi::ErrorCode::kInternal, "shoal.ode.solve: unknown C++ exception");
  }
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
