// Fixed-step convergence of the explicit Runge-Kutta steppers (Tsit5, Vern7, Vern9), of their
// error estimates and of their continuous extensions, measured on the non-autonomous
// y' = cos(t) y, whose solution is y0 exp(sin t).
#include <gtest/gtest.h>

#include <cmath>
#include <initializer_list>

#include "shoal/ode/tsit5.hpp"
#include "shoal/ode/vern7.hpp"
#include "shoal/ode/vern9.hpp"

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

template <template <class, class> class Stepper>
struct Method {
  using S = Stepper<CosGrowth, double>;

  // Global error at t_end of n fixed steps.
  static double global_error(int n_steps, double t_end) {
    S stepper;
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

  // The error estimate of one step of size h from the exact solution at 0.3.
  static double estimate(double h) {
    S stepper;
    double y = exact(0.3), y_new, err;
    stepper.init(&y, 0.3, nullptr);
    stepper.step(&y, 0.3, h, nullptr, &y_new, &err);
    return std::abs(err);
  }

  // Largest local error of the continuous extension over [0, t_end]: each step starts from the
  // exact solution, so only the interpolant's own error is measured.
  static double dense_local_error(int n_steps, double t_end, double theta) {
    S stepper;
    const double h = t_end / n_steps;
    double worst = 0;
    for (int k = 0; k < n_steps; ++k) {
      const double t = k * h;
      double y = exact(t), y_new, err, mid;
      stepper.init(&y, t, nullptr);
      stepper.step(&y, t, h, nullptr, &y_new, &err);
      stepper.interpolate(&y, t, h, theta, nullptr, &mid);
      worst = std::max(worst, std::abs(mid - exact(t + theta * h)));
    }
    return worst;
  }
};

// The observed order over `doublings` halvings of the step from n_steps: the mean slope
// log2(e(n) / e(2^d n)) / d, at least `order − slack` (the tableau test pins the orders exactly:
// this one checks the engine computes them). Where the step counts start, per method: where the
// asymptotic regime has begun and round-off stays far below (an averaged slope, as the error
// constants of these methods change sign over a few halvings).
template <class F>
void expect_order(F error, int n_steps, int doublings, double order, double slack,
                  const char* what) {
  const double first = error(n_steps), last = error(n_steps << doublings);
  EXPECT_GT(last, 1e-13) << what << ": round-off";
  EXPECT_GT(std::log2(first / last) / doublings, order - slack)
      << what << ", " << n_steps << " to " << (n_steps << doublings) << " steps: " << first
      << " -> " << last;
}

struct Steps {
  int order;
  double t_end;  // of the global error's run
  int global_steps, global_doublings;
  int dense_order, dense_steps, dense_doublings;
  double estimate_step;  // the largest step of the estimate's run
  double end_point_tol;  // relative, of the interpolant at θ = 1 against the step's solution
};

template <template <class, class> class Stepper>
void expect_convergence(const Steps& s) {
  using M = Method<Stepper>;
  expect_order([&](int n) { return M::global_error(n, s.t_end); }, s.global_steps,
               s.global_doublings, s.order, 0.35, "global error");
  // The embedded method of order `order − 1` has local error O(h^order).
  expect_order([&](int n) { return M::estimate(s.estimate_step / n); }, 1, 2, s.order, 0.45,
               "estimate");
  for (double theta : {0.3, 0.5, 0.8}) {
    expect_order([theta](int n) { return M::dense_local_error(n, 2.0, theta); }, s.dense_steps,
                 s.dense_doublings, s.dense_order + 1, 1.0, "dense output");
  }
  // The interpolant at θ = 0 is the step's start, at θ = 1 its end (to rounding: the
  // interpolant's weights at θ = 1 sum large polynomial coefficients).
  typename M::S stepper;
  double y = 1.7, y_new, err, at0, at1;
  stepper.init(&y, 0.4, nullptr);
  stepper.step(&y, 0.4, 0.3, nullptr, &y_new, &err);
  stepper.interpolate(&y, 0.4, 0.3, 0.0, nullptr, &at0);
  stepper.interpolate(&y, 0.4, 0.3, 1.0, nullptr, &at1);
  EXPECT_EQ(at0, y);
  EXPECT_NEAR(at1, y_new, s.end_point_tol * std::abs(y_new));
}

TEST(ExplicitRungeKuttaConvergence, Tsit5) {
  expect_convergence<shoal::ode::Tsit5>({5, 10.0, 80, 2, 4, 10, 2, 0.4, 1e-14});
}

TEST(ExplicitRungeKuttaConvergence, Vern7) {
  expect_convergence<shoal::ode::Vern7>({7, 40.0, 160, 2, 6, 2, 2, 0.4, 1e-13});
}

TEST(ExplicitRungeKuttaConvergence, Vern9) {
  expect_convergence<shoal::ode::Vern9>({9, 40.0, 40, 2, 9, 1, 2, 1.6, 5e-13});
}

}  // namespace
