// Rodas4 (Hairer & Wanner, Solving ODEs II, Sec. VI.4): a 6-stage, order-4, stiffly accurate
// Rosenbrock method with an embedded order-3 solution and a 2-vector continuous extension of
// order 3. Two stages fewer than Rodas5P: cheaper per step where the tolerance is loose enough
// that order 4 takes about as many steps as order 5 (rtol ~1e-3…1e-5).
//
// A tableau (data) for the Rosenbrock engine (rosenbrock.hpp), in the same transformed form as
// Rodas5P's: one Jacobian, one ∂f/∂t and ONE factorisation of M = I/(hγ) − J per step; stage 6
// reuses row 5 of a with a unit weight on the fifth increment (a_6j = a_5j, a_65 = 1), c_5 = c_6 =
// 1 and d_5 = d_6 = 0; y_new = u_6 + k_6, and k_6 is the error estimate.
//
// Coefficients: Hairer's RODAS (METH = 1, γ = 1/4), as OrdinaryDiffEq.jl's Rodas4 lists them;
// tests/cpp/test_rodas4_tableau.cc checks them against the order conditions.
#pragma once

#include "shoal/config.hpp"
#include "shoal/ode/iteration_matrix.hpp"
#include "shoal/ode/rosenbrock.hpp"
#include "shoal/ode/rosenbrock_joint.hpp"

namespace shoal {
namespace ode {

struct Rodas4Tableau {
  static constexpr int stages = 6;
  static constexpr bool stiffly_accurate = true;
  static constexpr int error_order = 4;  // embedded order 3: local error estimate O(h^4)
  static constexpr int dense_rows = 2;
  static constexpr double gamma = 0.25;
  // a[i][j], j < i (stage inputs).
  SHOAL_HD static double a(int i, int j) {
    static constexpr double v[6][5] = {
        {0, 0, 0, 0, 0},
        {1.544, 0, 0, 0, 0},
        {0.9466785280815826, 0.2557011698983284, 0, 0, 0},
        {3.314825187068521, 2.896124015972201, 0.9986419139977817, 0, 0},
        {1.221224509226641, 6.019134481288629, 12.53708332932087, -0.687886036105895, 0},
        {1.221224509226641, 6.019134481288629, 12.53708332932087, -0.687886036105895, 1.0},
    };
    return v[i][j];
  }
  // C[i][j], j < i (the transformed Γ⁻¹ couplings, divided by h in use).
  SHOAL_HD static double C(int i, int j) {
    static constexpr double v[6][5] = {
        {0, 0, 0, 0, 0},
        {-5.6688, 0, 0, 0, 0},
        {-2.430093356833875, -0.2063599157091915, 0, 0, 0},
        {-0.1073529058151375, -9.594562251023355, -20.47028614809616, 0, 0},
        {7.496443313967647, -10.24680431464352, -33.99990352819905, 11.7089089320616, 0},
        {8.083246795921522, -7.981132988064893, -31.52159432874371, 16.31930543123136,
         -6.058818238834054},
    };
    return v[i][j];
  }
  SHOAL_HD static double c(int i) {
    static constexpr double v[6] = {0.0, 0.386, 0.21, 0.63, 1.0, 1.0};
    return v[i];
  }
  SHOAL_HD static double d(int i) {
    static constexpr double v[6] = {0.25, -0.1043, 0.1035, -0.03620000000000023, 0.0, 0.0};
    return v[i];
  }
  // Dense output: K_r = Σ_i h[r][i] k_i, y(θ) = (1−θ) y0 + θ (y1 + (1−θ)(K_0 + θ K_1)).
  SHOAL_HD static double h(int i, int j) {
    static constexpr double v[2][6] = {
        {10.12623508344586, -7.487995877610167, -34.80091861555747, -7.992771707568823,
         1.025137723295662, 0.0},
        {-0.6762803392801253, 6.087714651680015, 16.43084320892478, 24.76722511418386,
         -6.594389125716872, 0.0},
    };
    return v[i][j];
  }
};

// Rodas4 over an iteration-matrix policy (RosenbrockUsing, rosenbrock_joint.hpp).
template <template <class> class Matrix>
using Rodas4Using = RosenbrockUsing<Rodas4Tableau, Matrix>;

// Rodas4 factorising in the state's precision (the convergence tests' stepper).
template <class Model, class T>
using Rodas4 = typename Rodas4Using<DenseMatrixOf<T>::template Type>::template Stepper<Model, T>;

}  // namespace ode
}  // namespace shoal
