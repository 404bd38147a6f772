// The Rodas4 coefficients satisfy the Rosenbrock order conditions (rosenbrock_order_conditions.hpp
// says how they are checked): order 4, embedded order 3, a dense output of order 3.
#include <gtest/gtest.h>

#include "rosenbrock_order_conditions.hpp"
#include "shoal/ode/rodas4.hpp"

namespace {

using Tab = shoal::ode::Rodas4Tableau;
using Cond = Conditions<Tab>;
constexpr int S = Tab::stages;
// The published coefficients have 16 significant digits.
constexpr double kTol = 1e-12;

TEST(Rodas4Tableau, SixStagesAndGammaAQuarter) {
  EXPECT_EQ(S, 6);
  EXPECT_EQ(Tab::gamma, 0.25);
  EXPECT_EQ(Tab::error_order, 4);
}

TEST(Rodas4Tableau, NodesAndTimeWeightsAreRowSums) {
  EXPECT_LT(Cond().row_sum_residual(), kTol);
}

TEST(Rodas4Tableau, StageSixIsTheStifflyAccurateRow) {
  for (int j = 0; j < 4; ++j) EXPECT_EQ(Tab::a(5, j), Tab::a(4, j)) << j;
  EXPECT_EQ(Tab::a(5, 4), 1.0);
  for (int i = 4; i < S; ++i) {
    EXPECT_EQ(Tab::c(i), 1.0);
    EXPECT_EQ(Tab::d(i), 0.0);
  }
  EXPECT_LT(Cond().stiffly_accurate_residual(), kTol);
}

TEST(Rodas4Tableau, SolutionIsOrderFourNotFive) {
  const Cond s;
  EXPECT_LT(s.worst_residual(s.b, 1, 4), kTol);
  EXPECT_GT(s.worst_residual(s.b, 5, 5), 1e-4);
}

TEST(Rodas4Tableau, EmbeddedIsOrderThreeNotFour) {
  const Cond s;
  EXPECT_LT(s.worst_residual(s.b_hat, 1, 3), kTol);
  EXPECT_GT(s.worst_residual(s.b_hat, 4, 4), 1e-4);
}

TEST(Rodas4Tableau, DenseOutputIsOrderThreeAndEndsAtTheSolution) {
  const Cond s;
  EXPECT_LT(s.dense_residual(3), kTol);
  EXPECT_GT(s.worst_residual(s.dense_weights(0.5), 4, 4, 0.5), 1e-5);
}

}  // namespace
