// shoal::elementary::exp2 against exp2l: error bound in ulp over millions of points, exactness on
// integers, the special values of C99 F.10.3.2, float32 swept, and lanes giving the scalar bits.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "elementary_accuracy.hpp"
#include "shoal/elementary/exp2.hpp"

namespace {

using namespace elementary_test;
namespace el = shoal::elementary;

auto exp2_d = [](double x) { return el::exp2(x); };
auto exp2_f = [](float x) { return el::exp2(x); };
auto ref = [](long double x) { return exp2l(x); };

TEST(ElementaryExp2, DoubleWithinBound) {
  const Worst reduced = measure<double>(
      exp2_d, ref, [] { return uniform(-0.5, 0.5); }, 1500000);
  const Worst range = measure<double>(
      exp2_d, ref, [] { return uniform(-1022, 1024); }, 1500000);
  const Worst tiny = measure<double>(
      exp2_d, ref, [] { return log_uniform(-1074, -1, true); }, 500000);
  const Worst subnormal = measure<double>(
      exp2_d, ref, [] { return uniform(-1075.5, -1022); }, 500000);
  for (const Worst* w : {&reduced, &range, &tiny}) {
    EXPECT_LT(w->ulp, 0.65) << "at x = " << w->x;
  }
  EXPECT_LT(subnormal.ulp, 1.0) << "at x = " << subnormal.x;
  std::printf(
      "exp2 double: max %.4f ulp (|x| <= 1/2), %.4f (normal results), %.4f (tiny x), "
      "%.4f (subnormal results)\n",
      reduced.ulp, range.ulp, tiny.ulp, subnormal.ulp);
}

TEST(ElementaryExp2, ExactOnIntegers) {
  for (int k = -1074; k <= 1023; ++k) {
    ASSERT_EQ(el::exp2(double(k)), std::ldexp(1.0, k)) << k;
  }
  for (int k = -149; k <= 127; ++k) {
    ASSERT_EQ(el::exp2(float(k)), std::ldexp(1.0f, k)) << k;
  }
  EXPECT_EQ(el::exp2(-1075.0), 0.0);
  EXPECT_EQ(el::exp2(1024.0), std::numeric_limits<double>::infinity());
  EXPECT_EQ(el::exp2(-150.0f), 0.0f);
  EXPECT_EQ(el::exp2(128.0f), std::numeric_limits<float>::infinity());
}

TEST(ElementaryExp2, FloatSweep) {
  const Worst w = sweep_float(exp2_f, ref, 509);
  EXPECT_LT(w.ulp, 0.5001) << "at x = " << w.x;
  std::printf("exp2 float: max %.6f ulp over %ld values\n", w.ulp, w.n);
}

TEST(ElementaryExp2, SpecialValues) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(el::exp2(0.0), 1.0);
  EXPECT_EQ(el::exp2(-0.0), 1.0);
  EXPECT_EQ(el::exp2(-inf), 0.0);
  EXPECT_FALSE(std::signbit(el::exp2(-inf)));
  EXPECT_EQ(el::exp2(inf), inf);
  EXPECT_TRUE(std::isnan(el::exp2(std::nan(""))));
  EXPECT_TRUE(std::isnan(el::exp2(std::nanf(""))));
  EXPECT_EQ(el::exp2(1e300), inf);
  EXPECT_EQ(el::exp2(-1e300), 0.0);
  EXPECT_EQ(el::exp2(1023.9999), std::exp2(1023.9999));
  EXPECT_EQ(el::exp2(-1075.1), 0.0);
  EXPECT_EQ(el::exp2(-1074.9), std::numeric_limits<double>::denorm_min());
  EXPECT_EQ(el::exp2(-1074.4), std::numeric_limits<double>::denorm_min());
  EXPECT_EQ(el::exp2(0.5), 1.4142135623730951);
}

TEST(ElementaryExp2, LanesGiveScalarBits) {
  const auto xd = arguments<double>([] { return uniform(-1100, 1100); }, 4096);
  expect_lanes_match<double, 8>(
      exp2_d, [](auto x) { return el::exp2(x); }, xd);
  expect_lanes_match<double, 4>(
      exp2_d, [](auto x) { return el::exp2(x); }, xd);
  const auto xf = arguments<float>([] { return uniform(-160, 160); }, 4096);
  expect_lanes_match<float, 16>(
      exp2_f, [](auto x) { return el::exp2(x); }, xf);
}

}  // namespace
