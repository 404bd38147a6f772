// shoal::elementary::erf and erfc against erfl and erfcl: error bounds in ulp over millions of
// points, the special values of C99 F.10.5, float32 swept, and lanes giving the scalar bits.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "elementary_accuracy.hpp"
#include "shoal/elementary/erf.hpp"

namespace {

using namespace elementary_test;
namespace el = shoal::elementary;

auto erf_d = [](double x) { return el::erf(x); };
auto erf_f = [](float x) { return el::erf(x); };
auto erfc_d = [](double x) { return el::erfc(x); };
auto erfc_f = [](float x) { return el::erfc(x); };
auto erf_ref = [](long double x) { return erfl(x); };
auto erfc_ref = [](long double x) { return erfcl(x); };

TEST(ElementaryErf, ErfDoubleWithinBound) {
  const Worst series = measure<double>(
      erf_d, erf_ref, [] { return uniform(-0.5, 0.5); }, 1000000);
  const Worst middle = measure<double>(
      erf_d, erf_ref, [] { return uniform(-6.0, 6.0); }, 1000000);
  const Worst edge = measure<double>(
      erf_d, erf_ref, [] { return uniform(0.45, 1.05); }, 500000);
  const Worst tiny = measure<double>(
      erf_d, erf_ref, [] { return log_uniform(-1021, -1, true); }, 500000);
  const Worst subnormal = measure<double>(
      erf_d, erf_ref, [] { return log_uniform(-1074, -1022.2, true); }, 100000);
  const Worst far = measure<double>(
      erf_d, erf_ref, [] { return log_uniform(2, 1024, true); }, 100000);
  for (const Worst* w : {&series, &middle, &edge, &tiny, &far}) {
    EXPECT_LT(w->ulp, 0.65) << "at x = " << w->x;
  }
  // A subnormal result is rounded twice (to 53 bits, then to the subnormal's precision).
  EXPECT_LT(subnormal.ulp, 1.0) << "at x = " << subnormal.x;
  std::printf(
      "erf double: max %.4f ulp (|x| < 0.5), %.4f (|x| < 6) at %.17g, %.4f (0.45..1.05), "
      "%.4f (tiny x), %.4f (subnormal results), %.4f (|x| > 4)\n",
      series.ulp, middle.ulp, middle.x, edge.ulp, tiny.ulp, subnormal.ulp, far.ulp);
}

TEST(ElementaryErf, ErfcDoubleWithinBound) {
  const Worst series = measure<double>(
      erfc_d, erfc_ref, [] { return uniform(-0.5, 0.5); }, 1000000);
  const Worst pos = measure<double>(
      erfc_d, erfc_ref, [] { return uniform(0.5, 26.5); }, 1000000);
  const Worst neg = measure<double>(
      erfc_d, erfc_ref, [] { return uniform(-6.0, -0.5); }, 500000);
  const Worst pieces = measure<double>(
      erfc_d, erfc_ref, [] { return uniform(0.45, 9.0); }, 1000000);
  const Worst subnormal = measure<double>(
      erfc_d, erfc_ref, [] { return uniform(26.5, 27.3); }, 200000);
  const Worst tiny = measure<double>(
      erfc_d, erfc_ref, [] { return log_uniform(-1074, -1, true); }, 200000);
  for (const Worst* w : {&series, &pos, &neg, &pieces, &tiny}) {
    EXPECT_LT(w->ulp, 0.66) << "at x = " << w->x;
  }
  // A subnormal result is rounded twice (to 53 bits, then to the subnormal's precision).
  EXPECT_LT(subnormal.ulp, 1.0) << "at x = " << subnormal.x;
  std::printf(
      "erfc double: max %.4f ulp (|x| < 0.5) at %.17g, %.4f (0.5..26.5) at %.17g, %.4f "
      "(−6..−0.5), %.4f (0.45..9) at %.17g, %.4f (subnormal results), %.4f (tiny x)\n",
      series.ulp, series.x, pos.ulp, pos.x, neg.ulp, pieces.ulp, pieces.x, subnormal.ulp, tiny.ulp);
}

TEST(ElementaryErf, FloatSweep) {
  const Worst e = sweep_float(erf_f, erf_ref, 509);
  const Worst c = sweep_float(erfc_f, erfc_ref, 509);
  EXPECT_LT(e.ulp, 0.5001) << "at x = " << e.x;
  EXPECT_LT(c.ulp, 0.5001) << "at x = " << c.x;
  std::printf("erf float: max %.6f ulp, erfc float: max %.6f ulp, over %ld values\n", e.ulp, c.ulp,
              e.n);
}

TEST(ElementaryErf, SpecialValues) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(el::erf(0.0), 0.0);
  EXPECT_FALSE(std::signbit(el::erf(0.0)));
  EXPECT_EQ(el::erf(-0.0), 0.0);
  EXPECT_TRUE(std::signbit(el::erf(-0.0)));
  EXPECT_EQ(el::erf(inf), 1.0);
  EXPECT_EQ(el::erf(-inf), -1.0);
  EXPECT_TRUE(std::isnan(el::erf(std::nan(""))));
  EXPECT_EQ(el::erfc(0.0), 1.0);
  EXPECT_EQ(el::erfc(-0.0), 1.0);
  EXPECT_EQ(el::erfc(inf), 0.0);
  EXPECT_FALSE(std::signbit(el::erfc(inf)));
  EXPECT_EQ(el::erfc(-inf), 2.0);
  EXPECT_TRUE(std::isnan(el::erfc(std::nan(""))));
  // erf rounds to ±1 from 5.92 on; erfc to 2 below −5.92 and underflows to +0 beyond 27.226.
  EXPECT_EQ(el::erf(6.0), 1.0);
  EXPECT_EQ(el::erf(-6.0), -1.0);
  EXPECT_EQ(el::erf(1e300), 1.0);
  EXPECT_EQ(el::erfc(-6.0), 2.0);
  EXPECT_EQ(el::erfc(27.3), 0.0);
  EXPECT_EQ(el::erfc(1e300), 0.0);
  EXPECT_GT(el::erfc(27.2), 0.0);
  const double dmin = std::numeric_limits<double>::denorm_min();
  EXPECT_EQ(el::erf(dmin), dmin);
  EXPECT_EQ(el::erf(-dmin), -dmin);
  EXPECT_EQ(el::erf(1e-300), static_cast<double>(erfl(1e-300L)));
  EXPECT_EQ(el::erf(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(el::erf(-0.0f)));
  EXPECT_EQ(el::erfc(-inf), 2.0);
  EXPECT_EQ(el::erfc(10.1f), 0.0f);
  EXPECT_EQ(el::erf(std::numeric_limits<float>::infinity()), 1.0f);
}

TEST(ElementaryErf, LanesGiveScalarBits) {
  const auto xd = arguments<double>([] { return uniform(-30, 30); }, 4096);
  const auto xs = arguments<double>([] { return uniform(-1.5, 1.5); }, 4096);
  for (const auto* v : {&xd, &xs}) {
    expect_lanes_match<double, 8>(
        erf_d, [](auto x) { return el::erf(x); }, *v);
    expect_lanes_match<double, 4>(
        erf_d, [](auto x) { return el::erf(x); }, *v);
    expect_lanes_match<double, 8>(
        erfc_d, [](auto x) { return el::erfc(x); }, *v);
    expect_lanes_match<double, 4>(
        erfc_d, [](auto x) { return el::erfc(x); }, *v);
  }
  const auto xf = arguments<float>([] { return uniform(-12, 12); }, 4096);
  expect_lanes_match<float, 16>(
      erf_f, [](auto x) { return el::erf(x); }, xf);
  expect_lanes_match<float, 16>(
      erfc_f, [](auto x) { return el::erfc(x); }, xf);
}

}  // namespace
