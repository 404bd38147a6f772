// The adaptive per-trajectory loop: accuracy against closed forms, saves, final-time landing,
// statuses, the step budget, stops with jumps, events and the weighted norm.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "shoal/ode/integrate.hpp"
#include "shoal/ode/tsit5.hpp"

namespace {

using shoal::ode::IntegrateOptions;
using shoal::ode::IntegrateStats;

struct Decay {  // y' = -k y
  static constexpr int n_vars = 1;
  static constexpr int n_params = 1;
  template <class T>
  static void rhs(const T* y, const T&, const T* p, T* dy) {
    dy[0] = -p[0] * y[0];
  }
};

struct Oscillator {  // x'' = -w² x
  static constexpr int n_vars = 2;
  static constexpr int n_params = 1;
  template <class T>
  static void rhs(const T* y, const T&, const T* p, T* dy) {
    dy[0] = y[1];
    dy[1] = -p[0] * p[0] * y[0];
  }
};

struct BlowUp {  // y' = y², y(0) = 1: singular at t = 1
  static constexpr int n_vars = 1;
  static constexpr int n_params = 0;
  template <class T>
  static void rhs(const T* y, const T&, const T*, T* dy) {
    dy[0] = y[0] * y[0];
  }
};

struct FastSecond {  // component 1 oscillates quickly; component 0 is a slow decay
  static constexpr int n_vars = 2;
  static constexpr int n_params = 0;
  template <class T>
  static void rhs(const T* y, const T&, const T*, T* dy) {
    dy[0] = -y[0];
    dy[1] = std::sin(T(40) * y[0]) * std::cos(T(30) * y[1]);
  }
};

struct NaNAfterHalf {  // fine until t = 0.5, then the model returns NaN
  static constexpr int n_vars = 1;
  static constexpr int n_params = 0;
  template <class T>
  static void rhs(const T* y, const T& t, const T*, T* dy) {
    dy[0] = t < T(0.5) ? -y[0] : std::numeric_limits<T>::quiet_NaN();
  }
};

template <class T>
IntegrateOptions<T> options(T rtol, T atol, int64_t max_steps = 100000) {
  IntegrateOptions<T> o;
  o.controller.rtol = rtol;
  o.controller.atol = atol;
  o.first_step = T(-1);
  o.max_steps = max_steps;
  return o;
}

TEST(Integrate, DecayMatchesClosedForm) {
  const double k = 1.3, y0 = 2.0;
  const double t_span[] = {0.0, 0.25, 1.0, 2.5, 4.0};
  double out[5];
  IntegrateStats stats;
  auto status = shoal::ode::integrate<shoal::ode::Tsit5, Decay, double>(
      &y0, &k, t_span, 5, nullptr, options(1e-10, 1e-12), out, &stats);
  ASSERT_EQ(status, shoal::ode::kSuccess);
  for (int j = 0; j < 5; ++j) EXPECT_NEAR(out[j], y0 * std::exp(-k * t_span[j]), 1e-9);
  EXPECT_EQ(out[0], y0);
  EXPECT_GT(stats.accepted, 0);
}

TEST(Integrate, OscillatorConservesEnergyAndPhase) {
  const double w = 3.0, y0[] = {1.0, 0.0};
  const double t_span[] = {0.0, 1.0, 5.0, 10.0};
  double out[8];
  IntegrateStats stats;
  auto status = shoal::ode::integrate<shoal::ode::Tsit5, Oscillator, double>(
      y0, &w, t_span, 4, nullptr, options(1e-11, 1e-13), out, &stats);
  ASSERT_EQ(status, shoal::ode::kSuccess);
  for (int j = 0; j < 4; ++j) {
    EXPECT_NEAR(out[2 * j], std::cos(w * t_span[j]), 1e-8);
    EXPECT_NEAR(out[2 * j + 1], -w * std::sin(w * t_span[j]), 3e-8);
  }
}

TEST(Integrate, FloatPrecisionWorks) {
  const float k = 0.5f, y0 = 1.0f, t_span[] = {0.0f, 2.0f};
  float out[2];
  IntegrateStats stats;
  auto status = shoal::ode::integrate<shoal::ode::Tsit5, Decay, float>(
      &y0, &k, t_span, 2, nullptr, options(1e-5f, 1e-7f), out, &stats);
  ASSERT_EQ(status, shoal::ode::kSuccess);
  EXPECT_NEAR(out[1], std::exp(-1.0f), 1e-5f);
}

TEST(Integrate, MaxStepsStopsAndFillsNaN) {
  const double k = 1.0, y0 = 1.0, t_span[] = {0.0, 1e-3, 100.0};
  double out[3];
  IntegrateStats stats;
  auto status = shoal::ode::integrate<shoal::ode::Tsit5, Decay, double>(
      &y0, &k, t_span, 3, nullptr, options(1e-12, 1e-14, 5), out, &stats);
  EXPECT_EQ(status, shoal::ode::kMaxStepsReached);
  EXPECT_EQ(stats.accepted + stats.rejected, 5);
  EXPECT_TRUE(std::isnan(out[2]));
}

TEST(Integrate, SingularityUnderflowsTheStep) {
  const double y0 = 1.0, t_span[] = {0.0, 0.5, 2.0};
  double out[3];
  IntegrateStats stats;
  auto status = shoal::ode::integrate<shoal::ode::Tsit5, BlowUp, double>(
      &y0, nullptr, t_span, 3, nullptr, options(1e-8, 1e-10), out, &stats);
  EXPECT_TRUE(status == shoal::ode::kStepSizeUnderflow || status == shoal::ode::kNonFinite)
      << status;
  EXPECT_NEAR(out[1], 2.0, 1e-6);  // y = 1 / (1 - t)
  EXPECT_TRUE(std::isnan(out[2]));
}

TEST(Integrate, NonFiniteModelIsReported) {
  const double y0 = 1.0, t_span[] = {0.0, 0.25, 1.0};
  double out[3];
  IntegrateStats stats;
  auto status = shoal::ode::integrate<shoal::ode::Tsit5, NaNAfterHalf, double>(
      &y0, nullptr, t_span, 3, nullptr, options(1e-8, 1e-10), out, &stats);
  EXPECT_EQ(status, shoal::ode::kNonFinite);
  EXPECT_NEAR(out[1], std::exp(-0.25), 1e-7);
  EXPECT_TRUE(std::isnan(out[2]));
}

TEST(Integrate, InvalidTimesAreReported) {
  const double k = 1.0, y0 = 1.0, t_span[] = {0.0, 1.0, 1.0};
  double out[3];
  IntegrateStats stats;
  auto status = shoal::ode::integrate<shoal::ode::Tsit5, Decay, double>(
      &y0, &k, t_span, 3, nullptr, options(1e-8, 1e-10), out, &stats);
  EXPECT_EQ(status, shoal::ode::kInvalidInput);
  for (double v : out) EXPECT_TRUE(std::isnan(v));
}

TEST(Integrate, ZeroWeightDropsAComponentFromControl) {
  // Component 1 decays 1000x faster; with its weight at 0 the controller ignores it and takes
  // fewer steps than when it counts.
  const double y0[] = {1.0, 1.0}, t_span[] = {0.0, 3.0};
  const double all[] = {1.0, 1.0}, first_only[] = {1.0, 0.0};
  double out[4];
  IntegrateStats with, without;
  shoal::ode::integrate<shoal::ode::Tsit5, FastSecond, double>(y0, nullptr, t_span, 2, all,
                                                               options(1e-9, 1e-9), out, &with);
  shoal::ode::integrate<shoal::ode::Tsit5, FastSecond, double>(y0, nullptr, t_span, 2, first_only,
                                                               options(1e-9, 1e-9), out, &without);
  EXPECT_LT(without.accepted, with.accepted);
  EXPECT_NEAR(out[2], std::exp(-3.0), 1e-8);
}

TEST(Integrate, LastStepLandsExactlyOnFinalTime) {
  // With a final save time that is not a multiple of any step, the last save is the last step's
  // end value, not an interpolation: check it equals a solve ending there.
  const double k = 0.7, y0 = 1.0;
  const double t_a[] = {0.0, 1.2345678};
  const double t_b[] = {0.0, 0.3, 1.2345678};
  double out_a[2], out_b[3];
  IntegrateStats s;
  shoal::ode::integrate<shoal::ode::Tsit5, Decay, double>(&y0, &k, t_a, 2, nullptr,
                                                          options(1e-9, 1e-12), out_a, &s);
  shoal::ode::integrate<shoal::ode::Tsit5, Decay, double>(&y0, &k, t_b, 3, nullptr,
                                                          options(1e-9, 1e-12), out_b, &s);
  EXPECT_EQ(out_a[1], out_b[2]);  // intermediate saves never change the steps
  EXPECT_NEAR(out_a[1], std::exp(-k * 1.2345678), 1e-9);
}

// A switch of f at s seen from either side: each step evaluates f on one side of the stop only.
struct Switch {  // y' = 1 for t < s (Left) or t <= s (!Left), else 0; exactly y(T) = s
  static constexpr int n_vars = 1;
  static constexpr int n_params = 1;
  template <class T>
  static void rhs(const T*, const T& t, const T* p, T* dy) {
    dy[0] = t < p[0] ? T(1) : T(0);
  }
};

struct DecayWithDose : Decay {  // a bolus of 1 at every stop, and the event y = 0.5
  static constexpr bool has_jump = true;
  static constexpr bool has_event = true;
  template <class T>
  static void jump(const T* y, const T&, const T*, T* out) {
    out[0] = y[0] + T(1);
  }
  template <class T>
  static void event(const T* y, const T&, const T*, T* out) {
    out[0] = y[0] - T(0.5);
  }
};

TEST(Integrate, StopsAreLandedOnAndSwitchesHonoured) {
  const double s = 0.3, y0 = 0.0;
  const double t_span[] = {0.0, 1.0}, stops[] = {s};
  double out[2];
  IntegrateStats stats;
  shoal::ode::Trajectory<double> tr;
  tr.y0 = &y0;
  tr.p = &s;
  tr.t_span = t_span;
  tr.n_save = 2;
  tr.tstops = stops;
  tr.n_tstops = 1;
  tr.out = out;
  ASSERT_EQ((shoal::ode::integrate<shoal::ode::Tsit5, Switch, double>(
                tr, options(1e-10, 1e-12), &stats)),
            shoal::ode::kSuccess);
  const double with_stop = std::abs(out[1] - s);
  EXPECT_LT(with_stop, 1e-14);
  tr.n_tstops = 0;  // without the stop, steps across s integrate a mix of both sides
  shoal::ode::integrate<shoal::ode::Tsit5, Switch, double>(tr, options(1e-10, 1e-12), &stats);
  EXPECT_GT(std::abs(out[1] - s), 100 * with_stop + 1e-13);
}

TEST(Integrate, JumpsAtStopsAndATerminalEvent) {
  const double k = 1.0, y0 = 1.0;
  const double t_span[] = {0.0, 0.5, 1.0, 5.0}, stops[] = {0.5, 7.0};  // 7 is outside
  double out[4], event_time, event_state;
  IntegrateStats stats;
  shoal::ode::Trajectory<double> tr;
  tr.y0 = &y0;
  tr.p = &k;
  tr.t_span = t_span;
  tr.n_save = 4;
  tr.tstops = stops;
  tr.n_tstops = 2;
  tr.out = out;
  tr.event_time = &event_time;
  tr.event_state = &event_state;
  const auto status = shoal::ode::integrate<shoal::ode::Tsit5, DecayWithDose, double>(
      tr, options(1e-11, 1e-13), &stats);
  // y(0.5-) = e^-0.5 > 0.5 (saved before the dose); after it y = e^-0.5 + 1, which decays to
  // the event's 0.5 at 0.5 + log(2 (e^-0.5 + 1)) ≈ 1.67: the save at 1 is reached, the one at 5
  // is not.
  const double after = std::exp(-0.5) + 1.0;
  EXPECT_EQ(status, shoal::ode::kEvent);
  EXPECT_NEAR(event_time, 0.5 + std::log(2.0 * after), 1e-10);
  EXPECT_NEAR(event_state, 0.5, 1e-10);
  EXPECT_NEAR(out[1], std::exp(-0.5), 1e-10);
  EXPECT_NEAR(out[2], after * std::exp(-0.5), 1e-10);
  EXPECT_TRUE(std::isnan(out[3]));
}

TEST(Integrate, ZeroWeightsLeaveTheMean) {
  const double rtol = 1e-6, atol = 1e-6;
  shoal::ode::ControllerOptions<double> c;
  c.rtol = rtol;
  c.atol = atol;
  const double err[] = {1e-6, 5.0}, y[] = {0.0, 0.0}, w[] = {1.0, 0.0};
  const int count = shoal::ode::weighted_count(2, w);
  EXPECT_EQ(count, 1);
  const double* scalar_atol = nullptr;
  EXPECT_NEAR(shoal::ode::error_norm(2, count, err, y, y, w, scalar_atol, c), 1.0, 1e-12);
  const double nan_err[] = {1e-6, std::numeric_limits<double>::quiet_NaN()};
  EXPECT_FALSE(std::isfinite(shoal::ode::error_norm(2, count, nan_err, y, y, w, scalar_atol, c)));
  // A component's own absolute tolerance replaces the scalar one.
  const double own_atol[] = {2e-6, 1.0};
  EXPECT_NEAR(shoal::ode::error_norm(2, count, err, y, y, w, own_atol, c), 0.5, 1e-12);
}

// The integral controller of an order-k estimate takes (1/norm)^(1/k) as `root` gives it: within
// rounding of pow's value, and clipped like every other factor.
template <class Root>
void expect_root_factor(int order, Root root) {
  shoal::ode::ControllerOptions<double> opt;
  opt.rtol = 1e-6;
  opt.atol = 1e-9;
  int inside = 0;
  for (double norm = 1e-3; norm < 1e3; norm *= 1.37) {
    shoal::ode::PidController<double> ctrl{opt, order};
    const bool accepted = norm <= 1.0;
    const double f = ctrl.factor(norm, accepted);
    const double want = 0.9 * std::pow(1.0 / norm, 1.0 / order);
    const double hi = accepted ? opt.factor_max : opt.safety;
    if (want > opt.factor_min && want < hi) {
      ++inside;
      EXPECT_EQ(f, 0.9 * root(1.0 / norm)) << norm;
      EXPECT_NEAR(f, want, 4e-16 * want) << norm;
    } else {
      EXPECT_EQ(f, want <= opt.factor_min ? opt.factor_min : hi) << norm;
    }
  }
  EXPECT_GT(inside, 10);
}

// Rodas4's order-4 estimate: two square roots.
TEST(Controller, QuarterPowerIsTwoSquareRoots) {
  expect_root_factor(4, [](double x) { return std::sqrt(std::sqrt(x)); });
}

// Rosenbrock23's order-3 estimate: shoal's cbrt.
TEST(Controller, ThirdPowerIsCubeRoot) {
  expect_root_factor(3, [](double x) { return shoal::math::cbrt(x); });
}

}  // namespace
