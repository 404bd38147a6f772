// cbrt(x) = x^(1/3) (real) for double and float, scalars and lanes, the same bits everywhere
// (elementary/ops.hpp), in the manner of shoal/fifth_root.hpp.
//
// Algorithm (double), on a = |x| (cbrt(−x) = −cbrt(x): the sign bit is put back at the end):
//   A subnormal a is first multiplied by 2^54 (exact; normal now) and the result scaled back by
//   2^-18. a = m 2^e, m in [1, 2); e = 3q + s, s in {0, 1, 2}, by integer arithmetic on the
//   biased exponent E: n = E + 3 in [4, 2049], floor(n/3) = (n · 0xAAAB) >> 17 (exact for
//   0 <= n < 2^16, checked exhaustively), q = floor(n/3) − 342, s = n − 3 floor(n/3). Then
//   cbrt(a) = cbrt(t) 2^q with the reduced target t = m 2^s in [1, 8), built exactly from bits.
//   seed:   y0 = p(m − 3/2) c_s, p of degree 4 fitted offline (Lawson's iteratively reweighted
//           least squares on 400 Chebyshev nodes, towards minimax relative error; numpy) to
//           m^(1/3) on [1, 2]: |p/cbrt − 1| <= 9.3e-6; c_s = 2^(s/3) rounded (relative 2^-53).
//   Newton: y1 = y0 + (t / y0² − y0)/3. For the cube root a step maps a relative error e to
//           e² (1 + O(e)) plus ~2.5 u of rounding (u = 2^-53; the fifth_root.hpp analysis with
//           k = 3): |e1| <= (9.3e-6 + 2u)² (1.0001) + 2.5 u < 8.7e-11 + 3e-16 < 9e-11.
//   Final, corrected step: y1³ − t is formed exactly up to ~2^-104 relative: y1² = S + S_lo
//           (two_prod: exact, by a fused multiply-add), y1 S = C + C_lo (Dekker again), C − t
//           exact (Sterbenz: C/t = 1 + O(3e-10)), so res = ((C − t) + C_lo) + y1 S_lo; then
//           y = fl(y1 − res / (3 S)). In exact arithmetic y1 − (y1³ − t)/(3 y1²) has relative
//           error e1² (1 + O(e1)) < 8.1e-21 = 2^-66.7; the correction res/(3S) (<= 3e-10 y) is
//           computed with a relative error < 4 u, i.e. < 2^-82 y. So y is the correct rounding
//           of a value within 2^-66 of cbrt(t): error <= 0.5 ulp + 2^-13 ulp; the scaling by 2^q
//           (and 2^-18) and the sign are exact (the result is always normal).
// Error: <= 0.5001 ulp (bound above); measured max 0.5000 ulp (tests/cpp/test_elementary_cbrt.cc,
// against cbrtl, millions of points, subnormals included); float (computed in double, rounded
// once): 0.5 ulp + 2^-29.
// Special values (C99 F.9.4.1): cbrt(±0) = ±0, cbrt(±inf) = ±inf, NaN -> NaN; exact cubes give
// their exact roots (a value within 2^-66 of a representable root rounds to it).
#pragma once

#include "shoal/config.hpp"
#include "shoal/elementary/double_double.hpp"
#include "shoal/elementary/ops.hpp"

namespace shoal {
namespace elementary {

namespace cbrt_detail {

template <class V>
SHOAL_INLINE V cbrt_double(V x) {
  using O = Ops<V>;
  using I = typename O::Int;
  const I sign = O::bits(V(-1.0)) ^ O::bits(V(1.0));
  const V a0 = O::from_bits(O::bits(x) & ~sign);
  // Subnormals (and 0, whose result is replaced below) scaled by 2^54.
  const I sub = O::lt(a0, V(0x1p-1022));
  const V a = O::select(sub, a0 * V(0x1p54), a0);
  const I b = O::bits(a);
  const I n = (b >> 52) + 3;  // a >= 0: the biased exponent, plus 3
  const I n3 = (n * 0xAAAB) >> 17;
  const I s = n - n3 * 3;
  const I q = n3 - 342 - O::select_int(sub, splat(b, 18), splat(b, 0));
  const I mant = b & ((splat(b, 1) << 52) - 1);
  const V m = O::from_bits(mant | (splat(b, 1023) << 52));
  const V t = O::from_bits(mant | ((s + 1023) << 52));
  const V c = O::select(
      O::ieq(s, splat(b, 0)), V(1.0),
      O::select(O::ieq(s, splat(b, 1)), V(0x1.428a2f98d728bp+0), V(0x1.965fea53d6e3dp+0)));
  const V z = m - V(1.5);
  V p = V(-0x1.5b771c7aee96bp-7);
  p = p * z + V(0x1.701d828324600p-6);
  p = p * z + V(-0x1.cda512430caa8p-5);
  p = p * z + V(0x1.0462d3ee9ca96p-2);
  p = p * z + V(0x1.250bbcc458a27p+0);
  const V y0 = p * c;
  const V y1 = y0 + (t / (y0 * y0) - y0) * V(1.0 / 3.0);
  const DD<V> sq = two_prod(y1, y1);
  const DD<V> cube = two_prod(y1, sq.hi);
  const V res = ((cube.hi - t) + cube.lo) + y1 * sq.lo;
  const V y = y1 - res / (V(3.0) * sq.hi);
  const V r = O::from_bits(O::bits(y * two_to<V>(q)) | (O::bits(x) & sign));
  // ±0, ±inf, NaN: x + x (keeps ±0's sign, inf's sign, quiets NaN).
  const I special = O::eq(a0, V(0.0)) | ~O::le(a0, V(0x1.fffffffffffffp1023));
  return O::select(special, x + x, r);
}

}  // namespace cbrt_detail

SHOAL_INLINE double cbrt(double x) { return cbrt_detail::cbrt_double(x); }
SHOAL_INLINE float cbrt(float x) {
  return Wide<float>::down(cbrt_detail::cbrt_double(Wide<float>::up(x)));
}

template <class V>
SHOAL_INLINE auto cbrt(const V& x) -> decltype(Ops<V>::bits(x), V()) {
  if constexpr (sizeof(typename Ops<V>::Scalar) == 8) {
    return cbrt_detail::cbrt_double(x);
  } else {
    return Wide<V>::down(cbrt_detail::cbrt_double(Wide<V>::up(x)));
  }
}

}  // namespace elementary
}  // namespace shoal
