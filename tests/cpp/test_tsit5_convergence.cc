// Fixed-step convergence of the Tsit5 stepper and of its continuous extension, measured on the
// non-autonomous y' = cos(t) y, whose solution is y0 exp(sin t).
#include <gtest/gtest.h>

#include <cmath>
#include <initializer_list>

#include "shoal/ode/tsit5.hpp"

namespace {

struct CosGrowth {
  static constexpr int n_vars = 1;
  static constexpr int n_params = 0;
  template <class T>
  static void rhs(const T* y, const T& t, const T*, T* dy) {
    dy[0] = std::cos(t) * y[0];
  }
};

double exact(double t) { return std::exp(std::sin(t)); }

// Global error at T of n fixed steps.
double global_error(int n_steps, double t_end) {
  shoal::ode::Tsit5<CosGrowth, double> stepper;
  double y = 1.0, t = 0.0, y_new, err;
  const double h = t_end / n_steps;
  stepper.init(&y, t, nullptr);
  for (int k = 0; k < n_steps; ++k) {
    stepper.step(&y, t, h, nullptr, &y_new, &err);
    stepper.accept();
    y = y_new;
    t += h;
  }
  return std::abs(y - exact(t_end));
}

// Largest local error of the continuous extension over [0, t_end]: each step starts from the
// exact solution, so only the interpolant's own error is measured.
double dense_local_error(int n_steps, double t_end, double theta) {
  shoal::ode::Tsit5<CosGrowth, double> stepper;
  const double h = t_end / n_steps;
  double worst = 0;
  for (int k = 0; k < n_steps; ++k) {
    const double t = k * h;
    double y = exact(t), y_new, err, mid;
    stepper.init(&y, t, nullptr);
    stepper.step(&y, t, h, nullptr, &y_new, &err);
    stepper.interpolate(&y, h, theta, &mid);
    worst = std::max(worst, std::abs(mid - exact(t + theta * h)));
  }
  return worst;
}

TEST(Tsit5Convergence, GlobalErrorIsFifthOrder) {
  // Over [0, 10] the asymptotic regime starts near 80 steps and round-off stays far below.
  const double e1 = global_error(80, 10.0), e2 = global_error(160, 10.0),
               e3 = global_error(320, 10.0);
  const double p1 = std::log2(e1 / e2), p2 = std::log2(e2 / e3);
  EXPECT_NEAR(p1, 5.0, 0.3) << e1 << " " << e2;
  EXPECT_NEAR(p2, 5.0, 0.3) << e2 << " " << e3;
}

TEST(Tsit5Convergence, EmbeddedErrorEstimateIsFifthOrderLocal) {
  // The estimate of one step from the exact start behaves like h^5 (order-4 embedded method).
  double est[2];
  for (int k = 0; k < 2; ++k) {
    shoal::ode::Tsit5<CosGrowth, double> stepper;
    double y = exact(0.3), y_new, err;
    const double h = 0.2 / (1 << k);
    stepper.init(&y, 0.3, nullptr);
    stepper.step(&y, 0.3, h, nullptr, &y_new, &err);
    est[k] = std::abs(err);
  }
  EXPECT_NEAR(std::log2(est[0] / est[1]), 5.0, 0.4);
}

TEST(Tsit5Convergence, InterpolantReproducesStepEndPoints) {
  shoal::ode::Tsit5<CosGrowth, double> stepper;
  double y = 1.7, y_new, err, at0, at1;
  stepper.init(&y, 0.4, nullptr);
  stepper.step(&y, 0.4, 0.3, nullptr, &y_new, &err);
  stepper.interpolate(&y, 0.3, 0.0, &at0);
  stepper.interpolate(&y, 0.3, 1.0, &at1);
  EXPECT_EQ(at0, y);
  EXPECT_NEAR(at1, y_new, 1e-14 * std::abs(y_new));
}

TEST(Tsit5Convergence, InterpolantIsFourthOrder) {
  // An order-4 continuous extension has local error O(h^5).
  for (double theta : {0.3, 0.5, 0.8}) {
    const double e1 = dense_local_error(10, 2.0, theta), e2 = dense_local_error(20, 2.0, theta),
                 e3 = dense_local_error(40, 2.0, theta);
    EXPECT_NEAR(std::log2(e1 / e2), 5.0, 0.5) << "theta " << theta;
    EXPECT_NEAR(std::log2(e2 / e3), 5.0, 0.5) << "theta " << theta;
  }
}

}  // namespace
