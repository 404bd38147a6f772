// The SIMD lanes engine (lanes_ensemble.hpp) against the scalar path, bit for bit: mixed
// ensembles of stiff and non-stiff members, NaN and invalid members, members finishing orders of
// magnitude apart, stops with jumps, events, per-lane LU pivoting, both LU precisions,
// sensitivities, a right-hand side that runs lane by lane, and refills from a work queue.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "shoal/ode/host_ensemble.hpp"
#include "shoal/ode/lanes_ensemble.hpp"
#include "shoal/ode/rodas5p.hpp"
#include "shoal/ode/sensitivity.hpp"
#include "shoal/ode/tsit5.hpp"

namespace {

using shoal::simd::Lanes;

struct Lorenz {  // plain arithmetic: runs in the lanes
  static constexpr int n_vars = 3;
  static constexpr int n_params = 3;
  template <class T>
  static void rhs(const T* y, const T&, const T* p, T* dy) {
    dy[0] = p[0] * (y[1] - y[0]);
    dy[1] = y[0] * (p[1] - y[2]) - y[1];
    dy[2] = y[0] * y[1] - p[2] * y[2];
  }
};

struct Robertson {  // stiff; p[0] spread over the ensemble
  static constexpr int n_vars = 3;
  static constexpr int n_params = 3;
  template <class T>
  static void rhs(const T* y, const T&, const T* p, T* dy) {
    const T r1 = p[0] * y[0], r2 = p[1] * y[1] * y[1], r3 = p[2] * y[1] * y[2];
    dy[0] = -r1 + r3;
    dy[1] = r1 - r2 - r3;
    dy[2] = r2;
  }
};

// y0' = w y1, y1' = −w y0 − c y1: M = I/(hγ) − J pivots where hγw > 1, in some lanes only.
struct Rotation {
  static constexpr int n_vars = 2;
  static constexpr int n_params = 2;
  template <class T>
  static void rhs(const T* y, const T&, const T* p, T* dy) {
    dy[0] = p[0] * y[1];
    dy[1] = -p[0] * y[0] - p[1] * y[1];
  }
};

// y0 decays; y1' = p1 y1² blows up at t = 1 / (p1 y1(0)): with y1 weighted out of the norm, only
// its going non-finite may reject a step (controller.hpp), and it must in every lane.
struct BlowUp {
  static constexpr int n_vars = 2;
  static constexpr int n_params = 2;
  template <class T>
  static void rhs(const T* y, const T&, const T* p, T* dy) {
    dy[0] = -p[0] * y[0];
    dy[1] = p[1] * y[1] * y[1];
  }
};

// Comparisons, libm and a switch at t = 1, with a dose at each stop and an event: the lanes run
// it one at a time (as generated models that are not plain arithmetic do).
struct Switched {
  static constexpr int n_vars = 2;
  static constexpr int n_params = 1;
  static constexpr bool has_jump = true;
  static constexpr bool has_event = true;
  template <class T>
  static void rhs(const T* y, const T& t, const T* p, T* dy) {
    if constexpr (shoal::lane_count<T>() > 1) {
      shoal::rhs_per_lane<Switched>(y, t, p, dy);
    } else {
      SHOAL_MATH_USING;
      const T k = t < T(1) ? p[0] : T(2) * p[0];
      dy[0] = -k * y[0] + exp(-t);
      dy[1] = max(y[0], T(0.25)) - y[1];
    }
  }
  template <class T>
  static void jump(const T* y, const T&, const T*, T* out) {
    out[0] = y[0] + T(0.5);
    out[1] = y[1];
  }
  template <class T>
  static void event(const T* y, const T&, const T*, T* g) {
    g[0] = y[1] - T(0.6);
  }
};

template <class T>
constexpr T nan_v() {
  return std::numeric_limits<T>::quiet_NaN();
}

// An ensemble of n_traj members with its own t_span row each (final times 10^[-2, 1] of
// `t_end`), per-member parameters, and the buffers for both paths.
template <class Model, class T>
struct Ensemble {
  static constexpr int n = Model::n_vars, np = Model::n_params, n_save = 9;
  int n_traj;
  std::vector<T> y0, params, t_span, tstops, ys, event_time, event_state;
  std::vector<int32_t> accepted, rejected, status;
  ShoalEnsembleArgs args;

  Ensemble(int members, T t_end, const std::vector<T>& y_start, const std::vector<T>& p_lo,
           const std::vector<T>& p_hi, std::vector<T> stops = {})
      : n_traj(members),
        y0(members * n),
        params(members * np),
        t_span(members * n_save),
        tstops(std::move(stops)),
        ys(members * n_save * shoal::ode::n_saved<Model>()),
        event_time(members),
        event_state(members * n),
        accepted(members),
        rejected(members),
        status(members) {
    for (int m = 0; m < members; ++m) {
      const T u = members > 1 ? T(m) / T(members - 1) : T(0);
      // A shuffled spread: neighbouring members (one vector's lanes) differ widely.
      const T w = T((m * 7) % members) / T(members > 1 ? members - 1 : 1);
      for (int i = 0; i < n; ++i) y0[m * n + i] = y_start[i];
      for (int j = 0; j < np; ++j) params[m * np + j] = p_lo[j] + w * (p_hi[j] - p_lo[j]);
      const T final_time = t_end * std::pow(T(10), T(3) * u - T(2));
      for (int j = 0; j < n_save; ++j) t_span[m * n_save + j] = final_time * T(j) / T(n_save - 1);
    }
    y0[3 * n] = nan_v<T>();                                  // a NaN member
    t_span[5 * n_save + 2] = t_span[5 * n_save + 1];         // an invalid member
    params[7 * np] = p_hi[0] * T(1000);                      // a wild one
    args = shoal::ode::ensemble_args<Model, T>(members, n_save, y0.data(), params.data(),
                                               t_span.data(), ys.data(), accepted.data(),
                                               rejected.data(), status.data());
    args.t_span_group = 1;
    args.tstops = tstops.data();
    args.n_tstops = static_cast<int32_t>(tstops.size());
    if constexpr (shoal::ode::has_event<Model>()) {
      args.event_time = event_time.data();
      args.event_state = event_state.data();
    }
  }

  void clear() {
    std::fill(ys.begin(), ys.end(), T(-7));
    std::fill(event_time.begin(), event_time.end(), T(-7));
    std::fill(event_state.begin(), event_state.end(), T(-7));
    std::fill(accepted.begin(), accepted.end(), -1);
    std::fill(rejected.begin(), rejected.end(), -1);
    std::fill(status.begin(), status.end(), -1);
  }
};

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Solves `e` by the scalar path, then by W lanes over a work queue of 5-member chunks, and
// checks every output bit for bit. Returns the statuses seen.
template <template <class, class> class Scalar, template <class, class> class Vector,
          class Model, class T, int W>
std::vector<int32_t> check_lanes(Ensemble<Model, T>& e, const ShoalSolveOptions& options) {
  e.args.options = options;
  e.clear();
  shoal::ode::solve_range<Scalar, Model, T>(e.args, 0, e.n_traj);
  const auto ys = e.ys, et = e.event_time, es = e.event_state;
  const auto acc = e.accepted, rej = e.rejected, st = e.status;

  e.clear();
  int64_t done = 0;
  ShoalWorkQueue queue{0, 5, &done};
  ShoalEnsembleArgs a = e.args;
  a.queue = &queue;
  shoal::ode::solve_range_lanes<Scalar, Vector, Model, T, W>(a, 0, 0);
  EXPECT_EQ(done, e.n_traj);
  EXPECT_TRUE(same_bits(ys, e.ys)) << "W = " << W;
  EXPECT_TRUE(same_bits(et, e.event_time));
  EXPECT_TRUE(same_bits(es, e.event_state));
  EXPECT_EQ(acc, e.accepted);
  EXPECT_EQ(rej, e.rejected);
  EXPECT_EQ(st, e.status);
  return st;
}

ShoalSolveOptions tolerances(double rtol, double atol, int64_t max_steps = 20000) {
  ShoalSolveOptions o{};
  o.rtol = rtol;
  o.atol = atol;
  o.max_steps = max_steps;
  o.max_step = -1;
  o.icoeff = 1;
  o.factor_min = 0.2;
  o.factor_max = 10;
  return o;
}

// The library's aliases take lanes for T (RebindLanes puts the LU in the state's lanes).
template <class Model, class V>
using Tsit5 = shoal::ode::Tsit5<Model, V>;
template <class Model, class V>
using Rodas64 = shoal::ode::Rodas5PLu64<Model, V>;
template <class Model, class V>
using Rodas32 = shoal::ode::Rodas5PLu32<Model, V>;
template <class Model, class V>
using Rodas64Joint = shoal::ode::Rodas5PSensitivityLu64<Model, V>;

bool has(const std::vector<int32_t>& statuses, int32_t s) {
  return std::find(statuses.begin(), statuses.end(), s) != statuses.end();
}


TEST(Lanes, Tsit5LorenzBitIdentical) {
  Ensemble<Lorenz, double> e(37, 3.0, {1, 1, 1}, {10, 0, 8.0 / 3}, {10, 28, 8.0 / 3});
  const auto o = tolerances(1e-8, 1e-8, 400);
  const auto st = check_lanes<Tsit5, Tsit5, Lorenz, double, 2>(e, o);
  check_lanes<Tsit5, Tsit5, Lorenz, double, 8>(e, o);
  check_lanes<Tsit5, Tsit5, Lorenz, double, 16>(e, o);
  // The mix is what it claims: successes, a NaN member, an invalid one, a wild one's budget.
  EXPECT_TRUE(has(st, shoal::ode::kSuccess));
  EXPECT_TRUE(has(st, shoal::ode::kNonFinite));
  EXPECT_TRUE(has(st, shoal::ode::kInvalidInput));
  EXPECT_TRUE(has(st, shoal::ode::kMaxStepsReached));
}

TEST(Lanes, Tsit5FloatBitIdentical) {
  Ensemble<Lorenz, float> e(23, 2.0f, {1, 1, 1}, {10, 0, 8.0f / 3}, {10, 28, 8.0f / 3});
  check_lanes<Tsit5, Tsit5, Lorenz, float, 16>(e, tolerances(1e-5, 1e-5));
}

TEST(Lanes, PerLaneRightHandSideStopsJumpsEvents) {
  Ensemble<Switched, double> e(29, 3.0, {1, 0}, {0.5, 0}, {20, 0}, {0.05, 1.0, 2.0});
  const auto st = check_lanes<Tsit5, Tsit5, Switched, double, 4>(e, tolerances(1e-9, 1e-9));
  EXPECT_TRUE(has(st, shoal::ode::kEvent));
  check_lanes<Rodas64, Rodas64, Switched, double, 8>(e, tolerances(1e-7, 1e-9));
}

TEST(Lanes, ErrorNormWeightsAtolAndComponents) {
  // The norm runs in the lanes (lanes_error_norm.hpp): per-member weights with zeros (a
  // component out of the mean), per-component atol, and a norm over the first components only,
  // each bit-identical to the scalar norm.
  Ensemble<Lorenz, double> e(37, 3.0, {1, 1, 1}, {10, 0, 8.0 / 3}, {10, 28, 8.0 / 3});
  std::vector<double> weights(e.n_traj * 3), atol(e.n_traj * 3);
  for (int m = 0; m < e.n_traj; ++m) {
    for (int i = 0; i < 3; ++i) {
      weights[m * 3 + i] = (m + i) % 4 == 0 ? 0.0 : 0.5 + 0.1 * ((m * 5 + i) % 7);
      atol[m * 3 + i] = 1e-9 * (1 + (m * 3 + i) % 5);
    }
  }
  e.args.weights = weights.data();
  const auto o = tolerances(1e-8, 1e-8, 400);
  check_lanes<Tsit5, Tsit5, Lorenz, double, 8>(e, o);
  e.args.atol = atol.data();
  check_lanes<Tsit5, Tsit5, Lorenz, double, 8>(e, o);
  check_lanes<Rodas64, Rodas64, Lorenz, double, 4>(e, tolerances(1e-6, 1e-8, 400));
  e.args.weights = nullptr;
  auto first_two = o;
  first_two.error_components = 2;
  check_lanes<Tsit5, Tsit5, Lorenz, double, 8>(e, first_two);
  e.args.atol = nullptr;
  check_lanes<Tsit5, Tsit5, Lorenz, double, 16>(e, first_two);

  // A component out of the mean that goes to infinity still rejects the step in each lane.
  Ensemble<BlowUp, double> b(29, 2.0, {1, 1}, {1, 0.1}, {3, 3});
  std::vector<double> decay_only(b.n_traj * 2);
  for (int m = 0; m < b.n_traj; ++m) decay_only[m * 2] = 1.0 + 0.01 * m;
  b.args.weights = decay_only.data();
  const auto st = check_lanes<Tsit5, Tsit5, BlowUp, double, 8>(b, tolerances(1e-8, 1e-8, 3000));
  EXPECT_TRUE(has(st, shoal::ode::kSuccess));
  EXPECT_FALSE(std::all_of(st.begin(), st.end(), [](int32_t s) { return s == 0; }));
  b.args.weights = nullptr;
  auto decay_norm = tolerances(1e-8, 1e-8, 3000);
  decay_norm.error_components = 1;
  check_lanes<Tsit5, Tsit5, BlowUp, double, 8>(b, decay_norm);
}

TEST(Lanes, Rodas5PStiffBothLuPrecisions) {
  // Robertson with k1 from 0.04 to 4e3 and, member 7, 4e6: stiff members finishing at 1e3 and
  // at 1e6, next to each other in the lanes.
  Ensemble<Robertson, double> e(37, 1e5, {1, 0, 0}, {0.04, 3e7, 1e4}, {4e3, 3e7, 1e4});
  const auto o = tolerances(1e-6, 1e-10, 5000);
  const auto st = check_lanes<Rodas64, Rodas64, Robertson, double, 8>(e, o);
  EXPECT_TRUE(has(st, shoal::ode::kSuccess));
  check_lanes<Rodas32, Rodas32, Robertson, double, 8>(e, o);
  check_lanes<Rodas64, Rodas64, Robertson, double, 2>(e, o);
}

TEST(Lanes, Rodas5PPivotsPerLane) {
  // w from 1 to 1e4: at hγw > 1 the LU swaps its rows, in some lanes of a vector and not others.
  Ensemble<Rotation, double> e(31, 2.0, {1, 0}, {1, 0.1}, {1e4, 10});
  check_lanes<Rodas64, Rodas64, Rotation, double, 8>(e, tolerances(1e-4, 1e-7));
  Ensemble<Rotation, float> f(31, 2.0f, {1, 0}, {1, 0.1f}, {1e4f, 10});
  check_lanes<Rodas32, Rodas32, Rotation, float, 16>(f, tolerances(1e-3, 1e-5));
}

// The lanes' LU (linalg/dense_lu_lanes.hpp) against the scalar DenseLU, matrix by matrix: rows
// scaled from 1 to 1e16 and random entries, so the pivot rule (scaled in double, plain in
// float) chooses differently in each lane; the same pivots, factors and solutions (A⁻¹ b and
// A⁻ᵀ b), bit for bit.
template <class S, int W>
void check_lane_lu() {
  constexpr int N = 5;
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> entry(-1.0, 1.0), exponent(0.0, 16.0);
  for (int trial = 0; trial < 20; ++trial) {
    shoal::linalg::DenseLU<Lanes<S, W>, N> lanes;
    shoal::linalg::DenseLU<S, N> scalar[W];
    Lanes<S, W> b[N];
    S rhs[W][N];
    for (int l = 0; l < W; ++l) {
      for (int i = 0; i < N; ++i) {
        const double row = std::pow(10.0, exponent(rng));
        for (int j = 0; j < N; ++j) {
          const S v = static_cast<S>(row * entry(rng));
          scalar[l].a[i * N + j] = v;
          lanes.a[i * N + j].set(l, v);
        }
        rhs[l][i] = static_cast<S>(entry(rng));
        b[i].set(l, rhs[l][i]);
      }
    }
    Lanes<S, W> bt[N];
    S rhs_t[W][N];
    for (int i = 0; i < N; ++i) {
      bt[i] = b[i];
      for (int l = 0; l < W; ++l) rhs_t[l][i] = rhs[l][i];
    }
    lanes.factor();
    lanes.solve(b);
    lanes.solve_transposed(bt);
    for (int l = 0; l < W; ++l) {
      scalar[l].factor();
      scalar[l].solve(rhs[l]);
      scalar[l].solve_transposed(rhs_t[l]);
      for (int i = 0; i < N; ++i) {
        ASSERT_EQ(lanes.piv[i][l], scalar[l].piv[i]) << trial << " " << l;
        ASSERT_EQ(std::memcmp(&rhs[l][i], &b[i].v[l], sizeof(S)), 0) << trial << " " << l;
        ASSERT_EQ(std::memcmp(&rhs_t[l][i], &bt[i].v[l], sizeof(S)), 0) << trial << " " << l;
        for (int j = 0; j < N; ++j) {
          const S want = scalar[l].a[i * N + j];
          ASSERT_EQ(std::memcmp(&want, &lanes.a[i * N + j].v[l], sizeof(S)), 0);
        }
      }
    }
  }
}

TEST(Lanes, PivotingIsTheScalars) {
  check_lane_lu<double, 8>();
  check_lane_lu<double, 4>();
  check_lane_lu<float, 16>();
}

TEST(Lanes, SensitivitiesTsit5AndRodas5P) {
  using LorenzSens = shoal::ode::Sensitivity<Lorenz, true, 0, 3>;
  std::vector<double> z0(LorenzSens::n_vars), y_start{1, 1, 1};
  LorenzSens::initial_state(y_start.data(), z0.data());
  Ensemble<LorenzSens, double> e(19, 1.0, z0, {10, 0, 8.0 / 3}, {10, 28, 8.0 / 3});
  check_lanes<Tsit5, Tsit5, LorenzSens, double, 8>(e, tolerances(1e-8, 1e-8));

  using RobertsonSens = shoal::ode::Sensitivity<Robertson, false, 0, 3>;
  std::vector<double> w0(RobertsonSens::n_vars), r_start{1, 0, 0};
  RobertsonSens::initial_state(r_start.data(), w0.data());
  Ensemble<RobertsonSens, double> r(19, 1e3, w0, {0.04, 3e7, 1e4}, {40, 3e7, 1e4});
  check_lanes<Rodas64Joint, Rodas64Joint, RobertsonSens, double, 8>(r, tolerances(1e-6, 1e-10));
}

TEST(Lanes, CppApiSolveEnsembleLanes) {
  // The C++ entry point: threads over one queue, the host's default width.
  Ensemble<Robertson, double> e(41, 1e5, {1, 0, 0}, {0.04, 3e7, 1e4}, {400, 3e7, 1e4});
  e.args.options = tolerances(1e-6, 1e-10);
  e.clear();
  shoal::ode::solve_ensemble<Rodas64, Robertson, double>(e.args, 2);
  const auto ys = e.ys;
  const auto st = e.status;
  e.clear();
  shoal::ode::solve_ensemble_lanes<Rodas64, Robertson, double>(e.args, 2, 3);
  EXPECT_TRUE(same_bits(ys, e.ys));
  EXPECT_EQ(st, e.status);
}

// searchsorted in the lanes (simd/lanes_math.hpp: the binary search stepping all lanes together,
// the near search's guess and four reads) against the scalar searches, lane by lane: grids of
// 0 to 1000 entries with a duplicate, queries inside, outside, on entries, NaN, ±inf, ±0.
template <class Q, int W>
void check_lane_searches() {
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> u(-1.5, 1.5);
  for (int n : {0, 1, 2, 3, 16, 17, 40, 1000}) {
    std::vector<double> tab(n + 1);
    for (int i = 0; i < n; ++i) tab[i] = -1.0 + 2.0 * i / (n > 1 ? n - 1 : 1);
    if (n == 3) tab[1] = tab[0];
    const double x0 = n ? tab[0] : 0, inv_h = n > 1 ? (n - 1) / 2.0 : 1.0;
    for (int trial = 0; trial < 2000; ++trial) {
      Lanes<Q, W> x;
      for (int l = 0; l < W; ++l) {
        double v = u(rng);
        const int r = static_cast<int>(rng() % 10);
        if (r == 0 && n) v = tab[rng() % n];
        if (r == 1) v = std::numeric_limits<double>::quiet_NaN();
        if (r == 2) v = (rng() % 2 ? 1 : -1) * std::numeric_limits<double>::infinity();
        if (r == 3) v = rng() % 2 ? 0.0 : -0.0;
        x.v[l] = static_cast<Q>(v);
      }
      for (bool right : {false, true}) {
        const Lanes<double, W> at = (shoal::simd::to_double(x) - x0) * inv_h;
        const auto a = shoal::simd::search_sorted(tab.data(), n, x, right);
        const auto b = shoal::simd::search_sorted_near(tab.data(), n, x, right, at);
        for (int l = 0; l < W; ++l) {
          ASSERT_EQ(a[l], shoal::math::search_sorted(tab.data(), n, x[l], right));
          ASSERT_EQ(b[l], shoal::math::search_sorted_near(tab.data(), n, x[l], right, at[l]));
        }
      }
    }
  }
}

TEST(Lanes, SearchSortedIsTheScalarsCount) {
  check_lane_searches<double, 8>();
  check_lane_searches<double, 4>();
  check_lane_searches<float, 16>();
  check_lane_searches<float, 4>();
}

// The lanes' square root (one vector instruction where the lanes fill a register, else a loop)
// gives the scalar's bits: IEEE's correctly rounded sqrt, −0, negatives and NaN to NaN, infinity,
// subnormals.
template <class T, int W>
void check_lane_sqrt() {
  const T inf = std::numeric_limits<T>::infinity();
  std::vector<T> xs = {T(0), T(-0.0), T(-1), -inf, inf, std::numeric_limits<T>::quiet_NaN(),
                       std::numeric_limits<T>::denorm_min(), std::numeric_limits<T>::min(),
                       std::numeric_limits<T>::max(), T(2), T(0.5)};
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> exponent(-300.0, 300.0);
  while (xs.size() % W != 0 || xs.size() < 512) {
    xs.push_back(static_cast<T>(std::pow(10.0, exponent(rng) / (sizeof(T) == 4 ? 8.0 : 1.0))));
  }
  for (size_t i = 0; i < xs.size(); i += W) {
    Lanes<T, W> x;
    for (int l = 0; l < W; ++l) x.set(l, xs[i + l]);
    const Lanes<T, W> r = sqrt(x);
    for (int l = 0; l < W; ++l) {
      const T want = std::sqrt(xs[i + l]);
      ASSERT_EQ(std::memcmp(&want, &r.v[l], sizeof(T)), 0) << xs[i + l];
    }
  }
}

TEST(Lanes, SqrtIsTheScalars) {
  check_lane_sqrt<double, 8>();
  check_lane_sqrt<double, 4>();
  check_lane_sqrt<double, 2>();
  check_lane_sqrt<float, 16>();
  check_lane_sqrt<float, 8>();
}

}  // namespace
