// log, log1p, log2, log10 for double and float, scalars and lanes, the same bits everywhere
// (elementary/ops.hpp).
//
// Algorithm (double). One core, log_detail::log_dd, returns ln x as a double-double hi + lo
// for a positive finite x (pow.hpp uses it too):
//   x = 2^e m with m in [√2/2, √2) read from the bits (a subnormal x is first scaled by 2^54),
//   f = m − 1 exactly (Sterbenz), s = f / (2 + f) with |s| <= (√2 − 1)/(√2 + 1) = 0.1716, and
//   ln m = 2 atanh s = 2s + s z P(z), z = s², P(z) = Σ_{j>=0} 2 z^j / (2j + 3).
//   s is carried as sh + sl: 2 + f = d + d_lo exactly (Fast2Sum), sh = f (1/d) (within ~1 ulp
//   of f/d), and the residual f − sh (d + d_lo) is formed exactly (two_prod, by a fused
//   multiply-add, then Sterbenz), so sl = residual (1/d) leaves s with a relative
//   error ~2^-102. One division.
//   2 atanh(sh + sl) = 2 atanh(sh) + 2 sl/(1 − z) (z = sh², 1/(1 − z) to z³; sl² neglected,
//   < 2^-100), and 2 atanh(sh) = 2 sh + sh³ (2/3 + (2/5) z) + sh⁷ Q(z), Q(z) = Σ_{j=0..9}
//   2 z^j / (2j + 7) (the Taylor coefficients rounded to double, summed by Estrin's scheme):
//   z = zh + zl and sh³ = sh zh (exact) + sh zl by Dekker's products; w = 2/3 + (2/5) z as a
//   double-double (2/3 and 2/5 double-doubles, (2/5) zh by Dekker's product); sh³ w as a
//   double-double (Dekker's product of the heads, the cross terms rounded): it is <= 0.0098 of
//   2s; sh⁷ Q in plain double: <= 2^-18 of 2s, so its roundings cost ≲ 2^-69; the truncated
//   terms Σ_{j>=10} z^{j+3}/(2j + 7) are below 2^-70.8 of 2s (z <= 0.02944, summed with mpmath).
//   No product waits for another's tail (the parts are independent and meet in the final sums),
//   so the dependency chain is short: one division, three products, the sums.
//   ln x = e ln2_hi + 2s + s z P + e ln2_lo: ln2_hi has 42 significant bits, so e ln2_hi is exact
//   for |e| < 2^11; the parts are summed with Fast2Sum into hi + lo, |lo| <= ulp(hi)/2.
// Error of the core: relative ≲ 2^-68 (measured against libquadmath's logq over 2 million x:
// 2^-68.35 at most; ln2_hi + ln2_lo is ln 2 to 2^-96).
//   log   = hi (rounded once from the exact-ish sum): ≤ 0.5 + 2^-13 ulp.
//   log1p: 1 + x = u + c exactly (u rounded, c its rounding error, Knuth's two_sum), and
//          ln(1 + x) = ln u + ln(1 + q) = hi + lo + q − q²/2 with q = c/u, |q| <= 2^-53 (q³/3
//          neglected: < 2^-105 of the result). For u < 2, q = c − q (u − 1) and c (exact) is
//          added to hi in a two_sum: for |x| < 2^-52 c is most of the result, and q in one
//          division would cost 0.16 ulp; for u >= 2, q joins the tail (c − q (u − 1) would
//          cancel). q²/2 matters (1/16 ulp) only where the result is near 2^-52.
//   log2  = (hi + lo) × (1/ln2 as a double-double), log10 likewise with 1/ln10, one rounding.
//          log2(2^k) is k exactly (f = 0: hi + lo = k (ln2_hi + ln2_lo), times 1/ln2 is k to
//          2^-94); log10(10^k) is k exactly for k = 0..22 (tested).
// Measured (tests/cpp/test_elementary_log.cc, against long double, ~2 million points each over
// [0.707, 1.414], 1 ± [2^-60, 2^-2], all normal and subnormal x; log1p also tiny x, x near −1,
// x up to 2^1024): max 0.5000 ulp for log, log2 and log1p, 0.5005 for log10 (where log10l's own
// error shows); float (through double, one rounding): 0.5 ulp.
// Cost: one reduction and one division, ~110 flops (a double-double core) — correctly rounded
// in all but rare cases; latency (benchmarks/elementary_cost.py) ~32 ns against glibc's ~12 ns,
// throughput in lanes ~3.2 ns per value. A faster log of ~0.6 ulp is possible if speed ever
// matters more.
// Special values (C99 F.10.3.7, .9, .8, .10): log(±0) = −inf, log(1) = +0, log(x < 0) = NaN,
// log(+inf) = +inf, NaN -> NaN; log1p(±0) = ±0, log1p(−1) = −inf, log1p(x < −1) = NaN,
// log1p(+inf) = +inf; log2 and log10 as log (log2(1) = log10(1) = +0).
#pragma once

#include "shoal/config.hpp"
#include "shoal/elementary/double_double.hpp"
#include "shoal/elementary/ops.hpp"

namespace shoal {
namespace elementary {

namespace log_detail {

// (a.hi + a.lo)(b.hi + b.lo), not renormalised (a.lo b.lo neglected).
template <class V>
SHOAL_INLINE DD<V> dd_mul(DD<V> a, DD<V> b) {
  const DD<V> p = two_prod(a.hi, b.hi);
  return {p.hi, p.lo + (a.hi * b.lo + a.lo * b.hi)};
}

constexpr double kLn2Hi = 0x1.62e42fefa3800p-1;  // 42 significant bits
constexpr double kLn2Lo = 0x1.ef35793c76730p-45;
constexpr double kInvLn2Hi = 0x1.71547652b82fep+0;
constexpr double kInvLn2Lo = 0x1.777d0ffda0d24p-56;
constexpr double kInvLn10Hi = 0x1.bcb7b1526e50ep-2;
constexpr double kInvLn10Lo = 0x1.95355baaafad3p-57;

// Q(z) = Σ_{j=0..9} 2 z^j / (2j + 7), the Taylor coefficients rounded to double, summed by
// Estrin's scheme (pairs, then z², z⁴: 4 multiply-add levels deep, not 10), 2/7 added last.
template <class V>
SHOAL_INLINE V series_tail(V z) {
  const V z2 = z * z;
  const V z4 = z2 * z2;
  const V q23 = V(0x1.745d1745d1746p-3) + V(0x1.3b13b13b13b14p-3) * z;
  const V q45 = V(0x1.1111111111111p-3) + V(0x1.e1e1e1e1e1e1ep-4) * z;
  const V q67 = V(0x1.af286bca1af28p-4) + V(0x1.8618618618618p-4) * z;
  const V q89 = V(0x1.642c8590b2164p-4) + V(0x1.47ae147ae147bp-4) * z;  // .., 2/25
  const V high = (q45 + z2 * q67) + z4 * q89;
  return V(0x1.2492492492492p-2) + ((V(0x1.c71c71c71c71cp-3) * z + z2 * q23) + z4 * high);
}

// ln x as hi + lo (|lo| <= ulp(hi)/2), relative error ≲ 2^-68, for x positive and finite
// (subnormals included). Other x give junk, to be replaced by the caller.
template <class V>
SHOAL_INLINE DD<V> log_dd(V x) {
  using O = Ops<V>;
  using I = typename O::Int;
  // Subnormals: scale by 2^54 first.
  const I sub = O::lt(x, V(0x1p-1022));
  const V xs = O::select(sub, x * V(0x1p54), x);
  const I b = O::bits(xs);
  // x = 2^e m, m in [√2/2, √2): the bits of x minus those of √2/2, shifted, give e.
  const I e = (b - int64_t(0x3fe6a09e667f3bcdLL)) >> 52;
  const V m = O::from_bits(b - (e << 52));
  const V ev = O::to_value(e) - O::select(sub, V(54.0), V(0.0));
  const V f = m - V(1.0);  // exact
  // s = f / (2 + f) as sh + sl.
  const V d = V(2.0) + f;
  const V d_lo = f - (d - V(2.0));  // exact
  // One division: sh = f (1/d) is within ~1 ulp of f/d, and the residual carries the rest.
  const V inv = V(1.0) / d;
  const V sh = f * inv;
  const DD<V> p = two_prod(sh, d);
  const V residual = ((f - p.hi) - p.lo) - sh * d_lo;
  const V sl = residual * inv;
  // 2 atanh(sh + sl) = 2 atanh(sh) + 2 sl / (1 − sh²) (+ sl², < 2^-100 of 2s; 1/(1 − z) to
  // z³: the rest < 2^-73 of 2s), and
  // 2 atanh(sh) = 2 sh + sh³ (2/3 + (2/5) z) + sh⁷ Q(z) with z = sh²:
  //   z = zh + zl exactly (Dekker), sh³ = sh zh (exact, Dekker) + sh zl;
  //   w = 2/3 + (2/5) zh as w_hi + w_lo (2/3 and 2/5 double-doubles, (2/5) zh by Dekker's
  //   product, Fast2Sum), then sh³ w as a double-double (Dekker's product of the heads, the
  //   cross terms rounded);
  //   sh⁷ Q(zh) in plain double: ≤ 2^-18 of 2s, its few roundings ≲ 2^-69.
  // The parts are independent of each other (no product waits for another's tail) and meet
  // at the end.
  const DD<V> z = two_prod(sh, sh);
  const DD<V> s3 = two_prod(sh, z.hi);
  const V s3_lo = s3.lo + sh * z.lo;
  const DD<V> t = two_prod(V(0x1.999999999999ap-2), z.hi);
  const DD<V> w = fast_two_sum_b_minus(V(0x1.5555555555555p-1), t.hi);
  const V w_lo = w.lo + (t.lo + ((V(0x1.5555555555555p-55) + V(-0x1.999999999999ap-56) * z.hi) +
                                 V(0x1.999999999999ap-2) * z.lo));
  const DD<V> c = two_prod(s3.hi, w.hi);
  const V c_lo = c.lo + (s3.hi * w_lo + s3_lo * w.hi);
  const V s7q = (s3.hi * z.hi) * (z.hi * series_tail(z.hi));
  const V sl_term = (V(2.0) * sl) * ((V(1.0) + z.hi) * (V(1.0) + z.hi * z.hi));  // to z³
  // ln x = e ln2_hi + 2 sh + c + (the tails): e ln2_hi exact for |e| < 2^11, |e ln2_hi| >=
  // |ln m| unless e = 0, so both sums are Fast2Sums.
  const DD<V> lm = fast_two_sum_b_minus(V(2.0) * sh, c.hi);
  const DD<V> sum = fast_two_sum_b_minus(ev * V(kLn2Hi), lm.hi);
  const V tails = ((c_lo + s7q) + sl_term) + ev * V(kLn2Lo);
  return fast_two_sum_b_minus(sum.hi, (sum.lo + lm.lo) + tails);
}

// The value for x outside (0, inf): −inf at ±0, NaN below, x itself at +inf and NaN.
template <class V>
SHOAL_INLINE V log_special(V x) {
  using O = Ops<V>;
  const V inf = O::from_bits(splat(O::bits(x), 0x7ff0000000000000LL));
  const V nan = O::from_bits(splat(O::bits(x), 0x7ff8000000000000LL));
  return O::select(O::eq(x, V(0.0)), -inf, O::select(O::lt(x, V(0.0)), nan, x + x));
}

// Whether x is positive and finite, as a mask.
template <class V>
SHOAL_INLINE typename Ops<V>::Int positive_finite(V x) {
  using O = Ops<V>;
  return O::lt(V(0.0), x) & O::le(x, V(0x1.fffffffffffffp1023));
}

template <class V>
SHOAL_INLINE V log_double(V x) {
  using O = Ops<V>;
  const typename O::Int ok = positive_finite(x);
  const DD<V> l = log_dd(O::select(ok, x, V(1.0)));
  return O::select(ok, l.hi, log_special(x));
}

// ln x times the double-double constant k_hi + k_lo, one rounding.
template <class V>
SHOAL_INLINE V log_times(V x, double k_hi, double k_lo) {
  using O = Ops<V>;
  const typename O::Int ok = positive_finite(x);
  const DD<V> l = log_dd(O::select(ok, x, V(1.0)));
  const DD<V> p = dd_mul(l, DD<V>{V(k_hi), V(k_lo)});
  return O::select(ok, p.hi + p.lo, log_special(x));
}

template <class V>
SHOAL_INLINE V log1p_double(V x) {
  using O = Ops<V>;
  // 1 + x = u + c exactly (Knuth's two_sum), ln(1 + x) = ln u + ln(1 + q), q = c/u.
  const DD<V> uc0 = two_sum(V(1.0), x);
  const V u = uc0.hi, c = uc0.lo;
  const typename O::Int ok = positive_finite(u);
  const V uc = O::select(ok, u, V(1.0));
  const DD<V> l = log_dd(uc);
  const V q = c / uc;
  // u < 2: q = c − q (u − 1), c exact joins hi in a two_sum (for |x| < 2^-52 c is most of the
  // result); u >= 2: q joins the tail.
  const typename O::Int small = O::lt(uc, V(2.0));
  const DD<V> head = two_sum(l.hi, O::select(small, c, V(0.0)));
  const V tail = O::select(small, -(q * (uc - V(1.0))), q) - V(0.5) * q * q;
  const V y = head.hi + (head.lo + (l.lo + tail));
  // ±0 keep their sign; u <= 0 (x <= −1) and u = +inf, NaN: as log's specials, of u.
  return O::select(O::eq(x, V(0.0)), x, O::select(ok, y, log_special(u)));
}

}  // namespace log_detail

SHOAL_INLINE double log(double x) { return log_detail::log_double(x); }
SHOAL_INLINE float log(float x) { return Wide<float>::down(log_detail::log_double(Wide<float>::up(x))); }
SHOAL_INLINE double log1p(double x) { return log_detail::log1p_double(x); }
SHOAL_INLINE float log1p(float x) {
  return Wide<float>::down(log_detail::log1p_double(Wide<float>::up(x)));
}
SHOAL_INLINE double log2(double x) {
  return log_detail::log_times(x, log_detail::kInvLn2Hi, log_detail::kInvLn2Lo);
}
SHOAL_INLINE float log2(float x) {
  return Wide<float>::down(
      log_detail::log_times(Wide<float>::up(x), log_detail::kInvLn2Hi, log_detail::kInvLn2Lo));
}
SHOAL_INLINE double log10(double x) {
  return log_detail::log_times(x, log_detail::kInvLn10Hi, log_detail::kInvLn10Lo);
}
SHOAL_INLINE float log10(float x) {
  return Wide<float>::down(
      log_detail::log_times(Wide<float>::up(x), log_detail::kInvLn10Hi, log_detail::kInvLn10Lo));
}

// Lanes and other value types with an Ops<V>: the double routine, or float through Wide<V>.
template <class V>
SHOAL_INLINE auto log(const V& x) -> decltype(Ops<V>::bits(x), V()) {
  if constexpr (sizeof(typename Ops<V>::Scalar) == 8) {
    return log_detail::log_double(x);
  } else {
    return Wide<V>::down(log_detail::log_double(Wide<V>::up(x)));
  }
}
template <class V>
SHOAL_INLINE auto log1p(const V& x) -> decltype(Ops<V>::bits(x), V()) {
  if constexpr (sizeof(typename Ops<V>::Scalar) == 8) {
    return log_detail::log1p_double(x);
  } else {
    return Wide<V>::down(log_detail::log1p_double(Wide<V>::up(x)));
  }
}
template <class V>
SHOAL_INLINE auto log2(const V& x) -> decltype(Ops<V>::bits(x), V()) {
  if constexpr (sizeof(typename Ops<V>::Scalar) == 8) {
    return log_detail::log_times(x, log_detail::kInvLn2Hi, log_detail::kInvLn2Lo);
  } else {
    return Wide<V>::down(
        log_detail::log_times(Wide<V>::up(x), log_detail::kInvLn2Hi, log_detail::kInvLn2Lo));
  }
}
template <class V>
SHOAL_INLINE auto log10(const V& x) -> decltype(Ops<V>::bits(x), V()) {
  if constexpr (sizeof(typename Ops<V>::Scalar) == 8) {
    return log_detail::log_times(x, log_detail::kInvLn10Hi, log_detail::kInvLn10Lo);
  } else {
    return Wide<V>::down(
        log_detail::log_times(Wide<V>::up(x), log_detail::kInvLn10Hi, log_detail::kInvLn10Lo));
  }
}

}  // namespace elementary
}  // namespace shoal
