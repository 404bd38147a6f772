// The one Rosenbrock engine: a step routine run by a tableau (data) over a system policy.
//
// Written in the transformed form (Hairer-Wanner IV.7) that needs no matrix-vector products with
// the Jacobian:
//   M = I/(hγ) − J,   u_i = y + Σ_{j<i} a_ij k_j,
//   M k_i = F(u_i, t + c_i h) + h d_i ∂F/∂t + Σ_{j<i} (C_ij / h) k_j.
// A stiffly accurate tableau (the Rodas family) has y_new = u_s + k_s, the solution is the last
// stage's point plus its increment, and k_s is the error estimate; any other (Rosenbrock23) gives
// weights: y_new = y + Σ b_j k_j and err = Σ e_j k_j. One Jacobian, one ∂F/∂t and one
// factorisation per step (attempt) serve every stage solve. Dense output:
//   K_r = Σ_i H_ri k_i,   y(θ) = (1−θ) y + θ (y_new + (1−θ)(K_0 + θ (K_1 + θ (K_2 + …)))).
//
// What is being stepped is the System policy's business, so one loop serves
//   - StateSystem<Matrix>: the model itself, M assembled and factorised by Matrix (dense LU in
//     either precision, or a generated sparse solver: iteration_matrix.hpp,
//     sparse_iteration_matrix.hpp);
//   - JointSystem<Matrix> (rosenbrock_joint.hpp): the model with its forward sensitivities [y, S],
//     solved by block forward substitution against the state's factorisation.
// A System<Model, T> has `n` (the stepped vector's size) and
//   begin_step(y, t, p, inv_hg, F0, Ft)  F and ∂F/∂t at the step's start, M ready (inv_hg = 1/(hγ))
//   rhs(u, t, p, out)                    F at a stage point
//   solve(y, t, p, r)                    r ← M⁻¹ r (y, t: the step's start)
//   apply_mass(v, out)                   out ← M_mass v (used only where has_mass)
// Because the joint system's state rows go through the same statements as the plain system's,
// a joint solve without sensitivity error control steps, and its y values are, bit for bit the
// plain solve's (tests/ode/test_gradients.py holds it to that).
#pragma once

#include "shoal/config.hpp"
#include "shoal/ode/mass.hpp"

namespace shoal {
namespace ode {

template <class Tableau, template <class, class> class System>
struct Rosenbrock {
  template <class Model, class T>
  struct Stepper {
    using Tab = Tableau;
    using Sys = System<Model, T>;
    static constexpr int n = Sys::n;
    static constexpr int error_order = Tab::error_order;

    Sys system;
    T k[Tab::stages][n];
    T dense[Tab::dense_rows][n];
    T y_end[n];

    SHOAL_HD void init(const T*, T, const T*) {}

    SHOAL_HD void step(const T* y, T t, T h, const T* p, T* y_new, T* err) {
      T F0[n], Ft[n], u[n], rhs[n];
      // The Jacobian is taken afresh at (t, y) on every attempt, so a rejected step's retry sees
      // exactly what a first attempt would.
      system.begin_step(y, t, p, T(1) / (h * T(Tab::gamma)), F0, Ft);

      for (int i = 0; i < n; ++i) rhs[i] = F0[i] + h * T(Tab::d(0)) * Ft[i];
      system.solve(y, t, p, rhs);
      for (int i = 0; i < n; ++i) k[0][i] = rhs[i];

      const T inv_h = T(1) / h;
      for (int s = 1; s < Tab::stages; ++s) {
        for (int i = 0; i < n; ++i) {
          T acc = y[i];
          for (int j = 0; j < s; ++j) acc += T(Tab::a(s, j)) * k[j][i];
          u[i] = acc;
        }
        system.rhs(u, t + T(Tab::c(s)) * h, p, rhs);
        if constexpr (Sys::has_mass) {
          T coupled[n], mass_coupled[n];
          for (int i = 0; i < n; ++i) {
            T acc = T(0);
            for (int j = 0; j < s; ++j) acc += T(Tab::C(s, j)) * k[j][i];
            coupled[i] = acc;
          }
          system.apply_mass(coupled, mass_coupled);
          for (int i = 0; i < n; ++i) rhs[i] += h * T(Tab::d(s)) * Ft[i] + inv_h * mass_coupled[i];
        } else {
          for (int i = 0; i < n; ++i) {
            T acc = T(0);
            for (int j = 0; j < s; ++j) acc += T(Tab::C(s, j)) * k[j][i];
            rhs[i] += h * T(Tab::d(s)) * Ft[i] + inv_h * acc;
          }
        }
        system.solve(y, t, p, rhs);
        for (int i = 0; i < n; ++i) k[s][i] = rhs[i];
      }
      if constexpr (Tab::stiffly_accurate) {
        for (int i = 0; i < n; ++i) {
          y_new[i] = u[i] + k[Tab::stages - 1][i];
          y_end[i] = y_new[i];
          err[i] = k[Tab::stages - 1][i];
        }
      } else {
        for (int i = 0; i < n; ++i) {
          T acc = y[i], e = T(0);
          for (int s = 0; s < Tab::stages; ++s) {
            acc += T(Tab::b(s)) * k[s][i];
            e += T(Tab::e(s)) * k[s][i];
          }
          y_new[i] = acc;
          y_end[i] = acc;
          err[i] = e;
        }
      }
      for (int r = 0; r < Tab::dense_rows; ++r) {
        for (int i = 0; i < n; ++i) {
          T acc = T(0);
          for (int s = 0; s < Tab::stages; ++s) acc += T(Tab::h(r, s)) * k[s][i];
          dense[r][i] = acc;
        }
      }
    }

    SHOAL_HD void accept() {}

    // The lanes engine (lanes_ensemble.hpp): lane l's dense output as a scalar stepper's; init
    // and accept keep nothing.
    template <class LanesStepper>
    void load_lane(const LanesStepper& from, int l) {
      for (int r = 0; r < Tab::dense_rows; ++r)
        for (int i = 0; i < n; ++i) dense[r][i] = lane(from.dense[r][i], l);
      for (int i = 0; i < n; ++i) y_end[i] = lane(from.y_end[i], l);
    }
    // All of lane l's step: its stages, dense output, end state and factors (the adjoint's
    // backward sweeps, adjoint_backward_lanes.hpp; the matrix policy's load_lane).
    template <class LanesStepper>
    void load_step_lane(const LanesStepper& from, int l) {
      load_lane(from, l);
      for (int s = 0; s < Tab::stages; ++s)
        for (int i = 0; i < n; ++i) k[s][i] = lane(from.k[s][i], l);
      system.M.load_lane(from.system.M, l);
    }
    template <class LanesStepper>
    void store_init_lane(LanesStepper&, int) const {}
    template <class Mask>
    void accept_lanes(const Mask&) {}

    // Dense output inside the last attempted step, from its start y (θ in [0, 1]); the step's
    // time, size and parameters are not needed.
    SHOAL_HD void interpolate(const T* y, T, T, T theta, const T*, T* out) const {
      const T one_minus = T(1) - theta;
      for (int i = 0; i < n; ++i) {
        T poly = dense[Tab::dense_rows - 1][i];
        for (int r = Tab::dense_rows - 2; r >= 0; --r) poly = dense[r][i] + theta * poly;
        out[i] = one_minus * y[i] + theta * (y_end[i] + one_minus * poly);
      }
    }
  };
};

// The plain system: the model's own right-hand side, M = I/(hγ) − J from Matrix<Model>.
template <template <class> class Matrix>
struct StateSystem {
  template <class Model, class T>
  struct Type {
    static constexpr int n = Model::n_vars;
    static constexpr bool has_mass = ode::has_mass<Model>();
    Matrix<Model> M;

    SHOAL_HD void begin_step(const T* y, const T& t, const T* p, const T& inv_hg, T* F0, T* Ft) {
      M.assemble(y, t, p, inv_hg, F0, Ft);
    }
    SHOAL_HD static void rhs(const T* u, const T& t, const T* p, T* out) {
      Model::template rhs<T>(u, t, p, out);
    }
    SHOAL_HD void solve(const T*, const T&, const T*, T* r) const { M.solve(r); }
    SHOAL_HD static void apply_mass(const T* v, T* out) { mass_times<Model, T>(v, out); }
  };
};

}  // namespace ode
}  // namespace shoal
