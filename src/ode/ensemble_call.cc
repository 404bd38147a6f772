#include "ensemble_call.hpp"

#include <cstdint>
#include <cstring>
#include <string>

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

}  // namespace

ffi::Error fill_ensemble_args(const ModelShape& model, EnsembleBuffers buffers,
                              const ShoalSolveOptions& options, ShoalEnsembleArgs* a) {
  const ffi::AnyBuffer &y0 = buffers.y0, &params = buffers.params, &shared = buffers.shared,
                       &t_span = buffers.t_span, &weights = buffers.weights, &atol = buffers.atol,
                       &tstops = buffers.tstops, &first_step = buffers.first_step;
  const auto dtype = y0.element_type();
  const int bits = dtype == ffi::DataType::F64 ? 64 : dtype == ffi::DataType::F32 ? 32 : 0;
  if (bits == 0 || bits != model.dtype_bits) {
    return invalid("y0 has an element type the compiled model was not built for (model is float" +
                   std::to_string(model.dtype_bits) + ")");
  }
  for (const ffi::AnyBuffer* b : {&params, &shared, &t_span, &weights, &atol, &tstops, &first_step}) {
    if (b->element_type() != dtype) return invalid("all floating inputs must share y0's dtype");
  }
  if (last_dim(y0) != model.n_vars || last_dim(weights) != model.n_vars ||
      last_dim(atol) != model.n_vars) {
    return invalid("state size " + std::to_string(last_dim(y0)) + " does not match the model's " +
                   std::to_string(model.n_vars) + " variables");
  }
  const int32_t n_own = model.n_params - model.n_shared;
  if (last_dim(params) != n_own || last_dim(shared) != model.n_shared) {
    return invalid("parameter sizes " + std::to_string(last_dim(params)) + " (per trajectory) and " +
                   std::to_string(last_dim(shared)) + " (shared) do not match the model's " +
                   std::to_string(n_own) + " and " + std::to_string(model.n_shared));
  }
  const int64_t n_traj = leading_count(y0, 1);
  const int64_t n_t_rows = leading_count(t_span, 1);
  if (leading_count(params, 1) != n_traj || leading_count(weights, 1) != n_traj ||
      leading_count(atol, 1) != n_traj) {
    return invalid("y0, params, error_weights and atol must have the same number of trajectories");
  }
  if (n_t_rows <= 0 || n_traj % n_t_rows != 0) {
    return invalid("t_span rows do not divide the ensemble");
  }
  const int64_t n_shared_rows = leading_count(shared, 1);
  if (n_shared_rows <= 0 || n_traj % n_shared_rows != 0) {
    return invalid("shared parameter rows do not divide the ensemble");
  }
  const int64_t n_tstop_rows = leading_count(tstops, 1);
  if (n_tstop_rows <= 0 || n_traj % n_tstop_rows != 0) {
    return invalid("tstops rows do not divide the ensemble");
  }
  if (static_cast<int64_t>(first_step.element_count()) != n_traj) {
    return invalid("first_step must have one entry per trajectory");
  }
  const int64_t n_save = last_dim(t_span);
  // Counts within a trajectory are int32 (ShoalEnsembleArgs); offsets across it are int64.
  if (n_save > INT32_MAX || last_dim(tstops) > INT32_MAX) {
    return invalid("more than 2^31 - 1 save times or stops per trajectory");
  }
  if (buffers.ys->element_count() != static_cast<size_t>(n_traj * n_save * model.n_saved)) {
    return invalid("output buffer has the wrong size");
  }
  const size_t event_rows = model.has_event ? static_cast<size_t>(n_traj) : 0;
  if (buffers.event_time->element_count() != event_rows ||
      buffers.event_state->element_count() != event_rows * model.n_vars) {
    return invalid("event output buffers have the wrong size");
  }
  for (auto* out : {&buffers.accepted, &buffers.rejected, &buffers.status}) {
    if ((*out)->element_count() != static_cast<size_t>(n_traj)) {
      return invalid("statistics buffer has the wrong size");
    }
  }

  std::memset(a, 0, sizeof(*a));
  a->n_traj = n_traj;
  a->t_span_group = n_traj / n_t_rows;
  a->shared_group = n_traj / n_shared_rows;
  a->n_vars = model.n_vars;
  a->n_params = model.n_params;
  a->n_shared = model.n_shared;
  a->n_save = static_cast<int32_t>(n_save);
  a->n_saved = model.n_saved;
  a->tstops_group = n_traj / n_tstop_rows;
  a->n_tstops = static_cast<int32_t>(last_dim(tstops));
  a->tstops = tstops.untyped_data();
  a->first_step = first_step.untyped_data();
  a->event_time = model.has_event ? buffers.event_time->untyped_data() : nullptr;
  a->event_state = model.has_event ? buffers.event_state->untyped_data() : nullptr;
  a->y0 = y0.untyped_data();
  a->params = params.untyped_data();
  a->shared = shared.untyped_data();
  a->t_span = t_span.untyped_data();
  a->weights = weights.untyped_data();
  a->atol = atol.untyped_data();
  a->ys = buffers.ys->untyped_data();
  a->accepted = static_cast<int32_t*>(buffers.accepted->untyped_data());
  a->rejected = static_cast<int32_t*>(buffers.rejected->untyped_data());
  a->status = static_cast<int32_t*>(buffers.status->untyped_data());
  a->options = options;
  return ffi::Error::Success();
}

}  // namespace shoal
