// What the elementary-function tests share: the error of a result in units in the last place of
// the correctly rounded one (against a long double reference: 11 bits beyond double, so a
// measured 0.51 ulp is 0.51 ± 0.001), samplers of the arguments that matter, a sweep of float32
// values, and the check that SIMD lanes return the scalar bits.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "shoal/simd/lanes.hpp"

namespace elementary_test {

// |y − ref| in units of the spacing of T at ref (ulp(ref) in T's format, subnormals included).
// A NaN where the reference is NaN, and the exact infinity, count as 0; a wrong class as inf.
template <class T>
double ulp_error(T y, long double ref) {
  constexpr int digits = std::numeric_limits<T>::digits;         // 53 or 24
  constexpr int min_exp = std::numeric_limits<T>::min_exponent;  // −1021 or −125
  if (std::isnan(ref)) return std::isnan(y) ? 0.0 : INFINITY;
  if (std::isnan(y)) return INFINITY;
  if (std::isinf(ref)) {
    // A finite reference beyond T's range is an exact infinity; T's maximum is off by < 1 ulp.
    return static_cast<long double>(y) == ref ? 0.0 : INFINITY;
  }
  int e = 0;
  frexpl(ref, &e);  // ref = f 2^e, f in [0.5, 1)
  const int ulp_exp = (e > min_exp ? e : min_exp) - digits;
  if (std::isinf(y)) {
    // y overflowed: fine only where ref rounds to infinity (beyond max + ulp/2).
    const long double edge =
        static_cast<long double>(std::numeric_limits<T>::max()) + ldexpl(1.0L, ulp_exp - 1);
    return (y > 0 ? ref >= edge : ref <= -edge) ? 0.0 : INFINITY;
  }
  return static_cast<double>(fabsl(static_cast<long double>(y) - ref) / ldexpl(1.0L, ulp_exp));
}

struct Worst {
  double ulp = 0;
  double x = 0, x2 = 0;
  long n = 0;
  void add(double err, double at, double at2 = 0) {
    ++n;
    if (!(err <= ulp)) {
      ulp = err;
      x = at;
      x2 = at2;
    }
  }
};

inline std::mt19937_64& rng() {
  static std::mt19937_64 g(20261202);
  return g;
}
inline double uniform(double lo, double hi) {
  return std::uniform_real_distribution<double>(lo, hi)(rng());
}
// |x| log-uniform in [2^lo, 2^hi), random sign if `signed_`.
inline double log_uniform(double lo, double hi, bool signed_ = false) {
  const double x = std::exp2(uniform(lo, hi));
  return signed_ && (rng()() & 1) ? -x : x;
}

// The error over n points drawn by `draw`, against `ref` (long double).
template <class T, class F, class R, class D>
Worst measure(F f, R ref, D draw, long n) {
  Worst w;
  for (long i = 0; i < n; ++i) {
    const T x = static_cast<T>(draw());
    w.add(ulp_error<T>(f(x), ref(static_cast<long double>(x))), x);
  }
  return w;
}

// Every float32 whose bits are a multiple of `stride` (stride 1: all 2^32), finite or not.
template <class F, class R>
Worst sweep_float(F f, R ref, uint32_t stride) {
  Worst w;
  for (uint64_t b = 0; b < (uint64_t(1) << 32); b += stride) {
    const uint32_t bits = static_cast<uint32_t>(b);
    float x;
    std::memcpy(&x, &bits, sizeof x);
    w.add(ulp_error<float>(f(x), ref(static_cast<long double>(x))), x);
  }
  return w;
}

inline bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }
inline bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Lanes of W values give the scalar function's bits, lane by lane, on every x in xs.
template <class T, int W, class Scalar, class Vector>
void expect_lanes_match(Scalar scalar, Vector vector, const std::vector<T>& xs) {
  using L = shoal::simd::Lanes<T, W>;
  for (size_t i = 0; i + W <= xs.size(); i += W) {
    L x;
    for (int l = 0; l < W; ++l) x.set(l, xs[i + l]);
    const L y = vector(x);
    for (int l = 0; l < W; ++l) {
      const T s = scalar(xs[i + l]);
      ASSERT_TRUE(same_bits(y[l], s)) << "lane " << l << " of W = " << W << ": x = " << xs[i + l]
                                      << " gives " << y[l] << ", the scalar " << s;
    }
  }
}

// Arguments for the lanes check: n draws plus the special values, as T.
template <class T, class D>
std::vector<T> arguments(D draw, long n) {
  std::vector<T> xs;
  for (long i = 0; i < n; ++i) xs.push_back(static_cast<T>(draw()));
  const T inf = std::numeric_limits<T>::infinity();
  for (T s : {T(0), -T(0), inf, -inf, std::numeric_limits<T>::quiet_NaN(),
              std::numeric_limits<T>::denorm_min(), std::numeric_limits<T>::min(),
              std::numeric_limits<T>::max(), T(1), T(-1)})
    xs.push_back(s);
  while (xs.size() % 16) xs.push_back(T(0.5));
  return xs;
}

}  // namespace elementary_test
