// Parameters read in place by the dual sweeps (ad/param_reads.hpp) against the copy into an
// array of duals they replace: the same model written once taking any `Params` (as generated
// models do) and once taking `const T* p` (hand-written ones, which still get the copy) must give
// the same bits in every sweep that reads parameters — the Jacobian, the forward-sensitivity
// right-hand side with unit columns and with directions, the Rosenbrock joint system's nested
// sweeps — scalar and in SIMD lanes, through every way generated code reads `p`: an index, an
// offset `(p + k)`, a gather at a run-time index and a search of a parameter table; the
// derivatives against closed forms.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "shoal/ad/jacobian.hpp"
#include "shoal/ad/param_reads.hpp"
#include "shoal/ode/directional_sensitivity.hpp"
#include "shoal/ode/iteration_matrix.hpp"
#include "shoal/ode/rosenbrock_joint.hpp"
#include "shoal/ode/sensitivity.hpp"
#include "shoal/simd/lanes.hpp"

namespace {

using shoal::simd::Lanes;

// p = [a, b, c, d, knots x0..x4 (a sorted table), values v0..v5]: 15 parameters, the last 11
// (the tables) shared.
//   f0 = a y1 − exp(b y0) + v[i] t,   i = searchsorted(knots, t)
//   f1 = −c y0 y1 + d sin(t)
//   f2 = v[1] y0 − a y2
template <class T, class Params>
void body(const T* y, const T& t, Params p, T* dy) {
  SHOAL_MATH_USING;
  const auto i = search_sorted(p + 4, 5, primal(t), false);
  const T w = gather<T>(p + 9, i);
  dy[0] = p[0] * y[1] - exp(p[1] * y[0]) + w * t;
  dy[1] = -(p + 2)[0] * y[0] * y[1] + p[3] * sin(t);
  dy[2] = (p + 9)[1] * y[0] - p[0] * y[2];
}

constexpr int kVars = 3, kParams = 15, kShared = 11;

struct InPlace {
  static constexpr int n_vars = kVars, n_params = kParams, n_shared = kShared;
  static constexpr bool params_in_place = true;
  template <class T, class Params = const T*>
  static void rhs(const T* y, const T& t, Params p, T* dy) {
    body(y, t, p, dy);
  }
};

struct Copied {
  static constexpr int n_vars = kVars, n_params = kParams, n_shared = kShared;
  template <class T>
  static void rhs(const T* y, const T& t, const T* p, T* dy) {
    body(y, t, p, dy);
  }
};

// The lanes run it one lane at a time, as generated models that are not plain arithmetic do.
struct InPlacePerLane {
  static constexpr int n_vars = kVars, n_params = kParams, n_shared = kShared;
  static constexpr bool params_in_place = true;
  template <class T, class Params = const T*>
  static void rhs(const T* y, const T& t, Params p, T* dy) {
    if constexpr (shoal::lane_count<T>() > 1) {
      shoal::rhs_per_lane<InPlacePerLane>(y, t, p, dy);
    } else {
      body(y, t, p, dy);
    }
  }
};

static_assert(shoal::ad::reads_params_in_place<InPlace>());
static_assert(!shoal::ad::reads_params_in_place<Copied>());

const double kP[kParams] = {1.5, 0.3, 2.0, -0.7, 0.0, 0.5, 1.0, 1.5, 2.0,
                            10.0, 20.0, 30.0, 40.0, 50.0, 60.0};
const double kY[kVars] = {0.4, -1.2, 0.9};

template <class A, class B>
bool same_bytes(const A& a, const B& b) {
  static_assert(sizeof(A) == sizeof(B));
  return std::memcmp(&a, &b, sizeof(A)) == 0;
}

TEST(ParamReads, JacobianIsTheCopysBitForBitAndRight) {
  for (double t : {0.2, 0.75, 1.9, 2.5}) {
    double f_in[kVars], j_in[kVars * kVars], ft_in[kVars];
    double f_cp[kVars], j_cp[kVars * kVars], ft_cp[kVars];
    shoal::ad::rhs_and_jacobian<InPlace, double, double>(kY, t, kP, f_in, j_in, ft_in);
    shoal::ad::rhs_and_jacobian<Copied, double, double>(kY, t, kP, f_cp, j_cp, ft_cp);
    EXPECT_TRUE(same_bytes(f_in, f_cp) && same_bytes(j_in, j_cp) && same_bytes(ft_in, ft_cp));
    // Closed forms: the table entry at searchsorted(knots, t) (knots 0, 0.5, …, 2).
    const int i = t <= 0.0 ? 0 : t <= 0.5 ? 1 : t <= 1.0 ? 2 : t <= 1.5 ? 3 : t <= 2.0 ? 4 : 5;
    const double w = kP[9 + i];
    EXPECT_EQ(f_in[0], kP[0] * kY[1] - std::exp(kP[1] * kY[0]) + w * t);
    EXPECT_NEAR(j_in[0 * kVars + 0], -kP[1] * std::exp(kP[1] * kY[0]), 1e-15);
    EXPECT_EQ(j_in[1 * kVars + 1], -kP[2] * kY[0]);
    EXPECT_EQ(j_in[2 * kVars + 0], kP[10]);
    EXPECT_NEAR(ft_in[0], w, 1e-15);
    EXPECT_NEAR(ft_in[1], kP[3] * std::cos(t), 1e-15);
  }
}

// The joint state [y, S_0 .. S_{m-1}] with S's columns filled with something other than 0 / I.
template <int n_vars>
void fill_joint(double* z) {
  for (int i = 0; i < kVars; ++i) z[i] = kY[i];
  for (int i = kVars; i < n_vars; ++i) z[i] = 0.1 * (i % 7) - 0.25;
}

TEST(ParamReads, SensitivityColumnsAreTheCopysBitForBitAndRight) {
  // y0 columns, then parameters 1 .. 10: b, c, d, the knots (derivative 0) and v0.
  using SIn = shoal::ode::Sensitivity<InPlace, true, 1, 10>;
  using SCp = shoal::ode::Sensitivity<Copied, true, 1, 10>;
  double z[SIn::n_vars], dz_in[SIn::n_vars], dz_cp[SIn::n_vars];
  fill_joint<SIn::n_vars>(z);
  for (double t : {0.3, 1.2}) {
    SIn::rhs(z, t, kP, dz_in);
    SCp::rhs(z, t, kP, dz_cp);
    EXPECT_TRUE(same_bytes(dz_in, dz_cp));
    // The column of parameter c (column 3 + 1): J_y S + ∂f/∂c, ∂f1/∂c = −y0 y1.
    const double* S = z + kVars * (1 + 4);
    const double expected = -kP[2] * (kY[1] * S[0] + kY[0] * S[1]) - kY[0] * kY[1];
    EXPECT_NEAR(dz_in[kVars * (1 + 4) + 1], expected, 1e-15);
  }
}

TEST(ParamReads, DirectionsAreTheCopysBitForBitAndTheUnitColumnsCombined) {
  constexpr int M = 2;
  using DIn = shoal::ode::DirectionalSensitivity<InPlace, M>;
  using DCp = shoal::ode::DirectionalSensitivity<Copied, M>;
  constexpr int own = kParams - kShared;
  // p = [own, own directions (M × own), shared, shared directions (M × shared)].
  double p[DIn::n_params], dirs[M][kParams];
  for (int k = 0; k < M; ++k)
    for (int j = 0; j < kParams; ++j) dirs[k][j] = 0.05 * ((j * (k + 2)) % 5) - 0.1;
  for (int j = 0; j < own; ++j) p[j] = kP[j];
  for (int k = 0; k < M; ++k)
    for (int j = 0; j < own; ++j) p[own + k * own + j] = dirs[k][j];
  double* shared = p + own * (1 + M);
  for (int j = 0; j < kShared; ++j) shared[j] = kP[own + j];
  for (int k = 0; k < M; ++k)
    for (int j = 0; j < kShared; ++j) shared[kShared + k * kShared + j] = dirs[k][own + j];

  double z[DIn::n_vars], dz_in[DIn::n_vars], dz_cp[DIn::n_vars];
  fill_joint<DIn::n_vars>(z);
  const double t = 0.8;
  DIn::rhs(z, t, p, dz_in);
  DCp::rhs(z, t, p, dz_cp);
  EXPECT_TRUE(same_bytes(dz_in, dz_cp));
  EXPECT_EQ(dz_in[0], dz_cp[0]);

  // Direction k = J_y S_k + Σ_j ∂f/∂p_j dirs[k][j], from the unit columns of every parameter.
  using Unit = shoal::ode::Sensitivity<InPlace, false, 0, kParams>;
  double zu[Unit::n_vars], dzu[Unit::n_vars];
  for (int i = 0; i < Unit::n_vars; ++i) zu[i] = i < kVars ? kY[i] : 0.0;
  Unit::rhs(zu, t, kP, dzu);
  double f_in[kVars], jac[kVars * kVars], ft[kVars];
  shoal::ad::rhs_and_jacobian<InPlace, double, double>(kY, t, kP, f_in, jac, ft);
  for (int k = 0; k < M; ++k) {
    for (int i = 0; i < kVars; ++i) {
      double expected = 0.0;
      for (int j = 0; j < kVars; ++j) expected += jac[i * kVars + j] * z[kVars * (1 + k) + j];
      for (int j = 0; j < kParams; ++j) expected += dzu[kVars * (1 + j) + i] * dirs[k][j];
      EXPECT_NEAR(dz_in[kVars * (1 + k) + i], expected, 1e-14) << "direction " << k;
    }
  }
}

TEST(ParamReads, RosenbrockJointSweepsAreTheCopysBitForBit) {
  using SIn = shoal::ode::Sensitivity<InPlace, false, 0, 4>;
  using SCp = shoal::ode::Sensitivity<Copied, false, 0, 4>;
  using JIn = shoal::ode::JointSystem<shoal::ode::DenseMatrixLu64>::Type<SIn, double>;
  using JCp = shoal::ode::JointSystem<shoal::ode::DenseMatrixLu64>::Type<SCp, double>;
  double z[SIn::n_vars];
  fill_joint<SIn::n_vars>(z);
  JIn in;
  JCp cp;
  double F_in[SIn::n_vars], Ft_in[SIn::n_vars], F_cp[SIn::n_vars], Ft_cp[SIn::n_vars];
  const double t = 1.1, inv_hg = 40.0;
  in.begin_step(z, t, kP, inv_hg, F_in, Ft_in);
  cp.begin_step(z, t, kP, inv_hg, F_cp, Ft_cp);
  EXPECT_TRUE(same_bytes(F_in, F_cp) && same_bytes(Ft_in, Ft_cp));
  double r_in[SIn::n_vars], r_cp[SIn::n_vars];
  for (int i = 0; i < SIn::n_vars; ++i) r_in[i] = r_cp[i] = 0.3 - 0.05 * i;
  in.solve(z, t, kP, r_in);  // the coupling L_k k_y: the nested sweep
  cp.solve(z, t, kP, r_cp);
  EXPECT_TRUE(same_bytes(r_in, r_cp));
}

// In the lanes: every lane its own parameters and its own table index (the gather and the
// search run per lane), in the lanes and lane by lane, each lane the scalar sweep's bits.
template <class Model>
void expect_lanes_match_scalar() {
  constexpr int W = 4;
  using L = Lanes<double, W>;
  L y[kVars], p[kParams], t;
  double ts[W] = {0.1, 0.6, 1.7, 2.4};
  for (int l = 0; l < W; ++l) {
    shoal::simd::set_lane(t, l, ts[l]);
    for (int i = 0; i < kVars; ++i) shoal::simd::set_lane(y[i], l, kY[i] + 0.1 * l);
    for (int j = 0; j < kParams; ++j) shoal::simd::set_lane(p[j], l, kP[j] * (1.0 + 0.01 * l));
  }
  L f[kVars], jac[kVars * kVars], ft[kVars];
  shoal::ad::rhs_and_jacobian<Model, L, L>(y, t, p, f, jac, ft);
  for (int l = 0; l < W; ++l) {
    double ys[kVars], ps[kParams], fs[kVars], js[kVars * kVars], fts[kVars];
    for (int i = 0; i < kVars; ++i) ys[i] = shoal::simd::lane(y[i], l);
    for (int j = 0; j < kParams; ++j) ps[j] = shoal::simd::lane(p[j], l);
    shoal::ad::rhs_and_jacobian<Copied, double, double>(ys, ts[l], ps, fs, js, fts);
    for (int i = 0; i < kVars; ++i) {
      EXPECT_EQ(shoal::simd::lane(f[i], l), fs[i]) << "lane " << l;
      EXPECT_EQ(shoal::simd::lane(ft[i], l), fts[i]) << "lane " << l;
    }
    for (int k = 0; k < kVars * kVars; ++k) EXPECT_EQ(shoal::simd::lane(jac[k], l), js[k]);
  }
}

TEST(ParamReads, LanesMatchTheScalarSweep) { expect_lanes_match_scalar<InPlace>(); }

TEST(ParamReads, LaneByLaneMatchesTheScalarSweep) { expect_lanes_match_scalar<InPlacePerLane>(); }

TEST(ParamReads, SensitivityInLanesMatchesTheScalarSweep) {
  constexpr int W = 4;
  using L = Lanes<double, W>;
  using S = shoal::ode::Sensitivity<InPlace, true, 0, 12>;
  L z[S::n_vars], p[kParams], dz[S::n_vars], t;
  double zs[W][S::n_vars], ps[W][kParams];
  for (int l = 0; l < W; ++l) {
    fill_joint<S::n_vars>(zs[l]);
    zs[l][0] += 0.2 * l;
    for (int j = 0; j < kParams; ++j) ps[l][j] = kP[j] * (1.0 - 0.02 * l);
    for (int i = 0; i < S::n_vars; ++i) shoal::simd::set_lane(z[i], l, zs[l][i]);
    for (int j = 0; j < kParams; ++j) shoal::simd::set_lane(p[j], l, ps[l][j]);
    shoal::simd::set_lane(t, l, 0.45 * (l + 1));
  }
  S::rhs(z, t, p, dz);
  for (int l = 0; l < W; ++l) {
    double dzs[S::n_vars];
    shoal::ode::Sensitivity<Copied, true, 0, 12>::rhs(zs[l], 0.45 * (l + 1), ps[l], dzs);
    for (int i = 0; i < S::n_vars; ++i) EXPECT_EQ(shoal::simd::lane(dz[i], l), dzs[i]);
  }
}

}  // namespace
