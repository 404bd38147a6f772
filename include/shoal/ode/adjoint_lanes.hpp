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
  static constexpr int n_adjoints = batched ? 2 * W : W;
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

  explicit AdjointLanes(const ShoalEnsembleArgs& args)
      : a(args), opt(IntegrateOptions<T>::from(args.options)) {
    for (int l = 0; l < W; ++l) lanes[l] = &adjoints[l];
    if constexpr (batched) {
      for (int l = 0; l < W; ++l) spare[n_spare++] = &adjoints[W + l];
      backward.reset(new BackwardLanes<A, LanesStepper, T, W>());
    }
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
    A& adjoint = *lanes[l];
    if (!batched || !differentiable(status, adjoint)) {
      write_cotangents(a, m, run.tr, status, adjoint);
      return;
    }
    // Parked with a copy of its parameters (the lane's is the next trajectory's).
    adjoint.vjps.begin(run.tr.p);
    parked_tr[n_parked] = run.tr;
    parked_tr[n_parked].p = adjoint.vjps.q.data();
    parked_m[n_parked] = m;
    parked[n_parked++] = &adjoint;
    lanes[l] = spare[--n_spare];
    if (n_parked == W) sweep_parked();
  }
  // After the last trajectory: the sweeps still waiting.
  void end() {
    if (n_parked > 0) sweep_parked();
  }

 private:
  void sweep_parked() {
    if constexpr (batched) backward->run(a, parked, parked_tr, parked_m, n_parked);
    for (int k = 0; k < n_parked; ++k) spare[n_spare++] = parked[k];
    n_parked = 0;
  }
};

// adjoint_range over SIMD lanes of width W: the same outputs, the same bits.
template <template <class, class> class ScalarStepper, template <class, class> class LanesStepper,
          template <template <class, class> class, class, class> class StepAdjoint, class Model,
          class T, int W>
void adjoint_range_lanes(const ShoalEnsembleArgs& a, int64_t begin, int64_t end) {
  solve_range_lanes<ScalarStepper, LanesStepper, Model, T, W,
                    AdjointLanes<ScalarStepper, LanesStepper, StepAdjoint, Model, T, W>>(a, begin,
                                                                                       end);
}

}  // namespace ode
}  // namespace shoal
