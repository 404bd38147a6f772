// exp2(x) = 2^x for double and float, scalars and lanes, the same bits everywhere
// (elementary/ops.hpp); exact for integer x.
//
// Algorithm (double). x = k + f with k = round(x) (ties to even), f = x − k exact, |f| <= 1/2.
//   2^f = e^(f ln2): f ln2 is formed as r + r_lo to ~2^-105 relative with ln2 = L_hi + L_lo
//   (L_hi = ln2 rounded to double, L_lo the next 53 bits, from mpmath), f L_hi exactly by
//   an exact product (two_prod) as r + its error, f L_lo rounded (2^-56 relative
//   below) added to the error in r_lo (|r_lo| <~ ulp(r)/2; r alone starts the polynomial); |r| <= ln2/2 — the reduced range of exp.hpp, whose polynomial is reused:
//   e^r = 1 + r + r² q(r) + r_lo (1 + r), 1 + r exact as head + tail, one rounding, then the
//   exact scaling by 2^k (exp_detail::scale: two normal powers of two; a subnormal result is
//   rounded once more).
//   Integer x: f = 0, so r = r_lo = 0, e^r = 1 exactly and the result is 2^k exactly, subnormal
//   results included (2^k is representable down to 2^-1074).
// Error: as exp's reduced part (the reduction here is more accurate than exp's): measured max
// 0.63 ulp (normal results: exp's tail error and the final rounding), 0.76 ulp where the result
// is subnormal (rounded twice) (tests/cpp/test_elementary_exp2.cc, against exp2l, millions of
// points); float (computed in double, rounded once): 0.5 ulp + 2^-29, exact for integers.
// Cost (benchmarks/elementary_cost.py): latency ~18 ns per call (glibc ~9; 29 ns with a clamp on
// the argument and r's Fast2Sum on the path; now |x| > 2000 and NaN are chosen beside it and
// merged by one select), throughput in lanes ~0.9 ns per double.
// Special values (C99 F.10.3.2): exp2(±0) = 1, exp2(−inf) = +0, exp2(+inf) = +inf, NaN -> NaN;
// overflow (x >= 1024) -> +inf, complete underflow (x <= −1075) -> +0.
#pragma once

#include "shoal/config.hpp"
#include "shoal/elementary/double_double.hpp"
#include "shoal/elementary/exp.hpp"
#include "shoal/elementary/ops.hpp"

namespace shoal {
namespace elementary {

namespace exp2_detail {

constexpr double kLn2 = 0x1.62e42fefa39efp-1;
constexpr double kLn2Lo = 0x1.abc9e3b39803fp-56;

template <class V>
SHOAL_INLINE V exp2_double(V x) {
  using O = Ops<V>;
  // No clamp on the path: for |x| <= 2000, k is within exp_detail::scale's range and 2^x
  // underflows to +0 or overflows to +inf by itself; other x and NaN give junk there, replaced
  // by one select at the end. r = f ln2 rounded starts the polynomial at once; its rounding
  // error (Dekker's product, ln2 split at compile time) and f ln2_lo join the tail later.
  const Rounded<V> k = round_to_integer(x);
  const V f = x - k.value;  // exact
  const DD<V> fl = two_prod(f, V(kLn2));
  const V r = fl.hi;
  const V r_lo = fl.lo + f * V(kLn2Lo);
  const exp_detail::Unrounded<V> e = exp_detail::exp_unrounded<V>({r, r_lo, k.integer});
  const V y = exp_detail::scale(e.head + e.tail, k.integer);
  const V inf = O::from_bits((O::bits(x) & 0) + 0x7ff0000000000000LL);
  const V other = O::select(O::lt(x, V(0.0)), V(0.0), O::select(O::lt(V(0.0), x), inf, x + x));
  return O::select(O::le(V(-2000.0), x) & O::le(x, V(2000.0)), y, other);
}

}  // namespace exp2_detail

SHOAL_INLINE double exp2(double x) { return exp2_detail::exp2_double(x); }
SHOAL_INLINE float exp2(float x) {
  return Wide<float>::down(exp2_detail::exp2_double(Wide<float>::up(x)));
}

template <class V>
SHOAL_INLINE auto exp2(const V& x) -> decltype(Ops<V>::bits(x), V()) {
  if constexpr (sizeof(typename Ops<V>::Scalar) == 8) {
    return exp2_detail::exp2_double(x);
  } else {
    return Wide<V>::down(exp2_detail::exp2_double(Wide<V>::up(x)));
  }
}

}  // namespace elementary
}  // namespace shoal
