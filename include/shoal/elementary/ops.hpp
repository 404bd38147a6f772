// The vocabulary shoal's elementary functions (exp.hpp, log.hpp, ...) are written in, one for
// every value type they run on: double and float here, simd::Lanes<T, W> in simd/lanes.hpp.
//
// Why a vocabulary and not `if`: a function must give the same bits in the scalar build, in SIMD
// lanes and on the GPU, so it is written once, as straight-line IEEE arithmetic (+, −, ×, ÷, no
// contraction into FMA), integer operations on the values' bits, and selects by masks. A mask is
// an integer of the value's width with all bits set where the condition holds (what vector
// comparisons return), so one `select` serves scalars and lanes. Rare slow paths (sin of a huge
// argument) test `any` of a mask and then run per lane through the scalar code.
//
// Ops<V>: Scalar (double or float), Int (the signed integer, or integer vector, of V's width),
//   bits / from_bits  the IEEE bits of a value and back;
//   select(m, a, b)   a where m is set, else b, bit for bit;
//   lt le eq          comparisons of values, as masks (NaN compares false);
//   ilt ieq           comparisons of integers, as masks;
//   to_value          an integer (|i| < 2^52 or 2^23) to the value, exactly;
//   sqrt              the hardware's correctly rounded square root (IEEE, so the same bits);
//   fma               a b + c with one rounding (IEEE; asked for explicitly, never contracted);
//   any               whether any lane of a mask is set;
//   per_lane(x, f)    f applied to each lane's scalar (the slow paths).
// by_part(m, first, second) below runs a function's two parts only where lanes need them.
#pragma once

#include "shoal/config.hpp"

namespace shoal {
namespace elementary {

template <class V>
struct Ops;

namespace ops_detail {
SHOAL_INLINE int64_t bits(double x) {
#if defined(__CUDA_ARCH__)
  return __double_as_longlong(x);
#else
  int64_t b;
  __builtin_memcpy(&b, &x, sizeof b);
  return b;
#endif
}
SHOAL_INLINE int32_t bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_int(x);
#else
  int32_t b;
  __builtin_memcpy(&b, &x, sizeof b);
  return b;
#endif
}
SHOAL_INLINE double value(int64_t b) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(b);
#else
  double x;
  __builtin_memcpy(&x, &b, sizeof x);
  return x;
#endif
}
SHOAL_INLINE float value(int32_t b) {
#if defined(__CUDA_ARCH__)
  return __int_as_float(b);
#else
  float x;
  __builtin_memcpy(&x, &b, sizeof x);
  return x;
#endif
}
}  // namespace ops_detail

// Scalars: masks are 0 or −1 (all bits), built from bool without a branch.
template <class T, class I>
struct ScalarOps {
  using Scalar = T;
  using Int = I;
  SHOAL_INLINE static I bits(T x) { return ops_detail::bits(x); }
  SHOAL_INLINE static T from_bits(I b) { return ops_detail::value(b); }
  SHOAL_INLINE static I mask(bool c) { return I(0) - I(c); }
  SHOAL_INLINE static T select(I m, T a, T b) { return from_bits((bits(a) & m) | (bits(b) & ~m)); }
  SHOAL_INLINE static I select_int(I m, I a, I b) { return (a & m) | (b & ~m); }
  SHOAL_INLINE static I lt(T a, T b) { return mask(a < b); }
  SHOAL_INLINE static I le(T a, T b) { return mask(a <= b); }
  SHOAL_INLINE static I eq(T a, T b) { return mask(a == b); }
  SHOAL_INLINE static I ilt(I a, I b) { return mask(a < b); }
  SHOAL_INLINE static I ieq(I a, I b) { return mask(a == b); }
  SHOAL_INLINE static T to_value(I i) { return static_cast<T>(i); }
  SHOAL_INLINE static T sqrt(T x) {
#if defined(__CUDACC_RTC__) || defined(__CUDA_ARCH__)
    return ::sqrt(x);
#else
    if constexpr (sizeof(T) == 4) {
      return __builtin_sqrtf(x);
    } else {
      return __builtin_sqrt(x);
    }
#endif
  }
  // a b + c rounded once (IEEE fusedMultiplyAdd): the hardware's where it has one, else libm's
  // exact emulation: the same bits either way.
  SHOAL_INLINE static T fma(T a, T b, T c) {
#if defined(__CUDACC_RTC__) || defined(__CUDA_ARCH__)
    return ::fma(a, b, c);
#else
    if constexpr (sizeof(T) == 4) {
      return __builtin_fmaf(a, b, c);
    } else {
      return __builtin_fma(a, b, c);
    }
#endif
  }
  SHOAL_INLINE static bool any(I m) { return m != 0; }
  template <class F>
  SHOAL_INLINE static T per_lane(T x, F f) {
    return f(x);
  }
  template <class F>
  SHOAL_INLINE static T per_lane(T x, T y, F f) {
    return f(x, y);
  }
};
template <>
struct Ops<double> : ScalarOps<double, int64_t> {};
template <>
struct Ops<float> : ScalarOps<float, int32_t> {};

// float functions are computed in double and rounded once: the double routines' error (< 1 ulp
// of double) then costs float at most 2^-29 ulp beyond correct rounding, and float needs no
// routines of its own. Wide<V>: V's double counterpart (lanes: simd/lanes.hpp).
template <class V>
struct Wide;
template <>
struct Wide<float> {
  using type = double;
  SHOAL_INLINE static double up(float x) { return x; }
  SHOAL_INLINE static float down(double x) { return static_cast<float>(x); }
};

// IEEE layout of the scalar type.
template <class S>
struct Format;
template <>
struct Format<double> {
  static constexpr int mant_bits = 52;
  static constexpr int bias = 1023;
};
template <>
struct Format<float> {
  static constexpr int mant_bits = 23;
  static constexpr int bias = 127;
};

// first() where mask m is set, second() elsewhere, for a function made of two costly parts (erf's
// series and its exponential): where every lane is on one side (always, for a scalar) only that
// part runs, else both and a select. The same bits either way, since each part computes each
// lane from that lane's argument alone. One at a time (lanes=1, the GPU) it saves the part not
// taken; but a branch keeps the compiler from vectorising a scalar loop over the function
// (sinh's throughput on lanes=1 went from 9.5 to 40 ns a value with it: not used there).
template <class V, class First, class Second>
SHOAL_INLINE V by_part(typename Ops<V>::Int m, First first, Second second) {
  using O = Ops<V>;
  if (!O::any(~m)) return first();
  if (!O::any(m)) return second();
  return O::select(m, first(), second());
}

// 2^k for an integer k in [1 − bias, bias] (a normal power of two), built from its bits.
template <class V>
SHOAL_INLINE V two_to(typename Ops<V>::Int k) {
  using O = Ops<V>;
  using F = Format<typename O::Scalar>;
  return O::from_bits((k + F::bias) << F::mant_bits);
}

// x rounded to the nearest integer (ties to even) as a value, and that integer: adding and
// subtracting 1.5·2^52 (2^23 for float) rounds in the FPU's own mode, for |x| < 2^51 (2^22).
template <class V>
struct Rounded {
  V value;
  typename Ops<V>::Int integer;
};
template <class V>
SHOAL_INLINE Rounded<V> round_to_integer(V x) {
  using O = Ops<V>;
  using S = typename O::Scalar;
  const S shifter = S(1.5) * S(int64_t(1) << Format<S>::mant_bits);
  const V shifted = x + V(shifter);
  return {shifted - V(shifter), O::bits(shifted) - O::bits(V(shifter))};
}

}  // namespace elementary
}  // namespace shoal
