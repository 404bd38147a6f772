// Rosenbrock23 (Shampine & Reichelt, "The MATLAB ODE Suite", 1997: MATLAB's ode23s): a 3-stage,
// L-stable Rosenbrock method of order 2 with an order-3 error estimate and an order-2 continuous
// extension. Per step one Jacobian, one ∂f/∂t, one factorisation, three solves and two new
// right-hand sides, against eight of each for Rodas5P: the method for loose tolerances (1e-2…1e-4)
// where order 2 takes few more steps than order 5.
//
// Shampine and Reichelt write it with slopes k_i and W = I − h d J, d = 1/(2 + √2):
//   W k1 = F0 + h d T,                              F1 = f(t + h/2, y + h/2 k1),
//   W (k2 − k1) = F1 − k1,                          y_new = y + h k2,
//   W k3 = F2 − e32 (k2 − F1) − 2 (k1 − F0) + h d T,  F2 = f(t + h, y_new), e32 = 6 + √2,
// error (h/6)(k1 − 2 k2 + k3), interpolant y + h [θ(1−θ) k1 + θ(θ−2d) k2] / (1 − 2d).
// With k2 − F1 = h d J (k2 − k1) and k1 − F0 = h d J k1 + h d T (from the first two solves), the
// J-products leave and it becomes a Rosenbrock tableau in the engine's transformed form
// (rosenbrock.hpp), increments K1 = h d k1, K2 = h d (k2 − k1), K3 = h d (k3 − e32 (k2 − k1) − 2 k1):
//   γ = d;  a_21 = 1/(2d), a_31 = a_32 = 1/d;  C_21 = −1/d, C_31 = −2/d, C_32 = −e32/d;
//   c = (0, 1/2, 1);  d_i = (d, 0, −d);
//   y_new = y + (K1 + K2)/d (the third stage's point, so b = row 3 of a);
//   the embedded order-3 solution is y_new + (K1 + (e32 − 2) K2 + K3)/(6d), so with the engine's
//   err = y_new − ŷ: e = −(1, 4 + √2, 1)/(6d);
//   dense: y(θ) = (1−θ) y + θ (y_new + (1−θ) K_0), K_0 = −K2 / (d (1 − 2d)) = −(4 + 3√2) K2.
// tests/cpp/test_rosenbrock23_tableau.cc checks these against the order conditions.
//
// Not stiffly accurate in the Rodas sense (y_new is a stage point, not a stage point plus its
// increment), so the engine takes y_new and the error from b and e.
#pragma once

#include "shoal/config.hpp"
#include "shoal/ode/iteration_matrix.hpp"
#include "shoal/ode/rosenbrock.hpp"
#include "shoal/ode/rosenbrock_joint.hpp"

namespace shoal {
namespace ode {

struct Rosenbrock23Tableau {
  static constexpr int stages = 3;
  static constexpr bool stiffly_accurate = false;
  static constexpr int error_order = 3;  // order 2 against order 3: local error estimate O(h^3)
  static constexpr int dense_rows = 1;
  static constexpr double gamma = 0.29289321881345248;  // d = 1/(2 + √2)
  SHOAL_HD static double a(int i, int j) {
    static constexpr double v[3][2] = {
        {0, 0},
        {1.7071067811865475, 0},                   // 1/(2d) = 1 + √2/2
        {3.4142135623730950, 3.4142135623730950},  // 1/d = 2 + √2
    };
    return v[i][j];
  }
  SHOAL_HD static double C(int i, int j) {
    static constexpr double v[3][2] = {
        {0, 0},
        {-3.4142135623730950, 0},                    // −1/d
        {-6.8284271247461901, -25.313708498984760},  // −2/d, −e32/d = −(14 + 8√2)
    };
    return v[i][j];
  }
  SHOAL_HD static double c(int i) {
    static constexpr double v[3] = {0.0, 0.5, 1.0};
    return v[i];
  }
  SHOAL_HD static double d(int i) {
    static constexpr double v[3] = {0.29289321881345248, 0.0, -0.29289321881345248};
    return v[i];
  }
  // y_new = y + Σ b_j K_j: the third stage's point.
  SHOAL_HD static double b(int j) {
    static constexpr double v[3] = {3.4142135623730950, 3.4142135623730950, 0.0};
    return v[j];
  }
  // err = Σ e_j K_j = y_new − ŷ (ŷ the order-3 solution).
  SHOAL_HD static double e(int j) {
    static constexpr double v[3] = {-0.56903559372884917, -3.0808802290397617,
                                    -0.56903559372884917};
    return v[j];
  }
  SHOAL_HD static double h(int i, int j) {
    static constexpr double v[1][3] = {{0.0, -8.2426406871192851, 0.0}};
    return v[i][j];
  }
};

// Rosenbrock23 over an iteration-matrix policy (RosenbrockUsing, rosenbrock_joint.hpp).
template <template <class> class Matrix>
using Rosenbrock23Using = RosenbrockUsing<Rosenbrock23Tableau, Matrix>;

// Rosenbrock23 factorising in the state's precision (the convergence tests' stepper).
template <class Model, class T>
using Rosenbrock23 =
    typename Rosenbrock23Using<DenseMatrixOf<T>::template Type>::template Stepper<Model, T>;

}  // namespace ode
}  // namespace shoal
