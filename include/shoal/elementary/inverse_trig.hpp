// atan(x), atan2(y, x) for double and float, scalars and lanes, the same bits everywhere
// (elementary/ops.hpp).
//
// Algorithm (double). One core computes θ = atan(Y/X) for Y, X > 0 in a safe range, as a
// double-double, without ever rounding the ratio Y/X into the result:
//   t = Y/X (rounded, only to choose the interval) picks c ∈ {0, 1/2, 1, 3/2} on [0, 7/16),
//   [7/16, 11/16), [11/16, 19/16), [19/16, 39/16), and then
//     atan(Y/X) = atan(c) + atan(u), u = (Y − cX)/(X + cY);   t >= 39/16: π/2 + atan(−X/Y).
//   c X and c Y are formed exactly (Dekker's product, no FMA); Y − c X is exact (Sterbenz: Y/X
//   is within a factor 2 of c); numerator and denominator are double-doubles, and u = u + u_lo
//   is their quotient with one correction step (exact remainder), so u is good to 2^-100.
//   |u| <= 7/16: atan(u + u_lo) = u + u³ P(u²) + u_lo (1 − u²), P a degree-12 polynomial fitted
//   (Chebyshev interpolation in mpmath, 200 bits, coefficients rounded to double) to
//   (atan u − u)/u³ on u² <= (7/16)²: relative error < 2^-58 of atan u, coefficient rounding
//   included. atan(c) and π/2 are hi + lo constants (mpmath). atan(c) + u is summed by TwoSum,
//   the small terms join the tail, and one final rounding gives the result.
// atan(x): the core on Y = min(|x|, 2^60), X = 1 (beyond 2^60 the result rounds to π/2's head
//   either way), the sign of x put back. Error: the final rounding plus the tail's: u³ P is up
//   to 6% of the result (u near 7/16) with a few roundings, < 0.15 ulp, the fit 0.03 ulp:
//   measured max 0.644 ulp (x near 0.4375; tests/cpp/test_elementary_inverse_trig.cc, against
//   atanl, millions of points).
// atan2(y, x): |x|, |y| scaled by one power of two (two exact steps) so that the larger is in
//   [1, 2); a ratio below 2^-60 takes |y|/|x| itself (rounded once; atan u = u to 2^-120
//   there, so subnormal results round once too); a ratio above 2^60 clamps the smaller to
//   2^-60. x < 0 (sign bit) gives π − θ, as double-doubles (π in hi + lo), the sign of y is put
//   back. Measured max 0.669 ulp (against atan2l, all quadrants and exponents): the ratio is
//   never rounded into the result. float (computed in double, rounded once): 0.5 ulp + 2^-29.
// Special values (C99 F.10.1.1, F.10.1.4), all by masks: atan(±0) = ±0, atan(±inf) = ±π/2;
// atan2(±0, −0) = ±π, atan2(±0, +0) = ±0, atan2(±0, x < 0) = ±π, atan2(±0, x > 0) = ±0,
// atan2(y < 0, ±0) = −π/2, atan2(y > 0, ±0) = π/2, atan2(±y, −inf) = ±π and atan2(±y, +inf) =
// ±0 for finite y > 0, atan2(±inf, x) = ±π/2 for finite x, atan2(±inf, −inf) = ±3π/4,
// atan2(±inf, +inf) = ±π/4; NaN in either argument -> NaN.
#pragma once

#include "shoal/config.hpp"
#include "shoal/elementary/ops.hpp"
#include "shoal/elementary/trig.hpp"

namespace shoal {
namespace elementary {

namespace inverse_trig_detail {

using trig_detail::DD;
using trig_detail::two_prod;
using trig_detail::two_sum;
using trig_detail::kAbsMask;

constexpr double kAtanHalfHi = 0x1.dac670561bb4fp-2, kAtanHalfLo = 0x1.a2b7f222f65e2p-56;
constexpr double kPio4Hi = 0x1.921fb54442d18p-1, kPio4Lo = 0x1.1a62633145c07p-55;
constexpr double kAtan3HalvesHi = 0x1.f730bd281f69bp-1, kAtan3HalvesLo = 0x1.007887af0cbbdp-56;
constexpr double kPio2Hi = 0x1.921fb54442d18p+0, kPio2Lo = 0x1.1a62633145c07p-54;
constexpr double kPiHi = 0x1.921fb54442d18p+1, kPiLo = 0x1.1a62633145c07p-53;

// (atan u − u)/u³ as a polynomial in w = u², |u| <= 7/16.
template <class V>
SHOAL_INLINE V atan_poly(V w) {
  V p = V(-0x1.9a18ede9870b4p-7);
  p = p * w + V(0x1.ddee2f7872bb1p-6);
  p = p * w + V(-0x1.4ac1860230978p-5);
  p = p * w + V(0x1.812d56e7540d1p-5);
  p = p * w + V(-0x1.ae801e0134f32p-5);
  p = p * w + V(0x1.e1d23bcd14132p-5);
  p = p * w + V(-0x1.1110908eb5d90p-4);
  p = p * w + V(0x1.3b13abad181b4p-4);
  p = p * w + V(-0x1.745d171e36a07p-4);
  p = p * w + V(0x1.c71c71c673e45p-4);
  p = p * w + V(-0x1.24924924918e5p-3);
  p = p * w + V(0x1.999999999998fp-3);
  p = p * w + V(-0x1.5555555555555p-2);
  return p;
}

// atan(Y/X) as a normalised double-double, for Y >= 0 and X > 0 with Y/X and X/Y in a range
// where the products below neither overflow nor lose bits (Y, X in [2^-60, 2^60], or X = 1).
template <class V>
SHOAL_INLINE DD<V> core(V y, V x) {
  using O = Ops<V>;
  const V t = y / x;
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
  const DD<V> cx = two_prod(c, x), cy = two_prod(c, y);
  const DD<V> num = two_sum(y - cx.hi, -cx.lo);
  const DD<V> d0 = two_sum(x, cy.hi);
  const V nh = O::select(i4, -x, num.hi), nl = O::select(i4, V(0.0), num.lo);
  const V dh = O::select(i4, y, d0.hi), dl = O::select(i4, V(0.0), d0.lo + cy.lo);
  // u + u_lo = (nh + nl)/(dh + dl): quotient, exact remainder, one correction.
  const V u = nh / dh;
  const DD<V> p = two_prod(u, dh);
  const V u_lo = ((((nh - p.hi) - p.lo) + nl) - u * dl) / dh;
  const V w = u * u;
  const DD<V> s = two_sum(ah, u);
  const V tail = s.lo + ((al + u_lo * (V(1.0) - w)) + (u * w) * atan_poly(w));
  const V h = s.hi + tail;
  return {h, (s.hi - h) + tail};
}

template <class V>
SHOAL_INLINE V atan_double(V x) {
  using O = Ops<V>;
  const typename O::Int sign = O::bits(x) & ~kAbsMask;
  const V ax = O::from_bits(O::bits(x) & kAbsMask);
  const V y = O::select(O::lt(ax, V(0x1p60)), ax, V(0x1p60));  // NaN, inf -> 2^60
  const DD<V> th = core(y, V(1.0));
  const V r = th.hi + th.lo;
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
  const DD<V> th = core(O::select(O::lt(sy, lo_clamp), lo_clamp, sy),
                        O::select(O::lt(sx, lo_clamp), lo_clamp, sx));
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
  return O::select(O::eq(x, x) & O::eq(y, y), signed_r, x + y);
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

// Lanes and other value types with an Ops<V>: the double routine, or float through Wide<V>.
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
