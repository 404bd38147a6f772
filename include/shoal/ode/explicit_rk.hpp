// The one engine of the explicit Runge-Kutta methods: a method is its tableau (tsit5.hpp,
// vern7.hpp, vern9.hpp), this file runs any of them.
//
// A tableau supplies
//   stages, order, embedded_order     the pair; the controller's exponent is 1/(embedded + 1)
//   fsal                              the last stage is f at the new point (its row of a is b),
//                                     kept as the next step's first stage
//   c(i), a(i, j)                     nodes and coefficients, j < i < dense_stages
//   b(i), e(i)                        solution and error weights (b − b̂), i < stages
//   dense_stages, dense_degree, r(i, j)
//                                     the continuous extension y(t + θh) = y + h Σ_i b_i(θ) k_i,
//                                     b_i(θ) = Σ_j r(i, j) θ^(j+1); stages from `stages` on are
//                                     extra ones (Verner's), computed only when a step's dense
//                                     output is first asked for, then kept for that step
// Zero coefficients are skipped, so a sparse tableau costs no more than its nonzeros (and a
// zero weight never turns an infinite stage into a NaN).
#pragma once

#include "shoal/config.hpp"
#include "shoal/ode/model_traits.hpp"

namespace shoal {
namespace ode {

template <class Tab>
struct ExplicitRungeKutta {
  // Whether stage i carries any dense-output weight.
  SHOAL_HD static bool dense_weighted(int i) {
    for (int j = 0; j < Tab::dense_degree; ++j) {
      if (Tab::r(i, j) != 0.0) return true;
    }
    return false;
  }

  // One trajectory's working storage and step. With an FSAL tableau, `k[0]` holds f(t, y) on
  // entry to step(); otherwise step() evaluates it.
  template <class Model, class T>
  struct Stepper {
    using Tableau = Tab;
    static constexpr int n = Model::n_vars;
    static constexpr int error_order = Tab::embedded_order + 1;
    static constexpr bool has_extra_stages = Tab::dense_stages > Tab::stages;
    static_assert(!has_mass<Model>(), "an explicit method solves y' = f: no mass matrix");

    T k[Tab::dense_stages][n];
    // Whether the extra dense-output stages of the last attempted step are computed.
    bool dense_ready = false;

    // Called once at the initial point, and again if the state is modified between steps.
    SHOAL_HD void init(const T* y, T t, const T* p) {
      if constexpr (Tab::fsal) Model::template rhs<T>(y, t, p, k[0]);
    }

    // Attempts a step of size h from (t, y): writes the candidate y_new and the error estimate
    // err (already scaled by h).
    SHOAL_HD void step(const T* y, T t, T h, const T* p, T* y_new, T* err) {
      if constexpr (!Tab::fsal) Model::template rhs<T>(y, t, p, k[0]);
      T tmp[n];
      for (int s = 1; s < Tab::stages; ++s) {
        stage(s, y, t, h, p, tmp);
        // An FSAL tableau's last stage point is the solution itself.
        if (Tab::fsal && s == Tab::stages - 1) {
          for (int i = 0; i < n; ++i) y_new[i] = tmp[i];
        }
      }
      if constexpr (!Tab::fsal) {
        for (int i = 0; i < n; ++i) {
          T acc = T(0);
          for (int s = 0; s < Tab::stages; ++s) {
            if (Tab::b(s) != 0.0) acc += T(Tab::b(s)) * k[s][i];
          }
          y_new[i] = y[i] + h * acc;
        }
      }
      for (int i = 0; i < n; ++i) {
        T acc = T(0);
        for (int s = 0; s < Tab::stages; ++s) {
          if (Tab::e(s) != 0.0) acc += T(Tab::e(s)) * k[s][i];
        }
        err[i] = h * acc;
      }
      dense_ready = false;
    }

    // The accepted step's derivative at its end becomes the next step's first stage.
    SHOAL_HD void accept() {
      if constexpr (Tab::fsal) {
        for (int i = 0; i < n; ++i) k[0][i] = k[Tab::stages - 1][i];
      }
    }

    // The lanes engine (lanes_ensemble.hpp), where this stepper's T is simd::Lanes: lane l's
    // step as a scalar stepper (for its dense output), a scalar stepper's init() put into lane
    // l, and accept() in the lanes a mask selects. The extra stages are never computed in the
    // lanes: the scalar stepper computes its lane's.
    template <class LanesStepper>
    void load_lane(const LanesStepper& from, int l) {
      for (int s = 0; s < Tab::stages; ++s)
        for (int i = 0; i < n; ++i) k[s][i] = lane(from.k[s][i], l);
      dense_ready = false;
    }
    template <class LanesStepper>
    void store_init_lane(LanesStepper& to, int l) const {
      if constexpr (Tab::fsal) {
        for (int i = 0; i < n; ++i) set_lane(to.k[0][i], l, k[0][i]);
      }
    }
    template <class Mask>
    void accept_lanes(const Mask& accepted) {
      if constexpr (Tab::fsal) {
        for (int i = 0; i < n; ++i) k[0][i] = select(accepted, k[Tab::stages - 1][i], k[0][i]);
      }
    }

    // Dense output inside the last attempted step (from (t, y), of size h): y(t + θh),
    // 0 ≤ θ ≤ 1.
    SHOAL_HD void interpolate(const T* y, T t, T h, T theta, const T* p, T* out) {
      if constexpr (has_extra_stages) {
        if (!dense_ready) {
          T tmp[n];
          for (int s = Tab::stages; s < Tab::dense_stages; ++s) stage(s, y, t, h, p, tmp);
          dense_ready = true;
        }
      }
      T bt[Tab::dense_stages];
      for (int s = 0; s < Tab::dense_stages; ++s) {
        T acc = T(Tab::r(s, Tab::dense_degree - 1));
        for (int j = Tab::dense_degree - 2; j >= 0; --j) acc = T(Tab::r(s, j)) + theta * acc;
        bt[s] = theta * acc;
      }
      for (int i = 0; i < n; ++i) {
        T acc = T(0);
        for (int s = 0; s < Tab::dense_stages; ++s) {
          if (dense_weighted(s)) acc += bt[s] * k[s][i];
        }
        out[i] = y[i] + h * acc;
      }
    }

   private:
    // Stage s: its point y + h Σ_j a_sj k_j (left in `point`) and k_s = f there.
    SHOAL_HD void stage(int s, const T* y, T t, T h, const T* p, T* point) {
      for (int i = 0; i < n; ++i) {
        T acc = T(0);
        for (int j = 0; j < s; ++j) {
          if (Tab::a(s, j) != 0.0) acc += T(Tab::a(s, j)) * k[j][i];
        }
        point[i] = y[i] + h * acc;
      }
      Model::template rhs<T>(point, t + T(Tab::c(s)) * h, p, k[s]);
    }
  };
};

}  // namespace ode
}  // namespace shoal
