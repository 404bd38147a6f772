// XLA FFI handler for ensemble ODE solves on the CPU.
//
// One static target serves every model: the call's attributes name the compiled model library and
// its entry point, the buffers carry the ensemble (signature: bind_ensemble_solve, after XLA's
// intra-op thread pool). The pool's workers claim small chunks of trajectories from one work
// queue (ShoalWorkQueue, ensemble.hpp); with a progress slot (progress.hpp) every finished
// trajectory is counted there, for Python to poll. Ctrl-C cuts the solve short (interrupt.hpp).
#include <algorithm>
#include <cstdlib>
#include <new>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "../common/ffi_guard.hpp"
#include "../common/parallel_for.hpp"
#include "ensemble_call.hpp"
#include "interrupt.hpp"
#include "model_registry.hpp"
#include "ode_ffi.hpp"
#include "progress.hpp"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace shoal {

int max_solve_threads() {
  if (const char* env = std::getenv("SHOAL_NUM_THREADS")) {
    const int v = std::atoi(env);
    if (v > 0) return v;
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

namespace {

// The progress operand: an int32 slot of progress.hpp's table, or -1 (then nullptr).
ffi::Error progress_counter(const ffi::AnyBuffer& slot, progress::Counter** counter) {
  if (slot.element_type() != ffi::DataType::S32 || slot.element_count() == 0) {
    return ffi::Error(ffi::ErrorCode::kInvalidArgument,
                      "shoal.ode.solve: the progress operand must be an int32 slot");
  }
  *counter = progress::counter(static_cast<const int32_t*>(slot.untyped_data())[0]);
  return ffi::Error::Success();
}

// An adjoint call's extra operand and results (bind_ensemble_adjoint).
struct AdjointBuffers {
  ffi::AnyBuffer ys_bar;
  ffi::Result<ffi::AnyBuffer> y0_bar, params_bar, shared_bar;
};

// Where the kernel writes each trajectory's whole p̄ (n_params numbers): kept by the thread that
// calls the handler and grown as needed, so that a neural network's thousands of shared weights
// times the ensemble (1 000 × 4 480 numbers, 36 MB) are not a fresh allocation, page faults and
// all, at every gradient; beyond kKeptRowsBytes it is released after the call
// (release_parameter_cotangent_rows), so one huge gradient does not hold its memory for good.
constexpr size_t kKeptRowsBytes = size_t(256) << 20;
std::vector<unsigned char>& parameter_cotangent_rows() {
  thread_local std::vector<unsigned char> rows;
  return rows;
}
void release_parameter_cotangent_rows() {
  std::vector<unsigned char>& rows = parameter_cotangent_rows();
  if (rows.size() > kKeptRowsBytes) std::vector<unsigned char>().swap(rows);
}

ffi::Error fill_adjoint_args(EnsembleBuffers buffers, AdjointBuffers& adjoint,
                             ShoalEnsembleArgs* a) {
  const auto dtype = buffers.y0.element_type();
  if (adjoint.ys_bar.element_type() != dtype || adjoint.y0_bar->element_type() != dtype ||
      adjoint.params_bar->element_type() != dtype || adjoint.shared_bar->element_type() != dtype) {
    return ffi::Error(ffi::ErrorCode::kInvalidArgument,
                      "shoal.ode.solve adjoint: cotangents must have y0's dtype");
  }
  // ys_bar: each trajectory's saves' cotangents, then (a model with an event) its event state's.
  const size_t event_part = buffers.event_state->element_count();
  const int64_t n_own = a->n_params - a->n_shared;
  if (adjoint.ys_bar.element_count() != buffers.ys->element_count() + event_part ||
      adjoint.y0_bar->element_count() != buffers.y0.element_count() ||
      adjoint.params_bar->element_count() != static_cast<size_t>(a->n_traj * n_own) ||
      adjoint.shared_bar->element_count() != buffers.shared.element_count()) {
    return ffi::Error(ffi::ErrorCode::kInvalidArgument,
                      "shoal.ode.solve adjoint: a cotangent buffer has the wrong size");
  }
  a->ys_bar = adjoint.ys_bar.untyped_data();
  a->y0_bar = adjoint.y0_bar->untyped_data();
  std::vector<unsigned char>& rows = parameter_cotangent_rows();
  const size_t bytes = static_cast<size_t>(a->n_traj * a->n_params) * ffi::ByteWidth(dtype);
  try {
    if (rows.size() < bytes) rows.resize(bytes);
  } catch (const std::bad_alloc&) {  // the lowering's check (_memory.py) passed, memory went since
    std::vector<unsigned char>().swap(rows);
    return ffi::Error(ffi::ErrorCode::kResourceExhausted,
                      "shoal.ode.solve adjoint: out of memory for the parameters' cotangent rows (" +
                          std::to_string(a->n_traj) + " trajectories x " +
                          std::to_string(a->n_params) + " parameters, " +
                          std::to_string(bytes >> 20) +
                          " MiB); differentiate the ensemble in parts");
  }
  a->p_bar = rows.data();
  return ffi::Error::Success();
}

// The kernel's p̄ rows into the results: each trajectory's own entries, and its shared ones
// summed over the trajectories that read each row of them (`group` consecutive ones), in
// trajectory order: the same sum whatever the threads did, each member's part its own.
template <class T>
void split_parameter_cotangents(const ShoalEnsembleArgs& a, T* params_bar, T* shared_bar) {
  const T* rows = static_cast<const T*>(a.p_bar);
  const int64_t n_params = a.n_params, n_shared = a.n_shared, n_own = n_params - n_shared;
  for (int64_t m = 0; m < a.n_traj; ++m) {
    std::copy(rows + m * n_params, rows + m * n_params + n_own, params_bar + m * n_own);
  }
  if (n_shared == 0) return;
  for (int64_t r = 0; r < a.n_traj / a.shared_group; ++r) {
    T* sum = shared_bar + r * n_shared;
    std::fill(sum, sum + n_shared, T(0));
    for (int64_t m = r * a.shared_group; m < (r + 1) * a.shared_group; ++m) {
      const T* row = rows + m * n_params + n_own;
      for (int64_t c = 0; c < n_shared; ++c) sum[c] += row[c];
    }
  }
}

// The rows of recordings an adjoint library's _record entry writes and its adjoint entry reads
// (RecordingRows, adjoint.hpp): uint8 (leading dimensions of y0, row bytes); none: 0 bytes.
ffi::Error fill_recording_args(const ffi::AnyBuffer& rows, ShoalEnsembleArgs* a) {
  const size_t bytes = rows.size_bytes();
  if (rows.element_type() != ffi::DataType::U8 ||
      (a->n_traj > 0 && bytes % static_cast<size_t>(a->n_traj) != 0)) {
    return ffi::Error(ffi::ErrorCode::kInvalidArgument,
                      "shoal.ode.solve adjoint: the recording rows must be uint8 with one row "
                      "per trajectory");
  }
  if (bytes > 0) {
    a->recording = rows.untyped_data();
    a->recording_row_bytes = static_cast<int64_t>(bytes) / a->n_traj;
  }
  return ffi::Error::Success();
}

// What the three handlers share: the progress slot's counter, then the ensemble's solve (with
// the adjoint's cotangents and the rows of recordings where given).
ffi::Error solve_impl(ffi::ThreadPool& pool, const ffi::AnyBuffer& progress,
                      const EnsembleBuffers& buffers, std::string_view model_path,
                      std::string_view entry, const ShoalSolveOptions& options,
                      AdjointBuffers* adjoint = nullptr,
                      const ffi::AnyBuffer* recording = nullptr) {
  progress::Counter* counter = nullptr;
  ffi::Error slot = progress_counter(progress, &counter);
  if (slot.failure()) return slot;
  LoadedModel model;
  std::string error;
  if (!load_model(std::string(model_path), std::string(entry), &model, &error)) {
    return ffi::Error(ffi::ErrorCode::kFailedPrecondition, error);
  }
  const ModelShape shape{model.n_vars,     model.n_params, model.n_shared,
                         model.dtype_bits, model.n_saved,  model.has_event};
  ShoalEnsembleArgs a;
  ffi::Error filled = fill_ensemble_args(shape, buffers, options, &a);
  if (filled.failure()) return filled;
  if (adjoint != nullptr) {
    filled = fill_adjoint_args(buffers, *adjoint, &a);
    if (filled.failure()) return filled;
  }
  if (recording != nullptr) {
    filled = fill_recording_args(*recording, &a);
    if (filled.failure()) return filled;
  }
  const int64_t n_traj = a.n_traj;
  if (n_traj == 0) {
    if (adjoint != nullptr) {  // no trajectory read the shared rows: their cotangents are 0
      std::fill_n(static_cast<unsigned char*>(adjoint->shared_bar->untyped_data()),
                  adjoint->shared_bar->size_bytes(), 0);
    }
    return ffi::Error::Success();
  }
  // Ctrl-C ends every trajectory within a step (interrupt.hpp). The solve still succeeds, with
  // status kCancelled where a trajectory was cut short: the handler ours chains to (Python's)
  // raises KeyboardInterrupt as soon as the main thread is back in Python, so an eager or jitted
  // solve ends in a plain KeyboardInterrupt. An error here would reach Python first, as an
  // exception of its own (a ValueError, tried), with the KeyboardInterrupt raised while handling
  // it: an `except KeyboardInterrupt` would miss it.
  interrupt::Scope ctrl_c;
  a.cancel = ctrl_c.flag();

  // Every worker claims small chunks from one queue (ShoalWorkQueue) until it is empty: small
  // chunks keep the load balanced when step counts differ wildly between trajectories, and a
  // worker with SIMD lanes refills a lane from it the moment the lane's trajectory ends.
  const int64_t threads = max_solve_threads();
  ShoalWorkQueue queue{};
  queue.next = 0;
  queue.chunk = std::max<int64_t>(1, std::min<int64_t>(64, n_traj / (16 * threads)));
  if (counter != nullptr) {
    __atomic_fetch_add(&counter->total, n_traj, __ATOMIC_RELAXED);
    queue.done = &counter->done;
  }
  a.queue = &queue;
  const SolveRangeFn fn = model.solve_range;
  const int64_t workers = std::min<int64_t>(threads, (n_traj + queue.chunk - 1) / queue.chunk);
  parallel_for(
      pool, workers, workers, [&](int64_t, int64_t) { fn(&a, 0, 0); }, 1);
  if (adjoint != nullptr) {
    if (model.dtype_bits == 64) {
      split_parameter_cotangents(a, static_cast<double*>(adjoint->params_bar->untyped_data()),
                                 static_cast<double*>(adjoint->shared_bar->untyped_data()));
    } else {
      split_parameter_cotangents(a, static_cast<float*>(adjoint->params_bar->untyped_data()),
                                 static_cast<float*>(adjoint->shared_bar->untyped_data()));
    }
    release_parameter_cotangent_rows();
  }
  return ffi::Error::Success();
}

ffi::Error solve(ffi::ThreadPool pool, ffi::AnyBuffer y0, ffi::AnyBuffer params,
                 ffi::AnyBuffer shared, ffi::AnyBuffer t_span, ffi::AnyBuffer weights,
                 ffi::AnyBuffer atol, ffi::AnyBuffer tstops, ffi::AnyBuffer first_step, ffi::AnyBuffer progress,
                 std::string_view model,
                 std::string_view entry, ShoalSolveOptions options, ffi::Result<ffi::AnyBuffer> ys,
                 ffi::Result<ffi::AnyBuffer> accepted, ffi::Result<ffi::AnyBuffer> rejected,
                 ffi::Result<ffi::AnyBuffer> status, ffi::Result<ffi::AnyBuffer> event_time,
                 ffi::Result<ffi::AnyBuffer> event_state) {
  return without_exceptions("shoal.ode.solve", [&] {
    return solve_impl(pool, progress,
                      {y0, params, shared, t_span, weights, atol, tstops, first_step, ys, accepted,
                       rejected, status, event_time, event_state},
                      model, entry, options);
  });
}

ffi::Error adjoint(ffi::ThreadPool pool, ffi::AnyBuffer y0, ffi::AnyBuffer params,
                   ffi::AnyBuffer shared, ffi::AnyBuffer t_span, ffi::AnyBuffer weights,
                   ffi::AnyBuffer atol, ffi::AnyBuffer tstops, ffi::AnyBuffer first_step,
                   ffi::AnyBuffer progress, std::string_view model, std::string_view entry,
                   ShoalSolveOptions options, ffi::Result<ffi::AnyBuffer> ys,
                   ffi::Result<ffi::AnyBuffer> accepted, ffi::Result<ffi::AnyBuffer> rejected,
                   ffi::Result<ffi::AnyBuffer> status, ffi::Result<ffi::AnyBuffer> event_time,
                   ffi::Result<ffi::AnyBuffer> event_state, ffi::AnyBuffer ys_bar,
                   ffi::AnyBuffer recording, ffi::Result<ffi::AnyBuffer> y0_bar,
                   ffi::Result<ffi::AnyBuffer> params_bar,
                   ffi::Result<ffi::AnyBuffer> shared_bar) {
  return without_exceptions("shoal.ode.solve", [&] {
    AdjointBuffers cotangents{ys_bar, y0_bar, params_bar, shared_bar};
    return solve_impl(pool, progress,
                      {y0, params, shared, t_span, weights, atol, tstops, first_step, ys, accepted,
                       rejected, status, event_time, event_state},
                      model, entry, options, &cotangents, &recording);
  });
}

// The value's solve of a gradient by the adjoint (an adjoint library's _record entry): a solve's
// results and each trajectory's recording in its row of `recording`.
ffi::Error record(ffi::ThreadPool pool, ffi::AnyBuffer y0, ffi::AnyBuffer params,
                  ffi::AnyBuffer shared, ffi::AnyBuffer t_span, ffi::AnyBuffer weights,
                  ffi::AnyBuffer atol, ffi::AnyBuffer tstops, ffi::AnyBuffer first_step,
                  ffi::AnyBuffer progress, std::string_view model, std::string_view entry,
                  ShoalSolveOptions options, ffi::Result<ffi::AnyBuffer> ys,
                  ffi::Result<ffi::AnyBuffer> accepted, ffi::Result<ffi::AnyBuffer> rejected,
                  ffi::Result<ffi::AnyBuffer> status, ffi::Result<ffi::AnyBuffer> event_time,
                  ffi::Result<ffi::AnyBuffer> event_state,
                  ffi::Result<ffi::AnyBuffer> recording) {
  return without_exceptions("shoal.ode.solve", [&] {
    const ffi::AnyBuffer rows = *recording;
    return solve_impl(pool, progress,
                      {y0, params, shared, t_span, weights, atol, tstops, first_step, ys, accepted,
                       rejected, status, event_time, event_state},
                      model, entry, options, nullptr, &rows);
  });
}

}  // namespace
}  // namespace shoal

XLA_FFI_DEFINE_HANDLER_SYMBOL(ShoalOdeSolveCpu, shoal::solve,
                              shoal::bind_ensemble_solve(ffi::Ffi::Bind().Ctx<ffi::ThreadPool>()));
XLA_FFI_DEFINE_HANDLER_SYMBOL(ShoalOdeRecordCpu, shoal::record,
                              shoal::bind_ensemble_solve(ffi::Ffi::Bind().Ctx<ffi::ThreadPool>())
                                  .Ret<ffi::AnyBuffer>());  // the rows of recordings
XLA_FFI_DEFINE_HANDLER_SYMBOL(ShoalOdeAdjointCpu, shoal::adjoint,
                              shoal::bind_ensemble_adjoint(shoal::bind_ensemble_solve(
                                  ffi::Ffi::Bind().Ctx<ffi::ThreadPool>())));
