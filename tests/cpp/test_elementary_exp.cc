// shoal::elementary::exp against expl: error bound in ulp over millions of points, the special
// values of C99 F.10.3.1, float32 swept, and lanes giving the scalar bits.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "elementary_accuracy.hpp"
#include "shoal/elementary/exp.hpp"

namespace {

using namespace elementary_test;
namespace el = shoal::elementary;

auto exp_d = [](double x) { return el::exp(x); };
auto exp_f = [](float x) { return el::exp(x); };
auto ref = [](long double x) { return expl(x); };

TEST(ElementaryExp, DoubleWithinBound) {
  const Worst reduced = measure<double>(exp_d, ref, [] { return uniform(-0.35, 0.35); }, 2000000);
  const Worst range = measure<double>(exp_d, ref, [] { return uniform(-708.3, 709.8); }, 2000000);
  const Worst tiny = measure<double>(exp_d, ref, [] { return log_uniform(-1074, -1, true); },
                                     500000);
  const Worst subnormal = measure<double>(exp_d, ref, [] { return uniform(-745.2, -708.3); },
                                          500000);
  for (const Worst* w : {&reduced, &range, &tiny}) {
    EXPECT_LT(w->ulp, 0.66) << "at x = " << w->x;
  }
  // A subnormal result is rounded twice (to 53 bits, then to the subnormal's precision).
  EXPECT_LT(subnormal.ulp, 1.0) << "at x = " << subnormal.x;
  std::printf("exp double: max %.4f ulp (|x| <= 0.35), %.4f (normal results), %.4f (tiny x), "
              "%.4f (subnormal results)\n", reduced.ulp, range.ulp, tiny.ulp, subnormal.ulp);
}

TEST(ElementaryExp, FloatSweep) {
  const Worst w = sweep_float(exp_f, ref, 509);
  EXPECT_LT(w.ulp, 0.5001) << "at x = " << w.x;
  std::printf("exp float: max %.6f ulp over %ld values\n", w.ulp, w.n);
}

TEST(ElementaryExp, SpecialValues) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(el::exp(0.0), 1.0);
  EXPECT_EQ(el::exp(-0.0), 1.0);
  EXPECT_EQ(el::exp(-inf), 0.0);
  EXPECT_FALSE(std::signbit(el::exp(-inf)));
  EXPECT_EQ(el::exp(inf), inf);
  EXPECT_TRUE(std::isnan(el::exp(std::nan(""))));
  EXPECT_EQ(el::exp(709.79), inf);
  EXPECT_EQ(el::exp(-745.14), 0.0);
  EXPECT_EQ(el::exp(-745.13), std::numeric_limits<double>::denorm_min());
  EXPECT_EQ(el::exp(709.78), std::exp(709.78));
  EXPECT_EQ(el::exp(1.0), 2.718281828459045);
  EXPECT_EQ(el::exp(89.0f), std::numeric_limits<float>::infinity());
}

TEST(ElementaryExp, LanesGiveScalarBits) {
  const auto xd = arguments<double>([] { return uniform(-750, 750); }, 4096);
  expect_lanes_match<double, 8>(exp_d, [](auto x) { return el::exp(x); }, xd);
  expect_lanes_match<double, 4>(exp_d, [](auto x) { return el::exp(x); }, xd);
  const auto xf = arguments<float>([] { return uniform(-110, 110); }, 4096);
  expect_lanes_match<float, 16>(exp_f, [](auto x) { return el::exp(x); }, xf);
}

}  // namespace
