// The transpose of one explicit Runge-Kutta step, for the adjoint (adjoint.hpp).
//
// The step from (t, y) of size h: Y_s = y + h Σ_j a_sj k_j, k_s = f(t + c_s h, Y_s), the end
// state y + h Σ_s w_s k_s (w = b, or a FSAL tableau's last row of a, which is how the engine
// forms it), a save inside at θ: y + h Σ_s b_s(θ) k_s over the dense stages too (Verner's extra
// ones). Transposed, with λ the end state's cotangent and ȳ_θ those of the saves inside:
//   k̄_s = h (w_s λ + Σ_θ b_s(θ) ȳ_θ),     ȳ = λ + Σ_θ ȳ_θ,
// then for s from the last stage down: ū = f_yᵀ k̄_s at (Y_s, t + c_s h) (p̄ += f_pᵀ k̄_s),
// ȳ += ū, k̄_j += h a_sj ū for j < s. A stage whose cotangent is all zeros is skipped (a zero
// weight never meets an infinite Jacobian entry, as in the engine).
//
// The forward re-solve records an accepted step's stages k_s (record): prepare then reads them
// instead of evaluating f again at every stage point.
#pragma once

#include "shoal/config.hpp"
#include "shoal/lane_traits.hpp"
#include "shoal/ode/adjoint.hpp"
#include "shoal/ode/model_traits.hpp"

namespace shoal {
namespace ode {

template <template <class, class> class Stepper, class Model, class T>
struct ExplicitStepAdjoint {
  using Tab = typename Stepper<Model, T>::Tableau;
  static constexpr int n = Model::n_vars;
  static constexpr int last = Tab::stages - 1;
  // transpose_lanes below, where f's vjp runs on lanes; prepare_lanes evaluates W steps at once
  // (f on lanes where a stage was not recorded).
  static constexpr bool transposes_in_lanes = has_lane_vjp<Model>();
  static constexpr bool prepares_in_lanes = true;

  T point[Tab::dense_stages][n], k[Tab::dense_stages][n], k_bar[Tab::dense_stages][n];
  T y_bar[n];
  const T* y = nullptr;
  T t = T(0), h = T(0);
  int used = Tab::stages;

  // An accepted step's record: its stages k_0 … k_{stages−1}, as the stepper computed them
  // (a FSAL tableau's k_0 carried over from the step before).
  static constexpr int recorded = Tab::stages * n;
  static void record(const Stepper<Model, T>& stepper, T* out) {
    for (int s = 0; s < Tab::stages; ++s)
      for (int i = 0; i < n; ++i) out[s * n + i] = stepper.k[s][i];
  }

  // The same from lane l of a lanes stepper (adjoint_lanes.hpp).
  template <class LanesStepper>
  static void record_lane(const LanesStepper& stepper, int l, T* out) {
    for (int s = 0; s < Tab::stages; ++s)
      for (int i = 0; i < n; ++i) out[s * n + i] = lane(stepper.k[s][i], l);
  }

  // stages: the step's record, or nullptr to evaluate f at every stage point.
  void prepare(const T* y_start, T t_start, T h_step, const T* p, bool dense, const T* stages) {
    y = y_start;
    t = t_start;
    h = h_step;
    used = dense ? Tab::dense_stages : Tab::stages;
    for (int s = 0; s < used; ++s) {
      stage_point(s, y, h, k, point[s]);
      if (stages != nullptr && s < Tab::stages) {
        for (int i = 0; i < n; ++i) k[s][i] = stages[s * n + i];
      } else {
        Model::template rhs<T>(point[s], t + T(Tab::c(s)) * h, p, k[s]);
      }
    }
  }

  // Y_s = y + h Σ_{l<s} a_sl k_l (the engine's sum, term by term in the same order), for
  // scalars or lanes.
  template <class U>
  static void stage_point(int s, const U* y, const U& h, const U (*ks)[n], U* out) {
    U acc[n];
    for (int i = 0; i < n; ++i) acc[i] = U(T(0));
    for (int l = 0; l < s; ++l) {
      const double a = Tab::a(s, l);
      if (a != 0.0)
        for (int i = 0; i < n; ++i) acc[i] += U(T(a)) * ks[l][i];
    }
    for (int i = 0; i < n; ++i) out[i] = y[i] + h * acc[i];
  }

  // What prepare_lanes leaves on the lanes for transpose_lanes: the stage points of the W steps
  // it evaluated (lane l's step's stage s at point[s], lane l), so that they are not stored in
  // each step and gathered back.
  template <class L>
  struct LaneWork {
    L point[Tab::dense_stages][n];
  };

  // prepare() of up to W steps at once (steps[l]: lane l's, or null; p: each lane's parameters):
  // the stage points on lanes, f on lanes at each stage some lane did not record, the points
  // kept in `work` (and stored in each step too where the transposes run one at a time), each
  // lane's stages stored in its step where it serves saves (keep[l]; the end state and the
  // dense output read them, the transpose does not): the scalar prepare's bits (lanes compute
  // as scalars do). A lane without a step evaluates the first one's again (defined values,
  // unread). (The scalar parameters and the lanes stepper are the Rosenbrock steps'; unused.)
  template <class LanesStepper, class L>
  static void prepare_lanes(ExplicitStepAdjoint* const* steps, const T* const* start,
                            const T* t, const T* h, const bool* dense, const T* const* stages,
                            const bool* keep, const T* const*, LanesStepper&, const L* p,
                            LaneWork<L>& work) {
    constexpr int W = lane_count<L>();
    int first = 0;
    while (steps[first] == nullptr) ++first;
    int most = 0;
    L y_l[n], t_l, h_l;
    for (int l = 0; l < W; ++l) {
      const int from = steps[l] != nullptr ? l : first;
      for (int i = 0; i < n; ++i) y_l[i].set(l, start[from][i]);
      t_l.set(l, t[from]);
      h_l.set(l, h[from]);
      if (steps[l] == nullptr) continue;
      ExplicitStepAdjoint& st = *steps[l];
      st.y = start[l];
      st.t = t[l];
      st.h = h[l];
      st.used = dense[l] ? Tab::dense_stages : Tab::stages;
      if (st.used > most) most = st.used;
    }
    L k_l[Tab::dense_stages][n];
    for (int s = 0; s < most; ++s) {
      L* point_l = work.point[s];
      stage_point(s, y_l, h_l, k_l, point_l);
      bool evaluate = false;
      for (int l = 0; l < W; ++l) {
        evaluate = evaluate || (steps[l] != nullptr && s < steps[l]->used &&
                                (stages[l] == nullptr || s >= Tab::stages));
      }
      if (evaluate) Model::template rhs<L>(point_l, t_l + L(T(Tab::c(s))) * h_l, p, k_l[s]);
      for (int l = 0; l < W; ++l) {
        const int from = steps[l] != nullptr ? l : first;
        if (stages[from] != nullptr && s < Tab::stages) {
          for (int i = 0; i < n; ++i) k_l[s][i].set(l, stages[from][s * n + i]);
        }
        if (steps[l] == nullptr || s >= steps[l]->used) continue;
        ExplicitStepAdjoint& st = *steps[l];
        if (keep[l]) {
          for (int i = 0; i < n; ++i) st.k[s][i] = k_l[s][i][l];
        }
        if constexpr (!transposes_in_lanes) {
          for (int i = 0; i < n; ++i) st.point[s][i] = point_l[i][l];
        }
      }
    }
  }

  // A FSAL tableau's end state is its last stage point, whose row of a covers the stages
  // before it (the last one's own weight is 0; a(last, last) is outside the table).
  static double end_weight(int s) {
    if constexpr (Tab::fsal) return s < last ? Tab::a(last, s) : 0.0;
    return Tab::b(s);
  }

  void end_state(T* out) const {
    T acc[n];
    for (int i = 0; i < n; ++i) acc[i] = T(0);
    for (int s = 0; s < Tab::stages; ++s) {
      const double w = end_weight(s);
      if (w != 0.0)
        for (int i = 0; i < n; ++i) acc[i] += T(w) * k[s][i];
    }
    for (int i = 0; i < n; ++i) out[i] = y[i] + h * acc[i];
  }

  // The continuous extension's weights b_s(θ).
  static void dense_weights(T theta, T* bt) {
    for (int s = 0; s < Tab::dense_stages; ++s) {
      T acc = T(Tab::r(s, Tab::dense_degree - 1));
      for (int d = Tab::dense_degree - 2; d >= 0; --d) acc = T(Tab::r(s, d)) + theta * acc;
      bt[s] = theta * acc;
    }
  }

  void dense_state(T theta, T* out) const {
    T bt[Tab::dense_stages], acc[n];
    dense_weights(theta, bt);
    for (int i = 0; i < n; ++i) acc[i] = T(0);
    for (int s = 0; s < Tab::dense_stages; ++s) {
      if (bt[s] != T(0))
        for (int i = 0; i < n; ++i) acc[i] += bt[s] * k[s][i];
    }
    for (int i = 0; i < n; ++i) out[i] = y[i] + h * acc[i];
  }

  void clear() {
    for (int s = 0; s < Tab::dense_stages; ++s)
      for (int i = 0; i < n; ++i) k_bar[s][i] = T(0);
    for (int i = 0; i < n; ++i) y_bar[i] = T(0);
  }

  void add_end(const T* lambda) {
    for (int s = 0; s < Tab::stages; ++s) {
      if (end_weight(s) == 0.0) continue;
      for (int i = 0; i < n; ++i) k_bar[s][i] += h * T(end_weight(s)) * lambda[i];
    }
    for (int i = 0; i < n; ++i) y_bar[i] += lambda[i];
  }

  void add_save(T theta, const T* w) {
    T bt[Tab::dense_stages];
    dense_weights(theta, bt);
    for (int s = 0; s < Tab::dense_stages; ++s) {
      if (bt[s] == T(0)) continue;
      for (int i = 0; i < n; ++i) k_bar[s][i] += h * bt[s] * w[i];
    }
    for (int i = 0; i < n; ++i) y_bar[i] += w[i];
  }

  template <class Vjps>
  void transpose(Vjps& vjps, T* out) {
    for (int s = used - 1; s >= 0; --s) {
      if (!any_nonzero(k_bar[s], n)) continue;
      T u[n];
      vjps.rhs(point[s], t + T(Tab::c(s)) * h, k_bar[s], u);
      for (int i = 0; i < n; ++i) y_bar[i] += u[i];
      for (int l = 0; l < s; ++l) {
        const double a = Tab::a(s, l);
        if (a != 0.0)
          for (int i = 0; i < n; ++i) k_bar[l][i] += h * T(a) * u[i];
      }
    }
    for (int i = 0; i < n; ++i) out[i] = y_bar[i];
  }

  // transpose() of up to W steps at once (steps[l]: lane l's, or null), the steps prepare_lanes
  // evaluated last (their stage points in `work`): at each stage, one product on SIMD lanes
  // (LaneVjps: ModelVjps over L = simd::Lanes<T, W>) for the lanes whose stage the scalar
  // transpose would evaluate, each lane's results then used as the scalar loop uses them (so
  // each trajectory gets the scalar path's bits). A lane that would skip the stage gets a zero
  // cotangent at another lane's stage point; its p̄ changes only where that product is not
  // finite (adjoint_backward_lanes.hpp). Lane l's start cotangent goes to out[l]. (The lanes
  // stepper is the Rosenbrock transposes'; unused here.)
  template <class L, class LaneVjps, class LanesStepper>
  static void transpose_lanes(ExplicitStepAdjoint* const* steps, LaneVjps& vjps,
                              const LanesStepper*, LaneWork<L>& work, T* const* out) {
    constexpr int W = lane_count<L>();
    int most = 0;
    for (int l = 0; l < W; ++l) {
      if (steps[l] != nullptr && steps[l]->used > most) most = steps[l]->used;
    }
    L t_l, w_l[n], u_l[n];
    for (int s = most - 1; s >= 0; --s) {
      bool needs[W] = {};
      int first = -1;
      for (int l = 0; l < W; ++l) {
        if (steps[l] == nullptr || s >= steps[l]->used) continue;
        needs[l] = any_nonzero(steps[l]->k_bar[s], n);
        if (needs[l] && first < 0) first = l;
      }
      if (first < 0) continue;
      L* point_l = work.point[s];
      for (int l = 0; l < W; ++l) {
        const ExplicitStepAdjoint& st = *steps[needs[l] ? l : first];
        if (needs[l]) {
          for (int i = 0; i < n; ++i) w_l[i].set(l, st.k_bar[s][i]);
        } else {
          for (int i = 0; i < n; ++i) {
            point_l[i].set(l, point_l[i][first]);
            w_l[i].set(l, T(0));
          }
        }
        t_l.set(l, st.t + T(Tab::c(s)) * st.h);
      }
      vjps.rhs(point_l, t_l, w_l, u_l);
      for (int l = 0; l < W; ++l) {
        if (!needs[l]) continue;
        ExplicitStepAdjoint& st = *steps[l];
        T u[n];
        for (int i = 0; i < n; ++i) u[i] = u_l[i][l];
        for (int i = 0; i < n; ++i) st.y_bar[i] += u[i];
        for (int j = 0; j < s; ++j) {
          const double a = Tab::a(s, j);
          if (a != 0.0)
            for (int i = 0; i < n; ++i) st.k_bar[j][i] += st.h * T(a) * u[i];
        }
      }
    }
    for (int l = 0; l < W; ++l) {
      if (steps[l] == nullptr) continue;
      for (int i = 0; i < n; ++i) out[l][i] = steps[l]->y_bar[i];
    }
  }
};

}  // namespace ode
}  // namespace shoal
