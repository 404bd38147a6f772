// shoal::elementary::expm1 against expm1l: error bound in ulp over millions of points, the special
// values of C99 F.10.3.3, float32 swept, and lanes giving the scalar bits.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "elementary_accuracy.hpp"
#include "shoal/elementary/expm1.hpp"

namespace {

using namespace elementary_test;
namespace el = shoal::elementary;

auto expm1_d = [](double x) { return el::expm1(x); };
auto expm1_f = [](float x) { return el::expm1(x); };
auto ref = [](long double x) { return expm1l(x); };

TEST(ElementaryExpm1, DoubleWithinBound) {
  const Worst reduced = measure<double>(
      expm1_d, ref, [] { return uniform(-0.35, 0.35); }, 1000000);
  const Worst near = measure<double>(
      expm1_d, ref, [] { return uniform(-3, 3); }, 1000000);
  const Worst range = measure<double>(
      expm1_d, ref, [] { return uniform(-45, 709.8); }, 1000000);
  const Worst tiny = measure<double>(
      expm1_d, ref, [] { return log_uniform(-1074, -1, true); }, 500000);
  for (const Worst* w : {&reduced, &near, &range, &tiny}) {
    EXPECT_LT(w->ulp, 0.64) << "at x = " << w->x;
  }
  std::printf(
      "expm1 double: max %.4f ulp (|x| <= 0.35), %.4f (|x| <= 3), %.4f (-45..709.8), "
      "%.4f (tiny x)\n",
      reduced.ulp, near.ulp, range.ulp, tiny.ulp);
}

TEST(ElementaryExpm1, FloatSweep) {
  const Worst w = sweep_float(expm1_f, ref, 509);
  EXPECT_LT(w.ulp, 0.5001) << "at x = " << w.x;
  std::printf("expm1 float: max %.6f ulp over %ld values\n", w.ulp, w.n);
}

TEST(ElementaryExpm1, SpecialValues) {
  const double inf = std::numeric_limits<double>::infinity();
  const double tiny = std::numeric_limits<double>::denorm_min();
  EXPECT_EQ(el::expm1(0.0), 0.0);
  EXPECT_FALSE(std::signbit(el::expm1(0.0)));
  EXPECT_EQ(el::expm1(-0.0), 0.0);
  EXPECT_TRUE(std::signbit(el::expm1(-0.0)));
  EXPECT_TRUE(std::signbit(el::expm1(-0.0f)));
  EXPECT_EQ(el::expm1(-inf), -1.0);
  EXPECT_EQ(el::expm1(inf), inf);
  EXPECT_TRUE(std::isnan(el::expm1(std::nan(""))));
  EXPECT_TRUE(std::isnan(el::expm1(std::nanf(""))));
  EXPECT_EQ(el::expm1(709.79), inf);
  EXPECT_EQ(el::expm1(1e300), inf);
  EXPECT_EQ(el::expm1(709.78), std::expm1(709.78));
  EXPECT_EQ(el::expm1(-40.0), -1.0);
  EXPECT_EQ(el::expm1(-1e300), -1.0);
  EXPECT_EQ(el::expm1(tiny), tiny);
  EXPECT_EQ(el::expm1(-tiny), -tiny);
  EXPECT_EQ(el::expm1(1e-20), 1e-20);
  EXPECT_EQ(el::expm1(-1e-300), -1e-300);
  EXPECT_EQ(el::expm1(89.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(el::expm1(-inf * 1.0f), -1.0f);
}

TEST(ElementaryExpm1, LanesGiveScalarBits) {
  const auto xd = arguments<double>([] { return uniform(-50, 750); }, 4096);
  expect_lanes_match<double, 8>(
      expm1_d, [](auto x) { return el::expm1(x); }, xd);
  expect_lanes_match<double, 4>(
      expm1_d, [](auto x) { return el::expm1(x); }, xd);
  const auto xs = arguments<double>([] { return log_uniform(-60, 3, true); }, 4096);
  expect_lanes_match<double, 8>(
      expm1_d, [](auto x) { return el::expm1(x); }, xs);
  const auto xf = arguments<float>([] { return uniform(-110, 110); }, 4096);
  expect_lanes_match<float, 16>(
      expm1_f, [](auto x) { return el::expm1(x); }, xf);
}

}  // namespace
