// sin(x), cos(x), tan(x) for double and float, scalars and lanes, the same bits everywhere
// (elementary/ops.hpp).
//
// Reduction. x = k π/2 + (r + r_lo), k = round(x 2/π), |r| <= π/4 (+ rounding of k).
//   |x| < 2^20 (Cody–Waite): π/2 = C1 + C2 + C3 + C4, C1..C3 with at most 33 significant bits
//   (so k Ci is exact for |k| < 2^20) and C4 a full double: the four parts give π/2 to 2^-160
//   (relative), so k (C1 + .. + C4) is off from k π/2 by < 2^-140. x − k C1 is exact
//   (Sterbenz: x and k C1 are within a factor 2 for k ≠ 0); k C2, k C3 are exact, k C4 is
//   rounded (error < 2^-53 |k C4| < 2^-130), and the rest rounded into r = ((x − k C1) − k C2) − k C3 − k C4 (four subtractions after k: the
//   kernels start from r alone) while the rounding errors of the last three are found beside
//   them and summed into r_lo (|r_lo| < 2^-40 |r|), which the kernels need only later. The
//   smallest |r| any double reaches is 2^-61 (the classical worst case of the reduction, over
//   the whole double range), so r + r_lo carries r to a relative 2^-69 or better: the
//   reduction costs nothing measurable.
//   |x| >= 2^20 (rare, per lane through the scalar code): Payne–Hanek in integers. x = m 2^e
//   (m < 2^53); the bits of 2/π from position e − 1 on (the earlier ones only add multiples of
//   4 to x 2/π) are taken 192 at a time from a table (computed with mpmath), m times those 192
//   bits modulo 2^192 is formed exactly with 32-bit limbs; its top two bits are k mod 4, the
//   other 190 the fraction (rounded to the nearest integer k, so the fraction is signed). The
//   truncated bits of 2/π are worth < 2^-137, against a fraction >= 2^-62: the top 128 bits of
//   the fraction, as a double-double, times π/2 (double-double, Dekker's exact product without
//   FMA) give r + r_lo to a relative 2^-100.
// Kernels on |r| <= π/4 (z = r²):
//   sin r = r + t + lo: t = −r³/6 with r³ formed as a double-double (r² and r r² by Dekker's
//     exact product) and divided by −6 once (t's error 2^-54 |t| <= 0.06 ulp); lo = the
//     remaining series r⁵ S(z) + r_lo (1 − z/2 + z²/24), S the Taylor series of
//     (sin r − r + r³/6)/r⁵ to r^19/19!: truncation < r^21/21! < 2^-72 |r|; |lo| <= 0.003 |r|,
//     so its roundings are negligible. h = r + t with its error kept exactly (Fast2Sum), and
//     h + ((r − h) + t + lo) rounded once is the result.
//   cos r = w + tail: w = 1 − z/2 with its rounding error kept exactly (Fast2Sum), r² formed
//     exactly (two_prod) so that z's rounding error joins the tail; tail adds
//     z² C(z) − r (1 − z/6) r_lo, C the Taylor series of (cos r − 1 + r²/2)/r⁴ to r^20/20!
//     (truncation < 2^-79). One final rounding; the tail's error is < 0.05 ulp.
//   S and C are summed by Estrin's scheme (3 and 4 multiply-add levels deep instead of 8 and
//   9; C's leading 1/24 added last, rounded near it once as in Horner's scheme). The r_lo
//   terms keep the second order of sin(r + r_lo), cos(r + r_lo) in r_lo's factor (z²/24,
//   −z/6): r_lo is up to ~1.5 ulp of r, and without them cos lost 0.1 ulp there.
//   Error: 0.5 ulp (the final rounding) + < 0.08 ulp (the tails): < 0.58 ulp.
//   Quadrant q = k mod 4 (cos: k + 1): q odd takes cos r, q = 2, 3 flip the sign (exactly).
//   tan: (sin r + its tail) / (cos r + its tail), q odd −(cos r)/(sin r), normalised by
//     Fast2Sum and divided as double-doubles (quotient q0, exact remainder by Dekker's
//     product, one correction step times 1/denominator, computed beside q0): the operands'
//     relative errors (< 0.08 ulp each) and the step's roundings add < 0.15 ulp to the final
//     rounding.
// Measured (tests/cpp/test_elementary_trig.cc, against sinl/cosl/tanl, millions of points over
// |x| <= π/4, |x| < 2^20, huge |x| and next to multiples of π/2; and 3 M more points each over
// |x| <= π/4, 1e5, 1e10): sin max 0.554 ulp, cos 0.561 ulp (|x| near 0.74), tan 0.624 ulp;
// float (computed in double, rounded once): 0.5 ulp + 2^-29 (every 1021st float32 swept).
// Cost (benchmarks/elementary_cost.py): latency sin/cos ~26 ns, tan ~38 ns per call (glibc
// ~19-21 ns; 37 and 98 ns with Horner's scheme, the four-part Cody–Waite sum and tan's second
// division on the path); throughput in lanes ~2.2 ns (sin, cos), 3.2 ns (tan) per double.
// Special values (C99 F.10.1.5-7): sin(±0) = ±0, tan(±0) = ±0, cos(±0) = 1, sin/cos/tan(±inf)
// = NaN, NaN -> NaN; sin x = tan x = x for |x| < 2^-27 (correctly rounded there).
#pragma once

#include "shoal/config.hpp"
#include "shoal/elementary/double_double.hpp"
#include "shoal/elementary/ops.hpp"

namespace shoal {
namespace elementary {

namespace trig_detail {

constexpr double kTwoOverPi = 0x1.45f306dc9c883p-1;
// π/2 = kC1 + kC2 + kC3 + kC4 + O(2^-160): three parts of <= 33 bits and a full double.
constexpr double kC1 = 0x1.921fb54400000p+0;
constexpr double kC2 = 0x1.0b4611a600000p-34;
constexpr double kC3 = 0x1.3198a2e000000p-69;
constexpr double kC4 = 0x1.b839a252049c1p-104;
// π/2 as a double-double (the slow path).
constexpr double kPio2Hi = 0x1.921fb54442d18p+0;
constexpr double kPio2Lo = 0x1.1a62633145c07p-54;
constexpr int64_t kAbsMask = 0x7fffffffffffffffLL;

template <class V>
struct Reduced {
  V r, r_lo;
  typename Ops<V>::Int k;
};

// Cody–Waite for |x| < 2^20 (garbage, never NaN-trapping, elsewhere; replaced by the caller).
// The heads are subtracted one after the other (r is ready after four subtractions) and their
// rounding errors, found beside them (TwoSum, and Fast2Sum for k C4, tiny against s2), are
// summed into r_lo, which the kernels need only later.
template <class V>
SHOAL_INLINE Reduced<V> reduce_medium(V x) {
  const Rounded<V> k = round_to_integer(x * V(kTwoOverPi));
  const V p2 = k.value * V(kC2), p3 = k.value * V(kC3), p4 = k.value * V(kC4);
  const V a = x - k.value * V(kC1);  // exact
  const V s1 = a - p2;
  const V s2 = s1 - p3;
  const V r = s2 - p4;
  const V b1 = s1 - a, b2 = s2 - s1;
  const V e1 = (a - (s1 - b1)) - (p2 + b1);  // TwoSum: a − p2 = s1 + e1
  const V e2 = (s1 - (s2 - b2)) - (p3 + b2);  // s1 − p3 = s2 + e2
  const V e3 = (s2 - r) - p4;                 // s2 − p4 = r + e3 (|p4| < 2^-82 <= |s2|)
  return {r, (e1 + e2) + e3, k.integer};
}

// Leading zeros of a nonzero 64-bit word.
SHOAL_INLINE int leading_zeros(uint64_t v) {
  int n = 0;
  for (int s = 32; s > 0; s >>= 1) {
    if ((v >> (64 - s)) == 0) {
      n += s;
      v <<= s;
    }
  }
  return n;
}

// Payne–Hanek for finite |x| >= 2^20 (any finite |x| >= 2^-10 in fact), scalar.
SHOAL_INLINE Reduced<double> reduce_huge(double x) {
  // 2/π in 64-bit words after one word of zeros: word j holds the bits 64(j−1)+1 .. 64j after
  // the binary point (mpmath, 2000 bits of precision).
  constexpr uint64_t table[22] = {
      0x0000000000000000ull, 0xa2f9836e4e441529ull, 0xfc2757d1f534ddc0ull,
      0xdb6295993c439041ull, 0xfe5163abdebbc561ull, 0xb7246e3a424dd2e0ull,
      0x06492eea09d1921cull, 0xfe1deb1cb129a73eull, 0xe88235f52ebb4484ull,
      0xe99c7026b45f7e41ull, 0x3991d639835339f4ull, 0x9c845f8bbdf9283bull,
      0x1ff897ffde05980full, 0xef2f118b5a0a6d1full, 0x6d367ecf27cb09b7ull,
      0x4f463f669e5fea2dull, 0x7527bac7ebe5f17bull, 0x3d0739f78a5292eaull,
      0x6bfb5fb11f8d5d08ull, 0x56033046fc7b6babull, 0xf0cfbc209af4361dull,
      0xa9e391615ee61b08ull};
  const int64_t b = Ops<double>::bits(x);
  const int e = int((b >> 52) & 0x7ff) - 1075;  // x = ±m 2^e
  const uint64_t m = uint64_t(b & 0xfffffffffffffLL) | (uint64_t(1) << 52);
  // The 192 bits of 2/π at positions e − 1 .. e + 190, i.e. from bit g0 = e + 62 of the table.
  const int g0 = e + 62;
  const int li = g0 >> 6, sh = g0 & 63;
  uint64_t w64[3];  // most significant first
  for (int i = 0; i < 3; ++i) {
    w64[i] = sh == 0 ? table[li + i] : (table[li + i] << sh) | (table[li + i + 1] >> (64 - sh));
  }
  uint32_t w[6];  // least significant first
  for (int i = 0; i < 3; ++i) {
    w[2 * i] = uint32_t(w64[2 - i]);
    w[2 * i + 1] = uint32_t(w64[2 - i] >> 32);
  }
  const uint32_t mw[2] = {uint32_t(m), uint32_t(m >> 32)};
  // p = m w mod 2^192: x (2/π) mod 4 in units of 2^-190.
  uint32_t p[6] = {0, 0, 0, 0, 0, 0};
  for (int j = 0; j < 2; ++j) {
    uint64_t carry = 0;
    for (int i = 0; i + j < 6; ++i) {
      const uint64_t t = uint64_t(w[i]) * mw[j] + p[i + j] + carry;
      p[i + j] = uint32_t(t);
      carry = t >> 32;
    }
  }
  // k mod 4 from the top two bits, rounded by bit 189; the fraction as a signed 190-bit number.
  int64_t k = int64_t((p[5] >> 30) + ((p[5] >> 29) & 1)) & 3;
  const bool negative = ((p[5] >> 29) & 1) != 0;
  uint64_t f[3] = {(uint64_t(p[5] & 0x3fffffffu) << 32) | p[4], (uint64_t(p[3]) << 32) | p[2],
                   (uint64_t(p[1]) << 32) | p[0]};  // most significant first, < 2^190
  if (negative) {  // f − 2^190, negated: 2^190 − f
    f[0] |= 0xc000000000000000ull;
    f[0] = ~f[0];
    f[1] = ~f[1];
    f[2] = ~f[2];
    if (++f[2] == 0 && ++f[1] == 0) ++f[0];
  }
  // Normalise: the leading 128 bits as hi:lo words, value = (hi:lo) 2^(scale − 128).
  int scale = 192 - 190;  // in units: value = (f0:f1:f2) 2^-190, the first word's top at 2^2
  uint64_t hi = f[0], lo = f[1], rest = f[2];
  if (hi == 0) {
    hi = lo;
    lo = rest;
    rest = 0;
    scale -= 64;
  }
  if (hi == 0) {
    hi = lo;
    lo = rest;
    rest = 0;
    scale -= 64;
  }
  double fh = 0, fl = 0;
  if (hi != 0) {
    const int z = leading_zeros(hi);
    if (z > 0) {
      hi = (hi << z) | (lo >> (64 - z));
      lo = (lo << z) | (rest >> (64 - z));
    }
    scale -= z;
    // hi:lo 2^(scale − 128): hi's top 53 bits exactly, the next 64 rounded once.
    fh = double(hi >> 11) * two_to<double>(scale - 53);
    fl = double(((hi & 0x7ff) << 53) | (lo >> 11)) * two_to<double>(scale - 117);
  }
  // r = f π/2 as a double-double.
  const DD<double> pr = two_prod(fh, kPio2Hi);
  const double tail = pr.lo + (fh * kPio2Lo + fl * kPio2Hi);
  double r = pr.hi + tail;
  double r_lo = (pr.hi - r) + tail;
  if (negative) {
    r = -r;
    r_lo = -r_lo;
  }
  if (b < 0) {
    r = -r;
    r_lo = -r_lo;
    k = (4 - k) & 3;
  }
  return {r, r_lo, k};
}

// sin r = hi + lo with |lo| <= 0.003 |hi| (not normalised: the caller rounds hi + lo once, or
// normalises it); sq = r² exactly. S by Estrin's scheme (3 multiply-add levels, not 8).
template <class V>
SHOAL_INLINE DD<V> sin_kernel(V r, V r_lo, const DD<V>& sq) {
  const V z = sq.hi;
  const V z2 = z * z, z4 = z2 * z2;
  const V p01 = V(0x1.1111111111111p-7) + V(-0x1.a01a01a01a01ap-13) * z;
  const V p23 = V(0x1.71de3a556c734p-19) + V(-0x1.ae64567f544e4p-26) * z;
  const V p45 = V(0x1.6124613a86d09p-33) + V(-0x1.ae7f3e733b81fp-41) * z;
  const V p67 = V(0x1.952c77030ad4ap-49) + V(-0x1.2f49b46814157p-57) * z;
  const V s = (p01 + z2 * p23) + z4 * (p45 + z2 * p67);  // (sin r − r + r³/6)/r⁵
  // r³ = c.hi + c.lo + r sq.lo exactly enough; −r³/6: the head by one division (rounded once),
  // the low parts (2^-52 of it) times −1/6 rounded.
  const DD<V> c = two_prod(r, z);
  const V t = c.hi / V(-6.0);
  const V lo = (c.lo + r * sq.lo) * V(-0x1.5555555555555p-3) +
               ((c.hi * z) * s + r_lo * ((V(1.0) - V(0.5) * z) + z2 * V(0x1.5555555555555p-5)));
  const V h = r + t;
  return {h, ((r - h) + t) + lo};  // Fast2Sum: |t| < |r|
}

// cos r = hi + lo, |lo| small against hi (not normalised); sq = r² exactly. C by Estrin's
// scheme (4 levels, not 9).
template <class V>
SHOAL_INLINE DD<V> cos_kernel(V r, V r_lo, const DD<V>& sq) {
  const V z = sq.hi;
  const V hz = V(0.5) * z;
  const V w = V(1.0) - hz;
  const V tail = (V(1.0) - w) - hz;  // exact (Fast2Sum, hz <= 0.31)
  const V z2 = z * z, z4 = z2 * z2;
  // 1/24 added last (rounded near it once, as in Horner's scheme), the rest by Estrin.
  const V p12 = V(-0x1.6c16c16c16c17p-10) + V(0x1.a01a01a01a01ap-16) * z;
  const V p34 = V(-0x1.27e4fb7789f5cp-22) + V(0x1.1eed8eff8d898p-29) * z;
  const V p56 = V(-0x1.93974a8c07c9dp-37) + V(0x1.ae7f3e733b81fp-45) * z;
  const V p78 = V(-0x1.6827863b97d97p-53) + V(0x1.e542ba4020225p-62) * z;
  const V p18 = (p12 + z2 * p34) + z4 * (p56 + z2 * p78);
  const V c = V(0x1.5555555555555p-5) + z * p18;  // (cos r − 1 + r²/2)/r⁴
  const V lo = tail + (z2 * c - (V(0.5) * sq.lo + (r * (V(1.0) - z * V(0x1.5555555555555p-3))) * r_lo));
  return {w, lo};
}

// The sign bit where bit 1 of q is set.
template <class V>
SHOAL_INLINE typename Ops<V>::Int sign_of_quadrant(typename Ops<V>::Int q) {
  return (q & 2) << 62;
}

// which = 0: sin, 1: cos, 2: tan, of x = k π/2 + r + r_lo.
template <class V>
SHOAL_INLINE V kernel(const Reduced<V>& red, int which) {
  using O = Ops<V>;
  using Int = typename O::Int;
  const DD<V> sq = two_prod(red.r, red.r);
  const DD<V> s = sin_kernel(red.r, red.r_lo, sq);
  const DD<V> c = cos_kernel(red.r, red.r_lo, sq);
  const Int q = red.k + int64_t(which == 1 ? 1 : 0);
  const Int odd = -(q & 1);  // a mask: all bits where q is odd
  if (which == 2) {
    // tan: s/c, or −c/s in odd quadrants, as double-doubles (normalised by Fast2Sum): the
    // quotient q0, the exact remainder (Dekker's product), one correction step by 1/dh
    // (computed beside q0; the correction is ~1 ulp, so 1/dh's rounding is negligible).
    const V nh0 = O::select(odd, c.hi, s.hi), nl0 = O::select(odd, c.lo, s.lo);
    const V dh0 = O::select(odd, s.hi, c.hi), dl0 = O::select(odd, s.lo, c.lo);
    const V nh = nh0 + nl0, nl = (nh0 - nh) + nl0;
    const V dh = dh0 + dl0, dl = (dh0 - dh) + dl0;
    const V q0 = nh / dh;
    const V inv = V(1.0) / dh;
    const DD<V> p = two_prod(q0, dh);
    const V rem = ((nh - p.hi) + (nl - q0 * dl)) - p.lo;  // nh − p.hi exact (Sterbenz)
    const V t = q0 + rem * inv;
    return O::from_bits(O::bits(t) ^ (odd & ~kAbsMask));
  }
  // hi + lo rounded once: the result, correctly signed.
  const V y = O::select(odd, c.hi, s.hi) + O::select(odd, c.lo, s.lo);
  return O::from_bits(O::bits(y) ^ sign_of_quadrant<V>(q));
}

SHOAL_INLINE double huge(double x, int which) { return kernel<double>(reduce_huge(x), which); }

template <class V>
SHOAL_INLINE V trig_double(V x, int which) {
  using O = Ops<V>;
  const V ax = O::from_bits(O::bits(x) & kAbsMask);
  const typename O::Int finite = O::eq(x - x, V(0.0));
  // Tiny x (sin x = tan x = x) and inf/NaN (NaN) merged by one select after the kernel.
  const typename O::Int tiny = O::lt(ax, V(which != 1 ? 0x1p-27 : 0.0));  // cos: never
  const V other = O::select(tiny, x, x - x);
  V y = O::select(finite & ~tiny, kernel(reduce_medium(x), which), other);
  const typename O::Int big = finite & O::le(V(0x1p20), ax);
  if (O::any(big)) {
    const V slow = which == 0   ? O::per_lane(x, [](double s) { return huge(s, 0); })
                   : which == 1 ? O::per_lane(x, [](double s) { return huge(s, 1); })
                                : O::per_lane(x, [](double s) { return huge(s, 2); });
    y = O::select(big, slow, y);
  }
  return y;
}

}  // namespace trig_detail

SHOAL_INLINE double sin(double x) { return trig_detail::trig_double(x, 0); }
SHOAL_INLINE double cos(double x) { return trig_detail::trig_double(x, 1); }
SHOAL_INLINE double tan(double x) { return trig_detail::trig_double(x, 2); }
SHOAL_INLINE float sin(float x) {
  return Wide<float>::down(trig_detail::trig_double(Wide<float>::up(x), 0));
}
SHOAL_INLINE float cos(float x) {
  return Wide<float>::down(trig_detail::trig_double(Wide<float>::up(x), 1));
}
SHOAL_INLINE float tan(float x) {
  return Wide<float>::down(trig_detail::trig_double(Wide<float>::up(x), 2));
}

// Lanes and other value types with an Ops<V>: the double routine, or float through Wide<V>.
template <class V>
SHOAL_INLINE auto sin(const V& x) -> decltype(Ops<V>::bits(x), V()) {
  if constexpr (sizeof(typename Ops<V>::Scalar) == 8) {
    return trig_detail::trig_double(x, 0);
  } else {
    return Wide<V>::down(trig_detail::trig_double(Wide<V>::up(x), 0));
  }
}
template <class V>
SHOAL_INLINE auto cos(const V& x) -> decltype(Ops<V>::bits(x), V()) {
  if constexpr (sizeof(typename Ops<V>::Scalar) == 8) {
    return trig_detail::trig_double(x, 1);
  } else {
    return Wide<V>::down(trig_detail::trig_double(Wide<V>::up(x), 1));
  }
}
template <class V>
SHOAL_INLINE auto tan(const V& x) -> decltype(Ops<V>::bits(x), V()) {
  if constexpr (sizeof(typename Ops<V>::Scalar) == 8) {
    return trig_detail::trig_double(x, 2);
  } else {
    return Wide<V>::down(trig_detail::trig_double(Wide<V>::up(x), 2));
  }
}

}  // namespace elementary
}  // namespace shoal
