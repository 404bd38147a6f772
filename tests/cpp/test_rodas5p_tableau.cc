// The Rodas5P coefficients satisfy the Rosenbrock order conditions.
//
// The stepper stores the method in the transformed form of Hairer & Wanner (Solving ODEs II,
// Sec. IV.7): with the stage increments u_i = Σ_j γ_ij k_j (Γ lower triangular, γ on its diagonal),
//   a = α Γ⁻¹,   C = diag(1/γ) − Γ⁻¹,   y1 = y0 + Σ m_j u_j with m = b Γ⁻¹,
// where y_new = u_8 + k_8 gives m_j = a_8j (j < 8) and m_8 = 1, and the embedded ŷ = u_8 gives
// m̂ = row 8 of a. Here the tableau is converted back to the standard form (α, Γ, b) and checked
// against the conditions of rooted trees: a vertex with one child contributes β = α + Γ (the
// f'(y) k and J Γ k terms together), a vertex with several children contributes α, and
// Σ b Φ(t) = 1/γ(t) (the tree's density). This gives Table 7.1 of HW IV.7 with the γ-polynomials
// moved to the right, e.g. Σ b_i β_i' = 1/2 − γ, Σ b_i β_ij β_j' = 1/6 − γ + γ².
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "shoal/ode/rodas5p.hpp"

namespace {

using Tab = shoal::ode::Rodas5PTableau;
constexpr int S = Tab::stages;
constexpr double g = Tab::gamma;
constexpr double kTol = 1e-12;

using Vec = double[S];
using Mat = double[S][S];

double a_t(int i, int j) { return j < i ? Tab::a(i, j) : 0.0; }  // transformed a
double c_t(int i, int j) { return j < i ? Tab::C(i, j) : 0.0; }  // transformed C

struct Standard {
  Mat alpha, gam, beta;  // α, Γ (with γ on the diagonal), β = α + Γ
  Vec b, b_hat;          // solution and embedded weights
};

// Γ from Γ⁻¹ = I/γ − C (lower triangular): forward substitution column by column.
void invert_lower(const Mat& l, Mat& inv) {
  for (int col = 0; col < S; ++col) {
    for (int i = 0; i < S; ++i) {
      double acc = i == col ? 1.0 : 0.0;
      for (int j = 0; j < i; ++j) acc -= l[i][j] * inv[j][col];
      inv[i][col] = acc / l[i][i];
    }
  }
}

void row_times(const Vec& m, const Mat& a, Vec& out) {  // out = m A (row vector)
  for (int j = 0; j < S; ++j) {
    out[j] = 0;
    for (int i = 0; i < S; ++i) out[j] += m[i] * a[i][j];
  }
}

Standard standard_form() {
  Standard s;
  Mat gamma_inv;
  for (int i = 0; i < S; ++i) {
    for (int j = 0; j < S; ++j) gamma_inv[i][j] = (i == j ? 1.0 / g : 0.0) - c_t(i, j);
  }
  invert_lower(gamma_inv, s.gam);
  for (int i = 0; i < S; ++i) {
    for (int j = 0; j < S; ++j) {
      s.alpha[i][j] = 0;
      for (int k = 0; k < S; ++k) s.alpha[i][j] += a_t(i, k) * s.gam[k][j];  // α = a Γ
    }
  }
  for (int i = 0; i < S; ++i) {
    for (int j = 0; j < S; ++j) s.beta[i][j] = s.alpha[i][j] + s.gam[i][j];
  }
  Vec m, m_hat;
  for (int j = 0; j < S; ++j) m[j] = m_hat[j] = a_t(S - 1, j);
  m[S - 1] = 1.0;  // y_new = u_8 + k_8
  row_times(m, s.gam, s.b);
  row_times(m_hat, s.gam, s.b_hat);
  return s;
}

// ---- vectors over the stages --------------------------------------------------------------------
struct V {
  double x[S];
};
V ones() {
  V r;
  for (double& v : r.x) v = 1.0;
  return r;
}
V mul(const Mat& m, const V& v) {
  V r;
  for (int i = 0; i < S; ++i) {
    r.x[i] = 0;
    for (int j = 0; j < S; ++j) r.x[i] += m[i][j] * v.x[j];
  }
  return r;
}
V operator*(const V& a, const V& b) {
  V r;
  for (int i = 0; i < S; ++i) r.x[i] = a.x[i] * b.x[i];
  return r;
}
double dot(const Vec& w, const V& v) {
  double s = 0;
  for (int i = 0; i < S; ++i) s += w[i] * v.x[i];
  return s;
}

// Φ(t) for the 17 trees of order ≤ 5 (α below bushy vertices, β below linear ones), with the
// densities γ(t): the conditions are Σ_i b_i Φ_i(t) = θ^|t| / γ(t) (θ = 1 for the step's end).
struct Tree {
  const char* name;
  int order;
  double density;
  V phi;
};

constexpr int kTrees = 17;
const int kTreesThroughOrder[6] = {0, 1, 2, 4, 8, 17};

void trees(const Standard& s, Tree (&t)[kTrees]) {
  const Mat &A = s.alpha, &B = s.beta;
  const V e = ones();
  const V c = mul(A, e);   // α_i = Σ_j α_ij
  const V Be = mul(B, e);  // β_i' (with γ)
  const V ABe = mul(A, Be);
  const V BBe = mul(B, Be);
  const V c2 = c * c, c3 = c2 * c;
  t[0] = {"τ: Σb = 1", 1, 1, e};
  t[1] = {"[τ]: Σ b β'", 2, 2, Be};
  t[2] = {"[τ,τ]: Σ b c²", 3, 3, c2};
  t[3] = {"[[τ]]: Σ b β β'", 3, 6, BBe};
  t[4] = {"[τ,τ,τ]: Σ b c³", 4, 4, c3};
  t[5] = {"[τ,[τ]]: Σ b c α β'", 4, 8, c * ABe};
  t[6] = {"[[τ,τ]]: Σ b β c²", 4, 12, mul(B, c2)};
  t[7] = {"[[[τ]]]: Σ b β β β'", 4, 24, mul(B, BBe)};
  t[8] = {"[τ,τ,τ,τ]: Σ b c⁴", 5, 5, c3 * c};
  t[9] = {"[τ,τ,[τ]]: Σ b c² α β'", 5, 10, c2 * ABe};
  t[10] = {"[τ,[τ,τ]]: Σ b c α c²", 5, 15, c * mul(A, c2)};
  t[11] = {"[τ,[[τ]]]: Σ b c α β β'", 5, 30, c * mul(A, BBe)};
  t[12] = {"[[τ],[τ]]: Σ b (α β')²", 5, 20, ABe * ABe};
  t[13] = {"[[τ,τ,τ]]: Σ b β c³", 5, 20, mul(B, c3)};
  t[14] = {"[[τ,[τ]]]: Σ b β (c α β')", 5, 40, mul(B, c * ABe)};
  t[15] = {"[[[τ,τ]]]: Σ b β β c²", 5, 60, mul(B, mul(B, c2))};
  t[16] = {"[[[[τ]]]]: Σ b β β β β'", 5, 120, mul(B, mul(B, BBe))};
}

double worst_residual(const Vec& b, int order_from, int order_to, double theta = 1.0) {
  const Standard s = standard_form();
  Tree t[kTrees];
  trees(s, t);
  double worst = 0;
  for (int k = kTreesThroughOrder[order_from - 1]; k < kTreesThroughOrder[order_to]; ++k) {
    worst =
        std::max(worst, std::abs(dot(b, t[k].phi) - std::pow(theta, t[k].order) / t[k].density));
  }
  return worst;
}

TEST(Rodas5PTableau, GammaIsThePublishedValue) {
  EXPECT_EQ(Tab::gamma, 0.21193756319429014);
  EXPECT_EQ(Tab::stages, 8);
}

TEST(Rodas5PTableau, NodesAreRowSumsOfAlpha) {
  // Non-autonomous consistency: f is evaluated at t + c_i h with c_i = Σ_j α_ij.
  const Standard s = standard_form();
  for (int i = 0; i < S; ++i) {
    double sum = 0;
    for (int j = 0; j < S; ++j) sum += s.alpha[i][j];
    EXPECT_NEAR(sum, Tab::c(i), kTol) << "stage " << i;
  }
}

TEST(Rodas5PTableau, TimeDerivativeWeightsAreRowSumsOfGamma) {
  // The h d_i ∂f/∂t term needs d_i = γ_i = Σ_j γ_ij (diagonal included).
  const Standard s = standard_form();
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
  const Standard s = standard_form();
  for (int j = 0; j < S; ++j) {
    EXPECT_NEAR(s.b[j], s.beta[S - 1][j], kTol) << j;
    EXPECT_NEAR(s.b_hat[j], s.beta[S - 2][j], kTol) << j;
  }
}

TEST(Rodas5PTableau, SolutionSatisfiesConditionsThroughOrderFive) {
  const Standard s = standard_form();
  Tree t[kTrees];
  trees(s, t);
  for (int k = 0; k < kTrees; ++k) {
    EXPECT_NEAR(dot(s.b, t[k].phi), 1.0 / t[k].density, kTol) << t[k].name;
  }
}

TEST(Rodas5PTableau, HairerWannerTableFormsWithGammaPolynomials) {
  // The same conditions written as in HW IV.7 Table 7.1, with β_ij = α_ij + γ_ij off the
  // diagonal only and β_i' = Σ_{j<i} β_ij.
  const Standard s = standard_form();
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
  const Standard s = standard_form();
  const V c = mul(s.alpha, ones());
  double sum = 0;
  for (int i = 0; i < S; ++i) sum += s.b[i] * std::pow(c.x[i], 5);
  EXPECT_GT(std::abs(sum - 1.0 / 6), 1e-6);
}

TEST(Rodas5PTableau, EmbeddedSatisfiesConditionsThroughOrderFour) {
  const Standard s = standard_form();
  EXPECT_LT(worst_residual(s.b_hat, 1, 4), kTol);
  EXPECT_GT(worst_residual(s.b_hat, 5, 5), 1e-4) << "the embedded method must be of lower order";
}

// Dense output: y(θ) = (1−θ) y0 + θ (y1 + (1−θ)(K_0 + θ (K_1 + θ K_2))), K_r = Σ_i h_ri u_i, so
// y(θ) − y0 = Σ_j m_j(θ) u_j with m(θ) = θ m + θ(1−θ)(h_0 + θ h_1 + θ² h_2), and b(θ) = m(θ) Γ.
void dense_weights(const Standard& s, double theta, Vec& b_theta) {
  Vec m;
  for (int j = 0; j < S; ++j) {
    const double mj = j < S - 1 ? a_t(S - 1, j) : 1.0;
    m[j] = theta * mj +
           theta * (1 - theta) * (Tab::h(0, j) + theta * (Tab::h(1, j) + theta * Tab::h(2, j)));
  }
  row_times(m, s.gam, b_theta);
}

TEST(Rodas5PTableau, DenseOutputSatisfiesConditionsThroughOrderFour) {
  // Σ b_i(θ) Φ_i(t) = θ^|t| / γ(t) for every θ and every tree of order ≤ 4.
  const Standard s = standard_form();
  for (double theta : {0.0, 0.1, 0.25, 0.5, 0.7, 0.9, 1.0}) {
    Vec bt;
    dense_weights(s, theta, bt);
    EXPECT_LT(worst_residual(bt, 1, 4, theta), kTol) << "theta " << theta;
  }
  Vec half;
  dense_weights(s, 0.5, half);
  EXPECT_GT(worst_residual(half, 5, 5, 0.5), 1e-5) << "an order-4 extension misses order 5";
}

TEST(Rodas5PTableau, DenseOutputEndsAtTheSolution) {
  const Standard s = standard_form();
  Vec b1, b0;
  dense_weights(s, 1.0, b1);
  dense_weights(s, 0.0, b0);
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
  const Standard s = standard_form();
  const V e = ones();
  const V c = mul(s.alpha, e), gi = mul(s.gam, e);
  EXPECT_NEAR(dot(s.b, e), 1.0, kTol);
  EXPECT_NEAR(dot(s.b, c), 0.5, kTol);
  EXPECT_NEAR(dot(s.b, gi), 0.0, kTol);
  // Order 3 with a W-vertex, [[τ]_W]_f: Σ b α Γ 1 = 0 — not satisfied.
  EXPECT_GT(std::abs(dot(s.b, mul(s.alpha, gi))), 1e-3);
  // The embedded solution: Σ b̂ γ_i ≠ 0 already.
  EXPECT_GT(std::abs(dot(s.b_hat, gi)), 1e-3);
}

}  // namespace
