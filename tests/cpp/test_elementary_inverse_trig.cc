// shoal::elementary::atan, atan2, asin, acos against atanl, atan2l, asinl, acosl: error bounds in ulp over millions of
// points (every reduction interval and its edges, tiny and huge arguments, all quadrants and
// exponent ranges for atan2), the special values of C99 F.10.1.1 and F.10.1.4, float32 swept
// (atan; atan2 on random float pairs), and lanes giving the scalar bits.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "elementary_accuracy.hpp"
#include "shoal/elementary/inverse_trig.hpp"

namespace {

using namespace elementary_test;
namespace el = shoal::elementary;

auto atan_d = [](double x) { return el::atan(x); };
auto atan_ref = [](long double x) { return atanl(x); };

// Next to the interval edges 7/16, 11/16, 19/16, 39/16 of the reduction.
double near_edge() {
  static const double edges[] = {0.4375, 0.6875, 1.1875, 2.4375};
  const double e = edges[rng()() % 4];
  return e * (1 + uniform(-1e-6, 1e-6)) * ((rng()() & 1) ? -1 : 1);
}

template <class D>
Worst measure2(D draw, long n) {
  Worst w;
  for (long i = 0; i < n; ++i) {
    double y, x;
    draw(y, x);
    w.add(ulp_error<double>(el::atan2(y, x), atan2l(static_cast<long double>(y),
                                                     static_cast<long double>(x))),
          y, x);
  }
  return w;
}
double signed_(double v) { return (rng()() & 1) ? -v : v; }

TEST(ElementaryInverseTrig, AtanDoubleWithinBound) {
  const Worst unit = measure<double>(atan_d, atan_ref, [] { return uniform(-2.5, 2.5); }, 1000000);
  const Worst wide = measure<double>(atan_d, atan_ref, [] { return log_uniform(-30, 64, true); },
                                     1000000);
  const Worst edges = measure<double>(atan_d, atan_ref, near_edge, 200000);
  const Worst extreme = measure<double>(
      atan_d, atan_ref, [] { return (rng()() & 1) ? log_uniform(-1074, -30, true)
                                                  : log_uniform(64, 1024, true); }, 100000);
  for (const Worst* w : {&unit, &wide, &edges, &extreme}) {
    EXPECT_LT(w->ulp, 0.66) << "at x = " << w->x;
  }
  std::printf("atan double: max %.4f ulp (|x| <= 2.5), %.4f (2^-30..2^64), %.4f (interval "
              "edges), %.4f (tiny, huge)\n", unit.ulp, wide.ulp, edges.ulp, extreme.ulp);
}

TEST(ElementaryInverseTrig, Atan2DoubleWithinBound) {
  const Worst unit = measure2([](double& y, double& x) {
    y = uniform(-3, 3);
    x = uniform(-3, 3);
  }, 1000000);
  const Worst ratio = measure2([](double& y, double& x) {
    x = log_uniform(-20, 20, true);
    y = x * (rng()() & 1 ? near_edge() : log_uniform(-70, 70, true));
  }, 500000);
  const Worst wide = measure2([](double& y, double& x) {
    x = log_uniform(-1074, 1024, true);
    y = log_uniform(-1074, 1024, true);
  }, 300000);
  const Worst close = measure2([](double& y, double& x) {  // large and tiny pairs, ratio ~ 1
    x = log_uniform(-1074, 1024, true);
    y = signed_(std::fabs(x) * uniform(0.1, 10));
  }, 200000);
  for (const Worst* w : {&unit, &ratio, &wide, &close}) {
    EXPECT_LT(w->ulp, 0.7) << "at y = " << w->x << ", x = " << w->x2;
  }
  std::printf("atan2 double: max %.4f ulp (|x|, |y| <= 3), %.4f (ratios 2^-70..2^70 and "
              "interval edges), %.4f (all exponents), %.4f (ratio ~1 at all exponents)\n",
              unit.ulp, ratio.ulp, wide.ulp, close.ulp);
}

template <class F, class R>
void check_asin_acos(const char* name, F f, R ref, double bound) {
  const Worst unit = measure<double>(f, ref, [] { return uniform(-1, 1); }, 800000);
  const Worst half = measure<double>(f, ref, [] { return uniform(-0.5, 0.5); }, 400000);
  const Worst edge = measure<double>(f, ref, [] { return signed_(0.5 + uniform(-1e-6, 1e-6)); },
                                     100000);
  const Worst one = measure<double>(f, ref, [] { return signed_(1 - std::exp2(-uniform(1, 53))); },
                                    300000);
  const Worst tiny = measure<double>(f, ref, [] { return log_uniform(-1074, -1, true); }, 100000);
  for (const Worst* w : {&unit, &half, &edge, &one, &tiny}) {
    EXPECT_LT(w->ulp, bound) << name << " at x = " << w->x;
  }
  std::printf("%s double: max %.4f ulp (|x| <= 1), %.4f (|x| <= 1/2), %.4f (|x| near 1/2), "
              "%.4f (|x| near 1), %.4f (tiny)\n", name, unit.ulp, half.ulp, edge.ulp, one.ulp,
              tiny.ulp);
}

TEST(ElementaryInverseTrig, AsinDoubleWithinBound) {
  check_asin_acos("asin", [](double x) { return el::asin(x); },
                  [](long double x) { return asinl(x); }, 0.7);
}
TEST(ElementaryInverseTrig, AcosDoubleWithinBound) {
  check_asin_acos("acos", [](double x) { return el::acos(x); },
                  [](long double x) { return acosl(x); }, 0.7);
}

TEST(ElementaryInverseTrig, FloatSweep) {
  const Worst as = sweep_float([](float x) { return el::asin(x); },
                               [](long double x) { return asinl(x); }, 1531);
  const Worst ac = sweep_float([](float x) { return el::acos(x); },
                               [](long double x) { return acosl(x); }, 1531);
  EXPECT_LT(as.ulp, 0.5001) << "asin at x = " << as.x;
  EXPECT_LT(ac.ulp, 0.5001) << "acos at x = " << ac.x;
  std::printf("float: asin max %.6f ulp, acos %.6f\n", as.ulp, ac.ulp);
  const Worst w = sweep_float([](float x) { return el::atan(x); }, atan_ref, 1021);
  EXPECT_LT(w.ulp, 0.5001) << "at x = " << w.x;
  Worst w2;
  for (int i = 0; i < 1000000; ++i) {
    const float y = static_cast<float>(log_uniform(-149, 128, true));
    const float x = static_cast<float>(i % 2 ? log_uniform(-149, 128, true)
                                              : signed_(std::fabs(y) * uniform(0.1, 10)));
    w2.add(ulp_error<float>(el::atan2(y, x), atan2l(static_cast<long double>(y),
                                                    static_cast<long double>(x))),
           y, x);
  }
  EXPECT_LT(w2.ulp, 0.5001) << "at y = " << w2.x << ", x = " << w2.x2;
  std::printf("float: atan max %.6f ulp over %ld values, atan2 %.6f over %ld pairs\n", w.ulp,
              w.n, w2.ulp, w2.n);
}

TEST(ElementaryInverseTrig, SpecialValues) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::nan("");
  const double pi = 3.141592653589793, pio2 = 1.5707963267948966, pio4 = 0.7853981633974483;
  auto same = [](double a, double b) { return same_bits(a, b); };
  EXPECT_TRUE(same(el::atan(0.0), 0.0));
  EXPECT_TRUE(same(el::atan(-0.0), -0.0));
  EXPECT_EQ(el::atan(inf), pio2);
  EXPECT_EQ(el::atan(-inf), -pio2);
  EXPECT_TRUE(std::isnan(el::atan(nan)));
  EXPECT_EQ(el::atan(1.0), pio4);
  EXPECT_EQ(el::atan(1e-300), 1e-300);
  const double dmin = std::numeric_limits<double>::denorm_min();
  EXPECT_TRUE(same(el::atan(-dmin), -dmin));
  EXPECT_EQ(el::atan(1e300), pio2);
  for (double s : {1.0, -1.0}) {
    const double z = std::copysign(0.0, s);
    EXPECT_TRUE(same(el::atan2(z, -0.0), s * pi));
    EXPECT_TRUE(same(el::atan2(z, 0.0), z));
    EXPECT_TRUE(same(el::atan2(z, -2.0), s * pi));
    EXPECT_TRUE(same(el::atan2(z, -inf), s * pi));
    EXPECT_TRUE(same(el::atan2(z, 2.0), z));
    EXPECT_TRUE(same(el::atan2(z, inf), z));
    EXPECT_TRUE(same(el::atan2(s * 3.0, 0.0), s * pio2));
    EXPECT_TRUE(same(el::atan2(s * 3.0, -0.0), s * pio2));
    EXPECT_TRUE(same(el::atan2(s * 3.0, -inf), s * pi));
    EXPECT_TRUE(same(el::atan2(s * 3.0, inf), z));
    EXPECT_TRUE(same(el::atan2(s * inf, 5.0), s * pio2));
    EXPECT_TRUE(same(el::atan2(s * inf, -5.0), s * pio2));
    EXPECT_TRUE(same(el::atan2(s * inf, 0.0), s * pio2));
    EXPECT_TRUE(same(el::atan2(s * inf, -inf), s * 2.356194490192345));
    EXPECT_TRUE(same(el::atan2(s * inf, inf), s * pio4));
    EXPECT_TRUE(same(el::atan2(s * 1.0, 1.0), s * pio4));
    EXPECT_TRUE(same(el::atan2(s * dmin, 1e300), z));
    EXPECT_TRUE(same(el::atan2(s * 1e300, dmin), s * pio2));
    const float zf = static_cast<float>(z);
    EXPECT_TRUE(std::signbit(el::atan2(zf, 1.0f)) == std::signbit(zf));
    EXPECT_EQ(el::atan2(zf, -0.0f), static_cast<float>(s * pi));
  }
  for (double v : {0.0, 1.0, inf, nan}) {
    EXPECT_TRUE(std::isnan(el::atan2(nan, v)));
    EXPECT_TRUE(std::isnan(el::atan2(v, nan)));
  }
  EXPECT_TRUE(std::isnan(el::atan(std::nanf(""))));
  EXPECT_TRUE(same(el::asin(0.0), 0.0));
  EXPECT_TRUE(same(el::asin(-0.0), -0.0));
  EXPECT_TRUE(same(el::acos(1.0), 0.0));
  EXPECT_EQ(el::acos(-1.0), pi);
  EXPECT_EQ(el::acos(0.0), pio2);
  EXPECT_EQ(el::acos(-0.0), pio2);
  EXPECT_EQ(el::asin(1.0), pio2);
  EXPECT_EQ(el::asin(-1.0), -pio2);
  EXPECT_TRUE(same(el::asin(-dmin), -dmin));
  EXPECT_EQ(el::acos(0.5), 1.0471975511965979);
  for (double v : {1.0000000000000002, -1.0000000000000002, 2.0, -2.0, inf, -inf, nan}) {
    EXPECT_TRUE(std::isnan(el::asin(v))) << v;
    EXPECT_TRUE(std::isnan(el::acos(v))) << v;
  }
  for (float v : {1.0000001f, -1.0000001f, 2.0f, -2.0f, static_cast<float>(inf),
                  static_cast<float>(-inf), std::nanf("")}) {
    EXPECT_TRUE(std::isnan(el::asin(v))) << v;
    EXPECT_TRUE(std::isnan(el::acos(v))) << v;
  }
  EXPECT_TRUE(same_bits(el::acos(1.0f), 0.0f));
  EXPECT_TRUE(same_bits(el::asin(-0.0f), -0.0f));
  EXPECT_EQ(el::atan(std::numeric_limits<float>::infinity()), static_cast<float>(pio2));
}

TEST(ElementaryInverseTrig, LanesGiveScalarBits) {
  auto draw = [] {
    switch (rng()() % 4) {
      case 0: return uniform(-4, 4);
      case 1: return log_uniform(-30, 30, true);
      case 2: return near_edge();
      default: return log_uniform(-1074, 1024, true);
    }
  };
  const auto xd = arguments<double>(draw, 4096);
  expect_lanes_match<double, 8>(atan_d, [](auto x) { return el::atan(x); }, xd);
  expect_lanes_match<double, 4>(atan_d, [](auto x) { return el::atan(x); }, xd);
  const auto xf = arguments<float>(draw, 4096);
  expect_lanes_match<float, 16>([](float x) { return el::atan(x); },
                                [](auto x) { return el::atan(x); }, xf);
  const auto ud = arguments<double>([] { return uniform(-1.1, 1.1); }, 4096);
  const auto uf = arguments<float>([] { return uniform(-1.1, 1.1); }, 4096);
  auto asin_d = [](double x) { return el::asin(x); };
  auto acos_d = [](double x) { return el::acos(x); };
  expect_lanes_match<double, 8>(asin_d, [](auto x) { return el::asin(x); }, ud);
  expect_lanes_match<double, 4>(asin_d, [](auto x) { return el::asin(x); }, ud);
  expect_lanes_match<double, 8>(acos_d, [](auto x) { return el::acos(x); }, ud);
  expect_lanes_match<double, 4>(acos_d, [](auto x) { return el::acos(x); }, ud);
  expect_lanes_match<float, 16>([](float x) { return el::asin(x); },
                                [](auto x) { return el::asin(x); }, uf);
  expect_lanes_match<float, 16>([](float x) { return el::acos(x); },
                                [](auto x) { return el::acos(x); }, uf);
  // atan2: y from one list, x from the same list shifted (all pairs of specials meet).
  auto pairs = [](auto xs, auto scalar2, auto vector2, auto tag) {
    using T = decltype(tag);
    constexpr int W = 64 / sizeof(T);
    using L = shoal::simd::Lanes<T, W>;
    for (size_t shift : {size_t(0), size_t(1), size_t(5), size_t(11), size_t(37)}) {
      for (size_t i = 0; i + W <= xs.size(); i += W) {
        L y, x;
        for (int l = 0; l < W; ++l) {
          y.set(l, xs[i + l]);
          x.set(l, xs[(i + l + shift) % xs.size()]);
        }
        const L r = vector2(y, x);
        for (int l = 0; l < W; ++l) {
          const T s = scalar2(y[l], x[l]);
          ASSERT_TRUE(same_bits(r[l], s)) << "y = " << y[l] << ", x = " << x[l];
        }
      }
    }
  };
  std::vector<double> specials = xd;
  specials.resize(specials.size() - 16 - (specials.size() % 16));
  for (double v : {0.0, -0.0, std::numeric_limits<double>::infinity(),
                   -std::numeric_limits<double>::infinity(), std::nan(""), 1.0, -1.0, 1e-310,
                   1e300, -2.0, 0.0, -0.0, 3.0, -3.0, -std::nan("7"), 7.0})
    specials.push_back(v);
  pairs(specials, [](double y, double x) { return el::atan2(y, x); },
        [](auto y, auto x) { return el::atan2(y, x); }, 0.0);
  std::vector<float> specials_f(specials.begin(), specials.end());
  pairs(specials_f, [](float y, float x) { return el::atan2(y, x); },
        [](auto y, auto x) { return el::atan2(y, x); }, 0.0f);
  // And the double lanes of width 4.
  for (size_t i = 0; i + 4 <= specials.size(); i += 4) {
    shoal::simd::Lanes<double, 4> y, x;
    for (int l = 0; l < 4; ++l) {
      y.set(l, specials[i + l]);
      x.set(l, specials[(i + l + 3) % specials.size()]);
    }
    const auto r = el::atan2(y, x);
    for (int l = 0; l < 4; ++l) ASSERT_TRUE(same_bits(r[l], el::atan2(y[l], x[l])));
  }
}

}  // namespace
