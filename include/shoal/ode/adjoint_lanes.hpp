// The adjoint's forward solve in SIMD lanes: W trajectories stepped together by the lanes engine
// (lanes_ensemble.hpp), each lane's accepted steps, jumps and stages recorded as the scalar
// forward solve records them (adjoint.hpp: the same steps and bits, since lanes compute as
// scalars do). When a lane's trajectory finishes, its backward sweep runs: where it can
// (backward_in_lanes), together with W − 1 others that finished before it, their products on
// the lanes (adjoint_backward_lanes.hpp), else at once on its own.
#pragma once

#include <cstdint>
#include <memory>

#include "shoal/ode/adjoint.hpp"
#include "shoal/ode/adjoint_backward_lanes.hpp"
#include "shoal/ode/lanes_ensemble.hpp"

namespace shoal {
namespace ode {

// A lane observer (lanes_ensemble.hpp) holding one Adjoint per lane, and where the backward
// sweeps run in the lanes as many again for the finished trajectories that wait for them; all
// of them share a worker thread's stage budget (adjoint.hpp's default) equally.
template <template <class, class> class Stepper, template <class, class> class LanesStepper,
          template <template <class, class> class, class, class> class StepAdjoint, class Model,
          class T, int W>
struct AdjointLanes {
  static constexpr bool batched =
      backward_in_lanes<Adjoint<Stepper, StepAdjoint, Model, T>>();
  static constexpr int n_adjoints = batched ? 2 * W : W + 1;
  using A = Adjoint<Stepper, StepAdjoint, Model, T, kStageBudgetBytes / n_adjoints>;
  const ShoalEnsembleArgs& a;
  const IntegrateOptions<T> opt;
  std::unique_ptr<A[]> adjoints{new A[n_adjoints]};  // on the heap: records and products
  A* lanes[W];  // the one recording lane l's trajectory
  // Finished trajectories waiting for their backward sweeps (batched only): their adjoints,
  // trajectories (p: the adjoint's copy) and indices; the adjoints not in use.
  A* parked[W];
  Trajectory<T> parked_tr[W];
  int64_t parked_m[W];
  int n_parked = 0;
  A* spare[W];
  int n_spare = 0;
  std::unique_ptr<BackwardLanes<A, LanesStepper, T, W>> backward;

  // `record`: each finished trajectory's recording goes to its row of `a.recording`
  // (record_range_lanes) instead of its backward sweep. Otherwise a trajectory whose row holds
  // its recording is swept from it (skip) instead of solved forward.
  const bool record;
  // Where a row is loaded that no lane or parked sweep uses.
  A* loader = nullptr;
  RecordingIdentity<Model, T> identity;

  AdjointLanes(const ShoalEnsembleArgs& args, bool record_rows)
      : a(args), opt(IntegrateOptions<T>::from(args.options)), record(record_rows) {
    for (int l = 0; l < W; ++l) lanes[l] = &adjoints[l];
    if constexpr (batched) {
      for (int l = 0; l < W; ++l) spare[n_spare++] = &adjoints[W + l];
      backward.reset(new BackwardLanes<A, LanesStepper, T, W>());
    } else {
      loader = &adjoints[W];
    }
  }

  // Trajectory m's backward sweep from its recording in a.recording, where the row holds it
  // (then the lanes do not solve it); false where the lanes are to.
  bool skip(int64_t m) {
    if (record || a.recording == nullptr) return false;
    T p[Model::n_params > 0 ? Model::n_params : 1];
    Trajectory<T> tr = trajectory_of<Model, T>(a, m);
    tr.p = params_of<Model>(a, m, p);
    // A spare adjoint: one is free whenever fewer than W sweeps are parked, as between calls.
    A* recorder = batched ? spare[n_spare - 1] : loader;
    Status status;
    if (!load_row<Model>(a, m, tr, *recorder, identity, &status)) return false;
    if (batched && differentiable(status, *recorder)) --n_spare;  // it is parked
    settle(*recorder, m, tr, status);
    return true;
  }

  template <class Run>
  void begin(int l, const Run& run) {
    lanes[l]->begin_recording(run, opt);
  }
  template <class Run>
  void after_next_attempt(int l, const Run& run) {
    lanes[l]->after_next_attempt(run);
  }
  template <class Run, class Lanes>
  void before_completion(int l, const Run& run, const Lanes& stepper) {
    lanes[l]->before_completion(run, [&](T* out) { A::Step::record_lane(stepper, l, out); });
  }
  template <class Run>
  void after_completion(int l, const Run& run, bool) {
    lanes[l]->after_completion(run);
  }
  template <class Run>
  void finish(int l, int64_t m, const Run& run, Status status) {
    if (record) {
      const RecordingRows rows = RecordingRows::of(a);
      lanes[l]->save_recording(rows.row(m), rows.capacity(), status, identity(a, m, run.tr),
                               event_time_of<Model>(run.tr));
      return;
    }
    A* done = lanes[l];
    if (batched && differentiable(status, *done)) lanes[l] = spare[--n_spare];  // it is parked
    settle(*done, m, run.tr, status);
  }
  // After the last trajectory: the sweeps still waiting.
  void end() {
    if (n_parked > 0) sweep_parked();
  }

 private:
  // Its backward sweep at once, or parked (with a copy of its parameters: the lane's are the
  // next trajectory's) until W are waiting.
  void settle(A& adjoint, int64_t m, const Trajectory<T>& tr, Status status) {
    if (!batched || !differentiable(status, adjoint)) {
      write_cotangents(a, m, tr, status, adjoint);
      return;
    }
    adjoint.vjps.begin(tr.p);
    parked_tr[n_parked] = tr;
    parked_tr[n_parked].p = adjoint.vjps.q.data();
    parked_m[n_parked] = m;
    parked[n_parked++] = &adjoint;
    if (n_parked == W) sweep_parked();
  }
  void sweep_parked() {
    if constexpr (batched) backward->run(a, parked, parked_tr, parked_m, n_parked);
    for (int k = 0; k < n_parked; ++k) spare[n_spare++] = parked[k];
    n_parked = 0;
  }
};

// record_range in SIMD lanes: adjoint_range_lanes' forward solve, each finished trajectory's
// recording saved to its row of a.recording instead of swept backward. The same instantiation of
// solve_range_lanes as adjoint_range_lanes (whether it records is a run-time argument of
// AdjointLanes), so an adjoint library exporting both compiles the lanes solver once.
template <template <class, class> class ScalarStepper, template <class, class> class LanesStepper,
          template <template <class, class> class, class, class> class StepAdjoint, class Model,
          class T, int W>
void record_range_lanes(const ShoalEnsembleArgs& a, int64_t begin, int64_t end) {
  solve_range_lanes<ScalarStepper, LanesStepper, Model, T, W,
                    AdjointLanes<ScalarStepper, LanesStepper, StepAdjoint, Model, T, W>>(
      a, begin, end, true);
}

// adjoint_range over SIMD lanes of width W: the same outputs, the same bits; a trajectory whose
// row of a.recording holds its recording is swept from it, not solved again (AdjointLanes::skip).
template <template <class, class> class ScalarStepper, template <class, class> class LanesStepper,
          template <template <class, class> class, class, class> class StepAdjoint, class Model,
          class T, int W>
void adjoint_range_lanes(const ShoalEnsembleArgs& a, int64_t begin, int64_t end) {
  solve_range_lanes<ScalarStepper, LanesStepper, Model, T, W,
                    AdjointLanes<ScalarStepper, LanesStepper, StepAdjoint, Model, T, W>>(
      a, begin, end, false);
}

}  // namespace ode
}  // namespace shoal
