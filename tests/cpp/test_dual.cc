// Forward-mode dual numbers: every function against its analytic derivative and against central
// differences, grouped by family; several tangent directions at once; mixed Dual/scalar
// arithmetic; comparisons; nested duals for second derivatives and mixed partials; the
// derivative conventions at kinks and zeros; float duals; and the vector-mode Jacobian with ∂f/∂t.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "shoal/ad/dual.hpp"
#include "shoal/ad/jacobian.hpp"
#include "shoal/math.hpp"

namespace {

using shoal::ad::Dual;
using shoal::ad::variable;
using D3 = Dual<double, 3>;
using D1 = Dual<double, 1>;
using DD = Dual<D1, 1>;  // second derivatives

constexpr double kPi = 3.14159265358979323846;
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;

// Three directions with different seeds: the tangent of f(x) in direction k is f'(x) seed[k].
constexpr double kSeed[3] = {1.0, -2.5, 0.375};

D3 seeded(double x) {
  D3 r(x);
  for (int k = 0; k < 3; ++k) r.d[k] = kSeed[k];
  return r;
}

// Central difference with one Richardson step: error O(h^4) + O(eps/h).
template <class F>
double central_difference(F f, double x, double h = 1e-3) {
  auto diff = [&](double s) { return (f(x + s) - f(x - s)) / (2 * s); };
  return (4 * diff(h / 2) - diff(h)) / 3;
}

// f is a generic lambda usable on double and on duals; fprime is the analytic derivative at x.
template <class F>
void check_unary(const char* name, F f, double x, double fprime) {
  SCOPED_TRACE(::testing::Message() << name << " at x = " << x);
  const D3 r = f(seeded(x));
  EXPECT_EQ(r.v, f(x)) << "the value is the scalar function's";
  const double scale = std::max(1.0, std::abs(fprime));
  for (int k = 0; k < 3; ++k) EXPECT_NEAR(r.d[k], fprime * kSeed[k], 1e-14 * scale) << "dir " << k;
  EXPECT_NEAR(central_difference(f, x), fprime, 1e-8 * scale) << "analytic vs finite difference";
}

// Second derivative by a nested dual: x = (x + ε₁) + ε₂ with ε₁ ε₂ kept.
DD nested_variable(double x) { return variable<D1, 1>(variable<double, 1>(x, 0), 0); }

template <class F>
void check_second(const char* name, F f, double x, double fprime, double fsecond) {
  SCOPED_TRACE(::testing::Message() << name << " at x = " << x);
  const DD r = f(nested_variable(x));
  EXPECT_EQ(r.v.v, f(x));
  const double s1 = std::max(1.0, std::abs(fprime)), s2 = std::max(1.0, std::abs(fsecond));
  EXPECT_NEAR(r.v.d[0], fprime, 1e-14 * s1);
  EXPECT_NEAR(r.d[0].v, fprime, 1e-14 * s1);
  EXPECT_NEAR(r.d[0].d[0], fsecond, 2e-14 * s2);
  // f'' by central differences of the (dual-computed) first derivative.
  auto first = [&](double z) { return f(variable<double, 1>(z, 0)).d[0]; };
  EXPECT_NEAR(central_difference(first, x), fsecond, 1e-7 * s2);
}

#define FN(expr)      \
  [](auto x) {        \
    SHOAL_MATH_USING; \
    return expr;      \
  }

// ---- arithmetic ---------------------------------------------------------------------------------

TEST(DualArithmetic, TwoVariablesInSeparateDirections) {
  const D3 x = variable<double, 3>(1.5, 0), y = variable<double, 3>(-0.4, 1);
  const D3 sum = x + y, diff = x - y, prod = x * y, quot = x / y, neg = -x, pos = +y;
  EXPECT_EQ(sum.v, 1.1);
  EXPECT_EQ(sum.d[0], 1.0);
  EXPECT_EQ(sum.d[1], 1.0);
  EXPECT_EQ(sum.d[2], 0.0);
  EXPECT_EQ(diff.d[0], 1.0);
  EXPECT_EQ(diff.d[1], -1.0);
  EXPECT_EQ(prod.v, 1.5 * -0.4);
  EXPECT_EQ(prod.d[0], -0.4);
  EXPECT_EQ(prod.d[1], 1.5);
  EXPECT_NEAR(quot.v, 1.5 / -0.4, 1e-15);
  EXPECT_NEAR(quot.d[0], 1 / -0.4, 1e-15);
  EXPECT_NEAR(quot.d[1], -1.5 / (0.4 * 0.4), 1e-14);
  EXPECT_EQ(quot.d[2], 0.0);
  EXPECT_EQ(neg.v, -1.5);
  EXPECT_EQ(neg.d[0], -1.0);
  EXPECT_EQ(pos.d[1], 1.0);
}

TEST(DualArithmetic, MixedWithScalarsOnEitherSide) {
  const D3 x = seeded(2.0);
  const D3 r[] = {x + 3,    3 + x,  x - 0.5, 0.5 - x, x * 4.0f,
                  4.0f * x, x / 8L, 8L / x,  x * 2u,  true * x};
  const double value[] = {5, 5, 1.5, -1.5, 8, 8, 0.25, 4, 4, 2};
  const double slope[] = {1, 1, 1, -1, 4, 4, 0.125, -2, 2, 1};
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(r[i].v, value[i]) << "case " << i;
    for (int k = 0; k < 3; ++k) EXPECT_EQ(r[i].d[k], slope[i] * kSeed[k]) << "case " << i;
  }
}

TEST(DualArithmetic, CompoundAssignmentAndConstants) {
  D3 x = seeded(1.0);
  x += 2.0;          // 3, d
  x *= seeded(3.0);  // 9, 3d + 3d = 6d
  x -= 1;            // 8, 6d
  x /= D3(4.0);      // 2, 1.5d
  EXPECT_EQ(x.v, 2.0);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(x.d[k], 1.5 * kSeed[k]);
  const D3 c(7.0), z{};  // value-initialised: zero (a plain `D3 z;` is not, as a double)
  EXPECT_EQ(c.v, 7.0);
  EXPECT_EQ(z.v, 0.0);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(c.d[k] + z.d[k], 0.0);
  EXPECT_EQ(static_cast<int>(seeded(3.7)), 3);  // explicit conversion drops tangents
  EXPECT_EQ(shoal::ad::primal(seeded(3.7)), 3.7);
  EXPECT_EQ(shoal::ad::primal(nested_variable(-1.25)), -1.25);
}

TEST(DualArithmetic, VariableSeedsOneDirectionAndIgnoresOutOfRange) {
  const D3 a = variable<double, 3>(2.0, 2), b = variable<double, 3>(2.0, 3),
           c = variable<double, 3>(2.0, -1);
  EXPECT_EQ(a.d[0], 0.0);
  EXPECT_EQ(a.d[2], 1.0);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(b.d[k] + c.d[k], 0.0);
}

TEST(DualArithmetic, GradientOfAThreeVariableFunction) {
  // f = x y sin z + exp(x / z): one evaluation gives the whole gradient.
  const double x0 = 0.7, y0 = -1.3, z0 = 2.1;
  const D3 x = variable<double, 3>(x0, 0), y = variable<double, 3>(y0, 1),
           z = variable<double, 3>(z0, 2);
  SHOAL_MATH_USING;
  const D3 f = x * y * sin(z) + exp(x / z);
  const double e = std::exp(x0 / z0);
  EXPECT_NEAR(f.v, x0 * y0 * std::sin(z0) + e, 1e-15);
  EXPECT_NEAR(f.d[0], y0 * std::sin(z0) + e / z0, 1e-14);
  EXPECT_NEAR(f.d[1], x0 * std::sin(z0), 1e-14);
  EXPECT_NEAR(f.d[2], x0 * y0 * std::cos(z0) - e * x0 / (z0 * z0), 1e-14);
}

TEST(DualComparisons, LookAtValuesOnly) {
  D3 a = seeded(1.0), b(1.0), c = seeded(2.0);
  b.d[0] = 99.0;
  EXPECT_TRUE(a == b);
  EXPECT_FALSE(a != b);
  EXPECT_TRUE(a <= b);
  EXPECT_TRUE(a >= b);
  EXPECT_TRUE(a < c);
  EXPECT_TRUE(c > a);
  EXPECT_FALSE(c < a);
  EXPECT_TRUE(a < 1.5);
  EXPECT_TRUE(1.5 > a);
  EXPECT_TRUE(a == 1);
  EXPECT_TRUE(2 >= c);
  EXPECT_TRUE(0.5f < a);
  EXPECT_FALSE(a > 1.0);
  const DD n = nested_variable(3.0);
  EXPECT_TRUE(n == 3.0);
  EXPECT_TRUE(n < 4);
  EXPECT_TRUE(-1.0 < n);
}

// ---- elementary functions, by family ------------------------------------------------------------

TEST(DualFunctions, ExponentialsAndLogarithms) {
  for (double x : {-1.3, 0.0, 0.7, 2.2}) {
    check_unary("exp", FN(exp(x)), x, std::exp(x));
    check_unary("exp2", FN(exp2(x)), x, std::exp2(x) * std::log(2.0));
    check_unary("expm1", FN(expm1(x)), x, std::exp(x));
  }
  for (double x : {0.3, 0.7, 3.5}) check_unary("log", FN(log(x)), x, 1 / x);
  for (double x : {-0.4, 0.0, 0.3, 5.0}) check_unary("log1p", FN(log1p(x)), x, 1 / (1 + x));
  // Near 0, expm1 and log1p keep the value's relative accuracy and have slope 1.
  const D3 em = shoal::ad::expm1(seeded(1e-12)), lp = shoal::ad::log1p(seeded(1e-12));
  EXPECT_NEAR(em.v, 1e-12, 1e-24);
  EXPECT_NEAR(lp.v, 1e-12, 1e-24);
  EXPECT_NEAR(em.d[1], kSeed[1], 1e-11);
  EXPECT_NEAR(lp.d[1], kSeed[1], 1e-11);
}

TEST(DualFunctions, RootsAndPowers) {
  for (double x : {0.3, 2.3, 9.0}) {
    check_unary("sqrt", FN(sqrt(x)), x, 0.5 / std::sqrt(x));
    check_unary("rsqrt", FN(rsqrt(x)), x, -0.5 * std::pow(x, -1.5));
  }
  for (double x : {-1.7, 0.3, 2.3}) {
    check_unary("cbrt", FN(cbrt(x)), x, 1 / (3 * std::cbrt(x) * std::cbrt(x)));
  }
  for (double x : {-1.2, 0.0, 0.8}) {
    check_unary("square", FN(square(x)), x, 2 * x);
    check_unary("integer_pow 3", FN(integer_pow(x, 3)), x, 3 * x * x);
    check_unary("integer_pow 5", FN(integer_pow(x, 5)), x, 5 * x * x * x * x);
    check_unary("integer_pow 0", FN(integer_pow(x, 0)), x, 0.0);
    check_unary("integer_pow 1", FN(integer_pow(x, 1)), x, 1.0);
  }
  for (double x : {-1.2, 0.8, 3.0}) {
    check_unary("integer_pow -2", FN(integer_pow(x, -2)), x, -2 / (x * x * x));
  }
  for (double x : {0.4, 1.3, 2.0}) {
    check_unary("pow(x, 2.5)", FN(pow(x, 2.5)), x, 2.5 * std::pow(x, 1.5));
    check_unary("pow(x, -0.5)", FN(pow(x, -0.5)), x, -0.5 * std::pow(x, -1.5));
    check_unary("pow(2, x)", FN(pow(2.0, x)), x, std::pow(2.0, x) * std::log(2.0));
    check_unary("pow(x, x)", FN(pow(x, x)), x, std::pow(x, x) * (std::log(x) + 1));
  }
  // Negative base with a constant integral exponent: only the base's derivative exists.
  for (double x : {-1.5, -0.3}) {
    check_unary("pow(x, 2.0)", FN(pow(x, 2.0)), x, 2 * x);
    check_unary("pow(x, 3)", FN(pow(x, 3)), x, 3 * x * x);
  }
}

TEST(DualFunctions, PowTwoDualArguments) {
  // ∂(a^b)/∂a = b a^{b-1}, ∂(a^b)/∂b = a^b ln a.
  const double a0 = 1.7, b0 = -0.6;
  const D3 a = variable<double, 3>(a0, 0), b = variable<double, 3>(b0, 2);
  const D3 r = shoal::ad::pow(a, b);
  EXPECT_EQ(r.v, std::pow(a0, b0));
  EXPECT_NEAR(r.d[0], b0 * std::pow(a0, b0 - 1), 1e-15);
  EXPECT_EQ(r.d[1], 0.0);
  EXPECT_NEAR(r.d[2], std::pow(a0, b0) * std::log(a0), 1e-15);
}

TEST(DualFunctions, ConstantsHaveZeroTangentsWhereTheSlopeIsInfinite) {
  using shoal::ad::log;
  using shoal::ad::sqrt;
  // A constant (a parameter inside a Jacobian sweep) at a point where the slope is infinite:
  // √0, log 0, asin 1 contribute nothing, instead of 0 · ∞ = NaN.
  for (const D3& r : {sqrt(D3(0.0)), log(D3(0.0)), shoal::ad::asin(D3(1.0)),
                      shoal::ad::cbrt(D3(0.0))}) {
    for (int k = 0; k < 3; ++k) EXPECT_EQ(r.d[k], 0.0);
  }
  // A variable there keeps its infinite derivative, in the directions it moves.
  const D3 moving = sqrt(variable<double, 3>(0.0, 1));
  EXPECT_EQ(moving.d[0], 0.0);
  EXPECT_TRUE(std::isinf(moving.d[1]));
  EXPECT_EQ(moving.d[2], 0.0);
}

TEST(DualFunctions, PowEdgeCases) {
  using shoal::ad::pow;
  const D3 zero = seeded(0.0);
  // 0^2: derivative 2·0 = 0 in every direction (and no NaN from ln 0).
  const D3 sq = pow(zero, 2.0);
  EXPECT_EQ(sq.v, 0.0);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(sq.d[k], 0.0);
  // 0^1 = x: derivative 1.
  const D3 lin = pow(zero, 1.0);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(lin.d[k], kSeed[k]);
  // x^0 = 1: derivative 0, also at x = 0.
  for (double x : {0.0, 2.0, -3.0}) {
    const D3 one = pow(seeded(x), 0.0);
    EXPECT_EQ(one.v, 1.0);
    for (int k = 0; k < 3; ++k) EXPECT_EQ(one.d[k], 0.0) << x;
  }
  // 0^b with a varying exponent b > 0: the value stays 0, so ∂/∂b = 0 (JAX's convention).
  const D3 b = variable<double, 3>(2.5, 1);
  const D3 zb = pow(0.0, b);
  EXPECT_EQ(zb.v, 0.0);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(zb.d[k], 0.0);
  const D3 zb_small = pow(0.0, variable<double, 3>(0.5, 0));
  for (int k = 0; k < 3; ++k) EXPECT_EQ(zb_small.d[k], 0.0) << "direction " << k;
  // Exponent derivative with a constant base: ∂(c^b)/∂b = c^b ln c.
  const D3 eb = pow(3.0, b);
  EXPECT_NEAR(eb.d[1], std::pow(3.0, 2.5) * std::log(3.0), 1e-13);
  EXPECT_EQ(eb.d[0], 0.0);
  EXPECT_EQ(eb.d[2], 0.0);
  // A negative base with an integral Dual exponent that does not vary: tangent finite.
  const D3 neg = pow(seeded(-2.0), D3(3.0));
  EXPECT_EQ(neg.v, -8.0);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(neg.d[k], 12.0 * kSeed[k]);
}

TEST(DualFunctions, Trigonometric) {
  for (double x : {-2.0, 0.0, 0.4, 1.2, 3.0}) {
    check_unary("sin", FN(sin(x)), x, std::cos(x));
    check_unary("cos", FN(cos(x)), x, -std::sin(x));
    check_unary("atan", FN(atan(x)), x, 1 / (1 + x * x));
  }
  for (double x : {-1.0, 0.0, 0.4, 1.2}) {
    const double c = std::cos(x);
    check_unary("tan", FN(tan(x)), x, 1 / (c * c));
  }
  for (double x : {-0.6, 0.0, 0.3, 0.8}) {
    check_unary("asin", FN(asin(x)), x, 1 / std::sqrt(1 - x * x));
    check_unary("acos", FN(acos(x)), x, -1 / std::sqrt(1 - x * x));
  }
}

TEST(DualFunctions, Atan2InEveryQuadrant) {
  // ∂atan2(y, x)/∂y = x / r², ∂/∂x = -y / r².
  const double pts[][2] = {{0.5, 1.5}, {0.5, -1.5}, {-0.5, -1.5}, {-0.5, 1.5}, {2.0, 0.0}};
  for (const auto& pt : pts) {
    const double y0 = pt[0], x0 = pt[1], r2 = x0 * x0 + y0 * y0;
    const D3 y = variable<double, 3>(y0, 0), x = variable<double, 3>(x0, 1);
    const D3 r = shoal::ad::atan2(y, x);
    EXPECT_EQ(r.v, std::atan2(y0, x0));
    EXPECT_NEAR(r.d[0], x0 / r2, 1e-15);
    EXPECT_NEAR(r.d[1], -y0 / r2, 1e-15);
    EXPECT_EQ(r.d[2], 0.0);
    auto fy = [&](double s) { return std::atan2(s, x0); };
    auto fx = [&](double s) { return std::atan2(y0, s); };
    EXPECT_NEAR(central_difference(fy, y0), x0 / r2, 1e-9);
    EXPECT_NEAR(central_difference(fx, x0), -y0 / r2, 1e-9);
  }
}

TEST(DualFunctions, Hyperbolic) {
  for (double x : {-1.4, 0.0, 0.8, 2.5}) {
    check_unary("sinh", FN(sinh(x)), x, std::cosh(x));
    check_unary("cosh", FN(cosh(x)), x, std::sinh(x));
    const double t = std::tanh(x);
    check_unary("tanh", FN(tanh(x)), x, 1 - t * t);
    check_unary("asinh", FN(asinh(x)), x, 1 / std::sqrt(x * x + 1));
  }
  for (double x : {1.3, 1.9, 10.0}) check_unary("acosh", FN(acosh(x)), x, 1 / std::sqrt(x * x - 1));
  for (double x : {-0.7, 0.0, 0.45}) check_unary("atanh", FN(atanh(x)), x, 1 / (1 - x * x));
}

TEST(DualFunctions, ErrorFunctionAndLogistic) {
  for (double x : {-1.5, 0.0, 0.6, 2.0}) {
    const double g = kTwoOverSqrtPi * std::exp(-x * x);
    check_unary("erf", FN(erf(x)), x, g);
    check_unary("erfc", FN(erfc(x)), x, -g);
    const double s = 1 / (1 + std::exp(-x));
    check_unary("logistic", FN(logistic(x)), x, s * (1 - s));
  }
}

TEST(DualFunctions, PiecewiseConstantHaveZeroDerivative) {
  for (double x : {-1.7, -0.5, 0.5, 2.3}) {  // away from the jumps, differences agree
    check_unary("floor", FN(floor(x)), x, 0.0);
    check_unary("ceil", FN(ceil(x)), x, 0.0);
    check_unary("trunc", FN(trunc(x)), x, 0.0);
  }
  for (double x : {-1.7, -1.0, -0.5, 0.0, 0.5, 1.5, 2.0, 2.3, 2.5}) {  // on them too
    const D3 fl = shoal::ad::floor(seeded(x)), ce = shoal::ad::ceil(seeded(x)),
             tr = shoal::ad::trunc(seeded(x));
    EXPECT_EQ(fl.v, std::floor(x));
    EXPECT_EQ(ce.v, std::ceil(x));
    EXPECT_EQ(tr.v, std::trunc(x));
    for (int k = 0; k < 3; ++k) EXPECT_EQ(fl.d[k] + ce.d[k] + tr.d[k], 0.0);
    const D3 re = shoal::ad::round_even(seeded(x)), ra = shoal::ad::round_away(seeded(x));
    EXPECT_EQ(re.v, std::nearbyint(x));
    EXPECT_EQ(ra.v, std::round(x));
    for (int k = 0; k < 3; ++k) EXPECT_EQ(re.d[k] + ra.d[k], 0.0);
  }
  // Ties: to even, and away from zero.
  EXPECT_EQ(shoal::ad::round_even(seeded(2.5)).v, 2.0);
  EXPECT_EQ(shoal::ad::round_away(seeded(2.5)).v, 3.0);
  EXPECT_EQ(shoal::ad::round_away(seeded(-0.5)).v, -1.0);
  // sign: ±1 with zero derivative, and a zero derivative at 0 too (as JAX).
  for (double x : {-2.0, -0.0, 0.0, 3.0}) {
    const D3 s = FN(sign(x))(seeded(x));  // unqualified, as generated models call it
    EXPECT_EQ(s.v, x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0));
    for (int k = 0; k < 3; ++k) EXPECT_EQ(s.d[k], 0.0) << "sign at " << x << ", direction " << k;
  }
}

TEST(DualFunctions, AbsoluteValue) {
  for (double x : {-1.5, -0.25, 0.25, 2.0}) {
    check_unary("abs", FN(abs(x)), x, x > 0 ? 1.0 : -1.0);
    check_unary("fabs", FN(fabs(x)), x, x > 0 ? 1.0 : -1.0);
  }
  // At 0 the derivative is sign(0) = 0, as in JAX.
  for (double x : {0.0, -0.0}) {
    const D3 a = shoal::ad::abs(seeded(x)), f = shoal::ad::fabs(seeded(x));
    EXPECT_EQ(a.v, 0.0);
    EXPECT_FALSE(std::signbit(a.v));
    for (int k = 0; k < 3; ++k) EXPECT_EQ(a.d[k] + f.d[k], 0.0);
  }
}

TEST(DualFunctions, MaxMinClampSelectTheActiveArgument) {
  using shoal::math::clamp;
  using shoal::math::max;
  using shoal::math::min;
  const D3 a = variable<double, 3>(1.0, 0), b = variable<double, 3>(2.0, 1);
  const D3 hi = max(a, b), lo = min(a, b);
  EXPECT_EQ(hi.v, 2.0);
  EXPECT_EQ(hi.d[1], 1.0);
  EXPECT_EQ(hi.d[0], 0.0);
  EXPECT_EQ(lo.v, 1.0);
  EXPECT_EQ(lo.d[0], 1.0);
  EXPECT_EQ(lo.d[1], 0.0);
  const D3 x = seeded(0.5);
  const D3 inside = clamp(D3(0.0), x, D3(1.0)), below = clamp(D3(0.8), x, D3(1.0)),
           above = clamp(D3(-1.0), x, D3(0.2));
  EXPECT_EQ(inside.v, 0.5);
  EXPECT_EQ(below.v, 0.8);
  EXPECT_EQ(above.v, 0.2);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(inside.d[k], kSeed[k]);
    EXPECT_EQ(below.d[k], 0.0);
    EXPECT_EQ(above.d[k], 0.0);
  }
  // NaN propagates through max/min (as XLA), with its tangents.
  const D3 nan = seeded(std::nan(""));
  EXPECT_TRUE(std::isnan(max(nan, b).v));
  EXPECT_TRUE(std::isnan(min(b, nan).v));
  EXPECT_FALSE(shoal::ad::is_finite(max(nan, b)));
  EXPECT_TRUE(shoal::ad::is_finite(max(a, b)));
}

TEST(DualFunctions, Fmod) {
  // fmod(a, b) = a - trunc(a/b) b: ∂/∂a = 1, ∂/∂b = -trunc(a/b).
  const double cases[][2] = {{5.3, 2.0}, {-5.3, 2.0}, {5.3, -1.5}, {0.7, 3.0}};
  for (const auto& cs : cases) {
    const D3 a = variable<double, 3>(cs[0], 0), b = variable<double, 3>(cs[1], 1);
    const D3 r = shoal::ad::fmod(a, b);
    EXPECT_EQ(r.v, std::fmod(cs[0], cs[1]));
    EXPECT_EQ(r.d[0], 1.0);
    EXPECT_EQ(r.d[1], -std::trunc(cs[0] / cs[1]));
    auto fb = [&](double s) { return std::fmod(cs[0], s); };
    EXPECT_NEAR(central_difference(fb, cs[1], 1e-4), -std::trunc(cs[0] / cs[1]), 1e-8);
  }
}

TEST(DualFunctions, IsFiniteLooksAtTangentsToo) {
  EXPECT_TRUE(shoal::ad::is_finite(seeded(1.0)));
  EXPECT_FALSE(shoal::ad::is_finite(seeded(INFINITY)));
  // sqrt at 0: finite value, infinite slope.
  EXPECT_FALSE(shoal::ad::is_finite(shoal::ad::sqrt(seeded(0.0))));
}

// ---- nested duals: second derivatives -----------------------------------------------------------

TEST(DualNested, SecondDerivativesOfUnaryFunctions) {
  for (double x : {0.3, 0.8, 1.7}) {
    const double e = std::exp(x);
    check_second("exp", FN(exp(x)), x, e, e);
    check_second("log", FN(log(x)), x, 1 / x, -1 / (x * x));
    check_second("sin", FN(sin(x)), x, std::cos(x), -std::sin(x));
    check_second("cos", FN(cos(x)), x, -std::sin(x), -std::cos(x));
    check_second("sqrt", FN(sqrt(x)), x, 0.5 / std::sqrt(x), -0.25 * std::pow(x, -1.5));
    check_second("cbrt", FN(cbrt(x)), x, std::pow(x, -2.0 / 3) / 3,
                 -2.0 / 9 * std::pow(x, -5.0 / 3));
    check_second("1/x", FN(1.0 / x), x, -1 / (x * x), 2 / (x * x * x));
    check_second("pow(x, 3.5)", FN(pow(x, 3.5)), x, 3.5 * std::pow(x, 2.5),
                 3.5 * 2.5 * std::pow(x, 1.5));
    check_second("pow(2, x)", FN(pow(2.0, x)), x, std::pow(2.0, x) * std::log(2.0),
                 std::pow(2.0, x) * std::log(2.0) * std::log(2.0));
    check_second("integer_pow 4", FN(integer_pow(x, 4)), x, 4 * x * x * x, 12 * x * x);
    const double t = std::tanh(x), sech2 = 1 - t * t;
    check_second("tanh", FN(tanh(x)), x, sech2, -2 * t * sech2);
    const double q = 1 + x * x;
    check_second("atan", FN(atan(x)), x, 1 / q, -2 * x / (q * q));
    const double g = kTwoOverSqrtPi * std::exp(-x * x);
    check_second("erf", FN(erf(x)), x, g, -2 * x * g);
    const double s = 1 / (1 + std::exp(-x));
    check_second("logistic", FN(logistic(x)), x, s * (1 - s), s * (1 - s) * (1 - 2 * s));
    const double c = std::cos(x), tn = std::tan(x);
    check_second("tan", FN(tan(x)), x, 1 / (c * c), 2 * tn / (c * c));
    check_second("sinh", FN(sinh(x)), x, std::cosh(x), std::sinh(x));
    check_second("asinh", FN(asinh(x)), x, 1 / std::sqrt(q), -x * std::pow(q, -1.5));
    check_second("x exp(-x^2)", FN(x * exp(-x * x)), x, (1 - 2 * x * x) * std::exp(-x * x),
                 (4 * x * x * x - 6 * x) * std::exp(-x * x));
  }
  for (double x : {-0.6, 0.2, 0.5}) {
    const double w = 1 - x * x;
    check_second("asin", FN(asin(x)), x, 1 / std::sqrt(w), x * std::pow(w, -1.5));
    check_second("acos", FN(acos(x)), x, -1 / std::sqrt(w), -x * std::pow(w, -1.5));
    check_second("atanh", FN(atanh(x)), x, 1 / w, 2 * x / (w * w));
    check_second("log1p", FN(log1p(x)), x, 1 / (1 + x), -1 / ((1 + x) * (1 + x)));
  }
  for (double x : {1.3, 2.0}) {
    const double w = x * x - 1;
    check_second("acosh", FN(acosh(x)), x, 1 / std::sqrt(w), -x * std::pow(w, -1.5));
  }
}

TEST(DualNested, MixedPartialOfATwoVariableFunction) {
  // f(x, y) = sin(x y) + x² e^y: ∂²f/∂x∂y = cos(x y) − x y sin(x y) + 2 x e^y.
  const double x0 = 0.9, y0 = -0.4;
  const DD x(variable<double, 1>(x0, 0));  // inner direction: x
  DD y{D1(y0)};
  y.d[0] = D1(1.0);  // outer direction: y
  SHOAL_MATH_USING;
  const DD f = sin(x * y) + x * x * exp(y);
  const double xy = x0 * y0;
  EXPECT_NEAR(f.v.v, std::sin(xy) + x0 * x0 * std::exp(y0), 1e-15);
  EXPECT_NEAR(f.v.d[0], y0 * std::cos(xy) + 2 * x0 * std::exp(y0), 1e-14);   // ∂f/∂x
  EXPECT_NEAR(f.d[0].v, x0 * std::cos(xy) + x0 * x0 * std::exp(y0), 1e-14);  // ∂f/∂y
  const double fxy = std::cos(xy) - xy * std::sin(xy) + 2 * x0 * std::exp(y0);
  EXPECT_NEAR(f.d[0].d[0], fxy, 1e-14);
  // Central differences of ∂f/∂x in y.
  auto fx = [&](double s) { return s * std::cos(x0 * s) + 2 * x0 * std::exp(s); };
  EXPECT_NEAR(central_difference(fx, y0), fxy, 1e-9);
}

TEST(DualNested, FullHessianWithTwoByTwoDirections) {
  // g(x, y) = x³ y + log(x) y² with a Dual<Dual<double, 2>, 2>: the whole Hessian in one pass.
  using In = Dual<double, 2>;
  using H = Dual<In, 2>;
  const double x0 = 1.4, y0 = 0.6;
  const H x = variable<In, 2>(variable<double, 2>(x0, 0), 0);
  const H y = variable<In, 2>(variable<double, 2>(y0, 1), 1);
  SHOAL_MATH_USING;
  const H g = x * x * x * y + log(x) * y * y;
  const double hess[2][2] = {{6 * x0 * y0 - y0 * y0 / (x0 * x0), 3 * x0 * x0 + 2 * y0 / x0},
                             {3 * x0 * x0 + 2 * y0 / x0, 2 * std::log(x0)}};
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 2; ++j) EXPECT_NEAR(g.d[i].d[j], hess[i][j], 1e-13) << i << j;
  }
  EXPECT_NEAR(g.v.d[0], 3 * x0 * x0 * y0 + y0 * y0 / x0, 1e-14);
  EXPECT_NEAR(g.d[1].v, x0 * x0 * x0 + 2 * std::log(x0) * y0, 1e-14);
}

TEST(DualNested, KinksAndConstantsStayFlat) {
  SHOAL_MATH_USING;
  const DD f = floor(nested_variable(1.5)), a = abs(nested_variable(-2.0)),
           p = pow(nested_variable(-1.5), 2.0), s = sign(nested_variable(0.0));
  EXPECT_EQ(f.d[0].d[0] + f.v.d[0] + f.d[0].v, 0.0);
  EXPECT_EQ(a.v.d[0], -1.0);
  EXPECT_EQ(a.d[0].d[0], 0.0);
  EXPECT_EQ(p.v.d[0], -3.0);
  EXPECT_EQ(p.d[0].d[0], 2.0);
  EXPECT_EQ(s.v.d[0] + s.d[0].v + s.d[0].d[0], 0.0);
}

// ---- float duals --------------------------------------------------------------------------------

TEST(DualFloat, FunctionsAndArithmeticInSinglePrecision) {
  using F2 = Dual<float, 2>;
  const F2 x = variable<float, 2>(0.7f, 0), y = variable<float, 2>(1.9f, 1);
  SHOAL_MATH_USING;
  const F2 r = exp(x) * sin(y) + pow(y, 1.5f) / sqrt(x) + 2.0 * x - 1;
  const double xd = 0.7f, yd = 1.9f;
  EXPECT_NEAR(r.v, std::exp(xd) * std::sin(yd) + std::pow(yd, 1.5) / std::sqrt(xd) + 2 * xd - 1,
              2e-6);
  const double dx = std::exp(xd) * std::sin(yd) - 0.5 * std::pow(yd, 1.5) * std::pow(xd, -1.5) + 2;
  const double dy = std::exp(xd) * std::cos(yd) + 1.5 * std::sqrt(yd) / std::sqrt(xd);
  EXPECT_NEAR(r.d[0], dx, 2e-6 * std::abs(dx));
  EXPECT_NEAR(r.d[1], dy, 2e-6 * std::abs(dy));
  const F2 t = tanh(x) + atan2(y, x) + erf(x) + log1p(x) + cbrt(y) + abs(-x) + floor(y);
  EXPECT_TRUE(shoal::ad::is_finite(t));
  const double dt0 = 1 - std::tanh(xd) * std::tanh(xd) - yd / (xd * xd + yd * yd) +
                     kTwoOverSqrtPi * std::exp(-xd * xd) + 1 / (1 + xd) + 1;
  EXPECT_NEAR(t.d[0], dt0, 4e-6 * std::abs(dt0));
  static_assert(sizeof(F2) == 3 * sizeof(float), "a float dual holds floats");
}

// ---- the vector-mode Jacobian and ∂f/∂t ---------------------------------------------------------

// A small non-autonomous model with parameters.
struct Small {
  static constexpr int n_vars = 3;
  static constexpr int n_params = 2;
  template <class T>
  static void rhs(const T* y, const T& t, const T* p, T* dy) {
    SHOAL_MATH_USING;
    dy[0] = -p[0] * y[0] + y[1] * y[2] * sin(t);
    dy[1] = y[0] * y[0] - p[1] * exp(y[1]) * t;
    dy[2] = cos(y[0] * t) + sqrt(y[2]);
  }
  static void exact(const double* y, double t, const double* p, double* f, double* jac,
                    double* ft) {
    f[0] = -p[0] * y[0] + y[1] * y[2] * std::sin(t);
    f[1] = y[0] * y[0] - p[1] * std::exp(y[1]) * t;
    f[2] = std::cos(y[0] * t) + std::sqrt(y[2]);
    const double j[9] = {-p[0],
                         y[2] * std::sin(t),
                         y[1] * std::sin(t),
                         2 * y[0],
                         -p[1] * std::exp(y[1]) * t,
                         0,
                         -t * std::sin(y[0] * t),
                         0,
                         0.5 / std::sqrt(y[2])};
    for (int i = 0; i < 9; ++i) jac[i] = j[i];
    ft[0] = y[1] * y[2] * std::cos(t);
    ft[1] = -p[1] * std::exp(y[1]);
    ft[2] = -y[0] * std::sin(y[0] * t);
  }
};

template <int Chunk, class S>
void check_small(double tol) {
  SCOPED_TRACE(::testing::Message() << "chunk " << Chunk << ", storage bytes " << sizeof(S));
  const double y[3] = {0.8, -0.3, 1.7}, p[2] = {1.3, 0.25}, t = 0.6;
  double f[3], ft[3], fe[3], je[9], fte[3];
  S jac[9];
  for (auto& v : jac) v = S(12345);  // every entry must be overwritten
  shoal::ad::rhs_and_jacobian<Small, double, S, Chunk>(y, t, p, f, jac, ft);
  Small::exact(y, t, p, fe, je, fte);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(f[i], fe[i]) << i;
    EXPECT_NEAR(ft[i], fte[i], 1e-15) << i;
    for (int j = 0; j < 3; ++j) EXPECT_NEAR(jac[i * 3 + j], je[i * 3 + j], tol) << i << "," << j;
  }
  // And against central differences of f.
  for (int j = 0; j < 3; ++j) {
    for (int i = 0; i < 3; ++i) {
      auto fi = [&](double s) {
        double yy[3] = {y[0], y[1], y[2]}, out[3];
        yy[j] = s;
        Small::rhs<double>(yy, t, p, out);
        return out[i];
      };
      EXPECT_NEAR(central_difference(fi, y[j]), jac[i * 3 + j], 1e-8 + tol) << i << "," << j;
    }
  }
  for (int i = 0; i < 3; ++i) {
    auto fi = [&](double s) {
      double out[3];
      Small::rhs<double>(y, s, p, out);
      return out[i];
    };
    EXPECT_NEAR(central_difference(fi, t), ft[i], 1e-8) << i;
  }
}

TEST(RhsAndJacobian, SmallModelMatchesAnalyticJacobianAndTimeDerivative) {
  check_small<16, double>(1e-15);  // one sweep of Dual<double, 4>
  check_small<3, double>(1e-15);   // two sweeps, the second with t alone
  check_small<2, double>(1e-15);
  check_small<1, double>(1e-15);  // one direction per sweep
  check_small<16, float>(2e-7);   // Jacobian stored in float
}

// A ring of n variables, autonomous in its coupling but with a time-dependent term, no parameters.
template <int N>
struct Ring {
  static constexpr int n_vars = N;
  static constexpr int n_params = 0;
  template <class T>
  static void rhs(const T* y, const T& t, const T*, T* dy) {
    SHOAL_MATH_USING;
    for (int i = 0; i < N; ++i) {
      const T& prev = y[(i + N - 1) % N];
      const T& next = y[(i + 1) % N];
      dy[i] = -T(i + 1) * y[i] + prev * next + sin(t) * y[i] * y[i];
    }
  }
};

template <int N, int Chunk>
void check_ring() {
  SCOPED_TRACE(::testing::Message() << "n " << N << ", chunk " << Chunk);
  double y[N], f[N], ft[N], jac[N * N];
  for (int i = 0; i < N; ++i) y[i] = 0.1 * (i + 1) - 0.03 * i * i;
  for (auto& v : jac) v = -777;
  const double t = 1.1;
  shoal::ad::rhs_and_jacobian<Ring<N>, double, double, Chunk>(y, t, nullptr, f, jac, ft);
  for (int i = 0; i < N; ++i) {
    const int ip = (i + N - 1) % N, in = (i + 1) % N;
    EXPECT_NEAR(f[i], -(i + 1) * y[i] + y[ip] * y[in] + std::sin(t) * y[i] * y[i], 1e-15);
    EXPECT_NEAR(ft[i], std::cos(t) * y[i] * y[i], 1e-15);
    for (int j = 0; j < N; ++j) {
      double e = 0;
      if (j == i) e += -(i + 1) + 2 * std::sin(t) * y[i];
      if (j == ip) e += y[in];
      if (j == in) e += y[ip];
      EXPECT_NEAR(jac[i * N + j], e, 1e-14) << i << "," << j;
    }
  }
}

TEST(RhsAndJacobian, ManyVariablesNeedSeveralSweeps) {
  check_ring<20, 16>();  // 21 directions: two sweeps of 11 (12: one short of a multiple of 4)
  check_ring<16, 16>();  // 17 directions: two sweeps of 9, not 16 and t alone
  check_ring<15, 16>();  // 16 directions: exactly one sweep
  check_ring<20, 5>();   // five sweeps of 5, the last with t and four unused
  check_ring<20, 32>();  // one wide sweep
  check_ring<72, 16>();  // 73 directions: five sweeps of 15, rounded to 16
}

TEST(RhsAndJacobian, SweepsAreAsFewAndAsEvenAsTheCapAllows) {
  using shoal::ad::sweep_width;
  static_assert(sweep_width<4, 16>() == 4);
  static_assert(sweep_width<5, 16>() == 5);
  static_assert(sweep_width<16, 16>() == 16);
  static_assert(sweep_width<17, 16>() == 9);
  static_assert(sweep_width<21, 16>() == 12);
  static_assert(sweep_width<26, 16>() == 13);
  static_assert(sweep_width<33, 16>() == 12);
  static_assert(sweep_width<73, 16>() == 16);
  static_assert(sweep_width<21, 5>() == 5);
  static_assert(sweep_width<3, 3>() == 3);
}

TEST(RhsAndJacobian, TheSweepWidthChangesNoBits) {
  // Directions never mix in dual arithmetic: one sweep of 21, sweeps of 12, of 5 and of 8 give
  // the same bits.
  constexpr int N = 20;
  double y[N], f[4][N], ft[4][N], jac[4][N * N];
  for (int i = 0; i < N; ++i) y[i] = 0.37 * std::sin(1.7 * i) + 0.1;
  shoal::ad::rhs_and_jacobian<Ring<N>, double, double, 32>(y, 0.7, nullptr, f[0], jac[0], ft[0]);
  shoal::ad::rhs_and_jacobian<Ring<N>, double, double, 16>(y, 0.7, nullptr, f[1], jac[1], ft[1]);
  shoal::ad::rhs_and_jacobian<Ring<N>, double, double, 5>(y, 0.7, nullptr, f[2], jac[2], ft[2]);
  shoal::ad::rhs_and_jacobian<Ring<N>, double, double, 8>(y, 0.7, nullptr, f[3], jac[3], ft[3]);
  for (int c = 1; c < 4; ++c) {
    for (int i = 0; i < N; ++i) {
      EXPECT_EQ(f[c][i], f[0][i]);
      EXPECT_EQ(ft[c][i], ft[0][i]);
    }
    for (int k = 0; k < N * N; ++k) EXPECT_EQ(jac[c][k], jac[0][k]) << c << " " << k;
  }
}

struct Autonomous {
  static constexpr int n_vars = 2;
  static constexpr int n_params = 0;
  template <class T>
  static void rhs(const T* y, const T&, const T*, T* dy) {
    dy[0] = y[1];
    dy[1] = -y[0] * y[0] * y[0];
  }
};

TEST(RhsAndJacobian, AutonomousModelHasZeroTimeDerivative) {
  const double y[2] = {1.5, -0.5};
  double f[2], jac[4], ft[2] = {9, 9};
  shoal::ad::rhs_and_jacobian<Autonomous, double, double>(y, 3.0, nullptr, f, jac, ft);
  EXPECT_EQ(ft[0], 0.0);
  EXPECT_EQ(ft[1], 0.0);
  EXPECT_EQ(jac[0], 0.0);
  EXPECT_EQ(jac[1], 1.0);
  EXPECT_EQ(jac[2], -3 * 1.5 * 1.5);
  EXPECT_EQ(jac[3], 0.0);
}

// Nested duals' arithmetic writes each inner part in place (dual.hpp, namespace nested): the
// same bits as the generic operators' formulas evaluated with one-level operators, at depth 2
// and 3, with values chosen so every rounding matters.
template <class X>
X spread(double base, int& counter) {
  if constexpr (std::is_same_v<X, double>) {
    return base + 0.1234567 * ++counter / 7.0;
  } else {
    X x;
    x.v = spread<decltype(x.v)>(base, counter);
    for (auto& d : x.d) d = spread<decltype(x.v)>(-base / 3.0, counter);
    return x;
  }
}

template <class O>
void expect_nested_arithmetic_is_the_generic_formulas() {
  int counter = 0;
  const O a = spread<O>(1.3, counter), b = spread<O>(-0.7, counter);
  constexpr int N = sizeof(a.d) / sizeof(a.d[0]);
  O e;
  const auto same = [](const O& x, const O& y) { return std::memcmp(&x, &y, sizeof(O)) == 0; };
  e.v = a.v * b.v;
  for (int k = 0; k < N; ++k) e.d[k] = a.d[k] * b.v + a.v * b.d[k];
  EXPECT_TRUE(same(a * b, e)) << "product";
  e.v = a.v / b.v;
  for (int k = 0; k < N; ++k) e.d[k] = (a.d[k] - e.v * b.d[k]) / b.v;
  EXPECT_TRUE(same(a / b, e)) << "quotient";
  e.v = a.v + b.v;
  for (int k = 0; k < N; ++k) e.d[k] = a.d[k] + b.d[k];
  EXPECT_TRUE(same(a + b, e)) << "sum";
  e.v = a.v - b.v;
  for (int k = 0; k < N; ++k) e.d[k] = a.d[k] - b.d[k];
  EXPECT_TRUE(same(a - b, e)) << "difference";
  e.v = -a.v;
  for (int k = 0; k < N; ++k) e.d[k] = -a.d[k];
  EXPECT_TRUE(same(-a, e)) << "negation";
}

TEST(NestedDual, InPlaceArithmeticIsTheGenericFormulasBitForBit) {
  expect_nested_arithmetic_is_the_generic_formulas<Dual<Dual<double, 3>, 2>>();
  expect_nested_arithmetic_is_the_generic_formulas<Dual<Dual<double, 5>, 1>>();
  expect_nested_arithmetic_is_the_generic_formulas<Dual<Dual<Dual<double, 2>, 3>, 2>>();
}

}  // namespace
