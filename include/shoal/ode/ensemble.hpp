// The ensemble entry point shared by compiled models and the host runtime.
//
// A JIT-compiled model library exports plain `extern "C"` functions taking an EnsembleArgs: a C
// struct of pointers and numbers, so nothing C++-ABI crosses the shared-object boundary. The host
// splits [0, n_traj) into chunks and calls solve_range on each from its thread pool; trajectories
// are independent, so any split gives bit-identical results.
#pragma once

#include "shoal/config.hpp"
#include "shoal/ode/integrate.hpp"
#include "shoal/ode/model_traits.hpp"
#include "shoal/ode/solve_options.hpp"

// The ensemble ABI: the host refuses a library built against a different layout instead of
// reading garbage. Bump SHOAL_ODE_ABI_BASE whenever ShoalEnsembleArgs (outside its options) or the
// exported entry signatures change; the options' layout is folded in by itself.
#define SHOAL_ODE_ABI_BASE 9
#define SHOAL_ODE_ABI_VERSION \
  (static_cast<int32_t>(SHOAL_ODE_ABI_BASE << 24) | ::shoal::ode::solve_options_layout())

extern "C" {

// Layouts (row-major, T = float or double as the library was compiled for):
//   y0       (n_traj, n_vars)
//   params   (n_traj, n_params - n_shared): each trajectory's own parameters
//   shared   (n_traj / shared_group, n_shared): the model's shared parameters (the trailing
//            n_shared of its p, model_traits.hpp); trajectory m uses row m / shared_group, so
//            one row serves a whole ensemble and a vmapped solve has one per batch element
//   weights  (n_traj, n_vars), or null for all ones
//   atol     (n_traj, n_vars) absolute tolerances, or null for the options' scalar atol
//   t_span   (n_traj / t_span_group, n_save): trajectory m uses row m / t_span_group
//   tstops   (n_traj / tstops_group, n_tstops), each row ascending (integrate.hpp)
//   first_step  (n_traj,): > 0 overrides the default first step
//   ys       (n_traj, n_save, n_saved): what each save records (the state, n_saved = n_vars,
//            unless the model has a save, model_traits.hpp)
//   accepted, rejected, status  (n_traj,) int32
//   event_time (n_traj,), event_state (n_traj, n_vars): only for a model with an event (else
//            null), NaN where no event occurred
//   cancel   one int32 the host may set to nonzero while the solve runs (Ctrl-C), or null:
//            every trajectory reads it once per step attempt and ends with kCancelled
//            (cancel.hpp); null on CUDA, where a running kernel cannot be reached
//   queue    the host's work queue (below), or null: then solve_range solves its range only
//   ys_bar, y0_bar, p_bar   only for an adjoint entry (explicit_rk_adjoint.hpp), else null: the
//            saves' cotangents (n_traj, n_save, n_vars) in, the cotangents of y0 (n_traj, n_vars)
//            and of each trajectory's whole p (n_traj, n_params: own, then shared) out
//   recording, recording_row_bytes   an adjoint library's rows of recordings (adjoint.hpp:
//            RecordingRows), or null and 0: (n_traj, recording_row_bytes) bytes, written by its
//            _record entry (the value's solve) and read by its adjoint entry (the backward sweeps)
//
// The work queue is shared by the host's worker threads: each claims `chunk` trajectories at a
// time from `next` (an atomic fetch-add) until n_traj, and counts every finished trajectory in
// `*done` (atomically; the live progress of progress.hpp, or null). A worker that holds SIMD
// lanes (lanes_ensemble.hpp) refills a lane from it the moment the lane's trajectory ends.
typedef struct ShoalWorkQueue {
  int64_t next;
  int64_t chunk;
  int64_t* done;
} ShoalWorkQueue;

typedef struct ShoalEnsembleArgs {
  int64_t n_traj;
  int64_t t_span_group;
  int64_t shared_group;
  const void* y0;
  const void* params;
  const void* shared;
  const void* t_span;
  const void* weights;
  void* ys;
  int32_t* accepted;
  int32_t* rejected;
  int32_t* status;
  ShoalSolveOptions options;
  int32_t n_vars;
  int32_t n_params;
  int32_t n_shared;
  int32_t n_save;
  const void* tstops;
  const void* first_step;
  void* event_time;
  void* event_state;
  int64_t tstops_group;
  int32_t n_tstops;
  int32_t n_saved;
  const void* atol;
  const int32_t* cancel;
  ShoalWorkQueue* queue;
  const void* ys_bar;
  void* y0_bar;
  void* p_bar;
  void* recording;
  int64_t recording_row_bytes;
} ShoalEnsembleArgs;

}  // extern "C"

namespace shoal {
namespace ode {

// Trajectory m of the ensemble described by `a`, all but its parameters (params_of).
template <class Model, class T>
SHOAL_HD Trajectory<T> trajectory_of(const ShoalEnsembleArgs& a, int64_t m) {
  constexpr int n = Model::n_vars;
  Trajectory<T> tr;
  tr.y0 = static_cast<const T*>(a.y0) + m * n;
  tr.t_span = static_cast<const T*>(a.t_span) + (m / a.t_span_group) * a.n_save;
  tr.n_save = a.n_save;
  tr.tstops = static_cast<const T*>(a.tstops) + (m / a.tstops_group) * a.n_tstops;
  tr.n_tstops = a.n_tstops;
  tr.weights = a.weights ? static_cast<const T*>(a.weights) + m * n : nullptr;
  tr.atol = a.atol ? static_cast<const T*>(a.atol) + m * n : nullptr;
  tr.first_step = a.first_step ? static_cast<const T*>(a.first_step)[m] : T(-1);
  tr.out = static_cast<T*>(a.ys) + m * a.n_save * n_saved<Model>();
  tr.cancel = a.cancel;
  if constexpr (has_event<Model>()) {
    tr.event_time = static_cast<T*>(a.event_time) + m;
    tr.event_state = static_cast<T*>(a.event_state) + m * n;
  }
  return tr;
}

// Trajectory m's own parameters (n_params − n_shared of them) and the row of shared ones it uses.
template <class Model, class T>
SHOAL_HD const T* own_params_of(const ShoalEnsembleArgs& a, int64_t m) {
  return static_cast<const T*>(a.params) + m * (Model::n_params - n_shared_params<Model>());
}
SHOAL_HD inline int64_t shared_row_of(const ShoalEnsembleArgs& a, int64_t m) {
  return m / a.shared_group;
}
template <class Model, class T>
SHOAL_HD const T* shared_params_row(const ShoalEnsembleArgs& a, int64_t row) {
  return static_cast<const T*>(a.shared) + row * n_shared_params<Model>();
}

// Trajectory m's parameters as the model reads them, one contiguous p: its own, then the shared
// ones (copied once per trajectory, not per step). Without shared ones, its own row itself.
template <class Model, class T>
SHOAL_HD const T* params_of(const ShoalEnsembleArgs& a, int64_t m, T* p) {
  constexpr int n_shared = n_shared_params<Model>();
  constexpr int n_own = Model::n_params - n_shared;
  const T* own = own_params_of<Model, T>(a, m);
  if constexpr (n_shared == 0) {
    return own;
  } else {
    const T* shared = shared_params_row<Model, T>(a, shared_row_of(a, m));
    for (int i = 0; i < n_own; ++i) p[i] = own[i];
    for (int i = 0; i < n_shared; ++i) p[n_own + i] = shared[i];
    return p;
  }
}

// Solves trajectory m of the ensemble described by `a`.
template <template <class, class> class Stepper, class Model, class T>
SHOAL_HD void solve_one(const ShoalEnsembleArgs& a, const IntegrateOptions<T>& opt, int64_t m) {
  T p[Model::n_params > 0 ? Model::n_params : 1];
  Trajectory<T> tr = trajectory_of<Model, T>(a, m);
  tr.p = params_of<Model>(a, m, p);
  IntegrateStats stats;
  a.status[m] = integrate<Stepper, Model, T>(tr, opt, &stats);
  a.accepted[m] = stats.accepted;
  a.rejected[m] = stats.rejected;
}

#ifndef __CUDACC_RTC__  // host only: the CPU runtime
// The next trajectories for a worker: [*begin, *end) claimed from a's work queue; false when it
// is empty (or there is none).
inline bool claim(const ShoalEnsembleArgs& a, int64_t* begin, int64_t* end) {
  if (a.queue == nullptr) return false;
  const int64_t chunk = a.queue->chunk > 0 ? a.queue->chunk : 1;
  const int64_t b = __atomic_fetch_add(&a.queue->next, chunk, __ATOMIC_RELAXED);
  if (b >= a.n_traj) return false;
  *begin = b;
  *end = b + chunk < a.n_traj ? b + chunk : a.n_traj;
  return true;
}

// Counts finished trajectories in the queue's progress counter, if any.
inline void count_done(const ShoalEnsembleArgs& a, int64_t finished) {
  if (a.queue != nullptr && a.queue->done != nullptr)
    __atomic_fetch_add(a.queue->done, finished, __ATOMIC_RELAXED);
}

// Solves trajectories [begin, end) of the ensemble described by `a`, then those it claims from
// a's work queue.
template <template <class, class> class Stepper, class Model, class T>
void solve_range(const ShoalEnsembleArgs& a, int64_t begin, int64_t end) {
  const auto opt = IntegrateOptions<T>::from(a.options);
  do {
    for (int64_t m = begin; m < end; ++m) solve_one<Stepper, Model, T>(a, opt, m);
    count_done(a, end - begin);
  } while (claim(a, &begin, &end));
}
#endif  // __CUDACC_RTC__

}  // namespace ode
}  // namespace shoal
