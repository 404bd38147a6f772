// The Rodas5P coefficients satisfy the Rosenbrock order conditions (rosenbrock_order_conditions.hpp
// says how they are checked).
#include <gtest/gtest.h>

#include <cmath>

#include "rosenbrock_order_conditions.hpp"
#include "shoal/ode/rodas5p.hpp"

namespace {

using Tab = shoal::ode::Rodas5PTableau;
using Cond = Conditions<Tab>;
constexpr int S = Tab::stages;
constexpr double g = Tab::gamma;
constexpr double kTol = 1e-12;

TEST(Rodas5PTableau, GammaIsThePublishedValue) {
  EXPECT_EQ(Tab::gamma, 0.21193756319429014);
  EXPECT_EQ(Tab::stages, 8);
}

TEST(Rodas5PTableau, NodesAreRowSumsOfAlpha) {
  // Non-autonomous consistency: f is evaluated at t + c_i h with c_i = Σ_j α_ij.
  const Cond s;
  for (int i = 0; i < S; ++i) {
    double sum = 0;
    for (int j = 0; j < S; ++j) sum += s.alpha[i][j];
    EXPECT_NEAR(sum, Tab::c(i), kTol) << "stage " << i;
  }
}

TEST(Rodas5PTableau, TimeDerivativeWeightsAreRowSumsOfGamma) {
  // The h d_i ∂f/∂t term needs d_i = γ_i = Σ_j γ_ij (diagonal included).
  const Cond s;
  for (int i = 0; i < S; ++i) {
    double sum = 0;
    for (int j = 0; j < S; ++j) sum += s.gam[i][j];
    EXPECT_NEAR(sum, Tab::d(i), kTol) << "stage " << i;
  }
  EXPECT_EQ(Tab::d(0), Tab::gamma);
}

TEST(Rodas5PTableau, StagesSevenAndEightAreStifflyAccurateRows) {
  for (int j = 0; j < 5; ++j) {
    EXPECT_EQ(Tab::a(6, j), Tab::a(5, j)) << j;
    EXPECT_EQ(Tab::a(7, j), Tab::a(6, j)) << j;
  }
  EXPECT_EQ(Tab::a(6, 5), 1.0);
  EXPECT_EQ(Tab::a(7, 5), 1.0);
  EXPECT_EQ(Tab::a(7, 6), 1.0);
  for (int i = 5; i < S; ++i) {
    EXPECT_EQ(Tab::c(i), 1.0);
    EXPECT_EQ(Tab::d(i), 0.0);
  }
  // In the standard form: b is the last row of β = α + Γ, and b̂ the one before (both methods
  // stiffly accurate: R(∞) = 0).
  EXPECT_LT(Cond().stiffly_accurate_residual(), kTol);
}

TEST(Rodas5PTableau, SolutionSatisfiesConditionsThroughOrderFive) {
  const Cond s;
  const auto t = s.trees();
  for (int k = 0; k < Cond::kTrees; ++k) {
    EXPECT_NEAR(Cond::dot(s.b, t[k].phi), 1.0 / t[k].density, kTol) << t[k].name;
  }
}

TEST(Rodas5PTableau, HairerWannerTableFormsWithGammaPolynomials) {
  // The same conditions written as in HW IV.7 Table 7.1, with β_ij = α_ij + γ_ij off the
  // diagonal only and β_i' = Σ_{j<i} β_ij.
  const Cond s;
  double bp[S], ab[S], bb[S], c[S];
  for (int i = 0; i < S; ++i) {
    bp[i] = c[i] = 0;
    for (int j = 0; j < i; ++j) {
      bp[i] += s.beta[i][j];
      c[i] += s.alpha[i][j];
    }
  }
  for (int i = 0; i < S; ++i) {
    ab[i] = bb[i] = 0;
    for (int j = 0; j < i; ++j) {
      ab[i] += s.alpha[i][j] * bp[j];
      bb[i] += s.beta[i][j] * bp[j];
    }
  }
  double s1 = 0, s2 = 0, s3a = 0, s3b = 0, s4b = 0, s4c = 0, s4d = 0;
  for (int i = 0; i < S; ++i) {
    s1 += s.b[i];
    s2 += s.b[i] * bp[i];
    s3a += s.b[i] * c[i] * c[i];
    s3b += s.b[i] * bb[i];
    s4b += s.b[i] * c[i] * ab[i];
    double bc2 = 0, bbb = 0;
    for (int j = 0; j < i; ++j) {
      bc2 += s.beta[i][j] * c[j] * c[j];
      bbb += s.beta[i][j] * bb[j];
    }
    s4c += s.b[i] * bc2;
    s4d += s.b[i] * bbb;
  }
  EXPECT_NEAR(s1, 1.0, kTol);
  EXPECT_NEAR(s2, 0.5 - g, kTol);
  EXPECT_NEAR(s3a, 1.0 / 3, kTol);
  EXPECT_NEAR(s3b, 1.0 / 6 - g + g * g, kTol);
  EXPECT_NEAR(s4b, 1.0 / 8 - g / 3, kTol);
  EXPECT_NEAR(s4c, 1.0 / 12 - g / 3, kTol);
  EXPECT_NEAR(s4d, 1.0 / 24 - g / 2 + 1.5 * g * g - g * g * g, kTol);
}

TEST(Rodas5PTableau, SolutionIsNotOrderSix) {
  // Σ b c⁵ = 1/6 is a sixth-order condition: a test that could not fail would prove nothing.
  const Cond s;
  const Cond::V c = Cond::mul(s.alpha, Cond::ones());
  double sum = 0;
  for (int i = 0; i < S; ++i) sum += s.b[i] * std::pow(c[i], 5);
  EXPECT_GT(std::abs(sum - 1.0 / 6), 1e-6);
}

TEST(Rodas5PTableau, EmbeddedSatisfiesConditionsThroughOrderFour) {
  const Cond s;
  EXPECT_LT(s.worst_residual(s.b_hat, 1, 4), kTol);
  EXPECT_GT(s.worst_residual(s.b_hat, 5, 5), 1e-4) << "the embedded method must be of lower order";
}

TEST(Rodas5PTableau, DenseOutputSatisfiesConditionsThroughOrderFour) {
  // Σ b_i(θ) Φ_i(t) = θ^|t| / γ(t) for every θ and every tree of order ≤ 4.
  const Cond s;
  for (double theta : {0.0, 0.1, 0.25, 0.5, 0.7, 0.9, 1.0}) {
    const Cond::V bt = s.dense_weights(theta);
    EXPECT_LT(s.worst_residual(bt, 1, 4, theta), kTol) << "theta " << theta;
  }
  const Cond::V half = s.dense_weights(0.5);
  EXPECT_GT(s.worst_residual(half, 5, 5, 0.5), 1e-5) << "an order-4 extension misses order 5";
}

TEST(Rodas5PTableau, DenseOutputEndsAtTheSolution) {
  const Cond s;
  const Cond::V b1 = s.dense_weights(1.0), b0 = s.dense_weights(0.0);
  for (int j = 0; j < S; ++j) {
    EXPECT_NEAR(b1[j], s.b[j], 1e-14) << j;
    EXPECT_EQ(b0[j], 0.0) << j;
  }
}

TEST(Rodas5PTableau, WConditionsHoldOnlyThroughOrderTwo) {
  // With an arbitrary matrix W in place of J, the W-vertices (one child, weight Γ) separate
  // from the f'-vertices (weight α) and every tree with a W-vertex must vanish. Rodas5P keeps
  // these through order 2 only (Σ b c = 1/2 and Σ b γ_i = 0); its embedded method only through
  // order 1. So the order with an inexact Jacobian (e.g. a Jacobian rounded to float) is 2:
  // an fp32 factorisation perturbs M by its roundoff and contributes an O(ε_32 h^2)-sized local
  // error, not a fifth-order one.
  const Cond s;
  const Cond::V e = Cond::ones();
  const Cond::V c = Cond::mul(s.alpha, e), gi = Cond::mul(s.gam, e);
  EXPECT_NEAR(Cond::dot(s.b, e), 1.0, kTol);
  EXPECT_NEAR(Cond::dot(s.b, c), 0.5, kTol);
  EXPECT_NEAR(Cond::dot(s.b, gi), 0.0, kTol);
  // Order 3 with a W-vertex, [[τ]_W]_f: Σ b α Γ 1 = 0 — not satisfied.
  EXPECT_GT(std::abs(Cond::dot(s.b, Cond::mul(s.alpha, gi))), 1e-3);
  // The embedded solution: Σ b̂ γ_i ≠ 0 already.
  EXPECT_GT(std::abs(Cond::dot(s.b_hat, gi)), 1e-3);
}

}  // namespace
