// Model mathematics on SIMD lanes and on the dual numbers built on them: masked choices (select,
// max, min, sign) and the elementary functions, each computing in every lane the bits the scalar
// code computes (the functions are the same routines, elementary/*.hpp). Found by
// argument-dependent lookup from a generated model's unqualified calls.
#pragma once

#ifndef SHOAL_DEVICE_COMPILE
#include "shoal/ad/dual.hpp"
#include "shoal/math.hpp"
#include "shoal/simd/lanes.hpp"

namespace shoal {
namespace simd {

// ---- choices by masks --------------------------------------------------------------------------
template <class T, int W>
Lanes<T, W> select(const LaneMask<T, W>& m, const Lanes<T, W>& on_true,
                   const Lanes<T, W>& on_false) {
  return select<T, W>(m.m, on_true, on_false);
}
// A dual of lanes (of duals of lanes ...): the choice in its value and in every tangent.
template <class T, int W, class V, int N>
ad::Dual<V, N> select(const LaneMask<T, W>& m, const ad::Dual<V, N>& on_true,
                      const ad::Dual<V, N>& on_false) {
  ad::Dual<V, N> r;
  r.v = select(m, on_true.v, on_false.v);
  for (int k = 0; k < N; ++k) r.d[k] = select(m, on_true.d[k], on_false.d[k]);
  return r;
}
// Per lane, ad::is_zero and ad::is_finite of the scalar duals: the value and every tangent.
template <class T, int W>
LaneMask<T, W> lane_is_zero(const Lanes<T, W>& x) {
  return x == Lanes<T, W>(T(0));
}
template <class V, int N>
auto lane_is_zero(const ad::Dual<V, N>& x) {
  auto z = lane_is_zero(x.v);
  for (int k = 0; k < N; ++k) z = z && lane_is_zero(x.d[k]);
  return z;
}
template <class T, int W>
LaneMask<T, W> lane_is_finite(const Lanes<T, W>& x) {
  return x - x == Lanes<T, W>(T(0));
}
template <class V, int N>
auto lane_is_finite(const ad::Dual<V, N>& x) {
  auto f = lane_is_finite(x.v);
  for (int k = 0; k < N; ++k) f = f && lane_is_finite(x.d[k]);
  return f;
}
// max and min propagate NaN as math.hpp's do: a NaN in a lane is chosen.
template <class T, int W>
Lanes<T, W> max(const Lanes<T, W>& a, const Lanes<T, W>& b) {
  return select(a != a || a > b, a, b);
}
template <class T, int W>
Lanes<T, W> min(const Lanes<T, W>& a, const Lanes<T, W>& b) {
  return select(a != a || a < b, a, b);
}
template <class T, int W>
Lanes<T, W> fabs(const Lanes<T, W>& x) {
  return abs(x);
}
template <class T, int W>
Lanes<T, W> sqrt(const Lanes<T, W>& x) {
  return elementary::Ops<Lanes<T, W>>::sqrt(x);
}

// ---- elementary functions: shoal's own, the scalar routines' bits -------------------------------
// The routines compute in double (float through elementary::Wide): lanes wider than a register
// of doubles (16 float lanes are a 1 024-bit double vector, which g++ lowers poorly) run as
// register-wide halves, lane for lane the same operations.
template <class T, int W, class F>
Lanes<T, W> by_register(const Lanes<T, W>& x, F f) {
  if constexpr (W > 2 && W * 8 > native_vector_bytes()) {
    Lanes<T, W / 2> lo, hi;
    __builtin_memcpy(&lo.v, &x.v, sizeof lo.v);
    __builtin_memcpy(&hi.v, reinterpret_cast<const char*>(&x.v) + sizeof lo.v, sizeof hi.v);
    lo = by_register(lo, f);
    hi = by_register(hi, f);
    Lanes<T, W> r;
    __builtin_memcpy(&r.v, &lo.v, sizeof lo.v);
    __builtin_memcpy(reinterpret_cast<char*>(&r.v) + sizeof lo.v, &hi.v, sizeof hi.v);
    return r;
  } else {
    return f(x);
  }
}
template <class T, int W, class F>
Lanes<T, W> by_register(const Lanes<T, W>& x, const Lanes<T, W>& y, F f) {
  if constexpr (W > 2 && W * 8 > native_vector_bytes()) {
    Lanes<T, W / 2> xl, xh, yl, yh;
    const char* xb = reinterpret_cast<const char*>(&x.v);
    const char* yb = reinterpret_cast<const char*>(&y.v);
    __builtin_memcpy(&xl.v, xb, sizeof xl.v);
    __builtin_memcpy(&xh.v, xb + sizeof xl.v, sizeof xh.v);
    __builtin_memcpy(&yl.v, yb, sizeof yl.v);
    __builtin_memcpy(&yh.v, yb + sizeof yl.v, sizeof yh.v);
    const Lanes<T, W / 2> lo = by_register(xl, yl, f), hi = by_register(xh, yh, f);
    Lanes<T, W> r;
    __builtin_memcpy(&r.v, &lo.v, sizeof lo.v);
    __builtin_memcpy(reinterpret_cast<char*>(&r.v) + sizeof lo.v, &hi.v, sizeof hi.v);
    return r;
  } else {
    return f(x, y);
  }
}

#define SHOAL_LANES_UNARY(name)                                                        \
  template <class T, int W>                                                            \
  Lanes<T, W> name(const Lanes<T, W>& x) {                                             \
    return by_register(x, [](const auto& v) { return elementary::name(v); });          \
  }
SHOAL_LANES_UNARY(exp)
SHOAL_LANES_UNARY(exp2)
SHOAL_LANES_UNARY(expm1)
SHOAL_LANES_UNARY(log)
SHOAL_LANES_UNARY(log1p)
SHOAL_LANES_UNARY(log2)
SHOAL_LANES_UNARY(log10)
SHOAL_LANES_UNARY(sin)
SHOAL_LANES_UNARY(cos)
SHOAL_LANES_UNARY(tan)
SHOAL_LANES_UNARY(atan)
SHOAL_LANES_UNARY(asin)
SHOAL_LANES_UNARY(acos)
SHOAL_LANES_UNARY(sinh)
SHOAL_LANES_UNARY(cosh)
SHOAL_LANES_UNARY(tanh)
SHOAL_LANES_UNARY(cbrt)
SHOAL_LANES_UNARY(erf)
SHOAL_LANES_UNARY(erfc)
#undef SHOAL_LANES_UNARY
template <class T, int W>
Lanes<T, W> pow(const Lanes<T, W>& x, const Lanes<T, W>& y) {
  return by_register(x, y, [](const auto& a, const auto& b) { return elementary::pow(a, b); });
}
template <class T, int W>
Lanes<T, W> atan2(const Lanes<T, W>& y, const Lanes<T, W>& x) {
  return by_register(y, x, [](const auto& a, const auto& b) { return elementary::atan2(a, b); });
}

}  // namespace simd
}  // namespace shoal
#endif  // SHOAL_DEVICE_COMPILE
