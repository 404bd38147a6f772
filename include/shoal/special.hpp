// Special functions for models: digamma and the polygamma functions, and erf_inv, for float and
// double, host and device, with JAX's values at poles and outside domains (lgamma is the C
// library's, in math.hpp).
//
// Dual-number overloads (ad/dual.hpp) differentiate them: lgamma' = digamma, ψ^(k)' = ψ^(k+1),
// erf_inv'(x) = (√π/2) e^{erf_inv(x)²}; so nested duals need ψ^(k) for any order k, which is why
// the polygamma functions are written for every k rather than as digamma and trigamma alone.
//
// ψ^(k)(x) (k = 0: digamma): the recurrence ψ^(k)(x) = ψ^(k)(x+1) − (−1)^k k! / x^{k+1} moves x
// to x ≥ 12, then the asymptotic series (Abramowitz & Stegun 6.3.18, 6.4.11)
//   ψ(x)     ~ ln x − 1/(2x) − Σ_j B_2j / (2j x^{2j}),
//   ψ^(k)(x) ~ (−1)^{k+1} [ (k−1)!/x^k + k!/(2 x^{k+1}) + Σ_j B_2j (2j+k−1)! / ((2j)! x^{2j+k}) ],
// with ten Bernoulli numbers: below 1e-15 relative at x ≥ 12 for k ≤ 3. For x < 0 digamma and
// trigamma use the reflections ψ(x) = ψ(1−x) − π / tan(πx), ψ'(x) = π² / sin²(πx) − ψ'(1−x)
// (JAX's own trigamma skips it and is wrong far below 0), higher orders the recurrence, down to
// x = −1e5 (NaN below: that would take |x| steps). At 0 and the negative integers (poles) digamma
// is NaN and the odd orders +inf, as in JAX.
//
// erf_inv: Giles' single-precision approximation (M. Giles, "Approximating the erfinv function",
// GPU Computing Gems, 2010) refined by four Newton steps on erf, or on erfc for |x| > 1/2 where
// 1 − |x| is exact and erf(y) − x would cancel; ±inf at ±1, NaN beyond.
#pragma once

#include "shoal/config.hpp"
#include "shoal/math.hpp"

namespace shoal {
namespace math {

namespace special_detail {

// B_2, B_4, ..., B_20.
SHOAL_INLINE double bernoulli_even(int j) {
  static constexpr double b[10] = {1.0 / 6,       -1.0 / 30,      1.0 / 42, -1.0 / 30,
                                   5.0 / 66,      -691.0 / 2730,  7.0 / 6,  -3617.0 / 510,
                                   43867.0 / 798, -174611.0 / 330};
  return b[j];
}

SHOAL_INLINE double factorial(int n) {
  double f = 1;
  for (int i = 2; i <= n; ++i) f *= i;
  return f;
}

SHOAL_INLINE double polygamma(int k, double x) {
  const double nan = 0.0 / 0.0, inf = 1.0 / 0.0, pi = 3.14159265358979323846;
  if (x != x) return x;
  if (x <= 0 && floor(x) == x) return k == 0 || k % 2 == 0 ? nan : inf;  // a pole (or -inf)
  if (k == 0 && x < 0) return polygamma(0, 1 - x) - pi / tan(pi * x);
  if (k == 1 && x < 0) {
    const double s = sin(pi * x);
    return pi * pi / (s * s) - polygamma(1, 1 - x);
  }
  if (x < -1e5) return nan;  // k ≥ 2: the recurrence would take |x| steps
  if (x == inf) return k == 0 ? inf : 0.0;
  const double sign = k % 2 == 0 ? -1.0 : 1.0;  // (−1)^{k+1}
  const double k_fact = factorial(k);
  double shift = 0;  // Σ of the recurrence's terms
  for (; x < 12; x += 1) shift -= (k % 2 == 0 ? 1.0 : -1.0) * k_fact / pow(x, k + 1);
  const double inv = 1 / x, inv2 = inv * inv;
  double series;
  if (k == 0) {
    series = log(x) - 0.5 * inv;
    double power = inv2;
    for (int j = 0; j < 10; ++j, power *= inv2) series -= bernoulli_even(j) / (2 * (j + 1)) * power;
  } else {
    const double lead = pow(inv, k);
    series = factorial(k - 1) * lead + 0.5 * k_fact * lead * inv;
    double power = lead * inv2;
    for (int j = 0; j < 10; ++j, power *= inv2) {
      const int two_j = 2 * (j + 1);
      series += bernoulli_even(j) * factorial(two_j + k - 1) / factorial(two_j) * power;
    }
    series *= sign;
  }
  return series + shift;
}

SHOAL_INLINE double erf_inv(double x) {
  const double nan = 0.0 / 0.0, inf = 1.0 / 0.0;
  if (!(x >= -1 && x <= 1)) return nan;
  if (x == 1 || x == -1) return x * inf;
  const double a = x < 0 ? -x : x;
  // Giles' approximation, in double.
  double w = -log((1 - a) * (1 + a)), p;
  if (w < 5) {
    w -= 2.5;
    p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
  } else {
    w = sqrt(w) - 3;
    p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
  }
  double y = p * a;
  const double two_over_sqrt_pi = 1.12837916709551257390;
  for (int step = 0; step < 4; ++step) {
    const double slope = two_over_sqrt_pi * exp(-y * y);  // erf'(y) = −erfc'(y)
    if (a > 0.5) {
      y += (erfc(y) - (1 - a)) / slope;
    } else {
      y -= (erf(y) - a) / slope;
    }
  }
  return x < 0 ? -y : y;
}

}  // namespace special_detail

SHOAL_INLINE double polygamma(int k, double x) { return special_detail::polygamma(k, x); }
SHOAL_INLINE float polygamma(int k, float x) {
  return static_cast<float>(special_detail::polygamma(k, x));
}
SHOAL_INLINE double digamma(double x) { return special_detail::polygamma(0, x); }
SHOAL_INLINE float digamma(float x) { return static_cast<float>(special_detail::polygamma(0, x)); }
SHOAL_INLINE double erf_inv(double x) { return special_detail::erf_inv(x); }
SHOAL_INLINE float erf_inv(float x) { return static_cast<float>(special_detail::erf_inv(x)); }

}  // namespace math
}  // namespace shoal
