// The cancel flag (cancel.hpp): a trajectory that finds it set ends at its next step attempt with
// kCancelled, keeping the saves it reached and NaN after, like any failure.
#include <gtest/gtest.h>

#include <cmath>

#include "shoal/ode/integrate.hpp"
#include "shoal/ode/tsit5.hpp"

namespace {

using shoal::ode::IntegrateOptions;
using shoal::ode::IntegrateStats;

int32_t cancel_request = 0;  // what the host's SIGINT handler sets, here set by the model

// y' = -y, which asks to be cancelled once it is evaluated past t = 0.5: Ctrl-C in mid-solve.
struct DecayCancelledAtHalf {
  static constexpr int n_vars = 1;
  static constexpr int n_params = 0;
  template <class T>
  static void rhs(const T* y, const T& t, const T*, T* dy) {
    if (t > T(0.5)) __atomic_store_n(&cancel_request, 1, __ATOMIC_RELAXED);
    dy[0] = -y[0];
  }
};

IntegrateOptions<double> tight() {
  IntegrateOptions<double> o;
  o.controller.rtol = 1e-10;
  o.controller.atol = 1e-12;
  o.first_step = -1;
  o.max_steps = 100000;
  return o;
}

shoal::ode::Trajectory<double> trajectory(const double* y0, const double* t_span, int n_save,
                                          double* out, const int32_t* cancel) {
  shoal::ode::Trajectory<double> tr;
  tr.y0 = y0;
  tr.t_span = t_span;
  tr.n_save = n_save;
  tr.out = out;
  tr.cancel = cancel;
  return tr;
}

TEST(Cancel, ASetFlagEndsTheTrajectoryBeforeItsFirstStep) {
  const double y0 = 1.0, t_span[] = {0.0, 1.0, 2.0};
  double out[3];
  const int32_t set = 1;
  IntegrateStats stats;
  const auto status = shoal::ode::integrate<shoal::ode::Tsit5, DecayCancelledAtHalf, double>(
      trajectory(&y0, t_span, 3, out, &set), tight(), &stats);
  EXPECT_EQ(status, shoal::ode::kCancelled);
  EXPECT_EQ(stats.accepted + stats.rejected, 0);
  EXPECT_EQ(out[0], y0);
  EXPECT_TRUE(std::isnan(out[1]) && std::isnan(out[2]));
}

TEST(Cancel, AFlagSetMidwayKeepsTheSavesReached) {
  const double y0 = 1.0, t_span[] = {0.0, 0.25, 1.0, 2.0};
  double out[4];
  IntegrateStats stats, uncancelled;
  // Without a flag the same model runs to the end.
  cancel_request = 0;
  ASSERT_EQ((shoal::ode::integrate<shoal::ode::Tsit5, DecayCancelledAtHalf, double>(
                trajectory(&y0, t_span, 4, out, nullptr), tight(), &uncancelled)),
            shoal::ode::kSuccess);
  EXPECT_NEAR(out[3], std::exp(-2.0), 1e-9);

  cancel_request = 0;
  const auto status = shoal::ode::integrate<shoal::ode::Tsit5, DecayCancelledAtHalf, double>(
      trajectory(&y0, t_span, 4, out, &cancel_request), tight(), &stats);
  EXPECT_EQ(status, shoal::ode::kCancelled);
  EXPECT_NEAR(out[1], std::exp(-0.25), 1e-9);
  // The step that first evaluates f past 0.5 is finished, none after it: its steps are far
  // shorter than the half unit to the save at 1.
  EXPECT_TRUE(std::isnan(out[2]) && std::isnan(out[3]));
  EXPECT_GT(stats.accepted, 0);
  EXPECT_LT(stats.accepted, uncancelled.accepted / 2);
}

}  // namespace
