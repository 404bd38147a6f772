// shoal::elementary::cbrt against cbrtl: error bound in ulp over millions of points (subnormals
// included), exact cubes, the special values (C99 F.9.4.1), float32 swept, lanes giving scalar
// bits.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "elementary_accuracy.hpp"
#include "shoal/elementary/cbrt.hpp"

namespace {

using namespace elementary_test;
namespace el = shoal::elementary;

auto cbrt_d = [](double x) { return el::cbrt(x); };
auto cbrt_f = [](float x) { return el::cbrt(x); };
auto ref = [](long double x) { return cbrtl(x); };

TEST(ElementaryCbrt, DoubleWithinBound) {
  const Worst reduced = measure<double>(
      cbrt_d, ref, [] { return uniform(-8, 8); }, 1500000);
  const Worst range = measure<double>(
      cbrt_d, ref, [] { return log_uniform(-1022, 1024, true); }, 1500000);
  const Worst subnormal = measure<double>(
      cbrt_d, ref, [] { return log_uniform(-1074, -1022, true); }, 300000);
  for (const Worst* w : {&reduced, &range, &subnormal}) {
    EXPECT_LT(w->ulp, 0.5001) << "at x = " << w->x;
  }
  std::printf("cbrt double: max %.6f ulp (|x| <= 8), %.6f (normal x), %.6f (subnormal x)\n",
              reduced.ulp, range.ulp, subnormal.ulp);
}

TEST(ElementaryCbrt, ExactCubes) {
  for (int i = 1; i < 200000; i += 7) {
    const double c = double(i) * i * i;  // exact below 2^53
    ASSERT_EQ(el::cbrt(c), double(i)) << i;
    ASSERT_EQ(el::cbrt(-c), -double(i)) << i;
  }
  for (int k = -1074; k <= 1023; k += 3) {  // every power 2^(3j), subnormals included
    ASSERT_EQ(el::cbrt(std::ldexp(1.0, k)), std::ldexp(1.0, k / 3)) << k;
  }
  EXPECT_EQ(el::cbrt(0.125), 0.5);
  EXPECT_EQ(el::cbrt(27.0f), 3.0f);
}

TEST(ElementaryCbrt, FloatSweep) {
  const Worst w = sweep_float(cbrt_f, ref, 509);
  EXPECT_LT(w.ulp, 0.5001) << "at x = " << w.x;
  std::printf("cbrt float: max %.6f ulp over %ld values\n", w.ulp, w.n);
}

TEST(ElementaryCbrt, SpecialValues) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(el::cbrt(0.0), 0.0);
  EXPECT_FALSE(std::signbit(el::cbrt(0.0)));
  EXPECT_TRUE(std::signbit(el::cbrt(-0.0)));
  EXPECT_TRUE(std::signbit(el::cbrt(-0.0f)));
  EXPECT_EQ(el::cbrt(inf), inf);
  EXPECT_EQ(el::cbrt(-inf), -inf);
  EXPECT_EQ(el::cbrt(-inf * 1.0f), -inf);
  EXPECT_TRUE(std::isnan(el::cbrt(std::nan(""))));
  EXPECT_TRUE(std::isnan(el::cbrt(std::nanf(""))));
  EXPECT_EQ(el::cbrt(std::numeric_limits<double>::denorm_min()),
            std::cbrt(4.9406564584124654e-324));
  EXPECT_EQ(el::cbrt(std::numeric_limits<double>::max()), std::cbrt(1.7976931348623157e308));
  EXPECT_EQ(el::cbrt(-8.0), -2.0);
}

TEST(ElementaryCbrt, LanesGiveScalarBits) {
  const auto xd = arguments<double>([] { return log_uniform(-1074, 1024, true); }, 4096);
  expect_lanes_match<double, 8>(
      cbrt_d, [](auto x) { return el::cbrt(x); }, xd);
  expect_lanes_match<double, 4>(
      cbrt_d, [](auto x) { return el::cbrt(x); }, xd);
  const auto xf = arguments<float>([] { return log_uniform(-149, 128, true); }, 4096);
  expect_lanes_match<float, 16>(
      cbrt_f, [](auto x) { return el::cbrt(x); }, xf);
}

}  // namespace
