// The Tsit5 coefficients satisfy the Runge-Kutta order conditions: all 17 rooted-tree conditions
// through order 5 for the solution weights, the 8 through order 4 for the embedded weights, and the
// continuous extension reproduces the step's end point.
#include <gtest/gtest.h>

#include <cmath>

#include "shoal/ode/tsit5.hpp"

namespace {

using Tab = shoal::ode::Tsit5Tableau;
constexpr int S = Tab::stages;

struct Weights {
  double v[S];
};
Weights weights(double (*w)(int)) {
  Weights out;
  for (int i = 0; i < S; ++i) out.v[i] = w(i);
  return out;
}
const Weights kB = weights(&Tab::b);
const Weights kBHat = weights(&Tab::b_hat);

double A(int i, int j) { return j < i && j < 6 ? Tab::a(i, j) : 0.0; }

// (A v)_i
void mat_vec(const double* v, double* out) {
  for (int i = 0; i < S; ++i) {
    out[i] = 0;
    for (int j = 0; j < S; ++j) out[i] += A(i, j) * v[j];
  }
}

double dot(const double* w, const double* v) {
  double s = 0;
  for (int i = 0; i < S; ++i) s += w[i] * v[i];
  return s;
}

struct Conditions {
  double residual[17];
  int count;
};

// Residuals of the order conditions Σ b Φ(tree) = 1/γ(tree), trees of order ≤ max_order.
Conditions order_conditions(const double* b, int max_order) {
  double c[S], c2[S], c3[S], c4[S], Ac[S], Ac2[S], Ac3[S], AAc[S], AAc2[S], AAAc[S], cAc[S],
      AcAc[S], c2Ac[S], cAc2[S], cAAc[S], AcAc_mixed[S];
  for (int i = 0; i < S; ++i) {
    c[i] = Tab::c(i);
    c2[i] = c[i] * c[i];
    c3[i] = c2[i] * c[i];
    c4[i] = c3[i] * c[i];
  }
  mat_vec(c, Ac);
  mat_vec(c2, Ac2);
  mat_vec(c3, Ac3);
  mat_vec(Ac, AAc);
  mat_vec(Ac2, AAc2);
  mat_vec(AAc, AAAc);
  for (int i = 0; i < S; ++i) {
    cAc[i] = c[i] * Ac[i];
    AcAc[i] = Ac[i] * Ac[i];
    c2Ac[i] = c2[i] * Ac[i];
    cAc2[i] = c[i] * Ac2[i];
    cAAc[i] = c[i] * AAc[i];
  }
  mat_vec(cAc, AcAc_mixed);  // A (c · Ac)
  double one[S];
  for (double& v : one) v = 1.0;
  const double phi_gamma[17][2] = {
      {dot(b, one), 1.0},       {dot(b, c), 1.0 / 2},      {dot(b, c2), 1.0 / 3},
      {dot(b, Ac), 1.0 / 6},    {dot(b, c3), 1.0 / 4},     {dot(b, cAc), 1.0 / 8},
      {dot(b, Ac2), 1.0 / 12},  {dot(b, AAc), 1.0 / 24},   {dot(b, c4), 1.0 / 5},
      {dot(b, c2Ac), 1.0 / 10}, {dot(b, AcAc), 1.0 / 20},  {dot(b, cAc2), 1.0 / 15},
      {dot(b, cAAc), 1.0 / 30}, {dot(b, Ac3), 1.0 / 20},   {dot(b, AcAc_mixed), 1.0 / 40},
      {dot(b, AAc2), 1.0 / 60}, {dot(b, AAAc), 1.0 / 120},
  };
  const int counts[] = {0, 1, 2, 4, 8, 17};
  Conditions out;
  out.count = counts[max_order];
  for (int k = 0; k < out.count; ++k) out.residual[k] = phi_gamma[k][0] - phi_gamma[k][1];
  return out;
}

TEST(Tsit5Tableau, RowSumsEqualNodes) {
  for (int i = 0; i < S; ++i) {
    double sum = 0;
    for (int j = 0; j < S; ++j) sum += A(i, j);
    EXPECT_NEAR(sum, Tab::c(i), 1e-14) << "stage " << i;
  }
}

TEST(Tsit5Tableau, SolutionWeightsAreOrderFive) {
  const Conditions cond = order_conditions(kB.v, 5);
  ASSERT_EQ(cond.count, 17);
  for (int k = 0; k < cond.count; ++k) EXPECT_NEAR(cond.residual[k], 0.0, 1e-14) << "tree " << k;
}

TEST(Tsit5Tableau, SolutionWeightsAreNotOrderSix) {
  // Σ b c^5 = 1/6 is a sixth-order condition; a fifth-order pair must miss it (a test that
  // could not fail would prove nothing about the conditions above).
  double s = 0;
  for (int i = 0; i < S; ++i) s += Tab::b(i) * std::pow(Tab::c(i), 5);
  EXPECT_GT(std::abs(s - 1.0 / 6), 1e-6);
}

TEST(Tsit5Tableau, EmbeddedWeightsAreOrderFour) {
  const Conditions cond = order_conditions(kBHat.v, 4);
  for (int k = 0; k < cond.count; ++k) EXPECT_NEAR(cond.residual[k], 0.0, 1e-14) << "tree " << k;
  const Conditions fifth = order_conditions(kBHat.v, 5);
  double worst = 0;
  for (int k = 8; k < 17; ++k) worst = std::max(worst, std::abs(fifth.residual[k]));
  EXPECT_GT(worst, 1e-6) << "the embedded method must be of lower order";
}

TEST(Tsit5Tableau, ErrorWeightsAreTheDifference) {
  for (int i = 0; i < S; ++i) EXPECT_NEAR(Tab::e(i), Tab::b(i) - Tab::b_hat(i), 4e-16);
}

TEST(Tsit5Tableau, FsalLastRowIsTheSolution) {
  for (int j = 0; j < 6; ++j) EXPECT_EQ(Tab::a(6, j), Tab::b(j));
  EXPECT_EQ(Tab::c(6), 1.0);
}

TEST(Tsit5Tableau, DenseOutputEndsAtTheSolutionWeights) {
  for (int i = 0; i < S; ++i) {
    const double at_one = Tab::r(i, 0) + Tab::r(i, 1) + Tab::r(i, 2) + Tab::r(i, 3);
    EXPECT_NEAR(at_one, Tab::b(i), 1e-14) << "stage " << i;
  }
}

}  // namespace
