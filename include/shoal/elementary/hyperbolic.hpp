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
//   tanh, from ONE exponential and one division (a network's activation: its cost matters most):
//   a < 0.375: a + a s P(s), s = a², P a 9-term polynomial for (tanh a − a)/a³ (below);
//   a >= 0.375: 1 − 2/(E + 1), E = e^(2a) from exp.hpp's reduction and series but kept unrounded
//   as a double-double, E + 1 likewise, the quotient corrected by its exact remainder (two_prod)
//   and 1 − q formed by a Fast2Sum, so that one rounding ends it (details at tanh_double). The
//   threshold 0.375 is where both sides measured best: the polynomial's correction grows as a²/3,
//   the exponential's error is amplified by 2E/(E² − 1) (~1/(2a) for small a).
// Error: measured max sinh 0.584 ulp (x = −0.3473: k = 1, r ~ −ln2/2), cosh 0.532 ulp,
// tanh 0.619 ulp (on [0.375, 0.75), the exponential side; 2 M points in each of nine bands of
// [0, 5] and 1 M on each side of 0.375, against tanhl)
// (tests/cpp/test_elementary_hyperbolic.cc and one-off runs of 3–4 M points on [−6, 6]
// and [0.15, 0.3], against sinhl/coshl/tanhl); float (computed in double, rounded once): 0.5 ulp
// + 2^-29.
// Cost of tanh in SIMD lanes (benchmarks/elementary_cost.py, AVX-512 Xeon, W = 8): 3.5 ns per
// double (an expm1 double-double and two divisions before 2026-12-07: 4.8 ns; glibc 11.8 ns).
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

// (tanh a − a) / a³ as a polynomial in s = a², a < 0.375: Chebyshev-economised (mpmath
// chebyfit, 9 coefficients on s in [0, 0.140625], rounded to double: 5.6e-17 relative, the
// rounded −1/3 most of it), summed as c0 + s Q(s) with Q by Estrin's scheme (c0 added last).
template <class V>
SHOAL_INLINE V tanh_series(V s) {
  const V s2 = s * s, s4 = s2 * s2;
  const V q12 = V(0x1.1111111110f0fp-3) + V(-0x1.ba1ba1b9bc59dp-5) * s;
  const V q34 = V(0x1.664f484c3912dp-6) + V(-0x1.226e25b3b82e6p-7) * s;
  const V q56 = V(0x1.d6cebe48bbf20p-9) + V(-0x1.7d273f7e2f224p-10) * s;
  const V q78 = V(0x1.2e5b26b41cac6p-11) + V(-0x1.861c26fe060b5p-13) * s;
  const V q = (q12 + s2 * q34) + s4 * (q56 + s2 * q78);
  return V(-0x1.5555555555555p-2) + s * q;
}

// a < 0.375: a + a s P(s), s = a²; the correction is below a²/3 < 0.047 of the result.
template <class V>
SHOAL_INLINE V tanh_small(V a) {
  const V s = a * a;
  return a + (a * s) * tanh_series(s);
}

// a >= 0.375: 1 − q, q = 2 / (E + 1), E = e^(2a) (2a exact; a clamped to 22, where tanh =
// 1 − 1.6e-19 rounds to 1, so k <= 64 and 2^k is exact). E is exp.hpp's sum before its
// rounding (exp_unrounded), kept as a double-double (Fast2Sum) and scaled exactly; D =
// E + 1 likewise (Fast2Sum, E >= 1), q = fl(2 / D) corrected by the remainder 2 − q D (an
// exact product, divided by D as q/2 does) into q + q_lo, and 1 − q a Fast2Sum, so that the
// result is rounded once, from a sum whose error is E's (exp.hpp's tail: ~0.1 ulp of E) times
// 2E/(E² − 1) <= 1.22 for a >= 0.375.
template <class V>
SHOAL_INLINE V tanh_large(V a) {
  using O = Ops<V>;
  const V ac = O::select(O::le(a, V(22.0)), a, V(22.0));  // NaN too: replaced by tanh_double
  const exp_detail::Reduced<V> red = exp_detail::reduce(ac + ac);
  const exp_detail::Unrounded<V> eu = exp_detail::exp_unrounded(red);
  const DD<V> er = fast_two_sum(eu.head, eu.tail);
  const V scale = two_to<V>(red.k);
  const V e = er.hi * scale, e_lo = er.lo * scale;
  const DD<V> d_lead = fast_two_sum(e, V(1.0));
  const DD<V> d = fast_two_sum(d_lead.hi, d_lead.lo + e_lo);
  const V q = V(2.0) / d.hi;
  const DD<V> qd = two_prod(q, d.hi);
  const V q_lo = (((V(2.0) - qd.hi) - qd.lo) - q * d.lo) * (q * V(0.5));
  const DD<V> one_minus_q = fast_two_sum(V(1.0), V(0.0) - q);
  return one_minus_q.hi + (one_minus_q.lo - q_lo);
}

// Both sides and a select, in the lanes too: running each only where a lane needs it
// (ops.hpp, by_part) measured no faster on the neural ODE, whose lanes see both.
template <class V>
SHOAL_INLINE V tanh_double(V x) {
  using O = Ops<V>;
  const V a = magnitude(x);
  const V m = O::select(O::lt(a, V(0.375)), tanh_small(a), tanh_large(a));
  return O::select(O::eq(x, x), with_sign_of(m, x), x + x);
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
