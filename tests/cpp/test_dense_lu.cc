// Dense LU (scaled partial pivoting in double, plain in float): known solutions, matrices that
// cannot be factored without row exchanges, random well-conditioned systems by residual, float
// factors serving double vectors, factor once / solve many, and exactly singular matrices reported
// by factor().
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "shoal/linalg/dense_lu.hpp"

namespace {

using shoal::linalg::DenseLU;

template <class S, int N>
DenseLU<S, N> from(const double (&a)[N][N]) {
  DenseLU<S, N> lu;
  for (int i = 0; i < N; ++i) {
    for (int j = 0; j < N; ++j) lu.a[i * N + j] = S(a[i][j]);
  }
  return lu;
}

template <int N>
void mat_vec(const double (&a)[N][N], const double* x, double* out) {
  for (int i = 0; i < N; ++i) {
    out[i] = 0;
    for (int j = 0; j < N; ++j) out[i] += a[i][j] * x[j];
  }
}

template <int N>
void expect_permutation(const int (&piv)[N]) {
  bool seen[N] = {};
  for (int i = 0; i < N; ++i) {
    ASSERT_GE(piv[i], 0);
    ASSERT_LT(piv[i], N);
    EXPECT_FALSE(seen[piv[i]]) << "row " << piv[i] << " used twice";
    seen[piv[i]] = true;
  }
}

TEST(DenseLU, KnownSolutionThreeByThree) {
  // x = (1, -2, 3).
  const double a[3][3] = {{4, -2, 1}, {3, 6, -4}, {2, 1, 8}};
  double b[3] = {4 * 1 + 4 + 3, 3 - 12 - 12, 2 - 2 + 24};
  auto lu = from<double>(a);
  ASSERT_TRUE(lu.factor());
  lu.solve(b);
  EXPECT_NEAR(b[0], 1.0, 1e-15);
  EXPECT_NEAR(b[1], -2.0, 1e-15);
  EXPECT_NEAR(b[2], 3.0, 1e-15);
}

TEST(DenseLU, OneByOneAndIdentity) {
  DenseLU<double, 1> one;
  one.a[0] = -4.0;
  ASSERT_TRUE(one.factor());
  double b1[1] = {2.0};
  one.solve(b1);
  EXPECT_EQ(b1[0], -0.5);
  const double eye[3][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
  auto lu = from<double>(eye);
  ASSERT_TRUE(lu.factor());
  double b[3] = {0.25, -7, 3e10};
  lu.solve(b);
  EXPECT_EQ(b[0], 0.25);
  EXPECT_EQ(b[1], -7.0);
  EXPECT_EQ(b[2], 3e10);
}

TEST(DenseLU, ZeroOnTheDiagonalNeedsPivoting) {
  const double swap[2][2] = {{0, 1}, {1, 0}};
  auto lu = from<double>(swap);
  ASSERT_TRUE(lu.factor());
  EXPECT_EQ(lu.piv[0], 1);
  EXPECT_EQ(lu.piv[1], 0);
  double b[2] = {3, -5};
  lu.solve(b);
  EXPECT_EQ(b[0], -5.0);
  EXPECT_EQ(b[1], 3.0);
}

TEST(DenseLU, ScaledPermutationMatrix) {
  // Every column's only non-zero is off the diagonal: each elimination step must exchange rows.
  const double a[4][4] = {{0, 0, 0, 2}, {0, 0, -3, 0}, {0, 0.5, 0, 0}, {4, 0, 0, 0}};
  auto lu = from<double>(a);
  ASSERT_TRUE(lu.factor());
  expect_permutation(lu.piv);
  double b[4] = {2, 6, 1.5, -8};  // x = (-2, 3, -2, 1)
  lu.solve(b);
  EXPECT_EQ(b[0], -2.0);
  EXPECT_EQ(b[1], 3.0);
  EXPECT_EQ(b[2], -2.0);
  EXPECT_EQ(b[3], 1.0);
}

TEST(DenseLU, ZeroDiagonalFullMatrix) {
  const double a[4][4] = {{0, 2, 1, 3}, {1, 0, 4, 1}, {2, 1, 0, 5}, {3, 4, 1, 0}};
  const double x[4] = {1.5, -1, 0.25, 2};
  double b[4];
  mat_vec(a, x, b);
  auto lu = from<double>(a);
  ASSERT_TRUE(lu.factor());
  expect_permutation(lu.piv);
  lu.solve(b);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(b[i], x[i], 1e-14) << i;
}

TEST(DenseLU, TinyPivotIsExchangedForStability) {
  // Without row exchanges, eliminating with the 1e-20 pivot loses the solution completely.
  const double a[2][2] = {{1e-20, 1}, {1, 1}};
  auto lu = from<double>(a);
  ASSERT_TRUE(lu.factor());
  EXPECT_EQ(lu.piv[0], 1);
  double b[2] = {1, 2};  // x ≈ (1, 1)
  lu.solve(b);
  EXPECT_NEAR(b[0], 1.0, 1e-15);
  EXPECT_NEAR(b[1], 1.0, 1e-15);
}

TEST(DenseLU, PivotsAreChosenRelativeToTheirRow) {
  // Column 0 ties at 1, but row 0 is 1e18 times larger elsewhere: an unscaled choice keeps row
  // 0 as the pivot, 1 + 1e18 rounds away x0's contribution, and x0 comes out 0 instead of 1.
  // Relative to its row, row 1's entry is the larger pivot.
  const double a[2][2] = {{1, 1e18}, {1, 1}};
  auto lu = from<double>(a);
  ASSERT_TRUE(lu.factor());
  EXPECT_EQ(lu.piv[0], 1);
  double b[2] = {1 + 1e18, 2};  // x = (1, 1)
  lu.solve(b);
  EXPECT_NEAR(b[0], 1.0, 1e-15);
  EXPECT_NEAR(b[1], 1.0, 1e-15);
}

TEST(DenseLU, FloatFactorsPivotPlainly) {
  // Float factors keep multipliers at most 1 (dense_lu.hpp): the tie in column 0 keeps row 0.
  const double a[2][2] = {{1, 1e18}, {1, 1}};
  auto lu = from<float>(a);
  ASSERT_TRUE(lu.factor());
  EXPECT_EQ(lu.piv[0], 0);
}

TEST(DenseLU, BadlyScaledStiffRowsKeepTheirAccuracy) {
  // The shape of a Boltzmann hierarchy's iteration matrix I/(hγ) − J: rows scaled from 1 to
  // 1e16, a strongly coupled pair (a huge off-diagonal entry in the larger row's column of the
  // smaller one). Each component of the solution to full relative accuracy (an accuracy check
  // of the factorisation on this shape; the pivot rule itself is the test above's).
  constexpr int N = 6;
  const double s[N] = {1, 1e16, 1, 1e8, 1, 1e12};
  double a[N][N];
  for (int i = 0; i < N; ++i)
    for (int j = 0; j < N; ++j) a[i][j] = s[i] * (i == j ? 4.0 + i : 0.3 / (1 + i + 2 * j));
  a[1][0] = 5e16;  // row 1 (size 1e16) couples strongly to x0
  const double x[N] = {1.0, -2.0, 3.0, 0.5, -1.5, 2.5};
  double b[N];
  mat_vec(a, x, b);
  auto lu = from<double>(a);
  ASSERT_TRUE(lu.factor());
  expect_permutation(lu.piv);
  lu.solve(b);
  for (int i = 0; i < N; ++i) EXPECT_NEAR(b[i], x[i], 1e-14 * std::abs(x[i])) << i;
}

// Random matrices, entries of mixed sign; with `boost`, a diagonal that makes them well
// conditioned.
template <int N>
void random_matrix(std::mt19937_64& rng, double (&a)[N][N], bool boost = true) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int i = 0; i < N; ++i) {
    for (int j = 0; j < N; ++j) a[i][j] = u(rng);
    if (boost) a[i][i] += (i % 2 ? -1.0 : 1.0) * 0.5 * N;
  }
}

// ‖A x − b‖∞ / (‖A‖∞ ‖x‖∞ + ‖b‖∞): of order N ε for a backward-stable solve.
template <int N>
double relative_residual(const double (&a)[N][N], const double* x, const double* b) {
  double ax[N], res = 0, norm_a = 0, norm_x = 0, norm_b = 0;
  mat_vec(a, x, ax);
  for (int i = 0; i < N; ++i) {
    res = std::max(res, std::abs(ax[i] - b[i]));
    norm_x = std::max(norm_x, std::abs(x[i]));
    norm_b = std::max(norm_b, std::abs(b[i]));
    double row = 0;
    for (int j = 0; j < N; ++j) row += std::abs(a[i][j]);
    norm_a = std::max(norm_a, row);
  }
  return res / (norm_a * norm_x + norm_b);
}

template <int N>
void check_random(int trials, bool boost) {
  SCOPED_TRACE(::testing::Message() << "N = " << N << (boost ? ", dominant" : ", general"));
  std::mt19937_64 rng(1234 + N + (boost ? 0 : 1000));
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int trial = 0; trial < trials; ++trial) {
    double a[N][N], x[N], b[N];
    random_matrix(rng, a, boost);
    auto lu = from<double>(a);
    ASSERT_TRUE(lu.factor());
    expect_permutation(lu.piv);
    // Factor once, solve several right-hand sides.
    for (int rhs = 0; rhs < 3; ++rhs) {
      for (int i = 0; i < N; ++i) b[i] = x[i] = u(rng);
      lu.solve(x);
      EXPECT_LT(relative_residual(a, x, b), 4e-16 * N) << "trial " << trial;
    }
    if (boost) {
      // Well conditioned: the solution itself is accurate, against a known x.
      double x_true[N];
      for (int i = 0; i < N; ++i) x_true[i] = u(rng);
      mat_vec(a, x_true, b);
      lu.solve(b);
      for (int i = 0; i < N; ++i) EXPECT_NEAR(b[i], x_true[i], 1e-14) << "trial " << trial;
    }
  }
}

TEST(DenseLU, RandomWellConditionedByResidual) {
  check_random<2>(20, true);
  check_random<3>(20, true);
  check_random<5>(20, true);
  check_random<8>(10, true);
  check_random<16>(5, true);
}

TEST(DenseLU, RandomGeneralMatricesByResidual) {
  // No diagonal dominance: the pivots come from anywhere; the solve is still backward stable.
  check_random<4>(30, false);
  check_random<6>(30, false);
  check_random<10>(10, false);
}

TEST(DenseLU, FloatFactorsSolveDoubleVectors) {
  constexpr int N = 5;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  double a[N][N], x[N], b[N];
  random_matrix(rng, a);
  for (int i = 0; i < N; ++i) x[i] = u(rng);
  mat_vec(a, x, b);
  auto lu32 = from<float>(a);
  auto lu64 = from<double>(a);
  ASSERT_TRUE(lu32.factor());
  ASSERT_TRUE(lu64.factor());
  double b32[N], b64[N];
  float bf[N];
  for (int i = 0; i < N; ++i) {
    b32[i] = b64[i] = b[i];
    bf[i] = float(b[i]);
  }
  lu32.solve(b32);  // double vector through float factors
  lu64.solve(b64);
  lu32.solve(bf);  // all float
  for (int i = 0; i < N; ++i) {
    EXPECT_NEAR(b64[i], x[i], 1e-14) << i;
    EXPECT_NEAR(b32[i], x[i], 5e-6) << i;  // the factors carry float's roundoff
    EXPECT_NEAR(bf[i], x[i], 5e-6) << i;
  }
  // The float-factor solve of a double vector is a float-accurate solution, not a float-rounded
  // one: it differs from the all-float solve.
  double diff = 0;
  for (int i = 0; i < N; ++i) diff = std::max(diff, std::abs(b32[i] - double(bf[i])));
  EXPECT_GT(diff, 0.0);
}

TEST(DenseLU, ExactlySingularIsReported) {
  const double rank1[2][2] = {{1, 2}, {2, 4}};
  auto a = from<double>(rank1);
  EXPECT_FALSE(a.factor());
  const double dup_rows[3][3] = {{1, 2, 3}, {1, 2, 3}, {4, 5, 7}};
  auto b = from<double>(dup_rows);
  EXPECT_FALSE(b.factor());
  const double zero_col[3][3] = {{1, 0, 3}, {2, 0, 5}, {4, 0, 7}};
  auto c = from<double>(zero_col);
  EXPECT_FALSE(c.factor());
  auto cf = from<float>(zero_col);
  EXPECT_FALSE(cf.factor());
  const double zeros[2][2] = {{0, 0}, {0, 0}};
  auto z = from<double>(zeros);
  EXPECT_FALSE(z.factor());
  // Nearly singular but not exactly: factor() succeeds.
  const double near[2][2] = {{1, 2}, {2, 4 + 1e-12}};
  auto n = from<double>(near);
  EXPECT_TRUE(n.factor());
}

TEST(DenseLU, SolvesSystemsOfTheRosenbrockShape) {
  // M = I/(hγ) − J for a stiff J (Robertson at its start), in double and float storage.
  const double k1 = 0.04, k2 = 3e7, k3 = 1e4, y2 = 3.6e-5, y3 = 3.6e-4;
  const double jac[3][3] = {
      {-k1, k3 * y3, k3 * y2}, {k1, -k3 * y3 - 2 * k2 * y2, -k3 * y2}, {0, 2 * k2 * y2, 0}};
  const double diag = 1.0 / (1e-2 * 0.21193756319429014);
  double m[3][3];
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) m[i][j] = (i == j ? diag : 0.0) - jac[i][j];
  }
  const double x[3] = {1e-3, -2e-6, 5e-4};
  double b[3], b32[3];
  mat_vec(m, x, b);
  for (int i = 0; i < 3; ++i) b32[i] = b[i];
  auto lu = from<double>(m);
  auto lu32 = from<float>(m);
  ASSERT_TRUE(lu.factor());
  ASSERT_TRUE(lu32.factor());
  lu.solve(b);
  lu32.solve(b32);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(b[i], x[i], 1e-15) << i;
    EXPECT_NEAR(b32[i], x[i], 1e-9) << i;
  }
}

}  // namespace

namespace {

// The adjoint's transposed solves (rosenbrock_adjoint.hpp): Aᵀ x = b by the factors of A, on a
// matrix that needs row exchanges and on random ones, checked by the residual of Aᵀ x.
TEST(DenseLU, TransposedSolveByResidual) {
  const double pivoting[3][3] = {{0, 2, 1}, {1e-3, 1, 5}, {7, -1, 2}};
  auto lu = from<double>(pivoting);
  ASSERT_TRUE(lu.factor());
  double b[3] = {1, -2, 0.5}, x[3] = {1, -2, 0.5};
  lu.solve_transposed(x);
  for (int i = 0; i < 3; ++i) {
    double r = -b[i];
    for (int j = 0; j < 3; ++j) r += pivoting[j][i] * x[j];
    EXPECT_NEAR(r, 0.0, 1e-13) << i;
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int trial = 0; trial < 20; ++trial) {
    double a[6][6];
    for (int i = 0; i < 6; ++i)
      for (int j = 0; j < 6; ++j) a[i][j] = u(rng) + (i == j ? 3.0 : 0.0);
    auto m = from<double>(a);
    ASSERT_TRUE(m.factor());
    double rhs[6], y[6];
    for (int i = 0; i < 6; ++i) rhs[i] = y[i] = u(rng);
    m.solve_transposed(y);
    for (int i = 0; i < 6; ++i) {
      double r = -rhs[i];
      for (int j = 0; j < 6; ++j) r += a[j][i] * y[j];
      EXPECT_NEAR(r, 0.0, 1e-12) << trial << " " << i;
    }
  }
}

}  // namespace
