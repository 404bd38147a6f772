// fifth_root(x) = x^(1/5) for the step-size controller (the order-5 factor (1/||err||)^(1/5)).
//
// Why not pow(x, 0.2): libm's pow and CUDA's pow are different algorithms, so the accepted step
// sizes -- and from there every trajectory -- would differ bitwise between CPU and GPU runs, and a
// libm call stops the compiler vectorising the ensemble loop. This routine uses only IEEE +, -, *,
// / (round to nearest, no FMA: the project builds with -ffp-contract=off and NVRTC -fmad=false),
// exponent-bit manipulation and selects, in straight-line code, so it vectorises and gives the
// same bits on every host and device.
//
// Semantics: x > 0 finite (subnormals included): the real fifth root, to the bound below.
// x = +-0 -> x; x = +inf -> +inf; x < 0 (including -inf) or NaN -> NaN.
//
// Algorithm. A subnormal x is first multiplied by 2^(5k) (k = 20 for double, 5 for float), which
// is exact and makes it normal; the result is scaled back by 2^-k. Then x = m 2^e with m in [1, 2),
// e = 5q + r with r in {0..4} (floor division, by an offset that makes e nonnegative), so
// x^(1/5) = t^(1/5) 2^q with the reduced target t = m 2^r in [1, 32), built exactly from bits.
//   seed:   y0 = p(m) * c_r, p the degree-4 polynomial below, c_r = 2^(r/5) rounded to T;
//   Newton: y <- y + (t / y^4 - y) / 5   (2 steps for double, 1 for float), on t;
//   result: y * 2^q, exact (2^q built from exponent bits; the result is always normal).
//
// Error bound. Let u = 2^-53 (double) or 2^-24 (float), a = t^(1/5) and y = a (1 + eps).
//  (1) Seed. p was fitted offline (Lawson's iteratively reweighted least squares, towards minimax
//      relative error) to m^(1/5) on [1, 2); the seed as evaluated in T arithmetic (Horner, then
//      * c_r), against a long double reference, has |eps0| <= 7.97e-6 (float: exhaustive over all
//      2^23 mantissas and all r; double: 2^23 equispaced mantissas, max 7.78e-6). We use
//      delta0 = 8e-6. tests/cpp/test_fifth_root.cc re-checks this on a dense sweep.
//  (2) One step, exact arithmetic: y' = a (1 + phi(eps)), phi(e) = (4 (1 + e) + (1 + e)^-4) / 5 - 1
//      = 2 e^2 - 4 e^3 + 7 e^4 - ...  (the k-th root recurrence (k - 1)/2 e^2, k = 5), so
//      0 <= phi(e) <= 2.001 e^2 for |e| <= 1e-4.
//  (3) One step, rounded. y2 = fl(y y), y4 = fl(y2 y2), w = fl(t / y4): w = a (1 + e)^-4 (1 + eta),
//      |eta| <= 4.001 u. w / y is within 1 +- 1e-4, so d = w - y is exact (Sterbenz);
//      fl(fl(0.2) d) = d / 5 (1 + g), |g| <= 2.001 u, |d| <= a (5.001 delta + 4.001 u); the final
//      add rounds once more. Collecting terms, |eps'| <= E + u (1 + E) with
//        E = phi(delta) + 0.8002 u (1 + 4.001 delta) + 0.4002 u (5.001 delta + 4.001 u)
//      (0.8002 = 4.001 / 5, 0.4002 = 2.001 / 5): a step maps delta to ~2 delta^2 + 1.8 u.
//      (a >= 1, so an underflow in d could only add an absolute error far below u a.)
//  (4) double: delta0 = 8e-6 -> delta1 <= 1.29e-10 -> delta2 <= 1.8005 u.
//      float:  delta0 = 8e-6 -> delta1 <= 1.8024 u (phi(delta0) = 1.28e-10 = 0.0021 u).
//  Bound (both types): |fifth_root(x) / x^(1/5) - 1| <= 1.81 u, i.e. <= 2.01e-16 (double),
//  <= 1.08e-7 (float); at most 1.81 ulp of the result (0.5 ulp is the floor for any rounded
//  result). The bound needs round-to-nearest, correctly rounded division (nvcc/NVRTC default
//  -prec-div=true; no --use_fast_math) and no contraction into FMA.
#pragma once

#include "shoal/config.hpp"

namespace shoal {
namespace math {
namespace detail {

// Raw IEEE bits of a value (and back). nvcc/NVRTC device code uses the intrinsics; host compilers
// fold the 4/8-byte memcpy into a register move, which they vectorise.
SHOAL_INLINE uint64_t fifth_root_bits(double x) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(x));
#else
  uint64_t b;
  __builtin_memcpy(&b, &x, sizeof b);
  return b;
#endif
}
SHOAL_INLINE uint32_t fifth_root_bits(float x) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint32_t>(__float_as_int(x));
#else
  uint32_t b;
  __builtin_memcpy(&b, &x, sizeof b);
  return b;
#endif
}
SHOAL_INLINE double fifth_root_from_bits(uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(b));
#else
  double x;
  __builtin_memcpy(&x, &b, sizeof x);
  return x;
#endif
}
SHOAL_INLINE float fifth_root_from_bits(uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __int_as_float(static_cast<int>(b));
#else
  float x;
  __builtin_memcpy(&x, &b, sizeof x);
  return x;
#endif
}

// c ? a : b by bit masks. Written as a conditional, gcc's jump threading turns the selects of
// fifth_root back into branches and duplicates the paths between them, and the loop no longer
// vectorises; the masks leave it nothing to thread. Mask is all ones or all zeros.
template <class T, class Bits>
SHOAL_INLINE T fifth_root_select(Bits mask, T a, T b) {
  return fifth_root_from_bits((fifth_root_bits(a) & mask) | (fifth_root_bits(b) & ~mask));
}

// Per-type constants. kFloorK = K is chosen so that e + 5K >= 0 for every normal exponent e, which
// turns the floor division of e by 5 into a division of a nonnegative integer.
template <class T>
struct FifthRootTraits;
template <>
struct FifthRootTraits<double> {
  typedef uint64_t Bits;
  typedef int64_t Int;
  static constexpr int kMantBits = 52;
  static constexpr Int kBias = 1023;
  static constexpr Int kFloorK = 205;           // 5K = 1025 > 1022 = -(least normal exponent)
  static constexpr Int kPrescaleK = 20;         // subnormals: * 2^100, result * 2^-20
  static constexpr double kPrescale = 0x1p100;  // 2^(5 kPrescaleK)
  static constexpr double kMinNormal = 0x1p-1022;
  static constexpr double kMax = 0x1.fffffffffffffp1023;
  static constexpr int kNewtonSteps = 2;
};
template <>
struct FifthRootTraits<float> {
  typedef uint32_t Bits;
  typedef int32_t Int;
  static constexpr int kMantBits = 23;
  static constexpr Int kBias = 127;
  static constexpr Int kFloorK = 26;           // 5K = 130 > 126
  static constexpr Int kPrescaleK = 5;         // subnormals: * 2^25, result * 2^-5
  static constexpr float kPrescale = 0x1p25f;  // 2^(5 kPrescaleK)
  static constexpr float kMinNormal = 0x1p-126f;
  static constexpr float kMax = 0x1.fffffep127f;
  static constexpr int kNewtonSteps = 1;
};

// p(m) ~ m^(1/5) on [1, 2), relative error <= 7.78e-6 in exact arithmetic (see the header
// comment for the fit). Horner form; exposed for the test of the seed bound.
template <class T>
SHOAL_INLINE T fifth_root_poly(T m) {
  T p = T(-0.008220645153706407);
  p = p * m + T(0.06598169303991427);
  p = p * m + T(-0.22436516795934894);
  p = p * m + T(0.48321497289548165);
  p = p * m + T(0.6833969239413135);
  return p;
}

// c_r = 2^(r/5), r in {0..4}, rounded to T; by masks (vectorisable, unlike a table lookup).
template <class T, class Bits>
SHOAL_INLINE T fifth_root_two_pow(Bits r) {
  const Bits c =
      (fifth_root_bits(T(1)) & (Bits(0) - Bits(r == 0))) |
      (fifth_root_bits(T(1.1486983549970350067986269467779276)) & (Bits(0) - Bits(r == 1))) |
      (fifth_root_bits(T(1.3195079107728942593740019712296710)) & (Bits(0) - Bits(r == 2))) |
      (fifth_root_bits(T(1.5157165665103980823630736149002562)) & (Bits(0) - Bits(r == 3))) |
      (fifth_root_bits(T(1.7411011265922482782725400349595600)) & (Bits(0) - Bits(r == 4)));
  return fifth_root_from_bits(c);
}

}  // namespace detail

template <class T>
SHOAL_INLINE T fifth_root(T x) {
  typedef detail::FifthRootTraits<T> Tr;
  typedef typename Tr::Bits Bits;
  typedef typename Tr::Int Int;
  const Bits kMantMask = (Bits(1) << Tr::kMantBits) - 1;

  // Main path on a sanitised input (specials take the select at the end). Every operation is
  // done unconditionally and only values are selected, by masks (see fifth_root_select).
  // (Classifying x on its integer bits instead made the vectorised loop 2x slower with gcc 12.)
  const Bits finite_pos = Bits(0) - Bits((x > T(0)) & (x <= Tr::kMax));
  const T xn = detail::fifth_root_select(finite_pos, x, T(1));
  const Bits tiny = Bits(0) - Bits(xn < Tr::kMinNormal);
  const T xs = xn * detail::fifth_root_select(tiny, Tr::kPrescale, T(1));  // exact

  // x = m 2^e, e = 5q + r. With e5 = e + 5K >= 0 (e5 < 2^14), floor(e5 / 5) = (e5 * 13108) >> 16
  // exactly (13108 / 2^16 exceeds 1/5 by 1.2e-5, too little to reach the next integer), which
  // vectorises better than an integer division.
  const Bits b = detail::fifth_root_bits(xs);
  const Int e5 = static_cast<Int>(b >> Tr::kMantBits) - Tr::kBias + 5 * Tr::kFloorK;
  const Int q5 = (e5 * 13108) >> 16;
  const Int r = e5 - 5 * q5;
  const Int q = q5 - Tr::kFloorK - (static_cast<Int>(tiny) & Tr::kPrescaleK);

  const Bits mant = b & kMantMask;
  const T m = detail::fifth_root_from_bits(mant | (Bits(Tr::kBias) << Tr::kMantBits));
  const T t = detail::fifth_root_from_bits(mant | (Bits(Tr::kBias + r) << Tr::kMantBits));
  const T scale = detail::fifth_root_from_bits(Bits(q + Tr::kBias) << Tr::kMantBits);

  T y = detail::fifth_root_poly(m) * detail::fifth_root_two_pow<T>(static_cast<Bits>(r));
  for (int i = 0; i < Tr::kNewtonSteps; ++i) {  // fixed trip count: unrolled, no branches
    const T y2 = y * y;
    const T w = t / (y2 * y2);
    y = y + (w - y) * T(0.2);  // w - y is exact (Sterbenz)
  }
  y = y * scale;

  // +-0 -> x, +inf -> +inf, NaN -> NaN (x + x quiets it); x < 0 -> NaN.
  const T nan = detail::fifth_root_from_bits(Bits(~kMantMask) >> 1);  // quiet NaN: 0x7ff8...
  const Bits keep = Bits(0) - Bits((x >= T(0)) | (x != x));
  const T special = detail::fifth_root_select(keep, x + x, nan);
  return detail::fifth_root_select(finite_pos, y, special);
}

}  // namespace math
}  // namespace shoal
