// pow(x, y) for double and float, scalars and lanes, the same bits everywhere
// (elementary/ops.hpp).
//
// Algorithm (double). |x|^y = exp(y ln|x|):
//   ln|x| = hi + lo from log.hpp's double-double core (relative error ≲ 2^-67);
//   y ln|x| = p + p_lo: y hi by Dekker's product (Veltkamp's split, no FMA), exact, plus y lo;
//   y is first clamped to |y| <= 2^65 (beyond it |y ln|x|| >= 2^12 for every x ≠ 1, so the
//   result over- or underflows either way, and the split cannot overflow);
//   exp(p + p_lo) = exp.hpp's reduction of p (p = k ln2 + r + r_lo), r + r_lo + p_lo summed
//   again into r + r_lo (two_sum: |r_lo| <= ulp(r)/2 as exp assumes), the rest as exp:
//   e^(r + r_lo) = 1 + r + r² q(r) + r_lo (1 + r), then 2^k.
// Error: |y ln|x|| <= 745 where the result is finite and nonzero, so the core's 2^-67 relative
// error is an absolute error ≲ 2^-57.5 in the exponent, ≲ 0.06 ulp of the result; y lo rounds
// at 2^-106 of p. The rest is exp's 0.63 ulp. Measured (tests/cpp/test_elementary_pow.cc,
// against powl, 2.3 million pairs): max 0.626 ulp (x in (0, 1e10], |y| <= 300, at
// x = 0.0713468..., y = 19.8115...), 0.613 (x = 1 ± 2^-52..2^-1, |y ln x| <= 700), 0.620 (x < 0,
// integer y), 0.608 (results near overflow), 0.756 (subnormal results, rounded twice); float
// (through double, one rounding): 0.5 ulp + 2^-29 (0.499999 over 1 million pairs).
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
#include "shoal/elementary/exp.hpp"
#include "shoal/elementary/log.hpp"
#include "shoal/elementary/ops.hpp"

namespace shoal {
namespace elementary {

namespace pow_detail {

using log_detail::DD;

// exp(p + p_lo), |p_lo| <= 2^-40 |p| or so; p clamped as in exp (NaN p is not expected).
template <class V>
SHOAL_INLINE V exp_dd(V p, V p_lo) {
  using O = Ops<V>;
  const typename O::Int inside = O::le(V(-746.0), p) & O::le(p, V(710.0));
  const V pc = O::select(inside, p, O::select(O::lt(p, V(0.0)), V(-746.0), V(710.0)));
  const exp_detail::Reduced<V> red = exp_detail::reduce(pc);
  // p_lo (up to 2^-43) is folded into r: exp's tail takes r_lo (1 + r) for r_lo e^r, which
  // is only good for |r_lo| <= ulp(r).
  const DD<V> rr = log_detail::two_sum(red.r, red.r_lo + O::select(inside, p_lo, V(0.0)));
  const V r = rr.hi, r_lo = rr.lo;
  const V head = V(1.0) + r;
  const V tail =
      ((V(1.0) - head) + r) + ((r * r) * exp_detail::taylor_tail(r) + r_lo * (V(1.0) + r));
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
  const I below = O::select_int(O::ilt(biased, log_detail::splat(b, 1076)),
                                1075 - biased, log_detail::splat(b, 0));
  const I shift = O::select_int(O::ilt(below, log_detail::splat(b, 53)), below,
                                log_detail::splat(b, 52));
  const I one = log_detail::splat(b, 1);
  const I fraction_mask = (one << shift) - 1;
  const I significand = (b & 0xfffffffffffffLL) | (int64_t(1) << 52);
  const I at_least_one = ~O::ilt(biased, log_detail::splat(b, 1023));
  const I finite = O::ilt(biased, log_detail::splat(b, 2047));
  const I integer = at_least_one & finite & O::ieq(b & fraction_mask, log_detail::splat(b, 0));
  const I below_2_53 = O::ilt(biased, log_detail::splat(b, 1076));
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
  const V inf = O::from_bits(log_detail::splat(bx, 0x7ff0000000000000LL));
  const V nan = O::from_bits(log_detail::splat(bx, 0x7ff8000000000000LL));
  // The general case on a sanitised |x| and a clamped y.
  const I regular = log_detail::positive_finite(ax);
  const DD<V> l = log_detail::log_dd(O::select(regular, ax, V(1.0)));
  const V yc = O::select(O::le(ay, V(0x1p65)), y, O::select(O::lt(y, V(0.0)), V(-0x1p65), V(0x1p65)));
  const DD<V> p0 = log_detail::two_prod(yc, l.hi);
  const DD<V> p = log_detail::fast_two_sum(p0.hi, p0.lo + yc * l.lo);
  V r = exp_dd(p.hi, p.lo);
  // |x| = 0 or inf, or y = ±inf: +inf where |x| > 1 and y > 0 or |x| < 1 and y < 0, else +0.
  const I extreme = ~regular | O::eq(ay, inf);
  const I grows = ~(O::lt(V(1.0), ax) ^ O::lt(V(0.0), y));
  r = O::select(extreme, O::select(grows, inf, V(0.0)), r);
  // |x| = 1 and y = ±inf: 1.
  r = O::select(O::eq(ax, V(1.0)) & O::eq(ay, inf), V(1.0), r);
  // x negative (−0 and −inf included): the sign from y's parity, NaN for finite x and finite
  // non-integer y.
  const Parity<V> py = parity(y);
  const I negative = O::ilt(bx, log_detail::splat(bx, 0));
  r = O::select(negative & py.odd, -r, r);
  r = O::select(O::lt(x, V(0.0)) & O::le(V(-0x1.fffffffffffffp1023), x) &
                    O::lt(ay, inf) & ~py.integer,
                nan, r);
  r = O::select(O::eq(x, x) & O::eq(y, y), r, x + y);
  return O::select(O::eq(y, V(0.0)) | O::eq(x, V(1.0)), V(1.0), r);
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
