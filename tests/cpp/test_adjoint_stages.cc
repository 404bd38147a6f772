// The adjoint's stage records (adjoint.hpp): an explicit method's backward sweep reads the
// stages the forward re-solve kept for its first steps, within a byte budget, and evaluates the
// others again. Whatever the budget (none, every step, a prefix), the cotangents are the same,
// and they match central finite differences of the solve.

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "forced_adjoint_model.hpp"
#include "shoal/ode/adjoint.hpp"
#include "shoal/ode/explicit_rk_adjoint.hpp"
#include "shoal/ode/tsit5.hpp"
#include "shoal/ode/vern9.hpp"

namespace {

using shoal::ode::IntegrateStats;
using shoal::ode::Trajectory;

using forced_adjoint::Forced;
using forced_adjoint::kSaves;
using forced_adjoint::options;

// The loss Σ_saves c · y(t_i) as the plain solve computes it.
template <template <class, class> class Stepper>
double loss(const double* y0, const double* p, const double* c) {
  double out[kSaves * 2];
  IntegrateStats stats;
  const Trajectory<double> tr = forced_adjoint::trajectory(y0, p, out);
  EXPECT_EQ((shoal::ode::integrate<Stepper, Forced, double>(tr, options(), &stats)),
            shoal::ode::kSuccess);
  double sum = 0.0;
  for (int i = 0; i < kSaves * 2; ++i) sum += c[i] * out[i];
  return sum;
}

// (ȳ0, p̄) of the loss by the adjoint with a stage budget, and the steps it recorded.
template <template <class, class> class Stepper, size_t Budget>
std::vector<double> adjoint(const double* y0, const double* p, const double* c,
                            size_t* steps_with_stages, int* steps) {
  double out[kSaves * 2];
  const Trajectory<double> tr = forced_adjoint::trajectory(y0, p, out);
  shoal::ode::Adjoint<Stepper, shoal::ode::ExplicitStepAdjoint, Forced, double, Budget> a;
  IntegrateStats stats;
  shoal::ode::Status status;
  EXPECT_TRUE(a.forward(tr, options(), &stats, &status));
  EXPECT_EQ(status, shoal::ode::kSuccess);
  std::vector<double> bar(4);
  a.backward(tr, c, nullptr, bar.data(), bar.data() + 2);
  using Step = typename decltype(a)::Step;
  *steps_with_stages = a.stage_records.size() / Step::recorded;
  *steps = stats.accepted;
  return bar;
}

template <template <class, class> class Stepper, int StagesTimesN>
void check() {
  const double y0[] = {1.0, -0.5}, p[] = {0.8, 1.3};
  const double c[] = {0.3, -1.0, 0.5, 0.25, -0.7, 1.1, 0.9, 0.4};
  constexpr size_t step_bytes = StagesTimesN * sizeof(double);
  size_t kept_none, kept_all, kept_some;
  int steps;
  const auto none = adjoint<Stepper, 0>(y0, p, c, &kept_none, &steps);
  const auto all = adjoint<Stepper, size_t(1) << 24>(y0, p, c, &kept_all, &steps);
  const auto some = adjoint<Stepper, 7 * step_bytes>(y0, p, c, &kept_some, &steps);
  EXPECT_EQ(kept_none, 0u);
  EXPECT_EQ(kept_all, static_cast<size_t>(steps));
  EXPECT_EQ(kept_some, 7u);
  ASSERT_GT(steps, 10);  // so the prefix of 7 leaves steps evaluated again
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(all[i], none[i], 1e-13 * std::abs(none[i]) + 1e-15) << i;
    EXPECT_NEAR(some[i], none[i], 1e-13 * std::abs(none[i]) + 1e-15) << i;
  }
  // Central differences of the solve (rtol 1e-9: a few digits of agreement).
  for (int i = 0; i < 4; ++i) {
    double yp[] = {y0[0], y0[1]}, pp[] = {p[0], p[1]}, ym[] = {y0[0], y0[1]}, pm[] = {p[0], p[1]};
    const double e = 1e-5;
    (i < 2 ? yp[i] : pp[i - 2]) += e;
    (i < 2 ? ym[i] : pm[i - 2]) -= e;
    const double fd = (loss<Stepper>(yp, pp, c) - loss<Stepper>(ym, pm, c)) / (2 * e);
    EXPECT_NEAR(all[i], fd, 1e-6 * (1.0 + std::abs(fd))) << i;
  }
}

TEST(AdjointStages, Tsit5CotangentsDoNotDependOnTheBudget) { check<shoal::ode::Tsit5, 7 * 2>(); }

TEST(AdjointStages, Vern9CotangentsDoNotDependOnTheBudget) { check<shoal::ode::Vern9, 16 * 2>(); }

}  // namespace
