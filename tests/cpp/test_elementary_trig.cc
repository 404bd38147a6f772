// shoal::elementary::sin, cos, tan against sinl, cosl, tanl: error bounds in ulp over millions
// of points (the reduced range, |x| < 2^20, huge |x| through Payne–Hanek, arguments next to
// multiples of π/2, tiny ones), the special values of C99 F.10.1.5-7, float32 swept, and lanes
// giving the scalar bits.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "elementary_accuracy.hpp"
#include "shoal/elementary/trig.hpp"

namespace {

using namespace elementary_test;
namespace el = shoal::elementary;

// The double nearest k π/2 for a random k below 2^hi (k π/2 in long double, then rounded):
// r is then about an ulp of x, where the reduction cancels most.
double near_multiple(int hi) {
  const long double k = std::floor(std::exp2(uniform(0, hi)));
  return static_cast<double>(k * 1.570796326794896619231321691639751442L) *
         ((rng()() & 1) ? -1 : 1);
}

template <class F, class R>
void check_double(const char* name, F f, R ref, double bound) {
  const Worst reduced = measure<double>(f, ref, [] { return uniform(-0.786, 0.786); }, 600000);
  const Worst medium = measure<double>(f, ref, [] { return log_uniform(-10, 20, true); }, 600000);
  const Worst near = measure<double>(f, ref, [] { return near_multiple(20); }, 200000);
  const Worst huge = measure<double>(f, ref, [] { return log_uniform(20, 1024, true); }, 200000);
  const Worst huge_near = measure<double>(f, ref, [] { return near_multiple(62); }, 100000);
  const Worst tiny = measure<double>(f, ref, [] { return log_uniform(-1074, -10, true); }, 100000);
  for (const Worst* w : {&reduced, &medium, &near, &huge, &huge_near, &tiny}) {
    EXPECT_LT(w->ulp, bound) << name << " at x = " << w->x;
  }
  // The worst case of the reduction over all doubles (|x mod π/2| ~ 2^-61).
  const double worst = std::ldexp(6381956970095103.0, 797);
  EXPECT_LT(ulp_error<double>(f(worst), ref(static_cast<long double>(worst))), bound) << name;
  EXPECT_LT(ulp_error<double>(f(-worst), ref(-static_cast<long double>(worst))), bound) << name;
  std::printf("%s double: max %.4f ulp (|x| <= pi/4), %.4f (|x| < 2^20), %.4f (next to k pi/2), "
              "%.4f (|x| >= 2^20), %.4f (huge, next to k pi/2), %.4f (tiny)\n",
              name, reduced.ulp, medium.ulp, near.ulp, huge.ulp, huge_near.ulp, tiny.ulp);
}

TEST(ElementaryTrig, SinDoubleWithinBound) {
  check_double("sin", [](double x) { return el::sin(x); }, [](long double x) { return sinl(x); },
               0.57);
}
TEST(ElementaryTrig, CosDoubleWithinBound) {
  check_double("cos", [](double x) { return el::cos(x); }, [](long double x) { return cosl(x); },
               0.58);
}
TEST(ElementaryTrig, TanDoubleWithinBound) {
  check_double("tan", [](double x) { return el::tan(x); }, [](long double x) { return tanl(x); },
               0.64);
}

TEST(ElementaryTrig, FloatSweep) {
  const Worst s = sweep_float([](float x) { return el::sin(x); }, [](long double x) { return sinl(x); }, 1021);
  const Worst c = sweep_float([](float x) { return el::cos(x); }, [](long double x) { return cosl(x); }, 1021);
  const Worst t = sweep_float([](float x) { return el::tan(x); }, [](long double x) { return tanl(x); }, 1021);
  for (const Worst* w : {&s, &c, &t}) EXPECT_LT(w->ulp, 0.5001) << "at x = " << w->x;
  std::printf("float: sin max %.6f, cos %.6f, tan %.6f ulp over %ld values each\n", s.ulp, c.ulp,
              t.ulp, s.n);
}

TEST(ElementaryTrig, SpecialValues) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::nan("");
  for (double z : {0.0, -0.0}) {
    EXPECT_EQ(el::sin(z), z);
    EXPECT_EQ(std::signbit(el::sin(z)), std::signbit(z));
    EXPECT_EQ(el::tan(z), z);
    EXPECT_EQ(std::signbit(el::tan(z)), std::signbit(z));
    EXPECT_EQ(el::cos(z), 1.0);
    const float zf = static_cast<float>(z);
    EXPECT_EQ(std::signbit(el::sin(zf)), std::signbit(zf));
    EXPECT_EQ(std::signbit(el::tan(zf)), std::signbit(zf));
    EXPECT_EQ(el::cos(zf), 1.0f);
  }
  for (double x : {inf, -inf, nan}) {
    EXPECT_TRUE(std::isnan(el::sin(x)));
    EXPECT_TRUE(std::isnan(el::cos(x)));
    EXPECT_TRUE(std::isnan(el::tan(x)));
    EXPECT_TRUE(std::isnan(el::sin(static_cast<float>(x))));
    EXPECT_TRUE(std::isnan(el::cos(static_cast<float>(x))));
    EXPECT_TRUE(std::isnan(el::tan(static_cast<float>(x))));
  }
  const double dmin = std::numeric_limits<double>::denorm_min();
  EXPECT_EQ(el::sin(dmin), dmin);
  EXPECT_EQ(el::sin(-dmin), -dmin);
  EXPECT_EQ(el::tan(1e-300), 1e-300);
  EXPECT_EQ(el::sin(1e-9), 1e-9);
  EXPECT_EQ(el::cos(1e-9), 1.0);
  EXPECT_EQ(el::sin(std::numeric_limits<double>::max()),
            static_cast<double>(sinl(std::numeric_limits<double>::max())));
}

TEST(ElementaryTrig, LanesGiveScalarBits) {
  auto draw = [] {
    switch (rng()() % 4) {
      case 0: return uniform(-4, 4);
      case 1: return log_uniform(-30, 20, true);
      case 2: return near_multiple(30);
      default: return log_uniform(19, 1024, true);
    }
  };
  const auto xd = arguments<double>(draw, 4096);
  auto sd = [](double x) { return el::sin(x); };
  auto cd = [](double x) { return el::cos(x); };
  auto td = [](double x) { return el::tan(x); };
  expect_lanes_match<double, 8>(sd, [](auto x) { return el::sin(x); }, xd);
  expect_lanes_match<double, 4>(sd, [](auto x) { return el::sin(x); }, xd);
  expect_lanes_match<double, 8>(cd, [](auto x) { return el::cos(x); }, xd);
  expect_lanes_match<double, 4>(cd, [](auto x) { return el::cos(x); }, xd);
  expect_lanes_match<double, 8>(td, [](auto x) { return el::tan(x); }, xd);
  expect_lanes_match<double, 4>(td, [](auto x) { return el::tan(x); }, xd);
  const auto xf = arguments<float>(draw, 4096);
  expect_lanes_match<float, 16>([](float x) { return el::sin(x); }, [](auto x) { return el::sin(x); }, xf);
  expect_lanes_match<float, 16>([](float x) { return el::cos(x); }, [](auto x) { return el::cos(x); }, xf);
  expect_lanes_match<float, 16>([](float x) { return el::tan(x); }, [](auto x) { return el::tan(x); }, xf);
}

}  // namespace
