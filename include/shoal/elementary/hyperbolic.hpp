// sinh, cosh, tanh for double and float, scalars and lanes, the same bits everywhere
// (elementary/ops.hpp).
//
// Algorithm (double), on a = |x| (the sign restored at the end for the odd sinh and tanh):
//   a < 1/4: the Taylor series, sinh a = a + a·(a² S(a²)), S = Σ a^(2n)/(2n+3)!, n = 0..6,
//   cosh a = 1 + a² C(a²), C = Σ a^(2n)/(2n+2)!, n = 0..6 (coefficients 1/n! rounded to double;
//   truncation below a^16/16! < 1e-23 relative). The correction term is below a²/6 <= 1/96 of
//   the result, so its few roundings cost <~ 0.03 ulp.
//   a >= 1/4: e^a and e^-a both from exp.hpp's reduction of a, a = k ln2 + (r + r_lo) (so −a
//   reduces to −k, −r, −r_lo), with e^±r − 1 = p_hi + p_lo the double-double of expm1.hpp
//   (accurate to ~3.5e-18 absolute); then (e^a ± e^-a)/2 = 2^(k−1)(1 + pe) ± 2^(−k−1)(1 + pf):
//   the scalings are exact (powers of two; for k > 512 everything is scaled by 2^-512 first and
//   the result by 2^512, so nothing overflows before the end, and e^-a's scale is held at 2^-101
//   for k > 100, where it is below 2^-200 of the result), the four leading terms are added by
//   TwoSums (exact) and the tails and the TwoSums' errors summed last: the result is the rounding
//   of a double-double accurate to <~ 2^k · 4e-18 absolute, against a result >= sinh(1/4) =
//   0.2526 (k = 0), >= 0.37 (k = 1), >= 2^(k−2) beyond: < 0.1 ulp.
//   tanh a = E / (E + 2), E = e^(2a) − 1, from ONE exponential (a network's activation: half the
//   work of sinh/cosh): 2a is exact, reduced as exp.hpp reduces (2a = k ln2 + r + r_lo, a clamped
//   to 22, where tanh = 1 − 1.6e-19 rounds to 1, so k <= 64), e^r − 1 = p_hi + p_lo from
//   expm1.hpp's double-double, then E = (2^k − 1) + 2^k p_hi + 2^k p_lo by TwoSums (exact; as in
//   expm1, no sum cancels beyond a factor ~3.5) and D = E + 2 likewise, both normalized
//   double-doubles accurate to <~ 2^-57 relative; for k = 0 (a < ln2/4) E is p itself, accurate
//   relative to a however small a is. q = fl(E/D), then one correction
//   q + ((E_hi − q D_hi) + E_lo − q D_lo) / D_hi with q D_hi exact (two_prod, by a
//   fused multiply-add) and E_hi − q D_hi exact (Sterbenz): the quotient's error is that of E and D
//   plus the final rounding. Below 2^-27, tanh x = x − x³/3 rounds to x, returned as is (so a
//   subnormal never meets Dekker's product).
// Error: measured max sinh 0.584 ulp (x = −0.3473: k = 1, r ~ −ln2/2), cosh 0.532 ulp,
// tanh 0.586 ulp (x = 0.17348, just past ln2/4: k = 1, r ~ −ln2/2, E = 1 + 2p doubling p's
// error) (tests/cpp/test_elementary_hyperbolic.cc and one-off runs of 3–4 M points on [−6, 6]
// and [0.15, 0.3], against sinhl/coshl/tanhl); float (computed in double, rounded once): 0.5 ulp
// + 2^-29.
// Special values (C99 F.10.2): sinh(±0) = ±0, sinh(±inf) = ±inf, cosh(±0) = 1, cosh(±inf) = +inf,
// tanh(±0) = ±0, tanh(±inf) = ±1, NaN -> NaN; tiny x: sinh x = tanh x = x; overflow of sinh,
// cosh (|x| > 710.4758...) -> ±inf, +inf.
#pragma once

#include "shoal/config.hpp"
#include "shoal/elementary/double_double.hpp"
#include "shoal/elementary/exp.hpp"
#include "shoal/elementary/expm1.hpp"
#include "shoal/elementary/ops.hpp"

namespace shoal {
namespace elementary {

namespace hyperbolic_detail {

// (sinh a − a) / a³ and (cosh a − 1) / a² as series in a², a < 1/4 (1/n! rounded to double).
template <class V>
SHOAL_INLINE V sinh_series(V a2) {
  V s = V(0x1.ae7f3e733b81fp-41);
  s = s * a2 + V(0x1.6124613a86d09p-33);
  s = s * a2 + V(0x1.ae64567f544e4p-26);
  s = s * a2 + V(0x1.71de3a556c734p-19);
  s = s * a2 + V(0x1.a01a01a01a01ap-13);
  s = s * a2 + V(0x1.1111111111111p-7);
  s = s * a2 + V(0x1.5555555555555p-3);
  return s;
}
template <class V>
SHOAL_INLINE V cosh_series(V a2) {
  V c = V(0x1.93974a8c07c9dp-37);
  c = c * a2 + V(0x1.1eed8eff8d898p-29);
  c = c * a2 + V(0x1.27e4fb7789f5cp-22);
  c = c * a2 + V(0x1.a01a01a01a01ap-16);
  c = c * a2 + V(0x1.6c16c16c16c17p-10);
  c = c * a2 + V(0x1.5555555555555p-5);
  c = c * a2 + V(0x1.0000000000000p-1);
  return c;
}

// e^a / 2 and e^-a / 2 for 0 <= a <= 711, scaled by 2^-j (j = 0, or 512 when k > 512), as
// 2^(k−1−j) (1 + pe_hi + pe_lo) and 2^(−k'−1−j) (1 + pf_hi + pf_lo) (k' = min(k, 100)), e^±r − 1 =
// pe, pf from expm1.hpp's double-double; the products by powers of two below are exact.
template <class V>
struct Halves {
  V se, sf;  // the powers of two
  V eh, fh;  // se pe_hi, sf pf_hi
  V et, ft;  // se pe_lo, sf pf_lo
  typename Ops<V>::Int j;
};
template <class V>
SHOAL_INLINE Halves<V> halves(V a) {
  using O = Ops<V>;
  using I = typename O::Int;
  const exp_detail::Reduced<V> red = exp_detail::reduce(a);
  const DD<V> pe = expm1_detail::expm1_reduced(red.r, red.r_lo);
  const DD<V> pf = expm1_detail::expm1_reduced(V(0.0) - red.r, V(0.0) - red.r_lo);
  const I k = red.k;
  const I c512 = splat(k, 512), c100 = splat(k, 100);
  const I j = O::select_int(O::ilt(c512, k), c512, splat(k, 0));
  const I kf = O::select_int(O::ilt(c100, k), c100, k);
  const V se = two_to<V>(k - 1 - j);
  const V sf = two_to<V>(splat(k, -1) - kf - j);
  return {se, sf, se * pe.hi, sf * pf.hi, se * pe.lo, sf * pf.lo, j};
}
// (e^a + sign e^-a) / 2^(j+1) as hi + lo (hi the rounded sum; sign = ±1): TwoSums of the
// exact terms, the tails and the TwoSums' errors added last.
template <class V>
SHOAL_INLINE DD<V> combine(const Halves<V>& h, V sign) {
  const DD<V> ones = two_sum(h.se, sign * h.sf);
  const DD<V> ps = two_sum(h.eh, sign * h.fh);
  const DD<V> all = two_sum(ones.hi, ps.hi);
  const V lo = all.lo + ((ones.lo + ps.lo) + (h.et + sign * h.ft));
  return fast_two_sum(all.hi, lo);
}

// The sign bit (from ±1: simd::Lanes(−0.0) broadcasts +0), |x|, and m given x's sign.
template <class V>
SHOAL_INLINE typename Ops<V>::Int sign_mask() {
  return Ops<V>::bits(V(-1.0)) ^ Ops<V>::bits(V(1.0));
}
template <class V>
SHOAL_INLINE V magnitude(V x) {
  using O = Ops<V>;
  return O::from_bits(O::bits(x) & ~sign_mask<V>());
}
template <class V>
SHOAL_INLINE V with_sign_of(V m, V x) {
  using O = Ops<V>;
  return O::from_bits(O::bits(m) | (O::bits(x) & sign_mask<V>()));
}

template <class V>
SHOAL_INLINE V sinh_double(V x) {
  using O = Ops<V>;
  const V a = magnitude(x);
  const V ac = O::select(O::le(a, V(711.0)), a, V(711.0));  // NaN too: replaced below
  const V a2 = a * a;
  const V small = a + a * (a2 * sinh_series(a2));
  const Halves<V> h = halves(ac);
  const V large = combine(h, V(-1.0)).hi * two_to<V>(h.j);
  const V y = with_sign_of(O::select(O::lt(a, V(0.25)), small, large), x);
  return O::select(O::eq(x, x), y, x + x);
}

template <class V>
SHOAL_INLINE V cosh_double(V x) {
  using O = Ops<V>;
  const V a = magnitude(x);
  const V ac = O::select(O::le(a, V(711.0)), a, V(711.0));
  const V a2 = a * a;
  const V small = V(1.0) + a2 * cosh_series(a2);
  const Halves<V> h = halves(ac);
  const V large = combine(h, V(1.0)).hi * two_to<V>(h.j);
  const V y = O::select(O::lt(a, V(0.25)), small, large);
  return O::select(O::eq(x, x), y, x + x);
}

template <class V>
SHOAL_INLINE V tanh_double(V x) {
  using O = Ops<V>;
  const V a = magnitude(x);
  const V ac = O::select(O::le(a, V(22.0)), a, V(22.0));  // NaN too: replaced below
  const exp_detail::Reduced<V> red = exp_detail::reduce(ac + ac);
  const DD<V> p = expm1_detail::expm1_reduced(red.r, red.r_lo);
  // E = e^(2a) − 1 and D = E + 2 as normalized double-doubles (2^k p_hi is exact).
  const V scale = two_to<V>(red.k);
  const DD<V> ones = two_sum(scale, V(-1.0));
  const DD<V> lead = two_sum(ones.hi, scale * p.hi);
  const DD<V> e = fast_two_sum(lead.hi, (lead.lo + ones.lo) + scale * p.lo);
  const DD<V> d_lead = two_sum(V(2.0), e.hi);
  const DD<V> d = fast_two_sum(d_lead.hi, d_lead.lo + e.lo);
  const V q = e.hi / d.hi;
  const DD<V> qd = two_prod(q, d.hi);
  const V rem = ((e.hi - qd.hi) - qd.lo) + (e.lo - q * d.lo);
  const V quotient = q + rem / d.hi;
  const V y = with_sign_of(O::select(O::lt(a, V(0x1p-27)), a, quotient), x);
  return O::select(O::eq(x, x), y, x + x);
}

}  // namespace hyperbolic_detail

SHOAL_INLINE double sinh(double x) { return hyperbolic_detail::sinh_double(x); }
SHOAL_INLINE float sinh(float x) {
  return Wide<float>::down(hyperbolic_detail::sinh_double(Wide<float>::up(x)));
}
SHOAL_INLINE double cosh(double x) { return hyperbolic_detail::cosh_double(x); }
SHOAL_INLINE float cosh(float x) {
  return Wide<float>::down(hyperbolic_detail::cosh_double(Wide<float>::up(x)));
}
SHOAL_INLINE double tanh(double x) { return hyperbolic_detail::tanh_double(x); }
SHOAL_INLINE float tanh(float x) {
  return Wide<float>::down(hyperbolic_detail::tanh_double(Wide<float>::up(x)));
}

template <class V>
SHOAL_INLINE auto sinh(const V& x) -> decltype(Ops<V>::bits(x), V()) {
  if constexpr (sizeof(typename Ops<V>::Scalar) == 8) {
    return hyperbolic_detail::sinh_double(x);
  } else {
    return Wide<V>::down(hyperbolic_detail::sinh_double(Wide<V>::up(x)));
  }
}
template <class V>
SHOAL_INLINE auto cosh(const V& x) -> decltype(Ops<V>::bits(x), V()) {
  if constexpr (sizeof(typename Ops<V>::Scalar) == 8) {
    return hyperbolic_detail::cosh_double(x);
  } else {
    return Wide<V>::down(hyperbolic_detail::cosh_double(Wide<V>::up(x)));
  }
}
template <class V>
SHOAL_INLINE auto tanh(const V& x) -> decltype(Ops<V>::bits(x), V()) {
  if constexpr (sizeof(typename Ops<V>::Scalar) == 8) {
    return hyperbolic_detail::tanh_double(x);
  } else {
    return Wide<V>::down(hyperbolic_detail::tanh_double(Wide<V>::up(x)));
  }
}

}  // namespace elementary
}  // namespace shoal
