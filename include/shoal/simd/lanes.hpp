// simd::Lanes<T, W>: W values of T side by side in one vector register (the compiler's vector
// extensions, g++ and clang), with the arithmetic of T applied lane by lane.
//
// Why vector extensions and not a library: every operation here is one IEEE operation per lane
// (+, −, ×, ÷, negation, bit selects), so each lane computes exactly what the scalar code
// computes: the lanes engine is bit-identical to the scalar path by construction, with
// -ffp-contract=off keeping a*b + c two roundings in vectors as in scalars. A library adds
// nothing to that set (std::experimental::simd and xsimd would also offer vector exp/log, whose
// bits differ from libm's, which the scalar path and the GPU use), and Highway would be a
// dependency for what is a thin wrapper. Functions beyond arithmetic run one lane at a time
// through the scalar code (rhs_per_lane).
//
// Comparisons return a LaneMask (all bits set per lane where true), which select(), &&, || and !
// take, so a generated model's `where`, max and min run in the lanes with the scalar's choices;
// never bool, and no implicit conversion back to T. Functions beyond arithmetic (exp, log, pow,
// ...) are shoal's own (elementary/), written once for scalars and lanes, so a lane computes
// the scalar's bits (simd/lanes_math.hpp). A model's integers (table indices) are IntLanes below,
// with the same lane count, whose comparisons are the floats' LaneMask; a model calling anything
// else runs one lane at a time through the scalar code (rhs_per_lane).
#pragma once

#ifndef SHOAL_DEVICE_COMPILE
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "shoal/ad/dual.hpp"
#include "shoal/config.hpp"
#include "shoal/elementary/ops.hpp"
#include "shoal/lane_traits.hpp"

namespace shoal {
namespace simd {

// The register width of the build's ISA in bytes: 64 with AVX-512F, 32 with AVX, else 16 (SSE2
// or another ISA's 128-bit vectors). Part of the compiled model's cache key through the
// compiler flags (-march=native).
constexpr int native_vector_bytes() {
#if defined(__AVX512F__)
  return 64;
#elif defined(__AVX__)
  return 32;
#else
  return 16;
#endif
}
template <class T>
constexpr int native_lanes() {
  return native_vector_bytes() / static_cast<int>(sizeof(T));
}

template <class T, int W>
struct LaneMask;
template <class I, class S, int W>
struct IntLanes;

template <class T, int W>
struct Lanes {
  static_assert(W >= 2 && (W & (W - 1)) == 0, "lanes come in powers of two");
  typedef T Vec __attribute__((vector_size(sizeof(T) * W)));
  // The integer vector of T's width: what comparisons of Vec return (all ones where true).
  using Int = std::conditional_t<sizeof(T) == 8, int64_t, int32_t>;
  typedef Int Mask __attribute__((vector_size(sizeof(T) * W)));

  Vec v;

  Lanes() = default;
  // Every lane x, bit for bit: x − (+0) is x for −0 too (x + 0 would give +0), and one
  // broadcast (a loop of lane stores cost the Lorenz benchmark 25 %).
  Lanes(T x) : v(x - Vec{}) {}  // NOLINT(google-explicit-constructor)
  template <class S, class = std::enable_if_t<std::is_arithmetic_v<S> && !std::is_same_v<S, T>>>
  Lanes(S x) : Lanes(T(x)) {}  // NOLINT(google-explicit-constructor)
  template <class U>
  explicit Lanes(const Lanes<U, W>& o) : v(__builtin_convertvector(o.v, Vec)) {}
  // An integer per lane, converted as T(i) converts it (round to nearest).
  template <class I, class S>
  explicit Lanes(const IntLanes<I, S, W>& o) : v(__builtin_convertvector(o.v, Vec)) {}
  static Lanes of(const Vec& x) {
    Lanes r;
    r.v = x;
    return r;
  }

  T operator[](int l) const { return v[l]; }
  void set(int l, T x) { v[l] = x; }

  friend Lanes operator+(const Lanes& a) { return a; }
  friend Lanes operator-(const Lanes& a) { return of(-a.v); }
  friend Lanes operator+(const Lanes& a, const Lanes& b) { return of(a.v + b.v); }
  friend Lanes operator-(const Lanes& a, const Lanes& b) { return of(a.v - b.v); }
  friend Lanes operator*(const Lanes& a, const Lanes& b) { return of(a.v * b.v); }
  friend Lanes operator/(const Lanes& a, const Lanes& b) { return of(a.v / b.v); }
  // Comparisons, lane by lane (NaN compares false, as in the scalar code).
  friend LaneMask<T, W> operator<(const Lanes& a, const Lanes& b) { return {a.v < b.v}; }
  friend LaneMask<T, W> operator<=(const Lanes& a, const Lanes& b) { return {a.v <= b.v}; }
  friend LaneMask<T, W> operator>(const Lanes& a, const Lanes& b) { return {a.v > b.v}; }
  friend LaneMask<T, W> operator>=(const Lanes& a, const Lanes& b) { return {a.v >= b.v}; }
  friend LaneMask<T, W> operator==(const Lanes& a, const Lanes& b) { return {a.v == b.v}; }
  friend LaneMask<T, W> operator!=(const Lanes& a, const Lanes& b) { return {a.v != b.v}; }
  // A mask as a value: 1 where set, 0 elsewhere (a bool converted to float).
  explicit Lanes(const LaneMask<T, W>& m) : v(Vec{} + T(1)) {
    v = (Vec)((typename LaneMask<T, W>::Bits)v & m.m);
  }
  Lanes& operator+=(const Lanes& o) { return *this = *this + o; }
  Lanes& operator-=(const Lanes& o) { return *this = *this - o; }
  Lanes& operator*=(const Lanes& o) { return *this = *this * o; }
  Lanes& operator/=(const Lanes& o) { return *this = *this / o; }
};

// A comparison's result in every lane: all bits set where it holds. The logical operators do not
// short-circuit (both sides are values already computed).
template <class T, int W>
struct LaneMask {
  using Bits = typename Lanes<T, W>::Mask;
  Bits m;
  friend LaneMask operator&&(const LaneMask& a, const LaneMask& b) { return {a.m & b.m}; }
  friend LaneMask operator||(const LaneMask& a, const LaneMask& b) { return {a.m | b.m}; }
  friend LaneMask operator!(const LaneMask& a) { return {~a.m}; }
  friend LaneMask operator&(const LaneMask& a, const LaneMask& b) { return {a.m & b.m}; }
  friend LaneMask operator|(const LaneMask& a, const LaneMask& b) { return {a.m | b.m}; }
  friend LaneMask operator^(const LaneMask& a, const LaneMask& b) { return {a.m ^ b.m}; }
  friend LaneMask operator==(const LaneMask& a, const LaneMask& b) { return {~(a.m ^ b.m)}; }
  friend LaneMask operator!=(const LaneMask& a, const LaneMask& b) { return {a.m ^ b.m}; }
};

// A mask meeting a bool (a constant of the model): the bool in every lane.
template <class T, int W>
LaneMask<T, W> as_mask(bool b) {
  using Bits = typename LaneMask<T, W>::Bits;
  return {Bits{} - static_cast<typename Lanes<T, W>::Int>(b)};
}
template <class T, int W>
LaneMask<T, W> as_mask(const LaneMask<T, W>& m) {
  return m;
}
#define SHOAL_MASK_WITH_BOOL(op)                                         \
  template <class T, int W>                                              \
  LaneMask<T, W> operator op(const LaneMask<T, W>& a, bool b) {          \
    return a op as_mask<T, W>(b);                                        \
  }                                                                      \
  template <class T, int W>                                              \
  LaneMask<T, W> operator op(bool a, const LaneMask<T, W>& b) {          \
    return as_mask<T, W>(a) op b;                                        \
  }
SHOAL_MASK_WITH_BOOL(&&)
SHOAL_MASK_WITH_BOOL(||)
SHOAL_MASK_WITH_BOOL(&)
SHOAL_MASK_WITH_BOOL(|)
SHOAL_MASK_WITH_BOOL(^)
SHOAL_MASK_WITH_BOOL(==)
SHOAL_MASK_WITH_BOOL(!=)
#undef SHOAL_MASK_WITH_BOOL

// IntLanes<I, S, W>: W integers of type I side by side, the integers of a model whose floats are
// Lanes<S, W> (shoal::IntOf, lane_traits.hpp): table indices, searchsorted's counts, clipped and
// shifted. Every operation is the scalar integer operation in each lane; comparisons return the
// float lanes' LaneMask<S, W>, so they combine with the float comparisons and choose floats too.
// W is the float lanes' count whatever I's width (8 int32 beside 8 doubles).
template <class I, class S, int W>
struct IntLanes {
  typedef I Vec __attribute__((vector_size(sizeof(I) * W)));
  using Mask = LaneMask<S, W>;
  Vec v;

  IntLanes() = default;
  template <class U, class = std::enable_if_t<std::is_arithmetic_v<U>>>
  IntLanes(U x) {  // NOLINT(google-explicit-constructor): every lane I(x), as the literal I(x)
    v = Vec{} + static_cast<I>(x);
  }
  // static_cast<I>(i) of another integer type, and of a float (truncation, as the scalar cast).
  template <class J>
  explicit IntLanes(const IntLanes<J, S, W>& o) : v(__builtin_convertvector(o.v, Vec)) {}
  template <class F>
  explicit IntLanes(const Lanes<F, W>& x) : v(__builtin_convertvector(x.v, Vec)) {}
  // A mask as an integer: 1 where set (a bool converted to I).
  explicit IntLanes(const Mask& m) : v(__builtin_convertvector(m.m, Vec) & static_cast<I>(1)) {}
  static IntLanes of(const Vec& x) {
    IntLanes r;
    r.v = x;
    return r;
  }
  I operator[](int l) const { return v[l]; }

  friend IntLanes operator+(const IntLanes& a) { return a; }
  friend IntLanes operator-(const IntLanes& a) { return of(-a.v); }
  friend IntLanes operator~(const IntLanes& a) { return of(~a.v); }
  friend IntLanes operator+(const IntLanes& a, const IntLanes& b) { return of(a.v + b.v); }
  friend IntLanes operator-(const IntLanes& a, const IntLanes& b) { return of(a.v - b.v); }
  friend IntLanes operator*(const IntLanes& a, const IntLanes& b) { return of(a.v * b.v); }
  friend IntLanes operator/(const IntLanes& a, const IntLanes& b) { return of(a.v / b.v); }
  friend IntLanes operator%(const IntLanes& a, const IntLanes& b) { return of(a.v % b.v); }
  friend IntLanes operator&(const IntLanes& a, const IntLanes& b) { return of(a.v & b.v); }
  friend IntLanes operator|(const IntLanes& a, const IntLanes& b) { return of(a.v | b.v); }
  friend IntLanes operator^(const IntLanes& a, const IntLanes& b) { return of(a.v ^ b.v); }
  static Mask mask(const decltype(Vec{} < Vec{})& m) {
    return {__builtin_convertvector(m, typename Mask::Bits)};
  }
  friend Mask operator<(const IntLanes& a, const IntLanes& b) { return mask(a.v < b.v); }
  friend Mask operator<=(const IntLanes& a, const IntLanes& b) { return mask(a.v <= b.v); }
  friend Mask operator>(const IntLanes& a, const IntLanes& b) { return mask(a.v > b.v); }
  friend Mask operator>=(const IntLanes& a, const IntLanes& b) { return mask(a.v >= b.v); }
  friend Mask operator==(const IntLanes& a, const IntLanes& b) { return mask(a.v == b.v); }
  friend Mask operator!=(const IntLanes& a, const IntLanes& b) { return mask(a.v != b.v); }
};

// ---- masks and selects (the dense LU's pivoting) ------------------------------------------------
// A cast between vector types of one size reinterprets the bits (a value, not an aliasing
// pointer: g++ and clang define it).
template <class T, int W>
typename Lanes<T, W>::Mask bits(const Lanes<T, W>& x) {
  return (typename Lanes<T, W>::Mask)x.v;
}
template <class T, int W>
Lanes<T, W> from_bits(const typename Lanes<T, W>::Mask& m) {
  return Lanes<T, W>::of((typename Lanes<T, W>::Vec)m);
}
// on_true where m is set, on_false elsewhere, bit for bit.
template <class T, int W>
Lanes<T, W> select(const typename Lanes<T, W>::Mask& m, const Lanes<T, W>& on_true,
                   const Lanes<T, W>& on_false) {
  return from_bits<T, W>((m & bits(on_true)) | (~m & bits(on_false)));
}
template <class M>
M select_int(const M& m, const M& on_true, const M& on_false) {
  return (m & on_true) | (~m & on_false);
}
template <class M>
bool any(const M& m) {
  constexpr int W = sizeof(M) / sizeof(m[0]);
  for (int l = 0; l < W; ++l)
    if (m[l]) return true;
  return false;
}
// |x| by clearing the sign bit, as fabs does (a NaN stays that NaN).
template <class T, int W>
Lanes<T, W> abs(const Lanes<T, W>& x) {
  using Int = typename Lanes<T, W>::Int;
  const Int magnitude = static_cast<Int>(~(static_cast<std::make_unsigned_t<Int>>(1)
                                           << (8 * sizeof(Int) - 1)));
  return from_bits<T, W>(bits(x) & magnitude);
}

// ---- one lane of a value: lanes and the duals built on them --------------------------------------
template <class T, int W>
T lane(const Lanes<T, W>& x, int l) {
  return x.v[l];
}
template <class T, int W>
void set_lane(Lanes<T, W>& x, int l, const T& value) {
  x.v[l] = value;
}
template <class I, class S, int W>
I lane(const IntLanes<I, S, W>& x, int l) {
  return x.v[l];
}
template <class I, class S, int W>
void set_lane(IntLanes<I, S, W>& x, int l, const I& value) {
  x.v[l] = value;
}
template <class V, int N>
auto lane(const ad::Dual<V, N>& x, int l) {
  ad::Dual<typename LaneTraits<V>::Scalar, N> r;
  r.v = simd::lane(x.v, l);
  for (int k = 0; k < N; ++k) r.d[k] = simd::lane(x.d[k], l);
  return r;
}
template <class V, int N, class S>
void set_lane(ad::Dual<V, N>& x, int l, const S& value) {
  simd::set_lane(x.v, l, value.v);
  for (int k = 0; k < N; ++k) simd::set_lane(x.d[k], l, value.d[k]);
}

}  // namespace simd

// The elementary functions' vocabulary (elementary/ops.hpp) on lanes: vector comparisons already
// return masks.
template <class T, int W>
struct elementary::Ops<simd::Lanes<T, W>> {
  using L = simd::Lanes<T, W>;
  using Scalar = T;
  using Int = typename L::Mask;
  static Int bits(const L& x) { return simd::bits(x); }
  static L from_bits(const Int& b) { return simd::from_bits<T, W>(b); }
  static L select(const Int& m, const L& a, const L& b) { return simd::select(m, a, b); }
  static Int select_int(const Int& m, const Int& a, const Int& b) { return (a & m) | (b & ~m); }
  static Int lt(const L& a, const L& b) { return a.v < b.v; }
  static Int le(const L& a, const L& b) { return a.v <= b.v; }
  static Int eq(const L& a, const L& b) { return a.v == b.v; }
  static Int ilt(const Int& a, const Int& b) { return a < b; }
  static Int ieq(const Int& a, const Int& b) { return a == b; }
  static L to_value(const Int& i) { return L::of(__builtin_convertvector(i, typename L::Vec)); }
  static bool any(const Int& m) { return simd::any(m); }
  // The correctly rounded square root per lane; one instruction where the lanes fill one
  // register (a loop of __builtin_sqrt becomes two 256-bit halves under -march's preferred width).
  static L sqrt(const L& x) {
#if defined(__AVX512F__)
    if constexpr (sizeof(L) == 64) {
      if constexpr (sizeof(T) == 8) return L::of(_mm512_sqrt_pd(x.v));
      if constexpr (sizeof(T) == 4) return L::of(_mm512_sqrt_ps(x.v));
    }
#endif
    L r;  // -fno-math-errno: vector square roots
    for (int l = 0; l < W; ++l) {
      if constexpr (sizeof(T) == 4) {
        r.v[l] = __builtin_sqrtf(x.v[l]);
      } else {
        r.v[l] = __builtin_sqrt(x.v[l]);
      }
    }
    return r;
  }
  // a b + c with one rounding per lane: one instruction where the lanes fill one register (g++
  // would split a loop of __builtin_fma into 256-bit halves under -march's preferred width).
  static L fma(const L& a, const L& b, const L& c) {
#if defined(__AVX512F__)
    if constexpr (sizeof(L) == 64) {
      if constexpr (sizeof(T) == 8) return L::of(_mm512_fmadd_pd(a.v, b.v, c.v));
      if constexpr (sizeof(T) == 4) return L::of(_mm512_fmadd_ps(a.v, b.v, c.v));
    }
#endif
#if defined(__FMA__)
    if constexpr (sizeof(L) == 32) {
      if constexpr (sizeof(T) == 8) return L::of(_mm256_fmadd_pd(a.v, b.v, c.v));
      if constexpr (sizeof(T) == 4) return L::of(_mm256_fmadd_ps(a.v, b.v, c.v));
    }
    if constexpr (sizeof(L) == 16) {
      if constexpr (sizeof(T) == 8) return L::of(_mm_fmadd_pd(a.v, b.v, c.v));
      if constexpr (sizeof(T) == 4) return L::of(_mm_fmadd_ps(a.v, b.v, c.v));
    }
#endif
    L r;
    for (int l = 0; l < W; ++l) {
      if constexpr (sizeof(T) == 4) {
        r.v[l] = __builtin_fmaf(a.v[l], b.v[l], c.v[l]);
      } else {
        r.v[l] = __builtin_fma(a.v[l], b.v[l], c.v[l]);
      }
    }
    return r;
  }
  template <class F>
  static L per_lane(const L& x, F f) {
    L r;
    for (int l = 0; l < W; ++l) r.v[l] = f(x.v[l]);
    return r;
  }
  template <class F>
  static L per_lane(const L& x, const L& y, F f) {
    L r;
    for (int l = 0; l < W; ++l) r.v[l] = f(x.v[l], y.v[l]);
    return r;
  }
};

template <int W>
struct elementary::Wide<simd::Lanes<float, W>> {
  using type = simd::Lanes<double, W>;
  static type up(const simd::Lanes<float, W>& x) { return type(x); }
  static simd::Lanes<float, W> down(const type& x) { return simd::Lanes<float, W>(x); }
};

template <class T, int W>
struct LaneTraits<simd::Lanes<T, W>> {
  static constexpr int count = W;
  using Scalar = T;
  template <class S>
  using Rebind = simd::Lanes<S, W>;
};

template <class T, int W>
struct SharedParamScalar<simd::Lanes<T, W>> {
  using type = T;
  static constexpr bool plain_lanes = true;
};

// Integers beside lanes and beside the duals built on them (a generated rhs's I32, I64, ...).
template <class S, int W, class I>
struct IntOfT<simd::Lanes<S, W>, I> {
  using type = simd::IntLanes<I, S, W>;
};
template <class V, int N, class I>
struct IntOfT<ad::Dual<V, N>, I> {
  using type = IntOf<V, I>;
};
template <class I, class S, int W>
struct IsLaneInt<simd::IntLanes<I, S, W>> {
  static constexpr bool value = true;
};
template <class S, int W>
struct IsLaneInt<simd::LaneMask<S, W>> {
  static constexpr bool value = true;
};

template <class Model, class V, class Params>
void rhs_per_lane(const V* y, const V& t, const Params& p, V* dy) {
  constexpr int n = Model::n_vars, np = Model::n_params > 0 ? Model::n_params : 1;
  using S = typename LaneTraits<V>::Scalar;
  for (int l = 0; l < lane_count<V>(); ++l) {
    S ys[n], ps[np], dys[n];
    for (int i = 0; i < n; ++i) ys[i] = simd::lane(y[i], l);
    for (int i = 0; i < Model::n_params; ++i) ps[i] = simd::lane(p[i], l);
    const S ts = simd::lane(t, l);
    Model::template rhs<S>(ys, ts, ps, dys);
    for (int i = 0; i < n; ++i) simd::set_lane(dy[i], l, dys[i]);
  }
}

}  // namespace shoal
#endif  // SHOAL_DEVICE_COMPILE

// select, max, min and the elementary functions on lanes and on duals of lanes.
#include "shoal/simd/lanes_math.hpp"
