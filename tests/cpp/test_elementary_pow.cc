// shoal::elementary::pow against powl: error bounds in ulp over millions of (x, y) pairs (x in
// (0, 1e10] and y in [−300, 300], x near 1 with large y, negative x with integer y, results near
// overflow and subnormal), every special case of C99 F.10.4.4, float pairs, and lanes giving the
// scalar bits.
// g++ 12 at -O2 may defer popping a long double call's stack argument across a call of
// log_detail::log_dd and never pop it inside a measuring loop (the stack overflows after a
// million points): not deferring pops in this file avoids it.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-defer-pop")
#endif
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "elementary_accuracy.hpp"
#include "shoal/elementary/pow.hpp"

namespace {

using namespace elementary_test;
namespace el = shoal::elementary;

const double inf = std::numeric_limits<double>::infinity();
const double nan_ = std::numeric_limits<double>::quiet_NaN();

struct Pair {
  double x, y;
};

// The error over n pairs drawn by `draw`.
template <class T, class D>
Worst measure_pow(D draw, long n) {
  Worst w;
  for (long i = 0; i < n; ++i) {
    const Pair p = draw();
    const T x = static_cast<T>(p.x), y = static_cast<T>(p.y);
    w.add(ulp_error<T>(el::pow(x, y), powl(static_cast<long double>(x), static_cast<long double>(y))),
          x, y);
  }
  return w;
}

// y for a target exponent t = y ln x.
Pair with_exponent(double x, double t) { return {x, t / std::log(x)}; }

TEST(ElementaryPow, DoubleWithinBound) {
  // x in (0, 1e10], y in [−300, 300], the result a normal number.
  const Worst wide = measure_pow<double>(
      [] {
        for (;;) {
          const double x = log_uniform(-60, 33.2), y = uniform(-300, 300);
          const double e = y * std::log2(x);
          if (e > -1021 && e < 1023.9) return Pair{x, y};
        }
      },
      1000000);
  // x near 1 (1 ± 2^-52 .. 2^-1) with |y ln x| up to 700.
  const Worst near1 = measure_pow<double>(
      [] { return with_exponent(1.0 + log_uniform(-52, -1, true), uniform(-700, 700)); }, 600000);
  // Negative x, integer y.
  const Worst negative = measure_pow<double>(
      [] {
        const double x = -log_uniform(-8, 8);
        const double y = std::round(uniform(-120, 120));
        return Pair{x, y};
      },
      300000);
  // Results near overflow (exponent in [700, 709.78]) and near the smallest normals.
  const Worst big = measure_pow<double>(
      [] { return with_exponent(log_uniform(-30, 30), uniform(700, 709.78)); }, 200000);
  // Subnormal results: rounded twice, as exp's.
  const Worst subnormal = measure_pow<double>(
      [] { return with_exponent(log_uniform(-30, 30), uniform(-745.1, -708.4)); }, 200000);
  for (const Worst* w : {&wide, &near1, &negative, &big}) {
    EXPECT_LT(w->ulp, 0.66) << "at x = " << w->x << ", y = " << w->x2;
  }
  EXPECT_LT(subnormal.ulp, 1.0) << "at x = " << subnormal.x << ", y = " << subnormal.x2;
  std::printf("pow double: max %.4f ulp (x in (0, 1e10], |y| <= 300: at %.17g, %.17g), %.4f (x "
              "near 1: at %.17g, %.17g), %.4f (x < 0, integer y: at %.17g, %.17g), %.4f (near "
              "overflow: at %.17g, %.17g), %.4f (subnormal results: at %.17g, %.17g)\n",
              wide.ulp, wide.x, wide.x2, near1.ulp, near1.x, near1.x2, negative.ulp, negative.x,
              negative.x2, big.ulp, big.x, big.x2, subnormal.ulp, subnormal.x, subnormal.x2);
}

TEST(ElementaryPow, Float) {
  const Worst wide = measure_pow<float>(
      [] {
        for (;;) {
          const double x = log_uniform(-149, 128), y = uniform(-40, 40);
          const double e = y * std::log2(static_cast<float>(x));
          if (e > -149 && e < 128) return Pair{x, y};
        }
      },
      600000);
  const Worst near1 = measure_pow<float>(
      [] { return with_exponent(1.0 + log_uniform(-23, -1, true), uniform(-80, 80)); }, 300000);
  const Worst negative = measure_pow<float>(
      [] { return Pair{-log_uniform(-4, 4), std::round(uniform(-30, 30))}; }, 100000);
  for (const Worst* w : {&wide, &near1, &negative}) {
    EXPECT_LT(w->ulp, 0.5001) << "at x = " << w->x << ", y = " << w->x2;
  }
  std::printf("pow float: max %.6f ulp (wide), %.6f (x near 1), %.6f (x < 0)\n", wide.ulp,
              near1.ulp, negative.ulp);
}

TEST(ElementaryPow, SpecialValues) {
  auto pw = [](double x, double y) { return el::pow(x, y); };
  auto is_pos0 = [](double v) { return v == 0 && !std::signbit(v); };
  auto is_neg0 = [](double v) { return v == 0 && std::signbit(v); };
  const double finite[] = {-3.5, -2.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.0, 3.0, 1e300, -1e300};
  // pow(x, ±0) = 1 for any x, even NaN; pow(1, y) = 1 for any y, even NaN.
  for (double x : {0.0, -0.0, 1.0, -1.0, 2.5, -2.5, inf, -inf, nan_, 1e-310}) {
    EXPECT_EQ(pw(x, 0.0), 1.0) << x;
    EXPECT_EQ(pw(x, -0.0), 1.0) << x;
  }
  for (double y : {0.0, 1.0, -1.0, 0.5, 1e300, -1e300, inf, -inf, nan_}) {
    EXPECT_EQ(pw(1.0, y), 1.0) << y;
  }
  // pow(±0, y): odd integer y < 0 -> ±inf; other y < 0 -> +inf; odd y > 0 -> ±0; other -> +0.
  EXPECT_EQ(pw(0.0, -3.0), inf);
  EXPECT_EQ(pw(-0.0, -3.0), -inf);
  EXPECT_EQ(pw(-0.0, -1.0), -inf);
  for (double y : {-2.0, -0.5, -1e300, -0x1p53, -(0x1p53 + 2), -inf}) {
    EXPECT_EQ(pw(0.0, y), inf) << y;
    EXPECT_EQ(pw(-0.0, y), inf) << y;
  }
  EXPECT_TRUE(is_pos0(pw(0.0, 3.0)));
  EXPECT_TRUE(is_neg0(pw(-0.0, 3.0)));
  EXPECT_TRUE(is_neg0(pw(-0.0, 0x1p53 - 1)));
  for (double y : {2.0, 0.5, 1e300, 0x1p53, 0x1p53 + 2, inf}) {
    EXPECT_TRUE(is_pos0(pw(0.0, y))) << y;
    EXPECT_TRUE(is_pos0(pw(-0.0, y))) << y;
  }
  // pow(−1, ±inf) = 1.
  EXPECT_EQ(pw(-1.0, inf), 1.0);
  EXPECT_EQ(pw(-1.0, -inf), 1.0);
  // pow(x, ±inf) by |x| against 1.
  for (double x : {0.5, -0.5, 1e-300, -0.999999999999, 4.9e-324}) {
    EXPECT_EQ(pw(x, -inf), inf) << x;
    EXPECT_TRUE(is_pos0(pw(x, inf))) << x;
  }
  for (double x : {1.5, -1.5, 1e300, -1.0000000000000002, 1.0000000000000002}) {
    EXPECT_TRUE(is_pos0(pw(x, -inf))) << x;
    EXPECT_EQ(pw(x, inf), inf) << x;
  }
  // pow(−inf, y) and pow(+inf, y).
  EXPECT_TRUE(is_neg0(pw(-inf, -3.0)));
  EXPECT_TRUE(is_pos0(pw(-inf, -2.0)));
  EXPECT_TRUE(is_pos0(pw(-inf, -0.5)));
  EXPECT_TRUE(is_pos0(pw(-inf, -inf)));
  EXPECT_EQ(pw(-inf, 3.0), -inf);
  EXPECT_EQ(pw(-inf, 2.0), inf);
  EXPECT_EQ(pw(-inf, 0.5), inf);
  EXPECT_EQ(pw(-inf, inf), inf);
  EXPECT_EQ(pw(-inf, 0x1p60), inf);
  EXPECT_TRUE(is_pos0(pw(inf, -1.0)));
  EXPECT_TRUE(is_pos0(pw(inf, -inf)));
  EXPECT_TRUE(is_pos0(pw(inf, -1e-300)));
  EXPECT_EQ(pw(inf, 1e-300), inf);
  EXPECT_EQ(pw(inf, inf), inf);
  // x < 0 finite, y finite non-integer: NaN; integer y: the sign from the parity.
  for (double x : {-0.5, -1.0, -2.0, -1e300, -4.9e-324}) {
    for (double y : {0.5, -0.5, 2.25, -1e-300, 0x1p51 + 0.5, -(0x1p50 + 0.25)}) {
      EXPECT_TRUE(std::isnan(pw(x, y))) << x << " " << y;
    }
  }
  EXPECT_EQ(pw(-2.0, 3.0), -8.0);
  EXPECT_EQ(pw(-2.0, 2.0), 4.0);
  EXPECT_EQ(pw(-2.0, -1.0), -0.5);
  EXPECT_EQ(pw(-1.0, 0x1p53 - 1), -1.0);  // odd
  EXPECT_EQ(pw(-1.0, 0x1p52 + 1), -1.0);  // odd
  EXPECT_EQ(pw(-1.0, 0x1p53), 1.0);       // even
  EXPECT_EQ(pw(-1.0, 1e300), 1.0);
  EXPECT_EQ(pw(-1.0, -1e300), 1.0);
  EXPECT_EQ(pw(-1.0, 0x1p52), 1.0);
  EXPECT_EQ(pw(-1.0, 1.0), -1.0);
  EXPECT_EQ(pw(-1.0, -1.0), -1.0);
  EXPECT_EQ(pw(-0.5, 1075.0), -0.0);
  EXPECT_TRUE(is_neg0(pw(-0.5, 1075.0)));
  EXPECT_EQ(pw(-2.0, 1025.0), -inf);
  EXPECT_EQ(pw(-2.0, 1024.0), inf);
  // NaN propagates otherwise.
  for (double v : finite) {
    if (v != 1.0) {
      EXPECT_TRUE(std::isnan(pw(v, nan_))) << v;
    }
    if (v != 0.0) {
      EXPECT_TRUE(std::isnan(pw(nan_, v))) << v;
    }
  }
  EXPECT_TRUE(std::isnan(pw(nan_, nan_)));
  EXPECT_TRUE(std::isnan(pw(nan_, inf)));
  EXPECT_TRUE(std::isnan(pw(-inf, nan_)));
  // Overflow and underflow, huge y.
  EXPECT_EQ(pw(10.0, 309.0), inf);
  EXPECT_TRUE(is_pos0(pw(10.0, -324.0)));
  EXPECT_EQ(pw(1.0000000000000002, 1e300), inf);
  EXPECT_TRUE(is_pos0(pw(0.9999999999999999, 1e300)));
  EXPECT_TRUE(is_pos0(pw(1.0000000000000002, -1e300)));
  EXPECT_EQ(pw(1.0000000000000002, 0x1p52), std::exp(1.0));
  EXPECT_EQ(pw(0.99999999999999989, 0x1p62), 0x1.44109edb2088fp-739);  // y beyond 2^53: e^(-512 - 2^-45)
  EXPECT_EQ(pw(2.0, -1074.0), 4.9e-324);
  EXPECT_EQ(pw(2.0, 1023.0), 0x1p1023);
  EXPECT_EQ(pw(4.9e-324, 1.0), 4.9e-324);
  EXPECT_EQ(pw(4.9e-324, -0.5), 0x1p537);
  EXPECT_EQ(pw(0x1p-1074, 1.0 / 1074), 0.5);
  // Exact cases.
  EXPECT_EQ(pw(2.0, 0.5), std::sqrt(2.0));
  EXPECT_EQ(pw(3.0, 2.0), 9.0);
  EXPECT_EQ(pw(10.0, 22.0), 1e22);
  // float.
  EXPECT_EQ(el::pow(-2.0f, 3.0f), -8.0f);
  EXPECT_TRUE(std::isnan(el::pow(-2.0f, 0.5f)));
  EXPECT_EQ(el::pow(0.0f, -1.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(el::pow(2.0f, 128.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(el::pow(std::nanf(""), 0.0f), 1.0f);
}

template <class T, int W>
void expect_pow_lanes(const std::vector<T>& xs, const std::vector<T>& ys) {
  using L = shoal::simd::Lanes<T, W>;
  for (size_t i = 0; i + W <= xs.size(); i += W) {
    L x, y;
    for (int l = 0; l < W; ++l) x.set(l, xs[i + l]), y.set(l, ys[i + l]);
    const L r = el::pow(x, y);
    for (int l = 0; l < W; ++l) {
      const T s = el::pow(xs[i + l], ys[i + l]);
      ASSERT_TRUE(same_bits(r[l], s)) << "lane " << l << " of W = " << W << ": pow(" << xs[i + l]
                                      << ", " << ys[i + l] << ") gives " << r[l] << ", the scalar "
                                      << s;
    }
  }
}

TEST(ElementaryPow, LanesGiveScalarBits) {
  const double specials[] = {0.0, -0.0, inf, -inf, nan_, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0,
                             -3.0, 0x1p53, 0x1p53 + 2, 0x1p52 + 1, 4.9e-324, 1e300, -1e300, 0.25,
                             -std::nan("7")};  // two NaNs of different payload meet
  std::vector<double> xd, yd;
  for (double a : specials) {
    for (double b : specials) xd.push_back(a), yd.push_back(b);
  }
  for (int i = 0; i < 4096; ++i) {
    xd.push_back(log_uniform(-1074, 1024, true));
    yd.push_back((i & 1) ? std::round(uniform(-50, 50)) : uniform(-400, 400));
  }
  while (xd.size() % 16) xd.push_back(1.5), yd.push_back(2.5);
  expect_pow_lanes<double, 8>(xd, yd);
  expect_pow_lanes<double, 4>(xd, yd);
  std::vector<float> xf, yf;
  for (size_t i = 0; i < xd.size(); ++i) {
    xf.push_back(static_cast<float>(xd[i] < 1e-300 && xd[i] > 0 ? 1e-40 : xd[i]));
    yf.push_back(static_cast<float>(yd[i] / 8));
  }
  expect_pow_lanes<float, 16>(xf, yf);
}

}  // namespace
