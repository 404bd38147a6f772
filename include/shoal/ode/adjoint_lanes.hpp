// The adjoint's forward solve in SIMD lanes: W trajectories stepped together by the lanes engine
// (lanes_ensemble.hpp), each lane's accepted steps, jumps and stages recorded as the scalar
// forward solve records them (adjoint.hpp: the same steps and bits, since lanes compute as
// scalars do), and each trajectory's backward sweep run, one at a time, when its lane finishes.
#pragma once

#include <memory>

#include "shoal/ode/adjoint.hpp"
#include "shoal/ode/lanes_ensemble.hpp"

namespace shoal {
namespace ode {

// A lane observer (lanes_ensemble.hpp) holding one Adjoint per lane; the lanes share a worker
// thread's stage budget (adjoint.hpp's default), W-th each.
template <template <class, class> class Stepper,
          template <template <class, class> class, class, class> class StepAdjoint, class Model,
          class T, int W>
struct AdjointLanes {
  using A = Adjoint<Stepper, StepAdjoint, Model, T, kStageBudgetBytes / W>;
  const ShoalEnsembleArgs& a;
  const IntegrateOptions<T> opt;
  std::unique_ptr<A[]> lanes{new A[W]};  // on the heap: each holds its records and products

  explicit AdjointLanes(const ShoalEnsembleArgs& args)
      : a(args), opt(IntegrateOptions<T>::from(args.options)) {}

  template <class Run>
  void begin(int l, const Run& run) {
    lanes[l].begin_recording(run, opt);
  }
  template <class Run>
  void after_next_attempt(int l, const Run& run) {
    lanes[l].after_next_attempt(run);
  }
  template <class Run, class LanesStepper>
  void before_completion(int l, const Run& run, const LanesStepper& stepper) {
    lanes[l].before_completion(run, [&](T* out) { A::Step::record_lane(stepper, l, out); });
  }
  template <class Run>
  void after_completion(int l, const Run& run, bool) {
    lanes[l].after_completion(run);
  }
  template <class Run>
  void finish(int l, int64_t m, const Run& run, Status status) {
    write_cotangents(a, m, run.tr, status, lanes[l]);
  }
};

// adjoint_range over SIMD lanes of width W: the same outputs, the same bits.
template <template <class, class> class ScalarStepper, template <class, class> class LanesStepper,
          template <template <class, class> class, class, class> class StepAdjoint, class Model,
          class T, int W>
void adjoint_range_lanes(const ShoalEnsembleArgs& a, int64_t begin, int64_t end) {
  solve_range_lanes<ScalarStepper, LanesStepper, Model, T, W,
                    AdjointLanes<ScalarStepper, StepAdjoint, Model, T, W>>(a, begin, end);
}

}  // namespace ode
}  // namespace shoal
