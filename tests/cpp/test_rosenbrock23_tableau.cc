// The Rosenbrock23 coefficients (rosenbrock23.hpp, transformed from Shampine & Reichelt's ode23s)
// satisfy the Rosenbrock order conditions (rosenbrock_order_conditions.hpp says how they are
// checked): order 2, an order-3 embedded solution, a dense output of order 2, L-stability.
#include <gtest/gtest.h>

#include <cmath>

#include "rosenbrock_order_conditions.hpp"
#include "shoal/ode/rosenbrock23.hpp"

namespace {

using Tab = shoal::ode::Rosenbrock23Tableau;
using Cond = Conditions<Tab>;
constexpr int S = Tab::stages;
constexpr double kTol = 1e-14;
const double kD = 1.0 / (2.0 + std::sqrt(2.0));

TEST(Rosenbrock23Tableau, ThreeStagesAndGammaIsShampinesD) {
  EXPECT_EQ(S, 3);
  EXPECT_NEAR(Tab::gamma, kD, 1e-16);
  EXPECT_EQ(Tab::error_order, 3);
  EXPECT_FALSE(Tab::stiffly_accurate);
}

TEST(Rosenbrock23Tableau, NodesAndTimeWeightsAreRowSums) {
  EXPECT_LT(Cond().row_sum_residual(), kTol);
}

TEST(Rosenbrock23Tableau, SolutionIsTheThirdStagesPoint) {
  // ode23s's y_new = y + h k2 is where it evaluates F2: b is row 3 of a, with no weight on K3.
  for (int j = 0; j < 2; ++j) EXPECT_EQ(Tab::b(j), Tab::a(2, j)) << j;
  EXPECT_EQ(Tab::b(2), 0.0);
  EXPECT_EQ(Tab::c(2), 1.0);
}

TEST(Rosenbrock23Tableau, SolutionIsOrderTwoNotThree) {
  const Cond s;
  EXPECT_LT(s.worst_residual(s.b, 1, 2), kTol);
  EXPECT_GT(s.worst_residual(s.b, 3, 3), 1e-3);
}

TEST(Rosenbrock23Tableau, EmbeddedIsOrderThreeNotFour) {
  const Cond s;
  EXPECT_LT(s.worst_residual(s.b_hat, 1, 3), kTol);
  EXPECT_GT(s.worst_residual(s.b_hat, 4, 4), 1e-3);
}

TEST(Rosenbrock23Tableau, DenseOutputIsOrderTwoAndEndsAtTheSolution) {
  const Cond s;
  EXPECT_LT(s.dense_residual(2), kTol);
  EXPECT_GT(s.worst_residual(s.dense_weights(0.5), 3, 3, 0.5), 1e-3);
}

// The stability function on y' = λy, z = hλ: stage increments solve (1/γ − z) u_i = z (1 + Σ a_ij
// u_j) + Σ C_ij u_j (the transformed form with h = 1), R(z) = 1 + Σ b_j u_j. L-stable: |R| ≤ 1 on
// the left half-plane's axis and R(z) → 0 as z → −∞ (R(z) = (1 + (1−2d) z) / (1 − d z)² here).
TEST(Rosenbrock23Tableau, StabilityFunctionIsLStable) {
  auto R = [](double z) {
    double u[S];
    double y = 1.0;
    for (int i = 0; i < S; ++i) {
      double arg = 1.0, coupling = 0.0;
      for (int j = 0; j < i; ++j) {
        arg += Tab::a(i, j) * u[j];
        coupling += Tab::C(i, j) * u[j];
      }
      u[i] = (z * arg + coupling) / (1.0 / Tab::gamma - z);
    }
    for (int j = 0; j < S; ++j) y += Tab::b(j) * u[j];
    return y;
  };
  for (double z : {-1e-3, -0.1, -1.0, -10.0, -1e3}) {
    const double want = (1 + (1 - 2 * kD) * z) / ((1 - kD * z) * (1 - kD * z));
    EXPECT_NEAR(R(z), want, 1e-13) << z;
    EXPECT_LE(std::abs(R(z)), 1.0) << z;
  }
  EXPECT_LT(std::abs(R(-1e12)), 1e-10);
}

}  // namespace
