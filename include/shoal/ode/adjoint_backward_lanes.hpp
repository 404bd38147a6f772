// The backward sweeps of up to W trajectories side by side, their vector-Jacobian products on
// SIMD lanes (adjoint.hpp's step 2 for the adjoint's forward solve in the lanes:
// adjoint_lanes.hpp).
//
// Each trajectory's sweep keeps its own bookkeeping, scalar, as adjoint.hpp runs it (saves,
// events, its records of steps and stages); only the transposes of the steps, where f's vjp is
// called at every stage (a neural network's right-hand side: nearly all of the backward pass),
// run together: lane l holds trajectory l's stage point, cotangent, and its p̄ (the lanes' own
// copy of the model's vjp accumulates each lane's p̄ in the scalar sweep's order). The lanes
// compute as scalars do, so every trajectory gets the scalar path's bits whatever the
// trajectories beside it — but for one case: a lane whose stage the scalar sweep would skip
// (its cotangent all zeros, a stage its step does not use, a sweep already ended) takes a zero
// cotangent at another lane's point, which adds ±0 to its p̄ (no change: p̄ starts at +0 and
// sums never make −0) unless a partial derivative there is infinite (0·∞ = NaN). A trajectory
// whose p̄ ends with a NaN is therefore swept again on its own, scalar, from its records.
//
// Where it applies: explicit methods (ExplicitStepAdjoint::transpose_lanes), models whose vjp
// is lane arithmetic (has_lane_vjp: the generated ones without run-time indexed writes), and no
// jump_fn or save_fn, whose products add to p̄ outside the lanes.
#pragma once

#include <cstdint>
#include <memory>

#include "shoal/config.hpp"
#include "shoal/math.hpp"
#include "shoal/ode/adjoint.hpp"
#include "shoal/ode/explicit_rk_adjoint.hpp"
#include "shoal/ode/model_traits.hpp"
#include "shoal/simd/lanes.hpp"

namespace shoal {
namespace ode {

template <class A>
constexpr bool backward_in_lanes() {
  using Model = typename A::SolvedModel;
  using Step = typename A::Step;
  return has_lane_vjp<Model>() && !has_jump<Model>() && !has_save<Model>() &&
         Step::transposes_in_lanes;
}

// A what the sweeps keep (adjoint.hpp's Adjoint), T its scalar, W the lanes.
template <class A, class T, int W>
struct BackwardLanes {
  using Model = typename A::SolvedModel;
  using Step = typename A::Step;
  using L = simd::Lanes<T, W>;
  static constexpr int n = Model::n_vars;
  static constexpr int n_params = Model::n_params;

  ModelVjps<Model, L> vjps;  // q: each lane's p; out: each lane's p̄
  Step idle;  // the step of a lane whose sweep has ended: it uses no stage

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

  BackwardLanes() {
    idle.clear();
    idle.used = 0;
  }

  // Trajectories m[0 … count) (count <= W): their sweeps (each adjoint[l] holds trajectory
  // tr[l]'s records, forward solve successful) and their cotangents written into `a`.
  void run(const ShoalEnsembleArgs& a, A* const* adjoint, const Trajectory<T>* tr,
           const int64_t* m, int count) {
    bool pending[W] = {};
    Step* steps[W];
    T* lambdas[W];
    T spare[n];
    for (int l = 0; l < W; ++l) {
      const int from = l < count ? l : 0;  // a lane with no trajectory reads lane 0's p
      for (int i = 0; i < n_params; ++i) vjps.q[i].set(l, tr[from].p[i]);
      for (int i = 0; i < n_params; ++i) vjps.out[n + i].set(l, T(0));
      steps[l] = &idle;
      lambdas[l] = spare;
    }
    // The products read shared weights as scalars (lane_traits.hpp: shared_param_row) where
    // every lane's trajectory reads the same row of them.
    SharedRow shared_row(a, m, count);
    for (int l = 0; l < count; ++l) {
      const T* ys_bar = saves_cotangent<Model, T>(a, m[l]);
      adjoint[l]->begin_backward(tr[l], ys_bar, ys_bar + a.n_save * n_saved<Model>());
      pending[l] = adjoint[l]->next_transpose();
    }
    for (;;) {
      bool any = false;
      for (int l = 0; l < count; ++l) {
        steps[l] = pending[l] ? &adjoint[l]->step : &idle;
        lambdas[l] = pending[l] ? adjoint[l]->lambda : spare;
        any = any || pending[l];
      }
      if (!any) break;
      Step::template transpose_lanes<L>(steps, W, vjps, lambdas);
      for (int l = 0; l < count; ++l) {
        if (pending[l]) pending[l] = adjoint[l]->next_transpose();
      }
    }
    for (int l = 0; l < count; ++l) {
      T* y0_bar = static_cast<T*>(a.y0_bar) + m[l] * n;
      T* p_bar = static_cast<T*>(a.p_bar) + m[l] * n_params;
      adjoint[l]->end_backward(y0_bar);
      bool finite = true;
      for (int i = 0; i < n_params; ++i) {
        p_bar[i] = vjps.out[n + i][l];
        finite = finite && p_bar[i] == p_bar[i];
      }
      if (!finite) {
        const T* ys_bar = saves_cotangent<Model, T>(a, m[l]);
        adjoint[l]->backward(tr[l], ys_bar, ys_bar + a.n_save * n_saved<Model>(), y0_bar, p_bar);
      }
    }
  }
};

}  // namespace ode
}  // namespace shoal
