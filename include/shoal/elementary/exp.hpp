// exp(x) for double and float, scalars and lanes, the same bits everywhere (elementary/ops.hpp).
//
// Algorithm (double). x = k ln2 + r with k = round(x / ln2), |r| <= ln2/2 (+ rounding):
//   ln2 = ln2_hi + ln2_lo, ln2_hi with 32 significant bits, so k ln2_hi is exact for |k| < 2^21
//   and x − k ln2_hi is exact (Sterbenz); r = hi − k ln2_lo is carried as r + r_lo (Fast2Sum),
//   so the reduction loses nothing measurable.
//   e^r = 1 + r + r² q(r) + r_lo (1 + r), q the Taylor series of (e^r − 1 − r)/r² to r^11/13!:
//   the truncation error is below r^14/14! < 5e-18 for |r| <= 0.35, 0.04 u; q is summed by
//   Estrin's scheme (4 multiply-add levels deep, not 12), 1/2 added last. 1 + r is formed
//   exactly as head + tail (Fast2Sum) and the small terms join the tail.
//   e^x = (1 + s) 2^k1 2^k2 with k1 = floor(k/2), k2 = k − k1: both normal powers of two for
//   every k that does not overflow or underflow completely, so the only rounding after 1 + s is
//   the one into a subnormal result.
// Error: head + tail rounds once (0.5 ulp); the tail's own error is that of r² q(r) ≤ 0.07 with
// a few roundings, ≤ 0.12 ulp of a result near 1/√2: measured max 0.63 ulp, 0.75 ulp where the
// result is subnormal (rounded twice) (tests/cpp/test_elementary_exp.cc, against long
// double, millions of points); float (computed in double, rounded once): 0.5 ulp + 2^-29.
// Cost (benchmarks/elementary_cost.py): latency ~19 ns per call (glibc ~10 ns; 33 ns with a
// Horner tail and a clamp on the argument's path), throughput in lanes ~0.8 ns per value.
// Special values (C99 F.10.3.1): exp(±0) = 1, exp(−inf) = +0, exp(+inf) = +inf, NaN -> NaN;
// overflow (x > 709.78...) -> +inf, complete underflow (x < −745.13...) -> +0.
#pragma once

#include "shoal/config.hpp"
#include "shoal/elementary/ops.hpp"

namespace shoal {
namespace elementary {

namespace exp_detail {

// (e^r − 1 − r) / r² to r^11/13!: the Taylor coefficients 1/n!, n = 2..13, rounded to double,
// summed by Estrin's scheme (pairs c_i + c_{i+1} r, then r², r⁴): 4 multiply-add levels
// deep instead of Horner's 12, the same roundings in the scalar build, the lanes and the GPU.
template <class V>
SHOAL_INLINE V taylor_tail(V r) {
  const V r2 = r * r;
  const V r4 = r2 * r2;
  const V p23 = V(0x1.5555555555555p-5) + V(0x1.1111111111111p-7) * r;
  const V p45 = V(0x1.6c16c16c16c17p-10) + V(0x1.a01a01a01a01ap-13) * r;
  const V p67 = V(0x1.a01a01a01a01ap-16) + V(0x1.71de3a556c734p-19) * r;
  const V p89 = V(0x1.27e4fb7789f5cp-22) + V(0x1.ae64567f544e4p-26) * r;
  const V p1011 = V(0x1.1eed8eff8d898p-29) + V(0x1.6124613a86d09p-33) * r;
  const V high = (p45 + r2 * p67) + r4 * (p89 + r2 * p1011);
  // 1/2 is added last, so q is rounded once near 1/2 as in Horner's scheme.
  return V(0x1.0000000000000p-1) + ((V(0x1.5555555555555p-3) * r + r2 * p23) + r4 * high);
}

constexpr double kLog2e = 0x1.71547652b82fep0;
constexpr double kLn2Hi = 0x1.62e42fee00000p-1;
constexpr double kLn2Lo = 0x1.a39ef35793c76p-33;

// x = k ln2 + (r + r_lo), |r| <= 0.3466 + rounding; x must be finite and |x| < 2^20.
template <class V>
struct Reduced {
  V r, r_lo;
  typename Ops<V>::Int k;
};
template <class V>
SHOAL_INLINE Reduced<V> reduce(V x) {
  const Rounded<V> k = round_to_integer(x * V(kLog2e));
  const V hi = x - k.value * V(kLn2Hi);  // exact
  const V lo = k.value * V(kLn2Lo);
  const V r = hi - lo;
  return {r, (hi - r) - lo, k.integer};
}

// v 2^k for v in [0.5, 2] and k in [−1076, 1024]: two exact scalings, one final rounding.
template <class V>
SHOAL_INLINE V scale(V v, typename Ops<V>::Int k) {
  const typename Ops<V>::Int k1 = k >> 1;
  return v * two_to<V>(k1) * two_to<V>(k - k1);
}

// e^(r + r_lo) = head + tail before its rounding: 1 + r exactly as head + tail (Fast2Sum), the
// small terms added to the tail (|tail| <= ~ulp(head); its own error ~0.1 ulp of the sum).
// exp rounds the sum; tanh (hyperbolic.hpp) keeps it as a double-double.
template <class V>
struct Unrounded {
  V head, tail;
};
template <class V>
SHOAL_INLINE Unrounded<V> exp_unrounded(const Reduced<V>& red) {
  const V r = red.r;
  const V head = V(1.0) + r;
  return {head, ((V(1.0) - head) + r) + ((r * r) * taylor_tail(r) + red.r_lo * (V(1.0) + r))};
}

template <class V>
SHOAL_INLINE V exp_double(V x) {
  using O = Ops<V>;
  // For |x| <= 1400, k is within [−2044, 2046], where scale's two powers of two are normal:
  // overflow gives +inf and complete underflow +0 by themselves. Other x (and NaN) give junk,
  // replaced at the end by a value chosen beside the main path (no clamp on it).
  const Reduced<V> red = reduce(x);
  const Unrounded<V> e = exp_unrounded(red);  // one rounding: the sum
  const V y = scale(e.head + e.tail, red.k);
  const V inf = O::from_bits((O::bits(x) & 0) + 0x7ff0000000000000LL);
  const V other = O::select(O::lt(x, V(0.0)), V(0.0), O::select(O::lt(V(0.0), x), inf, x + x));
  return O::select(O::le(V(-1400.0), x) & O::le(x, V(1400.0)), y, other);
}

}  // namespace exp_detail

SHOAL_INLINE double exp(double x) { return exp_detail::exp_double(x); }
SHOAL_INLINE float exp(float x) { return Wide<float>::down(exp_detail::exp_double(Wide<float>::up(x))); }

// Lanes and other value types with an Ops<V>: the double routine, or float through Wide<V>.
template <class V>
SHOAL_INLINE auto exp(const V& x) -> decltype(Ops<V>::bits(x), V()) {
  if constexpr (sizeof(typename Ops<V>::Scalar) == 8) {
    return exp_detail::exp_double(x);
  } else {
    return Wide<V>::down(exp_detail::exp_double(Wide<V>::up(x)));
  }
}

}  // namespace elementary
}  // namespace shoal
