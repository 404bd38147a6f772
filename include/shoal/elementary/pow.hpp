// pow(x, y) for double and float, scalars and lanes, the same bits everywhere
// (elementary/ops.hpp).
//
// Algorithm (double). |x|^y = exp(y ln|x|):
//   ln|x| = hi + lo from log.hpp's double-double core (relative error ≲ 2^-68);
//   y ln|x| = p + p_lo: y hi by two_prod (a fused multiply-add), exact, plus y lo;
//   y is first clamped to |y| <= 2^65 (beyond it |y ln|x|| >= 2^12 for every x ≠ 1, so the
//   result over- or underflows either way, and the split cannot overflow);
//   exp(p + p_lo): exp.hpp's reduction of p alone (p = k ln2 + r + r_lo), δ = r_lo + p_lo
//   (|δ| ≲ 2^-41), e^(r + δ) = 1 + r + r² q(r) + δ e^r with δ e^r by its Taylor series to
//   r⁵/5! (truncation < 2^-60), computed beside q, then 2^k. For |p| <= 1400 the scaling
//   overflows to +inf and underflows to +0 by itself; every special case (and |p| > 1400) is
//   a value chosen by masks beside the main path and merged by one select at the end, with the
//   sign (x < 0, odd y) as an xor of the sign bit: the dependency chain is the log core, one
//   product, exp's.
// Error: |y ln|x|| <= 745 where the result is finite and nonzero, so the core's 2^-68 relative
// error is an absolute error ≲ 2^-58.5 in the exponent, ≲ 0.03 ulp of the result; y lo rounds
// at 2^-106 of p. The rest is exp's 0.63 ulp. Measured (tests/cpp/test_elementary_pow.cc,
// against powl, 2.3 million pairs): max 0.628 ulp (x in (0, 1e10], |y| <= 300, at
// x = 0.48025993479560453, y = −284.94201321005653), 0.614 (x = 1 ± 2^-52..2^-1,
// |y ln x| <= 700), 0.608 (x < 0, integer y), 0.619 (results near overflow), 0.756 (subnormal
// results, rounded twice); float (through double, one rounding): 0.5 ulp + 2^-29 (0.499999
// over 1 million pairs).
// Cost (benchmarks/elementary_cost.py): latency ~50 ns per call against glibc's ~25 ns (it was
// ~92 ns with a serial double-double log and Horner polynomials); throughput in lanes ~6 ns.
// Sign and domain from y's bits (masks, no branches): y is an integer when its exponent is >= 52
// or its fraction bits below the units bit are zero; odd when it is an integer below 2^53 whose
// units bit is set (|y| >= 2^53: even).
// Special values (C99 F.10.4.4): pow(x, ±0) = 1 for every x, NaN too; pow(+1, y) = 1 for every
// y, NaN too; pow(±0, y) = ±inf for odd integer y < 0, +inf for other y < 0 (−inf included),
// ±0 for odd integer y > 0, +0 for other y > 0 (+inf included); pow(−1, ±inf) = 1;
// pow(x, −inf) = +inf for |x| < 1, +0 for |x| > 1; pow(x, +inf) = +0 for |x| < 1, +inf for
// |x| > 1; pow(−inf, y) = −0 for odd integer y < 0, +0 for other y < 0, −inf for odd integer
// y > 0, +inf for other y > 0; pow(+inf, y) = +0 for y < 0, +inf for y > 0; pow(x, y) = NaN
// for finite x < 0 and finite non-integer y; x < 0 and integer y: (−1)^y |x|^y; NaN otherwise
// propagates. Overflow -> ±inf, underflow -> ±0 (subnormal results rounded twice, as exp's).
#pragma once

#include "shoal/config.hpp"
#include "shoal/elementary/double_double.hpp"
#include "shoal/elementary/exp.hpp"
#include "shoal/elementary/log.hpp"
#include "shoal/elementary/ops.hpp"

namespace shoal {
namespace elementary {

namespace pow_detail {

// exp(p + p_lo), |p_lo| <= 2^-41 or so, p not renormalised, for |p| <= 1400: there
// k = round(p / ln2) is within [−2044, 2046], where exp_detail::scale's two powers of two are
// normal, so overflow gives +inf and complete underflow +0 by themselves. Other p (and NaN) give
// junk, which the caller replaces (no clamp on the result's path).
// p = k ln2 + r + r_lo (exp.hpp's reduction) and δ = r_lo + p_lo: e^(r + δ) = e^r + δ e^r, e^r as
// in exp (1 + r + r² q(r)), δ e^r by the Taylor series to r⁵/5! (|δ| r⁶/6! < 2^-60), which does
// not wait for q: δ joins the tail only at the end.
template <class V>
SHOAL_INLINE V exp_dd(V p, V p_lo) {
  const exp_detail::Reduced<V> red = exp_detail::reduce(p);
  const V r = red.r;
  const V delta = red.r_lo + p_lo;
  const V r2 = r * r;
  const V de = delta * ((V(1.0) + r) + r2 * ((V(0.5) + r * V(0x1.5555555555555p-3)) +
                                             r2 * (V(0x1.5555555555555p-5) +
                                                   r * V(0x1.1111111111111p-7))));
  const V head = V(1.0) + r;
  const V tail = ((V(1.0) - head) + r) + (r2 * exp_detail::taylor_tail(r) + de);
  return exp_detail::scale(head + tail, red.k);
}

// Masks: y an integer (finite), y an odd integer.
template <class V>
struct Parity {
  typename Ops<V>::Int integer, odd;
};
template <class V>
SHOAL_INLINE Parity<V> parity(V y) {
  using O = Ops<V>;
  using I = typename O::Int;
  const I b = O::bits(y);
  const I biased = (b >> 52) & 0x7ff;
  // Bits below the units bit: 1075 − biased of them (0 from 2^52 on).
  const I below = O::select_int(O::ilt(biased, splat(b, 1076)),
                                1075 - biased, splat(b, 0));
  const I shift = O::select_int(O::ilt(below, splat(b, 53)), below,
                                splat(b, 52));
  const I one = splat(b, 1);
  const I fraction_mask = (one << shift) - 1;
  const I significand = (b & 0xfffffffffffffLL) | (int64_t(1) << 52);
  const I at_least_one = ~O::ilt(biased, splat(b, 1023));
  const I finite = O::ilt(biased, splat(b, 2047));
  const I integer = at_least_one & finite & O::ieq(b & fraction_mask, splat(b, 0));
  const I below_2_53 = O::ilt(biased, splat(b, 1076));
  const I units = O::ieq((significand >> shift) & 1, one);
  return {integer, integer & below_2_53 & units};
}

template <class V>
SHOAL_INLINE V pow_double(V x, V y) {
  using O = Ops<V>;
  using I = typename O::Int;
  const I bx = O::bits(x);
  const V ax = O::from_bits(bx & 0x7fffffffffffffffLL);
  const V ay = O::from_bits(O::bits(y) & 0x7fffffffffffffffLL);
  const V inf = O::from_bits(splat(bx, 0x7ff0000000000000LL));
  const V nan = O::from_bits(splat(bx, 0x7ff8000000000000LL));
  // The general case on |x| (junk where |x| is 0, inf or NaN: replaced below) and a clamped y.
  const DD<V> l = log_detail::log_dd(ax);
  const V yc = O::select(O::le(ay, V(0x1p65)), y, O::select(O::lt(y, V(0.0)), V(-0x1p65), V(0x1p65)));
  // y ln|x| = p + p_lo: y l_hi by Dekker's product, y l_lo rounded; exp starts from p alone.
  const DD<V> p = two_prod(yc, l.hi);
  const V r = exp_dd(p.hi, p.lo + yc * l.lo);
  // Every other case is a value chosen by masks beside that path, and one select at the end.
  const I regular = log_detail::positive_finite(ax);
  const I finite_y = O::lt(ay, inf);
  const I in_range = O::le(V(-1400.0), p.hi) & O::le(p.hi, V(1400.0));
  const Parity<V> py = parity(y);
  // x < 0 (−0 and −inf included) and y an odd integer: the result's sign bit set.
  const I sign = O::ilt(bx, splat(bx, 0)) & py.odd &
                 splat(bx, int64_t(0x8000000000000000ULL));
  // Finite x < 0 and finite non-integer y: NaN.
  const I domain = O::lt(x, V(0.0)) & O::le(V(-0x1.fffffffffffffp1023), x) & finite_y & ~py.integer;
  const I one = O::eq(y, V(0.0)) | O::eq(x, V(1.0));
  const I unordered = ~(O::eq(x, x) & O::eq(y, y));
  const I general = regular & finite_y & in_range & ~domain & ~one;
  // |x| = 0 or inf, or y = ±inf: +inf where |x| > 1 and y > 0 or |x| < 1 and y < 0, else +0;
  // |y ln|x|| > 1400: +inf or +0 by the sign of y ln|x|; |x| = 1 and y = ±inf: 1.
  const I extreme = ~regular | ~finite_y;
  const I grows = ~(O::lt(V(1.0), ax) ^ O::lt(V(0.0), y));
  V other = O::select(extreme, O::select(grows, inf, V(0.0)),
                      O::select(O::lt(V(0.0), p.hi), inf, V(0.0)));
  other = O::select(O::eq(ax, V(1.0)) & O::eq(ay, inf), V(1.0), other);
  other = O::from_bits(O::bits(other) ^ sign);
  other = O::select(domain, nan, other);
  // A NaN argument comes back quieted, x's first (not x + y: the compiler may swap a commutative
  // add's operands, and which payload wins would differ between the scalar code and the lanes).
  other = O::select(unordered, O::select(O::eq(x, x), y + y, x + x), other);
  other = O::select(one, V(1.0), other);
  return O::select(general, O::from_bits(O::bits(r) ^ sign), other);
}

}  // namespace pow_detail

SHOAL_INLINE double pow(double x, double y) { return pow_detail::pow_double(x, y); }
SHOAL_INLINE float pow(float x, float y) {
  return Wide<float>::down(pow_detail::pow_double(Wide<float>::up(x), Wide<float>::up(y)));
}

// Lanes and other value types with an Ops<V>: the double routine, or float through Wide<V>.
template <class V>
SHOAL_INLINE auto pow(const V& x, const V& y) -> decltype(Ops<V>::bits(x), V()) {
  if constexpr (sizeof(typename Ops<V>::Scalar) == 8) {
    return pow_detail::pow_double(x, y);
  } else {
    return Wide<V>::down(pow_detail::pow_double(Wide<V>::up(x), Wide<V>::up(y)));
  }
}

}  // namespace elementary
}  // namespace shoal
