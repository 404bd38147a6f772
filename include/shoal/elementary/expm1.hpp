// expm1(x) = e^x − 1 for double and float, scalars and lanes, the same bits everywhere
// (elementary/ops.hpp), accurate where e^x is near 1.
//
// Algorithm (double). The reduction of exp.hpp: x = k ln2 + (r + r_lo), |r| <= ln2/2 (+ rounding),
// r_lo the reduction's rounding carried along (Fast2Sum); for |x| < ln2/2, k = 0, r = x exactly.
//   e^r − 1 = r + r²/2 + r³ c(r) + r_lo (1 + r) (to first order in r_lo, |r_lo| <~ ulp(r)/2:
//   the dropped r_lo²/2 is below 2^-110), c(r) = Σ r^n/(n+3)!, n = 0..12, the Taylor coefficients 1/n!
//   rounded to double, summed by Estrin's scheme (1/6 added last): truncation below r^16/16! < 2.2e-21 for |r| <= 0.3466, 2^-68 relative to
//   the smallest result there (0.29).
//   r² is formed exactly as rr_hi + rr_lo (two_prod, by a fused multiply-add), so
//   p = e^r − 1 is carried as ph + pl with ph = fl(r + rr_hi/2) (Fast2Sum, exact error) and all
//   the small terms in pl: the rounding errors left are those of pl, |pl| <~ 2^-53 |ph| + |r³|/6
//   <= 0.0072: r³ c(r) with ~2 u relative error and three additions at ulp(0.007)/2, together
//   <~ 3.5e-18 absolute (measured 3.3e-18 at r = −0.3459), 0.06 ulp of p.
//   e^x − 1 = 2^k (1 + ph + pl) − 1 = [(2^k1 − 2^-k2) + 2^k1 ph + 2^k1 pl] 2^k2, k2 = 512 when
//   k > 512 (else 0), k1 = k − k2: every term a normal number for x in [−40, 710] (results
//   outside, NaN and ±0 chosen beside the main path, merged by one select at the end),
//   2^k1 ph exact; the first two sums are TwoSums (exact, any order of magnitudes), the errors
//   and 2^k1 pl summed in a tail, then one rounding and an exact scaling by 2^k2. Since
//   |x| >= ln2/2 wherever k != 0, the result is then >= 0.29 in magnitude and no sum cancels
//   beyond a factor ~3.5 (k = 1, r = −ln2/2: 2·0.707 − 1).
// Error: the final rounding (0.5 ulp) plus the tail's rounding errors: < 0.07 ulp where k = 0;
// where k = 1 and r ~ −ln2/2 the tail's error is doubled (2^k) against a result 2 e^r − 1 ~ 0.415
// (ulp 2^-54): ~0.12 ulp. Measured max 0.62 ulp at x = 0.3472 (k = 1), 0.55 ulp for |x| < ln2/2
// (tests/cpp/test_elementary_expm1.cc, against expm1l, millions of points); float (computed in
// double, rounded once): 0.5 ulp + 2^-29.
// Cost (benchmarks/elementary_cost.py): latency ~23 ns per call (glibc ~22; 39 ns with a
// Horner tail and a clamp on the argument's path), throughput in lanes ~1.4 ns per double.
// Special values (C99 F.10.3.3): expm1(±0) = ±0, expm1(+inf) = +inf, expm1(−inf) = −1,
// NaN -> NaN; overflow (x > 709.78...) -> +inf; x < −40 -> −1 (e^x < 2^-57, below half an ulp
// of 1 − 2^-53); tiny x -> x (to the last bit; subnormal x exactly).
#pragma once

#include "shoal/config.hpp"
#include "shoal/elementary/double_double.hpp"
#include "shoal/elementary/exp.hpp"
#include "shoal/elementary/ops.hpp"

namespace shoal {
namespace elementary {

namespace expm1_detail {

// (e^r − 1 − r − r²/2) / r³ to r^12/15!: the Taylor coefficients 1/n!, n = 3..15, rounded;
// summed as 1/6 + r Q(r), Q by Estrin's scheme (4 multiply-add levels deep instead of
// Horner's 12; 1/6 added last, rounded near it once as in Horner's scheme).
template <class V>
SHOAL_INLINE V cubic_tail(V r) {
  const V r2 = r * r, r4 = r2 * r2, r8 = r4 * r4;
  const V q12 = V(0x1.5555555555555p-5) + V(0x1.1111111111111p-7) * r;
  const V q34 = V(0x1.6c16c16c16c17p-10) + V(0x1.a01a01a01a01ap-13) * r;
  const V q56 = V(0x1.a01a01a01a01ap-16) + V(0x1.71de3a556c734p-19) * r;
  const V q78 = V(0x1.27e4fb7789f5cp-22) + V(0x1.ae64567f544e4p-26) * r;
  const V q910 = V(0x1.1eed8eff8d898p-29) + V(0x1.6124613a86d09p-33) * r;
  const V q1112 = V(0x1.93974a8c07c9dp-37) + V(0x1.ae7f3e733b81fp-41) * r;
  const V q = ((q12 + r2 * q34) + r4 * (q56 + r2 * q78)) + r8 * (q910 + r2 * q1112);
  return V(0x1.5555555555555p-3) + r * q;
}

// e^r − 1 = hi + lo for the reduced r + r_lo (|r| <= 0.35), to ~2^-60 relative.
template <class V>
SHOAL_INLINE DD<V> expm1_reduced(V r, V r_lo) {
  const DD<V> rr = two_prod(r, r);
  const V h2 = rr.hi * V(0.5);
  const DD<V> p = fast_two_sum(r, h2);
  const V small = rr.lo * V(0.5) + (r * rr.hi) * cubic_tail(r) + r_lo * (V(1.0) + r);
  return {p.hi, p.lo + small};
}

template <class V>
SHOAL_INLINE V expm1_double(V x) {
  using O = Ops<V>;
  using I = typename O::Int;
  // No clamp on the path: for |x| <= 1400 the reduction's k is in range; results outside
  // [−40, 710] (−1 rounded, +inf), NaN and ±0 (their bits: the sums give +0 for −0) are chosen
  // beside the main path and merged by one select at the end.
  const exp_detail::Reduced<V> red = exp_detail::reduce(x);
  const DD<V> p = expm1_reduced(red.r, red.r_lo);
  const I k = red.k;
  const I k2 = O::select_int(O::ilt(splat(k, 512), k), splat(k, 512), splat(k, 0));
  const V a = two_to<V>(k - k2);
  const DD<V> s1 = two_sum(a, V(0.0) - two_to<V>(splat(k, 0) - k2));
  const DD<V> s2 = two_sum(s1.hi, a * p.hi);
  const V y = (s2.hi + ((s2.lo + s1.lo) + a * p.lo)) * two_to<V>(k2);
  const V inf = O::from_bits((O::bits(x) & 0) + 0x7ff0000000000000LL);
  const V other = O::select(O::lt(x, V(0.0)), V(-1.0),
                            O::select(O::lt(V(0.0), x), inf, x + x));  // ±0: x + x = x
  const I inside = O::le(V(-40.0), x) & O::le(x, V(710.0)) & ~O::eq(x, V(0.0));
  return O::select(inside, y, other);
}

}  // namespace expm1_detail

SHOAL_INLINE double expm1(double x) { return expm1_detail::expm1_double(x); }
SHOAL_INLINE float expm1(float x) {
  return Wide<float>::down(expm1_detail::expm1_double(Wide<float>::up(x)));
}

template <class V>
SHOAL_INLINE auto expm1(const V& x) -> decltype(Ops<V>::bits(x), V()) {
  if constexpr (sizeof(typename Ops<V>::Scalar) == 8) {
    return expm1_detail::expm1_double(x);
  } else {
    return Wide<V>::down(expm1_detail::expm1_double(Wide<V>::up(x)));
  }
}

}  // namespace elementary
}  // namespace shoal
