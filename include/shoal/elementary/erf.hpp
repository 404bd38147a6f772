// erf, erfc for double and float, scalars and lanes, the same bits everywhere (elementary/ops.hpp).
//
// Algorithm (double), a = |x|. Lanes on both sides of 0.5 compute both parts below and masks
// choose; where all are on one side (always, one at a time) only that part runs.
//   |x| < 0.5: erf x = x + x P(x²), P(t) = (2/√π − 1) + t Q(t), Q = Σ_{n=1..13} b_n t^(n−1),
//   b_n = (2/√π)(−1)^n / (n! (2n + 1)) the Taylor coefficients rounded to double (mpmath); the
//   series alternates, so the truncation is below the first omitted term, 2/√π 0.25^14/(14! 29)
//   = 1.7e-21 (2^-68 of erf). x² = s + s_lo exactly (two_prod, by a fused multiply-add),
//   2/√π − 1 a double-double, P summed as a double-double pm + pl (TwoSum) with s_lo Q in the
//   tail; x pm exactly (Dekker) and x + x P by a TwoSum: one final rounding, the errors left
//   those of t Q (b_1's rounding and Horner's last addition, ~2^-55 of Q, times x s <= 1/8).
//   erfc x = 1 − x − x P there, 1 − x exactly (Fast2Sum), x P's head subtracted by a TwoSum.
//   |x| < 2^-960 is scaled by 2^100 for erf so that Dekker's product does not underflow.
//   a >= 0.5: erfc a = e^(−a²) F(a), F = erfc · e^(a²) (smooth, ~1/(a√π) for large a):
//   - e^(−a²) = 2^k (eh + el) to ~2^-60: a² = p + p_lo exactly (Dekker), −p reduced as in
//     exp.hpp (−p = k ln2 + r + r_lo, k down to −1091) with −p_lo folded into r_lo by a TwoSum,
//     e^r − 1 the double-double of expm1.hpp (expm1_reduced), 1 + that by Fast2Sum.
//   - F from one polynomial of degree 16 whose coefficients are picked by selects from six
//     pieces: in z = (a − mid)/half on [0.5, 1], [1, 1.5], [1.5, 2], [2, 3] (mid the centre),
//     in z = (1/a − mid)/half on [3, 8] (mid 1/4, half 1/8) and [8, 27.5] (mid = half = 1/16);
//     half is a power of two and a (or 1/a) − mid is exact by Sterbenz, so z is exact for the
//     first four; 1/a = th + tl with tl = (1 − a th)/a from the exact residual (Dekker), so z
//     carries zl = tl/half. Coefficients: Chebyshev interpolation at 17 nodes of each piece in
//     mpmath (160 bits), turned into monomials in z, c0 and c1 kept as double-doubles; the fit
//     with the rounded coefficients is within 2.5e-18 relative (2^-58.5, checked at 2000 points
//     per piece). c2..c16 by Horner in double, then F = c0 + z (c1 + z q) with the last two
//     steps in double-double (zl joins at first order): z² q is at most ~4% of F, so Horner's
//     errors cost < 2^-57 of F.
//   - v = (eh + el)(fh + fl) by Dekker's product, in [0.014, 0.64] to ~2^-57 relative.
//   erfc a = 2^k v, rounded once (then exactly scaled by two powers of two, exp_detail::scale;
//   a subnormal result is rounded twice). erfc(−a) = 2 − 2^k v, erf(±a) = ±(1 − 2^k v): 2^k vh
//   exact where it matters (a < 6; further out the result rounds to 2 or 1), subtracted by
//   Fast2Sum, one rounding. a is clamped to [0.5, 27.5]: erfc underflows to +0 from 27.226 on.
// Error: measured max (one-off runs of ~15 M points against erfl/erfcl, and
// tests/cpp/test_elementary_erf.cc): erf 0.631 ulp (x = 0.4753, the series' end), 0.525 ulp for
// |x| >= 0.5; erfc 0.643 ulp (x = 0.4996, 1 − erf x near erfc x = 0.48), <= 0.578 ulp for
// x >= 0.5 (x = 7.96) and 0.536 for x < 0; where the result is subnormal (erfc x > 26.54, erf of
// |x| < 2^-1022) rounded twice: 0.756 ulp. float (computed in double, rounded once): 0.5 ulp +
// 2^-29 (swept).
// Special values (C99 F.10.5.1, F.10.5.2): erf(±0) = ±0, erf(±inf) = ±1, erfc(±0) = 1,
// erfc(+inf) = +0, erfc(−inf) = 2, NaN -> NaN; erf rounds to ±1 beyond 5.92, erfc to 2 below
// −5.92; erfc(x) = +0 for x > 27.226 (complete underflow); tiny x: erf x = x (2/√π) rounded.
// Cost: one division, ~270 flops and ~100 selects where both parts run.
#pragma once

#include "shoal/config.hpp"
#include "shoal/elementary/double_double.hpp"
#include "shoal/elementary/exp.hpp"
#include "shoal/elementary/expm1.hpp"
#include "shoal/elementary/ops.hpp"

namespace shoal {
namespace elementary {

namespace erf_detail {

// The piece of [0.5, 27.5] that a lies in, as masks: a >= 1, 1.5, 2, 3, 8.
template <class V>
struct Pieces {
  typename Ops<V>::Int m1, m2, m3, m4, m5;
};
// The constant of a's piece, by selects (the last mask set wins).
template <class V>
SHOAL_INLINE V pick(const Pieces<V>& m, double c0, double c1, double c2, double c3, double c4,
                    double c5) {
  using O = Ops<V>;
  V v = O::select(m.m1, V(c1), V(c0));
  v = O::select(m.m2, V(c2), v);
  v = O::select(m.m3, V(c3), v);
  v = O::select(m.m4, V(c4), v);
  return O::select(m.m5, V(c5), v);
}

// erfc a = 2^k (hi + lo) for a in [0.5, 27.5], hi + lo in [0.014, 0.64] to ~2^-58 relative.
template <class V>
struct Scaled {
  V hi, lo;
  typename Ops<V>::Int k;
};
template <class V>
SHOAL_INLINE Scaled<V> erfc_core(V a) {
  using O = Ops<V>;
  // e^(−a²) = 2^k (eh + el): a² = aa.hi + aa.lo exactly, −aa.hi reduced as in exp.hpp, −aa.lo
  // folded into the reduction's low part, e^r − 1 the double-double of expm1.hpp.
  const DD<V> aa = two_prod(a, a);
  const exp_detail::Reduced<V> red = exp_detail::reduce(V(0.0) - aa.hi);
  const DD<V> r = two_sum(red.r, red.r_lo - aa.lo);
  const DD<V> p = expm1_detail::expm1_reduced(r.hi, r.lo);
  const DD<V> e0 = fast_two_sum(V(1.0), p.hi);
  const V eh = e0.hi, el = e0.lo + p.lo;
  // F = erfc(a) e^(a²): a polynomial in z = (a − mid) / half below 3, in z = (1/a − mid) / half
  // from 3 on, with 1/a = th + tl (tl from the exact residual 1 − a th).
  const V th = V(1.0) / a;
  const DD<V> at = two_prod(a, th);
  const V tl = ((V(1.0) - at.hi) - at.lo) * th;
  const Pieces<V> m{O::le(V(1.0), a), O::le(V(1.5), a), O::le(V(2.0), a), O::le(V(3.0), a),
                    O::le(V(8.0), a)};
  const V mid = pick(m, 0x1.8000000000000p-1, 0x1.4000000000000p+0, 0x1.c000000000000p+0,
                     0x1.4000000000000p+1, 0x1.0000000000000p-2, 0x1.0000000000000p-4);
  const V inv_half = pick(m, 0x1.0000000000000p+2, 0x1.0000000000000p+2, 0x1.0000000000000p+2,
                          0x1.0000000000000p+1, 0x1.0000000000000p+3, 0x1.0000000000000p+4);
  const V u = O::select(m.m4, th, a);
  const V zh = (u - mid) * inv_half;  // exact (Sterbenz; half a power of two)
  const V zl = O::select(m.m4, tl, V(0.0)) * inv_half;
  V q = pick(m, 0x1.dd537718ef76cp-54, 0x1.50eeabc07ec9cp-57, 0x1.20d86808366c8p-60,
             0x1.d182456c55dc3p-49, 0x1.51a59227a945dp-43, -0x1.7b56d8579cbd3p-56);
  q = q * zh + pick(m, -0x1.879bb4360f29bp-50, -0x1.2d52e7d9ca20fp-53, -0x1.191b414a2ebd0p-56,
                    -0x1.006c9c222404fp-45, 0x1.360f643f5caecp-42, 0x1.b36513de9c3ffp-52);
  q = q * zh + pick(m, 0x1.30d9b679ab763p-46, 0x1.01722d19a7f37p-49, 0x1.06e8f27bbe3c3p-52,
                    0x1.05f2cb2c45b9dp-42, -0x1.46924634799a6p-39, -0x1.e1e2df8396bb3p-50);
  q = q * zh + pick(m, -0x1.d89a2e82658dbp-43, -0x1.b5a70e1ae92b5p-46, -0x1.e90d00140b3d1p-49,
                    -0x1.156b068cd3e63p-39, 0x1.1f66c3ab6471dp-37, -0x1.304a8d825ba78p-47);
  q = q * zh + pick(m, 0x1.637258c508aeep-39, 0x1.6a18d1875915fp-42, 0x1.bc1035ed7ca45p-45,
                    0x1.205ea2f0d65d1p-36, -0x1.6d756900420d5p-39, 0x1.cd3610e95d0c6p-44);
  q = q * zh + pick(m, -0x1.02b17ec58f27cp-35, -0x1.22fc54614208cp-38, -0x1.88fb3f48c8d91p-41,
                    -0x1.2516089fa8258p-33, -0x1.80011c7eb470bp-33, 0x1.94816aae308dep-44);
  q = q * zh + pick(m, 0x1.6b982bf7cc122p-32, 0x1.c5703583aa003p-35, 0x1.5273f33c24f7fp-37,
                    0x1.234fec1129a77p-30, 0x1.3944196cb469cp-30, -0x1.9ee935ca15b29p-38);
  q = q * zh + pick(m, -0x1.ec0cf4a29082dp-29, -0x1.55c07d0db32bap-31, -0x1.1b2912c4f883ap-33,
                    -0x1.1ad10ab8a5671p-27, -0x1.5a9106c7113edp-29, 0x1.ef53c19aa1369p-37);
  q = q * zh + pick(m, 0x1.3f81897cfee82p-25, 0x1.f0fe6fb60b1e4p-28, 0x1.cb4c687e51f7dp-30,
                    0x1.0bcba32343445p-24, -0x1.198809fd747efp-26, 0x1.82d837a15236ap-32);
  q = q * zh + pick(m, -0x1.8c97dd4ecb603p-22, -0x1.5b8bc94c6e6c0p-24, -0x1.6838884abbb22p-26,
                    -0x1.edd423a02acbfp-22, 0x1.8be7cfdea833bp-23, -0x1.399e32cf3fdb6p-29);
  q = q * zh + pick(m, 0x1.d43a7c7a660cep-19, 0x1.d1b695aabbf27p-21, 0x1.106bd5c04333dp-22,
                    0x1.ba8a67cfbaca3p-19, -0x1.5c22e188b189cp-21, -0x1.932021cb936b5p-26);
  q = q * zh + pick(m, -0x1.054d68295b17ep-15, -0x1.299636d6c5855p-17, -0x1.8bf716a8eabd4p-19,
                    -0x1.809ce8ab4eb77p-16, -0x1.8a59e68009a29p-19, 0x1.5f48a43aadbbap-22);
  q = q * zh + pick(m, 0x1.1192f5bd6877dp-12, 0x1.68a25a6641f26p-14, 0x1.13648a11ffe73p-15,
                    0x1.435c04e207cb3p-13, 0x1.b32eb6f1a3cd5p-15, 0x1.fa56d66cefcfep-20);
  q = q * zh + pick(m, -0x1.09e77d40e0239p-9, -0x1.9b635ac624ad5p-11, -0x1.6cb52fe48945fp-12,
                    -0x1.0632076809e11p-10, -0x1.ce788e19a511ap-13, -0x1.107fe2142eb13p-14);
  q = q * zh + pick(m, 0x1.d90093ae10928p-7, 0x1.b56f45eef7e58p-8, 0x1.c8d0cef0f810dp-9,
                    0x1.98958a7a8e4a3p-8, -0x1.4a88aa1d5f742p-9, -0x1.a9011d06db29bp-13);
  const V c1h = pick(m, -0x1.78cdd551ee51ap-4, -0x1.abaacdbfa8b07p-5, -0x1.0c3d538446447p-5,
                     -0x1.3086d7f01ac85p-5, 0x1.094922737431ap-4, 0x1.1f305584ff3edp-5);
  const V c1l = pick(m, 0x1.20de6308bcf12p-58, 0x1.d70ab32a9d877p-59, -0x1.e70dd480391d8p-59,
                     -0x1.e8238f5d488d0p-61, -0x1.ff88af5caf6c5p-60, -0x1.f07fea37457a5p-61);
  const V c0h = pick(m, 0x1.038d54ea3d834p-1, 0x1.78a692138767ap-2, 0x1.23cfc2f1dc7e0p-2,
                     0x1.afbb3f3b7343bp-3, 0x1.18932bf08e154p-3, 0x1.204ddcd967373p-5);
  const V c0l = pick(m, -0x1.ec2134d851665p-55, 0x1.4797400f19192p-63, 0x1.3b1040eb318c2p-57,
                     -0x1.9f40bca142466p-58, 0x1.093c9c6627020p-57, 0x1.b3dbe22d3d602p-61);
  // F = c0 + z (c1 + z q) with c0, c1 double-doubles and the last two steps in double-double.
  const DD<V> s1 = two_sum(c1h, zh * q);
  const V s1l = s1.lo + (c1l + zl * q);
  const DD<V> zs = two_prod(zh, s1.hi);
  const V zsl = zs.lo + (zh * s1l + zl * s1.hi);
  const DD<V> f = two_sum(c0h, zs.hi);
  const V fl = f.lo + (c0l + zsl);
  // e^(−a²) F as a double-double.
  const DD<V> v = two_prod(eh, f.hi);
  return {v.hi, v.lo + (eh * fl + el * f.hi), red.k};
}

// erf x − x = x P(x²) for |x| < 0.5, as a double-double.
template <class V>
SHOAL_INLINE DD<V> erf_small_part(V x) {
  const DD<V> t = two_prod(x, x);
  const V s = t.hi;
  V q = V(-0x1.d8453cb0c46eap-38);
  q = q * s + V(0x1.9e6ad5e55a730p-34);
  q = q * s + V(-0x1.51d7181c5d36dp-30);
  q = q * s + V(0x1.fcc5720624c1cp-27);
  q = q * s + V(-0x1.5f742ec43e71ap-23);
  q = q * s + V(0x1.b9e6c9dc651a3p-20);
  q = q * s + V(-0x1.f4d25c3e0c2ebp-17);
  q = q * s + V(0x1.f9a326f9b89b7p-14);
  q = q * s + V(-0x1.c02db40040b86p-11);
  q = q * s + V(0x1.565bcd0e6a53fp-8);
  q = q * s + V(-0x1.b82ce31288b51p-6);
  q = q * s + V(0x1.ce2f21a042be2p-4);
  q = q * s + V(-0x1.812746b0379e7p-2);
  // P = (2/√π − 1) + t Q(t): the constant a double-double, t's rounding error t.lo included.
  const DD<V> pm = two_sum(V(0x1.06eba8214db69p-3), s * q);
  const V pl = pm.lo + (V(-0x1.ca38add602500p-57) + t.lo * q);
  const DD<V> xp = two_prod(x, pm.hi);
  return {xp.hi, xp.lo + x * pl};
}

template <class V>
SHOAL_INLINE V abs_value(V x) {
  using O = Ops<V>;
  return O::from_bits(O::bits(x) & 0x7fffffffffffffffLL);
}

// a clamped to [0.5, 27.5] (NaN to 27.5): erfc 27.5 underflows to +0.
template <class V>
SHOAL_INLINE V clamp(V a) {
  using O = Ops<V>;
  return O::select(O::lt(a, V(0.5)), V(0.5), O::select(O::le(a, V(27.5)), a, V(27.5)));
}

// erf where |x| >= 0.5 (and NaN), from erfc_core.
template <class V>
SHOAL_INLINE V erf_large(V x, V a) {
  using O = Ops<V>;
  const Scaled<V> c = erfc_core(clamp(a));
  // 1 − erfc a: 2^k hi exact wherever it matters (a < 6; beyond, erf rounds to 1).
  const DD<V> d = fast_two_sum(V(1.0), V(0.0) - exp_detail::scale(c.hi, c.k));
  const V big = d.hi + (d.lo - exp_detail::scale(c.lo, c.k));
  const V large = O::select(O::lt(x, V(0.0)), V(0.0) - big, big);
  return O::select(O::eq(x, x), large, x + x);
}

// erf where |x| < 0.5, from the series.
template <class V>
SHOAL_INLINE V erf_small(V x, V a) {
  using O = Ops<V>;
  // |x| < 2^-960 is scaled by 2^100 first (x P(x²) is then x P(0), linear in x), so that Dekker's
  // product does not underflow; the result is scaled back with one more rounding where it is
  // subnormal. ±0 kept as they are (the sum would give +0 for −0).
  const typename O::Int tiny = O::lt(a, V(0x1p-960));
  const V xs = O::select(tiny, x * V(0x1p100), x);
  const DD<V> xp = erf_small_part(xs);
  const DD<V> sm = two_sum(xs, xp.hi);
  const V unscale = O::select(tiny, V(0x1p-100), V(1.0));
  return O::select(O::eq(x, V(0.0)), x, (sm.hi + (sm.lo + xp.lo)) * unscale);
}

template <class V>
SHOAL_INLINE V erf_double(V x) {
  const V a = abs_value(x);
  return by_part<V>(Ops<V>::lt(a, V(0.5)), [&] { return erf_small(x, a); },
                    [&] { return erf_large(x, a); });
}

// erfc where |x| >= 0.5 (and NaN), from erfc_core.
template <class V>
SHOAL_INLINE V erfc_large(V x, V a) {
  using O = Ops<V>;
  const Scaled<V> c = erfc_core(clamp(a));
  const V positive = exp_detail::scale(c.hi + c.lo, c.k);
  const DD<V> d = fast_two_sum(V(2.0), V(0.0) - exp_detail::scale(c.hi, c.k));
  const V negative = d.hi + (d.lo - exp_detail::scale(c.lo, c.k));
  const V large = O::select(O::lt(x, V(0.0)), negative, positive);
  return O::select(O::eq(x, x), large, x + x);
}

// erfc where |x| < 0.5: 1 − x − (xp.hi + xp.lo), 1 − x exactly as s.hi + s.lo, then minus xp.hi
// exactly.
template <class V>
SHOAL_INLINE V erfc_small(V x) {
  const DD<V> xp = erf_small_part(x);
  const DD<V> s = fast_two_sum(V(1.0), V(0.0) - x);
  const DD<V> sd = two_sum(s.hi, V(0.0) - xp.hi);
  return sd.hi + ((sd.lo + s.lo) - xp.lo);
}

template <class V>
SHOAL_INLINE V erfc_double(V x) {
  const V a = abs_value(x);
  return by_part<V>(Ops<V>::lt(a, V(0.5)), [&] { return erfc_small(x); },
                    [&] { return erfc_large(x, a); });
}

}  // namespace erf_detail

SHOAL_INLINE double erf(double x) { return erf_detail::erf_double(x); }
SHOAL_INLINE float erf(float x) {
  return Wide<float>::down(erf_detail::erf_double(Wide<float>::up(x)));
}
SHOAL_INLINE double erfc(double x) { return erf_detail::erfc_double(x); }
SHOAL_INLINE float erfc(float x) {
  return Wide<float>::down(erf_detail::erfc_double(Wide<float>::up(x)));
}

// Lanes and other value types with an Ops<V>: the double routine, or float through Wide<V>.
template <class V>
SHOAL_INLINE auto erf(const V& x) -> decltype(Ops<V>::bits(x), V()) {
  if constexpr (sizeof(typename Ops<V>::Scalar) == 8) {
    return erf_detail::erf_double(x);
  } else {
    return Wide<V>::down(erf_detail::erf_double(Wide<V>::up(x)));
  }
}
template <class V>
SHOAL_INLINE auto erfc(const V& x) -> decltype(Ops<V>::bits(x), V()) {
  if constexpr (sizeof(typename Ops<V>::Scalar) == 8) {
    return erf_detail::erfc_double(x);
  } else {
    return Wide<V>::down(erf_detail::erfc_double(Wide<V>::up(x)));
  }
}

}  // namespace elementary
}  // namespace shoal
