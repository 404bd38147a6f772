// The SIMD lanes engine: each worker thread advances W trajectories in lock-step, one per lane
// of simd::Lanes<T, W>, so that a step's stages, the model's right-hand side, its Jacobian by
// dual numbers and the LU run as vector arithmetic for W members at once.
//
// Lock-step only where it is cheap. Each lane runs its own Integration (integrate.hpp): its own
// t, h, controller history, accept/reject verdict, save cursor, stops, events and status, in
// the scalar statements the scalar path runs. What is arithmetic on the whole state runs in the
// lanes: the stages (step()), the error norms (lanes_error_norm.hpp), and accepting a step (y and
// the stepper's FSAL stage by selects). The state y stays in the lanes between steps; a lane's
// Integration hands its y over only when it set it otherwise (its start, a stop's jump), and
// receives its y_new only when the norm accepts the attempt. A lane whose trajectory ends is
// refilled at once from the work queue (ShoalWorkQueue), so members whose step counts differ by
// orders of magnitude do not leave lanes idle; only the queue's last trajectories run with lanes
// empty.
//
// Bit-identical to the scalar path: every lane operation is the scalar operation (simd/lanes.hpp),
// a model that is not plain arithmetic runs its right-hand side lane by lane (rhs_per_lane), the
// dense LU pivots per lane by the scalar rule (linalg/dense_lu_lanes.hpp), the norms repeat the
// scalar norm's operations lane-wise, and what the stepper does outside step() and accept (init,
// dense output) runs on one lane as a scalar stepper. An idle lane steps stale values whose
// results nobody reads.
#pragma once

#include <memory>
#include <optional>

#include "shoal/linalg/dense_lu_lanes.hpp"
#include "shoal/ode/ensemble.hpp"
#include "shoal/ode/integrate.hpp"
#include "shoal/ode/lanes_error_norm.hpp"
#include "shoal/simd/lanes.hpp"

namespace shoal {
namespace ode {

// Lane utilisation, summed over every call of this library's engine: vector step attempts and,
// over them, the lanes that held a trajectory (lane_steps / (W · vector_steps) is the fraction
// of lane work that was not idle). A compiled model exports them (shoal_lane_counts).
struct LaneCounts {
  int64_t vector_steps = 0;
  int64_t lane_steps = 0;
};
inline LaneCounts& lane_counts() {
  static LaneCounts counts;
  return counts;
}

// One lane of the lanes stepper, as the stepper an Integration talks to. Dense output copies
// the lane's step into a scalar stepper once per step (`scratch`, shared by the lanes, which are
// served one after another); accept() is applied to the lane by the engine after the verdict.
template <class ScalarStepper, class LanesStepper, class T>
struct LaneView {
  LanesStepper* lanes;
  ScalarStepper* scratch;
  int* scratch_lane;  // the lane `scratch` holds, or -1
  int l;
  bool accepted = false;

  void init(const T* y, T t, const T* p) {
    scratch->init(y, t, p);
    scratch->store_init_lane(*lanes, l);
    *scratch_lane = -1;
  }
  void interpolate(const T* y, T t, T h, T theta, const T* p, T* out) {
    if (*scratch_lane != l) {
      scratch->load_lane(*lanes, l);
      *scratch_lane = l;
    }
    scratch->interpolate(y, t, h, theta, p, out);
  }
  void accept() { accepted = true; }
};

// Solves trajectories [begin, end) of `a`, then those claimed from its work queue, W at a time.
// ScalarStepper<Model, T> and LanesStepper<Model, simd::Lanes<T, W>> are one method (for
// Rodas5P, the second over the lanes' LU).
// Every lane's controller root (PidController::root_of) at once, the same bits as each lane's,
// where it is not a fifth root (solve_range_lanes takes those inline, in a loop the compiler
// vectorises): Rodas4's sqrt(sqrt), Rosenbrock23's cbrt and any other exponent's pow (Vern7,
// Vern9, PID gains) by the lanes' own functions. Out of line: inlined, this code cost Lorenz's
// Tsit5 solve ~8 % (benchmarks/compare_revisions.py), though it never ran there.
template <class T, int W>
__attribute__((noinline)) void lanes_other_roots(const PidController<T>& ctrl, const T* norm,
                                                 T* root) {
  using L = simd::Lanes<T, W>;
  L inv;
  for (int l = 0; l < W; ++l) inv.set(l, T(1) / norm[l]);
  using Root = typename PidController<T>::Root;
  const Root kind = ctrl.root();
  const L r = kind == Root::kFourth ? simd::sqrt(simd::sqrt(inv))
              : kind == Root::kCube ? simd::cbrt(inv)
                                    : simd::pow(inv, L(ctrl.exponent()));
  for (int l = 0; l < W; ++l) root[l] = r[l];
}

// What solve_range_lanes tells an observer of each lane's trajectory (the adjoint records its
// forward solve through one: adjoint_lanes.hpp). This one does nothing.
struct NoLaneObserver {
  explicit NoLaneObserver(const ShoalEnsembleArgs&) {}
  // Whether trajectory m is done without the lanes (its outputs the observer's).
  bool skip(int64_t) { return false; }
  template <class Run>
  void begin(int, const Run&) {}
  template <class Run>
  void after_next_attempt(int, const Run&) {}
  template <class Run, class LanesStepper>
  void before_completion(int, const Run&, const LanesStepper&) {}
  template <class Run>
  void after_completion(int, const Run&, bool) {}
  template <class Run>
  void finish(int, int64_t, const Run&, Status) {}
  // After the last trajectory of the call.
  void end() {}
};

template <template <class, class> class ScalarStepper, template <class, class> class LanesStepper,
          class Model, class T, int W, class Observer = NoLaneObserver, class... ObserverArgs>
void solve_range_lanes(const ShoalEnsembleArgs& a, int64_t begin, int64_t end,
                       const ObserverArgs&... observer_args) {
  using L = simd::Lanes<T, W>;
  using Run = Integration<ScalarStepper, Model, T>;
  using Scalar = ScalarStepper<Model, T>;
  using Vector = LanesStepper<Model, L>;
  using View = LaneView<Scalar, Vector, T>;
  constexpr int n = Model::n_vars;
  constexpr int np = Model::n_params;
  constexpr int n_shared = n_shared_params<Model>();
  constexpr int n_own = np - n_shared;
  const auto opt = IntegrateOptions<T>::from(a.options);

  struct Slot {
    int64_t m = -1;  // the trajectory in this lane, or -1
    T p[np > 0 ? np : 1];
    IntegrateStats stats;
    std::optional<Run> run;
    uint32_t y_rewrites = 0;  // run->y_rewrites when y was last copied into the lanes
    int64_t shared_row = -1;  // the row of shared parameters in p's lane, or -1
  };
  // The working state lives on the heap, allocated once per call: W lanes of a dense LU of n
  // variables are W · 8n² bytes, beyond a worker thread's stack already at n = 400.
  struct State {
    Slot slots[W];
    Vector stepper;
    Scalar scratch;
    // A lane no trajectory has used yet steps (0, t = 0, h = 1): defined values, results unread.
    L y[n]{}, t{}, h{T(1)}, p[np > 0 ? np : 1]{}, y_new[n], err[n];
    LaneTolerances<T, W, n> tol{};
    T yn[n], norm[W], root[W], state_norm[W];
  };
  const std::unique_ptr<State> state(new State());
  Slot* slots = state->slots;
  Vector& stepper = state->stepper;
  Scalar& scratch = state->scratch;
  L *y = state->y, &t = state->t, &h = state->h, *p = state->p;
  L *y_new = state->y_new, *err = state->err;
  LaneTolerances<T, W, n>& tol = state->tol;
  T *yn = state->yn, *norm = state->norm, *root = state->root, *state_norm = state->state_norm;
  int scratch_lane = -1;
  int n_error = n;  // the same for every trajectory (the options')
  constexpr int n_state = state_vars<Model>();
  int64_t next = begin, last = end;

  Observer observer(a, observer_args...);
  auto view = [&](int l) { return View{&stepper, &scratch, &scratch_lane, l}; };
  auto finish = [&](int l) {
    Slot& s = slots[l];
    a.status[s.m] = s.run->finish();
    observer.finish(l, s.m, *s.run, static_cast<Status>(a.status[s.m]));
    a.accepted[s.m] = s.stats.accepted;
    a.rejected[s.m] = s.stats.rejected;
    count_done(a, 1);
    s.run.reset();
    s.m = -1;
  };
  // While every lane holds the same row of shared parameters, a generated rhs reads its weights
  // from that row as scalars (lane_traits.hpp: shared_param_row); `refilled` is the lane just
  // given a trajectory, not yet marked busy. Cleared when this call ends, so no other solve on
  // this thread sees a stale row.
  struct SharedRowReset {
    ~SharedRowReset() { SharedParamRow<Model, T>::row = nullptr; }
  } shared_row_reset;
  auto publish_shared_row = [&](int refilled) {
    int64_t row = -1;
    bool one_row = true;
    for (int l = 0; l < W; ++l) {
      if (slots[l].m < 0 && l != refilled) continue;
      if (row < 0) row = slots[l].shared_row;
      one_row = one_row && slots[l].shared_row == row;
    }
    SharedParamRow<Model, T>::row =
        one_row && row >= 0 ? shared_params_row<Model, T>(a, row) : nullptr;
  };
  // Lane l takes the next trajectory that needs a step; false when none is left.
  auto refill = [&](int l) {
    Slot& s = slots[l];
    for (;;) {
      if (next >= last && !claim(a, &next, &last)) return false;
      const int64_t m = next++;
      if (observer.skip(m)) {
        count_done(a, 1);
        continue;
      }
      Trajectory<T> tr = trajectory_of<Model, T>(a, m);
      // The lane keeps its own copy of p (the vector stepper's p holds it in lane l): its own
      // parameters, and the shared ones only when its row of them changes (a neural network's
      // thousands of weights are copied once per lane, not once per trajectory).
      const T* own = own_params_of<Model, T>(a, m);
      for (int i = 0; i < n_own; ++i) s.p[i] = own[i];
      for (int i = 0; i < n_own; ++i) p[i].set(l, own[i]);
      if constexpr (n_shared > 0) {
        const int64_t row = shared_row_of(a, m);
        if (row != s.shared_row) {
          const T* shared = shared_params_row<Model, T>(a, row);
          for (int i = 0; i < n_shared; ++i) s.p[n_own + i] = shared[i];
          for (int i = 0; i < n_shared; ++i) p[n_own + i].set(l, shared[i]);
          s.shared_row = row;
        }
        publish_shared_row(l);
      }
      tr.p = s.p;
      s.m = m;
      s.run.emplace(tr, opt, &s.stats);
      View v = view(l);
      s.run->begin(v);
      observer.begin(l, *s.run);
      n_error = s.run->error_components();
      tol.set_lane(l, tr.weights, tr.atol, s.run->error_count(),
                   weighted_count(n_state, tr.weights));
      s.y_rewrites = s.run->y_rewrites - 1;  // y is copied into the lanes before its first step
      const bool more = s.run->next_attempt(v);
      observer.after_next_attempt(l, *s.run);
      if (more) return true;
      finish(l);
    }
  };

  int active = 0;
  for (int l = 0; l < W; ++l) active += refill(l) ? 1 : 0;
  const PidController<T> controller{opt.controller, Scalar::error_order};
  const bool roots = controller.takes_root();
  const bool fifth_roots = controller.root() == PidController<T>::Root::kFifth;
  int64_t vector_steps = 0, lane_steps = 0;
  while (active > 0) {
    ++vector_steps;
    lane_steps += active;
    for (int l = 0; l < W; ++l) {
      Slot& s = slots[l];
      if (s.m < 0) continue;
      if (s.y_rewrites != s.run->y_rewrites) {
        for (int i = 0; i < n; ++i) y[i].set(l, s.run->y[i]);
        s.y_rewrites = s.run->y_rewrites;
      }
      t.set(l, s.run->t);
      h.set(l, s.run->h);
    }
    stepper.step(y, t, h, p, y_new, err);
    scratch_lane = -1;
    // The verdicts: every lane's error norms at once, then the controller's roots of all lanes,
    // then each lane's own statements.
    const L norms = lanes_attempt_norm<T, W, n>(n_error, err, y, y_new, tol, opt.controller);
    for (int l = 0; l < W; ++l) norm[l] = norms[l];
    if constexpr (n_state < n) {
      const L state_norms =
          lanes_error_norm<T, W, n>(n_state, tol.state_count, err, y, y_new, tol, opt.controller);
      for (int l = 0; l < W; ++l) state_norm[l] = state_norms[l];
    }
    if (fifth_roots) {
      for (int l = 0; l < W; ++l) root[l] = PidController<T>::fifth_root_of(norm[l]);
    } else if (roots) {
      lanes_other_roots<T, W>(controller, norm, root);
    }
    typename L::Mask accepted_lanes{};
    for (int l = 0; l < W; ++l) {
      Slot& s = slots[l];
      if (s.m < 0) continue;
      if (PidController<T>::accepts(norm[l])) {
        for (int i = 0; i < n; ++i) yn[i] = y_new[i][l];
      }
      View v = view(l);
      observer.before_completion(l, *s.run, stepper);
      s.run->complete_attempt(v, yn, norm[l], roots ? root[l] : T(0),
                              n_state < n ? state_norm[l] : T(0));
      observer.after_completion(l, *s.run, v.accepted);
      accepted_lanes[l] = v.accepted ? -1 : 0;
    }
    // The accepted lanes move on (as each lane's Integration did), before any lane restarts.
    for (int i = 0; i < n; ++i) y[i] = select(accepted_lanes, y_new[i], y[i]);
    stepper.accept_lanes(accepted_lanes);
    for (int l = 0; l < W; ++l) {
      Slot& s = slots[l];
      if (s.m < 0) continue;
      View v = view(l);
      const bool more = s.run->next_attempt(v);
      observer.after_next_attempt(l, *s.run);
      if (more) continue;
      finish(l);
      if (!refill(l)) --active;
    }
  }
  observer.end();
  __atomic_fetch_add(&lane_counts().vector_steps, vector_steps, __ATOMIC_RELAXED);
  __atomic_fetch_add(&lane_counts().lane_steps, lane_steps, __ATOMIC_RELAXED);
}

}  // namespace ode
}  // namespace shoal
