// The transpose of one Rosenbrock step, for the adjoint (adjoint.hpp); its transposed solves are
// the iteration matrix's own (the dense LU's, or the sparse solver's over the transposed
// pattern: iteration_matrix.hpp, sparse_iteration_matrix.hpp).
//
// The step (rosenbrock.hpp, transformed form) from (t, y) of size h: M = I/(hγ) − J(y, t, p),
//   u_0 = y, u_s = y + Σ_{j<s} a_sj k_j,
//   r_s = F(u_s, t + c_s h) + h d_s F_t(y, t) + (1/h) Σ_{j<s} C_sj k_j,   k_s = M⁻¹ r_s,
// the end state u_last + k_last (stiffly accurate) or y + Σ b_s k_s, and the dense output
// y(θ) = (1−θ) y + θ (y_end + (1−θ) Σ_r θ^r K_r), K_r = Σ_s H_rs k_s.
// Transposed, stage by stage from the last, with k̄_s gathered from the end state, the saves and
// the later stages: r̄ = M⁻ᵀ k̄_s (one transposed solve against the step's own factors); since
// dk_s = M⁻¹ (dr_s + dJ k_s) with h fixed, the iteration matrix and F_t contribute
// ∂/∂(y, p) [r̄ᵀ (J k_s + F_t h d_s)] at (y, t) — the model's second-order `jvp_vjp`, so no
// derivative of J is ever formed —, F at the stage point f_yᵀ r̄ (and f_pᵀ r̄), the earlier
// stages k̄_j += C_sj r̄ / h, and u_s passes its cotangent to y and to k̄_j by a_sj. With a
// constant mass matrix (mass.hpp: M = M_mass/(hγ) − J, coupling M_mass Σ_j C_sj k_j / h) the
// earlier stages get C_sj M_massᵀ r̄ / h instead; the rest is unchanged, M_mass being constant.
#pragma once

#include "shoal/config.hpp"
#include "shoal/lane_traits.hpp"
#include "shoal/ode/adjoint.hpp"
#include "shoal/ode/model_traits.hpp"

namespace shoal {
namespace ode {

template <template <class, class> class Stepper, class Model, class T>
struct RosenbrockStepAdjoint {
  using S = Stepper<Model, T>;
  using Tab = typename S::Tab;
  static constexpr int n = Model::n_vars;
  static constexpr int last = Tab::stages - 1;
  // transpose_lanes below, where f's two products run on lanes.
  static constexpr bool transposes_in_lanes = has_lane_vjp<Model>() && has_lane_jvp_vjp<Model>();

 private:
  template <class M>
  static constexpr auto loads_lanes_of(int) -> decltype(M::loads_lanes, true) {
    return M::loads_lanes;
  }
  template <class M>
  static constexpr bool loads_lanes_of(long) {
    return false;
  }

 public:
  // Whether W steps are evaluated again at once by the lanes stepper, each lane then loaded
  // into its trajectory's scalar stepper (prepare_lanes): where the iteration matrix can load a
  // lane of its factors (the dense LU and the sparse solver do).
  static constexpr bool prepares_in_lanes = loads_lanes_of<decltype(S::system.M)>(0);

  S stepper;  // its step evaluates the stages, the factors and the dense output again
  T u[Tab::stages][n], k_bar[Tab::stages][n], y_bar[n];
  const T* y = nullptr;
  const T* p = nullptr;
  T t = T(0), h = T(0);

  // Nothing is recorded: the step is evaluated again, since its factors are needed anyway.
  static constexpr int recorded = 0;
  static void record(const S&, T*) {}
  template <class LanesStepper>
  static void record_lane(const LanesStepper&, int, T*) {}

  void prepare(const T* y_start, T t_start, T h_step, const T* params, bool, const T*) {
    y = y_start;
    t = t_start;
    h = h_step;
    p = params;
    T y_new[n], err[n];
    stepper.step(y, t, h, p, y_new, err);
    stage_points();
  }

  // prepare() of up to W steps at once: lane l's step (where steps[l] is not null) from
  // start[l] at t[l] of size h[l] with its trajectory's parameters params[l], by one step of
  // `lanes` (this method's stepper on lanes; p: each lane's parameters), each lane's then
  // loaded into its trajectory's stepper: the scalar step's bits (lanes compute as scalars do).
  // A lane without a step steps the first one's again (defined values, unread). (Whether a
  // dense output is needed, recorded stages and whether a step serves saves are the explicit
  // steps'; unused here.)
  // Nothing is passed from prepare_lanes to transpose_lanes beside the lanes stepper.
  template <class L>
  struct LaneWork {};

  template <class LanesStepper, class L>
  static void prepare_lanes(RosenbrockStepAdjoint* const* steps, const T* const* start,
                            const T* t, const T* h, const bool*, const T* const*,
                            const bool*, const T* const* params, LanesStepper& lanes,
                            const L* p, LaneWork<L>&) {
    constexpr int W = lane_count<L>();
    int first = 0;
    while (steps[first] == nullptr) ++first;
    L y_l[n], t_l, h_l, y_new[n], err[n];
    for (int l = 0; l < W; ++l) {
      const int from = steps[l] != nullptr ? l : first;
      for (int i = 0; i < n; ++i) y_l[i].set(l, start[from][i]);
      t_l.set(l, t[from]);
      h_l.set(l, h[from]);
    }
    lanes.step(y_l, t_l, h_l, p, y_new, err);
    for (int l = 0; l < W; ++l) {
      if (steps[l] == nullptr) continue;
      RosenbrockStepAdjoint& st = *steps[l];
      st.y = start[l];
      st.t = t[l];
      st.h = h[l];
      st.p = params[l];
      st.stepper.load_step_lane(lanes, l);
      st.stage_points();
    }
  }

  // u_s = y + Σ_{j<s} a_sj k_j, the stage points f's products are taken at.
  void stage_points() {
    for (int s = 0; s < Tab::stages; ++s) {
      for (int i = 0; i < n; ++i) {
        T acc = y[i];
        for (int j = 0; j < s; ++j) acc += T(Tab::a(s, j)) * stepper.k[j][i];
        u[s][i] = acc;
      }
    }
  }

  void end_state(T* out) const {
    for (int i = 0; i < n; ++i) out[i] = stepper.y_end[i];
  }
  void dense_state(T theta, T* out) { stepper.interpolate(y, t, h, theta, p, out); }

  void clear() {
    for (int s = 0; s < Tab::stages; ++s)
      for (int i = 0; i < n; ++i) k_bar[s][i] = T(0);
    for (int i = 0; i < n; ++i) y_bar[i] = T(0);
  }

  void add_end(const T* lambda) {
    for (int i = 0; i < n; ++i) y_bar[i] += lambda[i];
    for (int s = 0; s < Tab::stages; ++s) {
      double w;
      if constexpr (Tab::stiffly_accurate) {
        w = s == last ? 1.0 : Tab::a(last, s);
      } else {
        w = Tab::b(s);
      }
      if (w == 0.0) continue;
      for (int i = 0; i < n; ++i) k_bar[s][i] += T(w) * lambda[i];
    }
  }

  void add_save(T theta, const T* w) {
    const T one_minus = T(1) - theta;
    T end_part[n];
    for (int i = 0; i < n; ++i) {
      y_bar[i] += one_minus * w[i];
      end_part[i] = theta * w[i];
    }
    add_end(end_part);
    T power = theta * one_minus;  // θ (1−θ) θ^r, the weight of K_r
    for (int r = 0; r < Tab::dense_rows; ++r, power *= theta) {
      for (int s = 0; s < Tab::stages; ++s) {
        const double hr = Tab::h(r, s);
        if (hr == 0.0) continue;
        for (int i = 0; i < n; ++i) k_bar[s][i] += power * T(hr) * w[i];
      }
    }
  }

  // transpose() of up to W steps at once (steps[l]: lane l's, or null), prepared by
  // prepare_lanes with `lanes`, whose factors (still those of these steps) give the transposed
  // solves on lanes; f's products are one call each on lanes (LaneVjps: ModelVjps over L), each
  // lane's results then used as the scalar loop uses them (the scalar path's bits). A lane that
  // would skip a stage (its cotangent all zeros, or no step) gets a zero right-hand side, a zero
  // cotangent at another lane's point; its p̄ changes only where those products are not finite
  // (adjoint_backward_lanes.hpp). Lane l's start cotangent goes to out[l].
  template <class L, class LaneVjps, class LanesStepper>
  static void transpose_lanes(RosenbrockStepAdjoint* const* steps, LaneVjps& vjps,
                              const LanesStepper* lanes, LaneWork<L>&, T* const* out) {
    constexpr int W = lane_count<L>();
    L r_l[n], y_l[n], t_l, k_l[n], tau_l, u_l[n], tc_l, part_l[n];
    for (int s = last; s >= 0; --s) {
      bool needs[W] = {};
      int first = -1;
      for (int l = 0; l < W; ++l) {
        if (steps[l] == nullptr) continue;
        needs[l] = any_nonzero(steps[l]->k_bar[s], n);
        if (needs[l] && first < 0) first = l;
      }
      if (first < 0) continue;
      for (int l = 0; l < W; ++l) {
        const RosenbrockStepAdjoint& st = *steps[needs[l] ? l : first];
        for (int i = 0; i < n; ++i) {
          r_l[i].set(l, needs[l] ? st.k_bar[s][i] : T(0));
          y_l[i].set(l, st.y[i]);
          k_l[i].set(l, st.stepper.k[s][i]);
          u_l[i].set(l, st.u[s][i]);
        }
        t_l.set(l, st.t);
        tau_l.set(l, st.h * T(Tab::d(s)));
        tc_l.set(l, st.t + T(Tab::c(s)) * st.h);
      }
      lanes->system.M.solve_transposed(r_l);
      vjps.rhs_second_order(y_l, t_l, k_l, tau_l, r_l, part_l);
      for (int l = 0; l < W; ++l) {
        if (!needs[l]) continue;
        for (int i = 0; i < n; ++i) steps[l]->y_bar[i] += part_l[i][l];
      }
      vjps.rhs(u_l, tc_l, r_l, part_l);  // part = ū_s
      for (int l = 0; l < W; ++l) {
        if (!needs[l]) continue;
        RosenbrockStepAdjoint& st = *steps[l];
        T r_bar[n], part[n], coupled[n];
        for (int i = 0; i < n; ++i) {
          r_bar[i] = r_l[i][l];
          part[i] = part_l[i][l];
          st.y_bar[i] += part[i];
        }
        st.couple(s, r_bar, part, coupled);
      }
    }
    for (int l = 0; l < W; ++l) {
      if (steps[l] == nullptr) continue;
      for (int i = 0; i < n; ++i) out[l][i] = steps[l]->y_bar[i];
    }
  }

  // The earlier stages' cotangents from stage s's: k̄_j += C_sj (Mᵀ) r̄ / h + a_sj ū_s.
  void couple(int s, const T* r_bar, const T* part, T* coupled) {
    const T inv_h = T(1) / h;
    // With a mass matrix the coupling terms are M Σ_j (C_sj/h) k_j: their transpose Mᵀ r̄.
    if constexpr (has_mass<Model>()) {
      mass_transposed_times<Model, T>(r_bar, coupled);
    } else {
      for (int i = 0; i < n; ++i) coupled[i] = r_bar[i];
    }
    for (int j = 0; j < s; ++j) {
      const double C = Tab::C(s, j), a = Tab::a(s, j);
      for (int i = 0; i < n; ++i) k_bar[j][i] += inv_h * T(C) * coupled[i] + T(a) * part[i];
    }
  }

  template <class Vjps>
  void transpose(Vjps& vjps, T* out) {
    for (int s = last; s >= 0; --s) {
      if (!any_nonzero(k_bar[s], n)) continue;
      T r_bar[n], part[n];
      for (int i = 0; i < n; ++i) r_bar[i] = k_bar[s][i];
      stepper.system.M.solve_transposed(r_bar);
      vjps.rhs_second_order(y, t, stepper.k[s], h * T(Tab::d(s)), r_bar, part);
      for (int i = 0; i < n; ++i) y_bar[i] += part[i];
      vjps.rhs(u[s], t + T(Tab::c(s)) * h, r_bar, part);  // part = ū_s
      for (int i = 0; i < n; ++i) y_bar[i] += part[i];
      T coupled[n];
      couple(s, r_bar, part, coupled);
    }
    for (int i = 0; i < n; ++i) out[i] = y_bar[i];
  }
};

}  // namespace ode
}  // namespace shoal
