// atan(x), atan2(y, x), asin(x), acos(x) for double and float, scalars and lanes, the same bits everywhere
// (elementary/ops.hpp).
//
// Algorithm (double). One core computes θ = atan(Y/X) for Y, X > 0 in a safe range, as a
// double-double, without ever rounding the ratio Y/X into the result:
//   t = Y/X (rounded, only to choose the interval) picks c ∈ {0, 1/2, 1, 3/2} on [0, 7/16),
//   [7/16, 11/16), [11/16, 19/16), [19/16, 39/16), and then
//     atan(Y/X) = atan(c) + atan(u), u = (Y − cX)/(X + cY);   t >= 39/16: π/2 + atan(−X/Y).
//   c X and c Y are formed exactly (Dekker's product, no FMA); Y − c X is exact (Sterbenz: Y/X
//   is within a factor 2 of c); numerator and denominator are double-doubles, and u = u + u_lo
//   is their quotient with one correction step (exact remainder, times 1/denominator computed
//   beside the quotient), so u is good to 2^-100. c X, c Y use X, Y split beforehand (c has
//   two bits), and the interval comes from t alone, so the chain after t is short.
//   |u| <= 7/16: atan(u + u_lo) = u + u³ P(u²) + u_lo (1 − u²), P a degree-12 polynomial fitted
//   (Chebyshev interpolation in mpmath, 200 bits, coefficients rounded to double; summed as
//   −1/3 + w Q(w), Q by Estrin's scheme: 4 levels deep instead of 12) to
//   (atan u − u)/u³ on u² <= (7/16)²: relative error < 2^-58 of atan u, coefficient rounding
//   included. atan(c) and π/2 are hi + lo constants (mpmath). atan(c) + u is summed by TwoSum,
//   the small terms join the tail, and one final rounding gives the result.
// atan(x): the core on Y = |x|, X = 1, t = |x| (no division); |x| >= 2^60 (the result rounds
//   to π/2's head), inf and NaN replaced by one select at the end, the sign of x put back. Error: the final rounding plus the tail's: u³ P is up
//   to 6% of the result (u near 7/16) with a few roundings, < 0.15 ulp, the fit 0.03 ulp:
//   measured max 0.637 ulp (x near an interval edge; tests/cpp/test_elementary_inverse_trig.cc,
//   against atanl, millions of points).
// atan2(y, x): |x|, |y| scaled by one power of two (two exact steps) so that the larger is in
//   [1, 2); a ratio below 2^-60 takes |y|/|x| itself (rounded once; atan u = u to 2^-120
//   there, so subnormal results round once too); a ratio above 2^60 clamps the smaller to
//   2^-60. x < 0 (sign bit) gives π − θ, as double-doubles (π in hi + lo), the sign of y is put
//   back; the interval is chosen from |y|/|x| unscaled, beside the scaling. Measured max
//   0.669 ulp (against atan2l, all quadrants and exponents): the ratio is never rounded into
//   the result.
// Cost (benchmarks/elementary_cost.py): latency atan ~32 ns, atan2 ~53 ns per call (glibc ~22;
//   63 and 129 ns with a Horner polynomial, the correction divided by the denominator and the
//   interval found from the scaled ratio); throughput in lanes ~2.6 and 4.5 ns per double. float (computed in double, rounded once): 0.5 ulp + 2^-29.
// asin, acos: |x| <= 1/2: asin x = x + x³ Q(x²), Q of degree 13 fitted like P ((asin u − u)/u³
//   on u² <= 1/4, relative error < 2^-58 of asin u); acos x = π/2 − asin x with π/2 as hi + lo
//   (TwoSum of the heads, the rest in the tail). |x| > 1/2: with z = (1 − |x|)/2 (exact) and
//   s = √z from Ops::sqrt, s_lo = (z − s²)/(2s) with s² exact (Dekker), asin(s + s_lo) =
//   s + s³ Q(s²) + s_lo (1 + z/2); then asin|x| = π/2 − 2 asin s, acos x = 2 asin s (x > 0) or
//   π − 2 asin s (x < 0), each a TwoSum of the heads and one final rounding. The tails are
//   < 5% of the result: measured max asin 0.669 ulp (|x| just above 1/2), acos 0.642 ulp
//   (millions of points over [−1, 1], near ±1/2, near ±1, tiny); float 0.5 ulp + 2^-29.
// Special values (C99 F.10.1.1-3, F.10.1.4), all by masks: asin(±0) = ±0, acos(1) = +0,
// asin, acos of |x| > 1 -> NaN, NaN -> NaN; atan(±0) = ±0, atan(±inf) = ±π/2;
// atan2(±0, −0) = ±π, atan2(±0, +0) = ±0, atan2(±0, x < 0) = ±π, atan2(±0, x > 0) = ±0,
// atan2(y < 0, ±0) = −π/2, atan2(y > 0, ±0) = π/2, atan2(±y, −inf) = ±π and atan2(±y, +inf) =
// ±0 for finite y > 0, atan2(±inf, x) = ±π/2 for finite x, atan2(±inf, −inf) = ±3π/4,
// atan2(±inf, +inf) = ±π/4; NaN in either argument -> NaN.
#pragma once

#include "shoal/config.hpp"
#include "shoal/elementary/double_double.hpp"
#include "shoal/elementary/ops.hpp"
#include "shoal/elementary/trig.hpp"

namespace shoal {
namespace elementary {

namespace inverse_trig_detail {

using trig_detail::kAbsMask;

constexpr double kAtanHalfHi = 0x1.dac670561bb4fp-2, kAtanHalfLo = 0x1.a2b7f222f65e2p-56;
constexpr double kPio4Hi = 0x1.921fb54442d18p-1, kPio4Lo = 0x1.1a62633145c07p-55;
constexpr double kAtan3HalvesHi = 0x1.f730bd281f69bp-1, kAtan3HalvesLo = 0x1.007887af0cbbdp-56;
constexpr double kPio2Hi = 0x1.921fb54442d18p+0, kPio2Lo = 0x1.1a62633145c07p-54;
constexpr double kPiHi = 0x1.921fb54442d18p+1, kPiLo = 0x1.1a62633145c07p-53;

// (atan u − u)/u³ as a polynomial in w = u², |u| <= 7/16: −1/3 + w Q(w), Q by Estrin's scheme
// (4 multiply-add levels deep instead of Horner's 12; −1/3 added last, rounded near it once).
template <class V>
SHOAL_INLINE V atan_poly(V w) {
  const V w2 = w * w, w4 = w2 * w2, w8 = w4 * w4;
  const V q12 = V(0x1.999999999998fp-3) + V(-0x1.24924924918e5p-3) * w;
  const V q34 = V(0x1.c71c71c673e45p-4) + V(-0x1.745d171e36a07p-4) * w;
  const V q56 = V(0x1.3b13abad181b4p-4) + V(-0x1.1110908eb5d90p-4) * w;
  const V q78 = V(0x1.e1d23bcd14132p-5) + V(-0x1.ae801e0134f32p-5) * w;
  const V q910 = V(0x1.812d56e7540d1p-5) + V(-0x1.4ac1860230978p-5) * w;
  const V q1112 = V(0x1.ddee2f7872bb1p-6) + V(-0x1.9a18ede9870b4p-7) * w;
  const V q = ((q12 + w2 * q34) + w4 * (q56 + w2 * q78)) + w8 * (q910 + w2 * q1112);
  return V(-0x1.5555555555555p-2) + w * q;
}

// c a = p + e exactly for c in {0, 1/2, 1, 3/2} (two significant bits) and a split beforehand
// (Dekker's product with c's own split c + 0: the same bits as two_prod(c, a), c arriving
// late).
template <class V>
SHOAL_INLINE DD<V> times_small(V c, V a, const DD<V>& as) {
  const V p = c * a;
  return {p, (c * as.hi - p) + c * as.lo};
}

// atan(Y/X) as hi + lo (|lo| <= 6% of hi, not normalised: the caller rounds hi + lo once), for
// Y >= 0 and X > 0 with Y/X and X/Y in a range where the products below neither overflow nor
// lose bits (Y, X in [2^-60, 2^60], or X = 1); t: Y/X or any value in the same interval.
template <class V>
SHOAL_INLINE DD<V> core(V y, V x, V t) {
  using O = Ops<V>;
  const DD<V> xs = split(x), ys = split(y);  // beside t
  const typename O::Int i1 = O::le(V(0.4375), t), i2 = O::le(V(0.6875), t),
                        i3 = O::le(V(1.1875), t), i4 = O::le(V(2.4375), t);
  const V c = O::select(i3, V(1.5), O::select(i2, V(1.0), O::select(i1, V(0.5), V(0.0))));
  V ah = O::select(i3, V(kAtan3HalvesHi),
                   O::select(i2, V(kPio4Hi), O::select(i1, V(kAtanHalfHi), V(0.0))));
  V al = O::select(i3, V(kAtan3HalvesLo),
                   O::select(i2, V(kPio4Lo), O::select(i1, V(kAtanHalfLo), V(0.0))));
  ah = O::select(i4, V(kPio2Hi), ah);
  al = O::select(i4, V(kPio2Lo), al);
  // Numerator y − c x (y − c x.hi exact), denominator x + c y, as double-doubles.
  const DD<V> cx = times_small(c, x, xs), cy = times_small(c, y, ys);
  const DD<V> num = two_sum(y - cx.hi, -cx.lo);
  const DD<V> d0 = two_sum(x, cy.hi);
  const V nh = O::select(i4, -x, num.hi), nl = O::select(i4, V(0.0), num.lo);
  const V dh = O::select(i4, y, d0.hi), dl = O::select(i4, V(0.0), d0.lo + cy.lo);
  // u + u_lo = (nh + nl)/(dh + dl): quotient, exact remainder, one correction times 1/dh
  // (computed beside u; the correction is ~1 ulp of u, so 1/dh's rounding is negligible).
  const V u = nh / dh;
  const V inv = V(1.0) / dh;
  const DD<V> p = two_prod(u, dh);
  const V u_lo = (((nh - p.hi) + (nl - u * dl)) - p.lo) * inv;  // nh − p.hi exact
  const V w = u * u;
  const DD<V> s = two_sum(ah, u);
  // atan(u + u_lo) = u + u³ P(w) + u_lo (1 − w); u_lo joins last.
  const V tail = (s.lo + (al + (u * w) * atan_poly(w))) + u_lo * (V(1.0) - w);
  return {s.hi, tail};
}

template <class V>
SHOAL_INLINE V atan_double(V x) {
  using O = Ops<V>;
  const typename O::Int sign = O::bits(x) & ~kAbsMask;
  const V ax = O::from_bits(O::bits(x) & kAbsMask);
  // No clamp on the path: |x| >= 2^60 (the result rounds to π/2's head), inf and NaN give junk
  // there, replaced by one select at the end.
  const DD<V> th = core(ax, V(1.0), ax);
  const V r = O::select(O::lt(ax, V(0x1p60)), th.hi + th.lo, V(kPio2Hi));
  return O::select(O::eq(x, x), O::from_bits(O::bits(r) | sign), x + x);
}

template <class V>
SHOAL_INLINE V atan2_double(V y, V x) {
  using O = Ops<V>;
  using Int = typename O::Int;
  const Int ysign = O::bits(y) & ~kAbsMask;
  const Int x_negative = O::ilt(O::bits(x), O::bits(V(0.0)));  // sign bit set (−0 too)
  V ax = O::from_bits(O::bits(x) & kAbsMask);
  V ay = O::from_bits(O::bits(y) & kAbsMask);
  // Infinities: both -> 1, 1 (π/4); one -> 1 against 0 (NaN counts as infinite here; its
  // result is replaced at the end).
  const V max = V(0x1.fffffffffffffp1023);
  const Int xinf = ~O::le(ax, max), yinf = ~O::le(ay, max);
  ax = O::select(xinf, V(1.0), O::select(yinf, V(0.0), ax));
  ay = O::select(yinf, V(1.0), O::select(xinf, V(0.0), ay));
  // Scale: the larger of ax, ay into [1, 2) (tiny pairs first lifted by 2^600).
  const V big = O::select(O::lt(ax, ay), ay, ax);
  const V lift = O::select(O::lt(big, V(0x1p-500)), V(0x1p600), V(1.0));
  const V bl = big * lift;
  const Int e = ((O::bits(bl) >> 52) & 0x7ff) - 1023;  // in [−574, 1023]
  const Int e1 = e >> 1;
  const V sx = ax * lift * two_to<V>(-e1) * two_to<V>(e1 - e);
  const V sy = ay * lift * two_to<V>(-e1) * two_to<V>(e1 - e);
  const V lo_clamp = V(0x1p-60);
  // The interval from the unscaled ratio (the scaling is exact where it matters; where sx or
  // sy is clamped, both ratios lie in the first or the last interval), beside the scaling.
  const DD<V> th = core(O::select(O::lt(sy, lo_clamp), lo_clamp, sy),
                        O::select(O::lt(sx, lo_clamp), lo_clamp, sx), ay / ax);
  V hi = th.hi, lo = th.lo;
  // A ratio below 2^-60: atan(y/x) = y/x, rounded once (subnormal results too).
  const Int tiny = O::lt(sy, lo_clamp);
  hi = O::select(tiny, ay / ax, hi);
  lo = O::select(tiny, V(0.0), lo);
  // y = 0: 0; x = 0 (y ≠ 0): π/2.
  const Int yzero = O::eq(ay, V(0.0)), xzero = O::eq(ax, V(0.0)) & ~yzero;
  hi = O::select(yzero, V(0.0), O::select(xzero, V(kPio2Hi), hi));
  lo = O::select(yzero | xzero, O::select(xzero, V(kPio2Lo), V(0.0)), lo);
  // x < 0: π − θ.
  const DD<V> m = two_sum(V(kPiHi), -hi);
  const V mt = m.lo + (V(kPiLo) - lo);
  const V r = O::select(x_negative, m.hi + mt, hi + lo);
  const V signed_r = O::from_bits(O::bits(r) | ysign);
  // A NaN argument comes back quieted, y's first (not x + y: which payload a commutative add
  // returns may differ between the scalar code and the lanes).
  return O::select(O::eq(x, x) & O::eq(y, y), signed_r, O::select(O::eq(y, y), x + x, y + y));
}

// (asin u − u)/u³ as a polynomial in w = u², |u| <= 1/2.
template <class V>
SHOAL_INLINE V asin_poly(V w) {
  V q = V(0x1.e541e703646cap-6);
  q = q * w + V(-0x1.3b670509b8ba4p-6);
  q = q * w + V(0x1.407b71e22f0f0p-6);
  q = q * w + V(0x1.8ec67625b1250p-9);
  q = q * w + V(0x1.3167772f25afdp-7);
  q = q * w + V(0x1.3b48f25a51282p-7);
  q = q * w + V(0x1.7b029ae0bf779p-7);
  q = q * w + V(0x1.c990aaf9c472ep-7);
  q = q * w + V(0x1.1c4efcf1d8e6cp-6);
  q = q * w + V(0x1.6e8ba1235a206p-6);
  q = q * w + V(0x1.f1c71c7a558f9p-6);
  q = q * w + V(0x1.6db6db6dac1a2p-5);
  q = q * w + V(0x1.3333333333388p-4);
  q = q * w + V(0x1.5555555555555p-3);
  return q;
}

// which = 0: asin, 1: acos.
template <class V>
SHOAL_INLINE V asin_acos_double(V x, int which) {
  using O = Ops<V>;
  using Int = typename O::Int;
  const Int sign = O::bits(x) & ~kAbsMask;
  const V a = O::from_bits(O::bits(x) & kAbsMask);
  const Int large = O::lt(V(0.5), a);
  // The argument of the series: a itself, or s = √((1 − a)/2) + s_lo.
  const V z = (V(1.0) - a) * V(0.5);  // exact for a in [1/2, 1]
  const V zc = O::select(O::le(V(0.0), z), z, V(0.0));  // |x| > 1, NaN: replaced at the end
  const V s0 = O::sqrt(zc);
  const DD<V> ss = two_prod(s0, s0);
  const V s0_lo = O::select(O::lt(V(0.0), s0), ((zc - ss.hi) - ss.lo) / (s0 + s0), V(0.0));
  const V u = O::select(large, s0, a);
  const V u_lo = O::select(large, s0_lo, V(0.0));
  const V w = O::select(large, zc, a * a);
  // asin(u + u_lo) = u + t.
  const V t = (u * w) * asin_poly(w) + u_lo * (V(1.0) + V(0.5) * w);
  V r;
  if (which == 0) {
    // Small: u + t; large: π/2 − 2u − 2t.
    const DD<V> h = two_sum(V(kPio2Hi), V(-2.0) * u);
    const V big = h.hi + ((h.lo + V(kPio2Lo)) - V(2.0) * t);
    r = O::from_bits(O::bits(O::select(large, big, u + t)) | sign);
  } else {
    const Int negative = O::ilt(O::bits(x), O::bits(V(0.0)));
    // Small: π/2 − (±(u + t)); large, x > 0: 2u + 2t; large, x < 0: π − 2u − 2t.
    const V su = O::from_bits(O::bits(u) | sign), st = O::from_bits(O::bits(t) ^ sign);
    const DD<V> hs = two_sum(V(kPio2Hi), -su);
    const V small = hs.hi + ((hs.lo + V(kPio2Lo)) - st);
    const DD<V> hn = two_sum(V(kPiHi), V(-2.0) * u);
    const V big_neg = hn.hi + ((hn.lo + V(kPiLo)) - V(2.0) * t);
    const V big_pos = V(2.0) * u + V(2.0) * t;
    r = O::select(large, O::select(negative, big_neg, big_pos), small);
  }
  const V nan = O::from_bits(O::bits(V(0.0)) | int64_t(0x7ff8000000000000LL));
  return O::select(O::le(a, V(1.0)), r, O::select(O::eq(x, x), nan, x + x));
}

}  // namespace inverse_trig_detail

SHOAL_INLINE double atan(double x) { return inverse_trig_detail::atan_double(x); }
SHOAL_INLINE float atan(float x) {
  return Wide<float>::down(inverse_trig_detail::atan_double(Wide<float>::up(x)));
}
SHOAL_INLINE double atan2(double y, double x) { return inverse_trig_detail::atan2_double(y, x); }
SHOAL_INLINE float atan2(float y, float x) {
  return Wide<float>::down(
      inverse_trig_detail::atan2_double(Wide<float>::up(y), Wide<float>::up(x)));
}

SHOAL_INLINE double asin(double x) { return inverse_trig_detail::asin_acos_double(x, 0); }
SHOAL_INLINE double acos(double x) { return inverse_trig_detail::asin_acos_double(x, 1); }
SHOAL_INLINE float asin(float x) {
  return Wide<float>::down(inverse_trig_detail::asin_acos_double(Wide<float>::up(x), 0));
}
SHOAL_INLINE float acos(float x) {
  return Wide<float>::down(inverse_trig_detail::asin_acos_double(Wide<float>::up(x), 1));
}

// Lanes and other value types with an Ops<V>: the double routine, or float through Wide<V>.
template <class V>
SHOAL_INLINE auto asin(const V& x) -> decltype(Ops<V>::bits(x), V()) {
  if constexpr (sizeof(typename Ops<V>::Scalar) == 8) {
    return inverse_trig_detail::asin_acos_double(x, 0);
  } else {
    return Wide<V>::down(inverse_trig_detail::asin_acos_double(Wide<V>::up(x), 0));
  }
}
template <class V>
SHOAL_INLINE auto acos(const V& x) -> decltype(Ops<V>::bits(x), V()) {
  if constexpr (sizeof(typename Ops<V>::Scalar) == 8) {
    return inverse_trig_detail::asin_acos_double(x, 1);
  } else {
    return Wide<V>::down(inverse_trig_detail::asin_acos_double(Wide<V>::up(x), 1));
  }
}
template <class V>
SHOAL_INLINE auto atan(const V& x) -> decltype(Ops<V>::bits(x), V()) {
  if constexpr (sizeof(typename Ops<V>::Scalar) == 8) {
    return inverse_trig_detail::atan_double(x);
  } else {
    return Wide<V>::down(inverse_trig_detail::atan_double(Wide<V>::up(x)));
  }
}
template <class V>
SHOAL_INLINE auto atan2(const V& y, const V& x) -> decltype(Ops<V>::bits(x), V()) {
  if constexpr (sizeof(typename Ops<V>::Scalar) == 8) {
    return inverse_trig_detail::atan2_double(y, x);
  } else {
    return Wide<V>::down(inverse_trig_detail::atan2_double(Wide<V>::up(y), Wide<V>::up(x)));
  }
}

}  // namespace elementary
}  // namespace shoal
