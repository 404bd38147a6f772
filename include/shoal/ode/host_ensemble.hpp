// Host-only conveniences for using the ensemble API from C++: filling a ShoalEnsembleArgs from
// buffers and options (ShoalSolveOptions, solve_options.hpp), and spreading solve_range (or the
// SIMD lanes engine, solve_range_lanes) over std::threads.
//
// Not for device code (it uses std::thread); the Python runtime has its own dynamic scheduler.
// Trajectories are independent, so any split gives bit-identical results.
#pragma once

#ifndef __CUDACC_RTC__
#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

#include "shoal/ode/ensemble.hpp"
#ifndef SHOAL_DEVICE_COMPILE  // the lanes are host-compiler vectors
#include "shoal/ode/lanes_ensemble.hpp"
#endif

namespace shoal {
namespace ode {

// Buffers in ShoalEnsembleArgs' layouts (ensemble.hpp); one t_span row and one row of shared
// parameters (for a model with n_shared, model_traits.hpp) serve every trajectory, all error
// weights one.
template <class Model, class T>
ShoalEnsembleArgs ensemble_args(int64_t n_traj, int n_save, const T* y0, const T* params,
                                const T* t_span, T* ys, int32_t* accepted, int32_t* rejected,
                                int32_t* status, const ShoalSolveOptions& options = {},
                                const T* shared = nullptr) {
  ShoalEnsembleArgs a{};
  a.n_traj = n_traj;
  a.t_span_group = n_traj > 0 ? n_traj : 1;
  a.shared_group = a.t_span_group;
  a.n_vars = Model::n_vars;
  a.n_params = Model::n_params;
  a.n_shared = n_shared_params<Model>();
  a.n_save = n_save;
  a.y0 = y0;
  a.params = params;
  a.shared = shared;
  a.t_span = t_span;
  a.weights = nullptr;
  a.ys = ys;
  a.accepted = accepted;
  a.rejected = rejected;
  a.status = status;
  a.options = options;
  a.tstops = nullptr;
  a.tstops_group = a.t_span_group;
  a.n_tstops = 0;
  a.first_step = nullptr;
  a.n_saved = n_saved<Model>();
  a.atol = nullptr;
  a.queue = nullptr;
  return a;
}

// Solves the whole ensemble on `threads` threads (0: all hardware threads), in equal slices.
// Returns the number of threads used.
template <template <class, class> class Stepper, class Model, class T>
int solve_ensemble(const ShoalEnsembleArgs& a, int threads = 0) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int k = 0; k < threads; ++k) {
    pool.emplace_back([&a, k, threads] {
      const int64_t begin = a.n_traj * k / threads, end = a.n_traj * (k + 1) / threads;
      solve_range<Stepper, Model, T>(a, begin, end);
    });
  }
  for (auto& t : pool) t.join();
  return threads;
}

#ifndef SHOAL_DEVICE_COMPILE
// The same with W trajectories per thread in SIMD lanes (lanes_ensemble.hpp; default: one vector
// register of this build's ISA), the threads claiming chunks of `chunk` from one work queue.
// Stepper must take lanes for T: Tsit5, Rodas5PLu64, Rodas5PLu32 and their sensitivity forms
// do. Bit-identical to solve_ensemble.
template <template <class, class> class Stepper, class Model, class T,
          int W = simd::native_lanes<T>()>
int solve_ensemble_lanes(const ShoalEnsembleArgs& a, int threads = 0, int64_t chunk = 16) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ShoalWorkQueue queue{0, chunk, nullptr};
  ShoalEnsembleArgs shared = a;
  shared.queue = &queue;
  std::vector<std::thread> pool;
  for (int k = 0; k < threads; ++k) {
    pool.emplace_back(
        [&shared] { solve_range_lanes<Stepper, Stepper, Model, T, W>(shared, 0, 0); });
  }
  for (auto& t : pool) t.join();
  return threads;
}
#endif  // SHOAL_DEVICE_COMPILE

}  // namespace ode
}  // namespace shoal
#endif  // __CUDACC_RTC__
