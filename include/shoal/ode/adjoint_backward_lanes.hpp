// The backward sweeps of up to W trajectories side by side, the costly half of each step on
// SIMD lanes (adjoint.hpp's step 2 for the adjoint's forward solve in the lanes:
// adjoint_lanes.hpp).
//
// Each trajectory's sweep keeps its own bookkeeping, scalar, as adjoint.hpp runs it (saves,
// events, jumps, its records of steps and stages); what runs together is, per method:
//  - explicit: the steps' evaluations again (ExplicitStepAdjoint::prepare_lanes: the stage
//    points, and f where a stage was not recorded, on lanes for W of them; the points stay on
//    the lanes, the stages go to the steps that serve saves), and
//    (ExplicitStepAdjoint::transpose_lanes) the transposes of the steps, where f's vjp is
//    called at every stage (a neural network's right-hand side: nearly all of the backward
//    pass). Lane l holds trajectory l's stage point, cotangent and p̄ (the lanes' own copy of
//    the model's vjp accumulates each lane's p̄ in the scalar sweep's order). A lane whose stage
//    the scalar sweep would skip (its cotangent all zeros, a stage its step does not use, a
//    sweep already ended) takes a zero cotangent at another lane's point, which adds ±0 to its
//    p̄ (no change: p̄ starts at +0 and sums never make −0) unless a partial derivative there is
//    infinite (0·∞ = NaN); a trajectory whose p̄ ends with a NaN is therefore swept again on
//    its own, scalar, from its records. Needs f's vjp to be lane arithmetic (has_lane_vjp; a
//    table read's transpose, an addition at a run-time index, is math.hpp's scatter_add: lane l
//    adds into lane l of its own entry). A jump_fn's or save_fn's product,
//    which a trajectory's own bookkeeping computes between the transposes, adds to that
//    trajectory's p̄ in the scalar sweep's order all the same: its lane of p̄ is copied into
//    the trajectory's scalar products just before (ModelVjps::before_param_product) and back
//    after the bookkeeping.
//  - Rosenbrock (RosenbrockStepAdjoint::prepare_lanes): the steps' evaluations again (Jacobian,
//    factors, stages: most of the backward pass), one step of the lanes stepper for W of them,
//    each lane loaded into its trajectory's scalar stepper; needs a matrix policy that loads
//    lanes (the dense LU, the sparse solver). Then, where f's vjp and jvp_vjp are lane
//    arithmetic, the transposes too (RosenbrockStepAdjoint::transpose_lanes: transposed solves
//    with the lanes stepper's factors, f's two products on lanes, p̄ per lane, jumps' and
//    saves' products added to it and repaired as above); else each trajectory transposes its
//    step alone (its own p̄).
// The lanes compute as scalars do, so every trajectory gets the scalar path's bits whatever the
// trajectories beside it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "shoal/config.hpp"
#include "shoal/math.hpp"
#include "shoal/ode/adjoint.hpp"
#include "shoal/ode/ensemble.hpp"
#include "shoal/ode/model_traits.hpp"
#include "shoal/simd/lanes.hpp"

namespace shoal {
namespace ode {

// Whether the backward sweeps of A (adjoint.hpp's Adjoint) run side by side (above): their
// products on lanes, or their steps evaluated on lanes, or both.
template <class A>
constexpr bool products_in_lanes() {
  return A::Step::transposes_in_lanes;
}
template <class A>
constexpr bool backward_in_lanes() {
  return products_in_lanes<A>() || A::Step::prepares_in_lanes;
}

// A what the sweeps keep, LanesStepper the method's stepper on lanes (Rosenbrock: it evaluates
// the steps again), T the scalar, W the lanes.
template <class A, template <class, class> class LanesStepper, class T, int W>
struct BackwardLanes {
  using Model = typename A::SolvedModel;
  using Step = typename A::Step;
  using StepToPrepare = typename A::StepToPrepare;
  using L = simd::Lanes<T, W>;
  static constexpr int n = Model::n_vars;
  static constexpr int n_params = Model::n_params;
  static constexpr bool lane_products = products_in_lanes<A>();
  static constexpr bool lane_steps = Step::prepares_in_lanes;
  // Whether each trajectory's bookkeeping adds products of a jump_fn or save_fn to its p̄
  // between the transposes (then its lane of p̄ visits its scalar products: pull, push).
  static constexpr bool products_outside =
      lane_products && (jump_products_add_p_bar<Model>() || save_products_add_p_bar<Model>());

  // With the products on lanes, q holds each lane's p and out each lane's p̄. With the steps on
  // lanes, p is each lane's p for the lanes stepper (whose factors are on the heap: W · 8n²
  // bytes, and stay there for the transposes' solves).
  std::unique_ptr<ModelVjps<Model, L>> vjps{lane_products ? new ModelVjps<Model, L>() : nullptr};
  std::vector<L> p = std::vector<L>(lane_steps ? (n_params > 0 ? n_params : 1) : 0);
  std::unique_ptr<LanesStepper<Model, L>> stepper{lane_steps ? new LanesStepper<Model, L>()
                                                             : nullptr};
  // What the method's prepare_lanes leaves for its transpose_lanes (the explicit steps' stage
  // points on lanes).
  std::unique_ptr<typename Step::template LaneWork<L>> work{
      new typename Step::template LaneWork<L>()};

  // SharedParamRow<Model, T>::row for the lifetime of one run(): the row of shared parameters
  // the trajectories m[0 … count) all read, else null; then what it was (the forward solve's).
  struct SharedRow {
    const T* before = SharedParamRow<Model, T>::row;
    SharedRow(const ShoalEnsembleArgs& a, const int64_t* m, int count) {
      const T* row = nullptr;
      if constexpr (n_shared_params<Model>() > 0) {
        bool one = true;
        for (int l = 1; l < count; ++l) one = one && shared_row_of(a, m[l]) == shared_row_of(a, m[0]);
        if (one) row = shared_params_row<Model, T>(a, shared_row_of(a, m[0]));
      }
      SharedParamRow<Model, T>::row = row;
    }
    ~SharedRow() { SharedParamRow<Model, T>::row = before; }
  };

  // Trajectories m[0 … count) (count <= W): their sweeps (each adjoint[l] holds trajectory
  // tr[l]'s records, forward solve successful) and their cotangents written into `a`.
  void run(const ShoalEnsembleArgs& a, A* const* adjoint, const Trajectory<T>* tr,
           const int64_t* m, int count) {
    // Each lane's parameters (a lane with no trajectory reads lane 0's).
    for (int l = 0; l < W; ++l) {
      const T* from = tr[l < count ? l : 0].p;
      if constexpr (lane_products) {
        for (int i = 0; i < n_params; ++i) vjps->q[i].set(l, from[i]);
        for (int i = 0; i < n_params; ++i) vjps->out[n + i].set(l, T(0));
      }
      if constexpr (lane_steps) {
        for (int i = 0; i < n_params; ++i) p[i].set(l, from[i]);
      }
    }
    // The products read shared weights as scalars (lane_traits.hpp: shared_param_row) where
    // every lane's trajectory reads the same row of them.
    SharedRow shared_row(a, m, count);
    bool pending[W] = {};
    for (int l = 0; l < count; ++l) {
      const T* ys_bar = saves_cotangent<Model, T>(a, m[l]);
      adjoint[l]->begin_backward(tr[l], ys_bar, ys_bar + a.n_save * n_saved<Model>());
      pending[l] = true;
      link(adjoint[l], l);
    }
    for (;;) {
      // Every pending sweep's next step, prepared (together where the method can), then its
      // bookkeeping, then the transposes (together where the method can).
      StepToPrepare next[W];
      bool any = false;
      for (int l = 0; l < count; ++l) {
        if (pending[l]) pending[l] = adjoint[l]->next_step(&next[l]);
        any = any || pending[l];
      }
      if (!any) break;
      prepare(adjoint, next, pending, count);
      for (int l = 0; l < count; ++l) {
        if (!pending[l]) continue;
        adjoint[l]->prepared();
        push(l);
      }
      transpose(adjoint, pending, count);
    }
    for (int l = 0; l < count; ++l) finish(a, adjoint[l], tr[l], m[l], l);
  }

 private:
  // Lane l of p̄ and the scalar products of the trajectory in it (products_outside).
  struct Link {
    BackwardLanes* lanes = nullptr;
    A* adjoint = nullptr;
    int l = 0;
    bool pulled = false;  // whether the scalar products hold lane l's p̄ (newer than the lane)
  };
  Link links[W];

  static void pull(void* context) {
    Link& k = *static_cast<Link*>(context);
    if (k.pulled) return;
    for (int i = 0; i < n_params; ++i) k.adjoint->vjps.out[n + i] = k.lanes->vjps->out[n + i][k.l];
    k.pulled = true;
  }
  void push(int l) {
    if constexpr (products_outside) {
      Link& k = links[l];
      if (!k.pulled) return;
      for (int i = 0; i < n_params; ++i) vjps->out[n + i].set(l, k.adjoint->vjps.out[n + i]);
      k.pulled = false;
    }
  }
  void link(A* adjoint, int l) {
    if constexpr (products_outside) {
      links[l] = Link{this, adjoint, l, false};
      adjoint->vjps.before_param_product = &pull;
      adjoint->vjps.param_product_context = &links[l];
    }
  }
  static void unlink(A* adjoint) {
    adjoint->vjps.before_param_product = nullptr;
    adjoint->vjps.param_product_context = nullptr;
  }

  // Lane l's step next[l] (where pending[l]) into its adjoint's step.
  void prepare(A* const* adjoint, const StepToPrepare* next, const bool* pending, int count) {
    if constexpr (!lane_steps) {
      for (int l = 0; l < count; ++l) {
        if (!pending[l]) continue;
        const StepToPrepare& s = next[l];
        adjoint[l]->step.prepare(s.y, s.t, s.h, adjoint[l]->sweep_params(), s.dense, s.stages);
      }
    } else {
      Step* steps[W] = {};
      const T* start[W] = {};
      const T* params[W] = {};
      const T* stages[W] = {};
      T t[W] = {}, h[W] = {};
      bool dense[W] = {}, keep[W] = {};
      for (int l = 0; l < count; ++l) {
        if (!pending[l]) continue;
        steps[l] = &adjoint[l]->step;
        start[l] = next[l].y;
        t[l] = next[l].t;
        h[l] = next[l].h;
        dense[l] = next[l].dense;
        keep[l] = next[l].serves_saves;
        stages[l] = next[l].stages;
        params[l] = adjoint[l]->sweep_params();
      }
      Step::prepare_lanes(steps, start, t, h, dense, stages, keep, params, *stepper, p.data(),
                          *work);
    }
  }

  void transpose(A* const* adjoint, const bool* pending, int count) {
    if constexpr (lane_products) {
      // Lane l of the products is trajectory l's (its p̄); null where none is pending.
      Step* steps[W] = {};
      T* lambdas[W] = {};
      for (int l = 0; l < count; ++l) {
        if (!pending[l]) continue;
        steps[l] = &adjoint[l]->step;
        lambdas[l] = adjoint[l]->lambda;
      }
      Step::template transpose_lanes<L>(steps, *vjps, stepper.get(), *work, lambdas);
    } else {
      for (int l = 0; l < count; ++l) {
        if (pending[l]) adjoint[l]->step.transpose(adjoint[l]->vjps, adjoint[l]->lambda);
      }
    }
  }

  void finish(const ShoalEnsembleArgs& a, A* adjoint, const Trajectory<T>& tr, int64_t m,
              int l) {
    T* y0_bar = static_cast<T*>(a.y0_bar) + m * n;
    T* p_bar = static_cast<T*>(a.p_bar) + m * n_params;
    adjoint->end_backward(y0_bar);
    push(l);
    unlink(adjoint);
    if constexpr (lane_products) {
      bool finite = true;
      for (int i = 0; i < n_params; ++i) {
        p_bar[i] = vjps->out[n + i][l];
        finite = finite && p_bar[i] == p_bar[i];
      }
      if (!finite) {
        const T* ys_bar = saves_cotangent<Model, T>(a, m);
        adjoint->backward(tr, ys_bar, ys_bar + a.n_save * n_saved<Model>(), y0_bar, p_bar);
      }
    } else {
      adjoint->vjps.finish(p_bar);
    }
  }
};

}  // namespace ode
}  // namespace shoal
