// Scalar mathematics for models: one name per function for float and double, host and device.
//
// Generated models call these unqualified (`exp(x)`) in a scope that opens with SHOAL_MATH_USING, so
// the same source also resolves to the dual-number and sparsity-tracer overloads, found by
// argument-dependent lookup in their own namespaces.
//
// max/min propagate NaN (as XLA does): a NaN produced inside a model must reach the error norm so the
// step is rejected, never be silently dropped by fmax/fmin.
#pragma once

#include "shoal/config.hpp"
#include "shoal/elementary/cbrt.hpp"
#include "shoal/elementary/erf.hpp"
#include "shoal/elementary/exp.hpp"
#include "shoal/elementary/exp2.hpp"
#include "shoal/elementary/expm1.hpp"
#include "shoal/elementary/hyperbolic.hpp"
#include "shoal/elementary/inverse_trig.hpp"
#include "shoal/elementary/log.hpp"
#include "shoal/elementary/pow.hpp"
#include "shoal/elementary/trig.hpp"
#include "shoal/lane_traits.hpp"

#ifndef __CUDACC_RTC__
#include <cmath>
#endif

namespace shoal {
namespace math {

#if defined(__CUDACC_RTC__)
#define SHOAL_MATH_NS ::  // NVRTC declares the CUDA math functions globally
#else
#define SHOAL_MATH_NS std::
#endif

#define SHOAL_UNARY(name)                                                  \
  SHOAL_INLINE double name(double x) { return SHOAL_MATH_NS name(x); }     \
  SHOAL_INLINE float name(float x) { return SHOAL_MATH_NS name(x); }

SHOAL_UNARY(sqrt)
SHOAL_UNARY(asinh)
SHOAL_UNARY(acosh)
SHOAL_UNARY(atanh)
SHOAL_UNARY(lgamma)
SHOAL_UNARY(floor)
SHOAL_UNARY(ceil)
SHOAL_UNARY(trunc)
SHOAL_UNARY(fabs)
#undef SHOAL_UNARY

// shoal's own (elementary/): the same bits on every host, in SIMD lanes and on the GPU.
#define SHOAL_OWN_UNARY(name)                                               \
  SHOAL_INLINE double name(double x) { return elementary::name(x); }       \
  SHOAL_INLINE float name(float x) { return elementary::name(x); }
SHOAL_OWN_UNARY(exp)
SHOAL_OWN_UNARY(exp2)
SHOAL_OWN_UNARY(expm1)
SHOAL_OWN_UNARY(log)
SHOAL_OWN_UNARY(log1p)
SHOAL_OWN_UNARY(sin)
SHOAL_OWN_UNARY(cos)
SHOAL_OWN_UNARY(tan)
SHOAL_OWN_UNARY(atan)
SHOAL_OWN_UNARY(asin)
SHOAL_OWN_UNARY(acos)
SHOAL_OWN_UNARY(sinh)
SHOAL_OWN_UNARY(cosh)
SHOAL_OWN_UNARY(tanh)
SHOAL_OWN_UNARY(cbrt)
SHOAL_OWN_UNARY(erf)
SHOAL_OWN_UNARY(erfc)
#undef SHOAL_OWN_UNARY
SHOAL_INLINE double pow(double x, double y) { return elementary::pow(x, y); }
SHOAL_INLINE float pow(float x, float y) { return elementary::pow(x, y); }
SHOAL_INLINE double atan2(double y, double x) { return elementary::atan2(y, x); }
SHOAL_INLINE float atan2(float y, float x) { return elementary::atan2(y, x); }

SHOAL_INLINE double fmod(double x, double y) { return SHOAL_MATH_NS fmod(x, y); }
SHOAL_INLINE float fmod(float x, float y) { return SHOAL_MATH_NS fmod(x, y); }
// Round half to even, as lax.round(..., ROUND_TO_NEAREST_EVEN) and jnp.round do.
SHOAL_INLINE double round_even(double x) { return SHOAL_MATH_NS nearbyint(x); }
SHOAL_INLINE float round_even(float x) { return SHOAL_MATH_NS nearbyint(x); }
// Round half away from zero, lax.round's default.
SHOAL_INLINE double round_away(double x) { return SHOAL_MATH_NS round(x); }
SHOAL_INLINE float round_away(float x) { return SHOAL_MATH_NS round(x); }
#undef SHOAL_MATH_NS

SHOAL_INLINE double abs(double x) { return fabs(x); }
SHOAL_INLINE float abs(float x) { return fabs(x); }
template <class T>
SHOAL_INLINE T rsqrt(const T& x) {
  return T(1) / sqrt(x);
}
template <class T>
SHOAL_INLINE T square(const T& x) {
  return x * x;
}
template <class T>
SHOAL_INLINE T logistic(const T& x) {
  return T(1) / (T(1) + exp(-x));
}
// select_n: which value the predicate picks (the sparsity tracer overloads it to join both;
// SIMD lanes overload it for their masks, simd/lanes_math.hpp).
template <class T>
SHOAL_INLINE T select(bool pred, const T& on_true, const T& on_false) {
  return pred ? on_true : on_false;
}
// The choices below go through select so that lanes (whose comparisons are masks) take them too.
template <class T>
SHOAL_INLINE T sign(const T& x) {
  // sign(NaN) is NaN and sign(±0) is ±0, as in XLA.
  return select(x > T(0), T(1), select(x < T(0), T(-1), x));
}
template <class T>
SHOAL_INLINE T max(const T& a, const T& b) {
  return select(a != a || a > b, a, b);
}
template <class T>
SHOAL_INLINE T min(const T& a, const T& b) {
  return select(a != a || a < b, a, b);
}
template <class T>
SHOAL_INLINE T clamp(const T& lo, const T& x, const T& hi) {
  return min(max(x, lo), hi);
}
// x**n for a compile-time integer exponent, by binary powering (what lax.integer_pow computes).
template <class T>
SHOAL_INLINE T integer_pow(const T& x, int n) {
  bool invert = n < 0;
  unsigned m = invert ? static_cast<unsigned>(-n) : static_cast<unsigned>(n);
  T result = T(1);
  T base = x;
  bool first = true;
  while (m) {
    if (m & 1u) {
      result = first ? base : result * base;
      first = false;
    }
    m >>= 1u;
    if (m) base = base * base;
  }
  return invert ? T(1) / result : result;
}
// Control flow in a model. A while loop: `for (bool grew = true;;) { cond; if (!test(cond, grew))
// break; grew = false; body; grew |= update(carry, next) for each float carry; }`; a lax.cond
// whose branches hold while loops: `if (test(index == k, true)) { branch k; update(out, value); }`.
// A number tests the condition and assigns (JAX's semantics: no cap on a loop's trip count). The
// sparsity tracer has no values to test: it specialises this to take every branch and to iterate
// while any carry's set grows, joining old and new sets (the union over every trip count, reached
// in at most n_vars × carries iterations).
template <class T>
struct ControlFlow {
  SHOAL_HD static bool test(bool condition, bool /*tracer*/) { return condition; }
  SHOAL_HD static bool update(T& variable, const T& value) {
    variable = value;
    return false;
  }
};
// The primal value of a scalar; dual numbers overload it to strip their tangents.
SHOAL_INLINE double primal(double x) { return x; }
SHOAL_INLINE float primal(float x) { return x; }
// lax's total order on floats (lt_to, searchsorted): NaN above everything, -0 equal to +0 (JAX
// canonicalises zeros before comparing). Callers pass primal values.
template <class S>
SHOAL_INLINE bool lt_total(const S& a, const S& b) {
  return a == a && (b != b || a < b);
}
// jnp.searchsorted over a sorted table of n entries: how many entries are below x (right: not
// above x), in the total order. A binary search, so a model's source does not grow with n. The
// table is anything indexable: an array, or parameters read in place (ad/param_reads.hpp).
template <class Table, class Q>
SHOAL_INLINE int64_t search_sorted(const Table& table, int64_t n, const Q& x, bool right) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    const Q v = static_cast<Q>(primal(table[mid]));  // a run-time table may hold duals
    if (right ? !lt_total(x, v) : lt_total(v, x)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}
// The same count, started from a guess: `position` is where x lies on the table in units of
// entries (x0 + i h for a linspace gives (x - x0) / h; log-spaced tables take logs), accurate
// to a quarter entry for every x inside the table (the code generator checks the table), so
// the answer is within one entry of ceil(position) and two comparisons confirm it or move it
// by one: O(1) instead of log2(n) dependent loads. Any disagreement (a NaN query or position)
// falls back to the binary search: the result is always exactly search_sorted's.
template <class Table, class Q>
SHOAL_INLINE int64_t search_sorted_near(const Table& table, int64_t n, const Q& x, bool right,
                                        double position) {
  // Whether entry i counts as below x (the binary search's test).
  const auto below = [&](int64_t i) {
    const Q v = static_cast<Q>(primal(table[i]));
    return right ? !lt_total(x, v) : lt_total(v, x);
  };
  // The answer is the first entry not below x: for x in (t[i-1], t[i]], i = ceil(position).
  int64_t g = 0;
  if (position >= static_cast<double>(n)) {
    g = n;
  } else if (position > 0.0) {
    g = static_cast<int64_t>(position);
    if (static_cast<double>(g) < position) ++g;
  }
  for (int64_t k = g > 0 ? g - 1 : 0; k <= g + 1 && k <= n; ++k) {
    if ((k == 0 || below(k - 1)) && (k == n || !below(k))) return k;
  }
  return search_sorted(table, n, x, right);
}
// A constant table that is a linspace to the bit: entry i is fl(fl(i·h) + x0), the last one
// `last` (np.linspace sets it to its stop). The code generator checks every entry
// (shoal/ode/_codegen/linspace.py), so an entry computed here has the bits the table holds, and
// searches and reads of the grid cost arithmetic instead of memory reads (gathers in the lanes).
struct Linspace {
  int64_t n;
  double x0, h, last;
  SHOAL_HD double operator[](int64_t i) const {
    return i == n - 1 ? last : static_cast<double>(i) * h + x0;
  }
};
template <class R, class I>
SHOAL_INLINE R gather(const Linspace& table, const I& i) {
  return R(table[i]);
}
// An element read at a run-time index: the element itself. The index was computed from `from`;
// the sparsity tracer overloads this so the read depends on them (as select joins both branches).
template <class T, class... D>
SHOAL_INLINE T indexed(const T& value, const D&...) {
  return value;
}
// Integer and bool choices and table reads, spelled as calls so that SIMD lanes overload them
// (simd/lanes_math.hpp: a masked select, a gather; integers are simd::IntLanes there): for
// scalars they are exactly `c ? a : b`, `R(array[i])` and a conversion to double.
template <class A, class B>
SHOAL_INLINE auto pick(bool c, const A& on_true, const B& on_false) {
  return c ? on_true : on_false;
}
// Element i of an array (a constant table, a local array, the parameters) as an R.
template <class R, class E, class I>
SHOAL_INLINE R gather(const E* array, const I& i) {
  return R(array[i]);
}
// Values read at an index computed at run time: for the sparsity tracer they depend on what the
// index was computed from (indexed), for numbers they are the read itself, returned as the value
// it is: `indexed(gather<R>(…), from…)` would copy it, and a dual of SIMD lanes (192 bytes and
// more) is copied by a call to memcpy at every read. (A scatter's `indexed(select(…), …)` showed
// no such copy: g++ builds the selected dual in place.)
template <class R>
struct IndexDependent {  // true for the sparsity tracer (ad/sparsity_tracer.hpp)
  static constexpr bool value = false;
};
// A table read at index i, computed from `from`.
template <class R, class A, class I, class... D>
SHOAL_INLINE R gather_indexed(const A& array, const I& i, const D&... from) {
  if constexpr (IndexDependent<R>::value) {
    return indexed(gather<R>(array, i), from...);
  } else {
    return gather<R>(array, i);
  }
}
// An addition into an array at a run-time index (a vjp's cotangent of a table read, which the
// code generator spells as a call so that SIMD lanes overload it: each lane adds its own value
// into its own index; simd/lanes_math.hpp).
template <class A, class I, class V>
SHOAL_INLINE void scatter_add(A* array, const I& i, const V& value) {
  array[i] += value;
}
template <class X>
SHOAL_INLINE double to_double(const X& x) {
  return static_cast<double>(x);
}
SHOAL_INLINE bool is_finite(double x) { return x - x == 0.0; }
SHOAL_INLINE bool is_finite(float x) { return x - x == 0.0f; }
// The neighbouring float of x towards `toward` (the integrator's landing on a stop).
#if defined(__CUDACC_RTC__)
SHOAL_INLINE double next_after(double x, double toward) { return ::nextafter(x, toward); }
SHOAL_INLINE float next_after(float x, float toward) { return ::nextafterf(x, toward); }
#else
SHOAL_INLINE double next_after(double x, double toward) { return std::nextafter(x, toward); }
SHOAL_INLINE float next_after(float x, float toward) { return std::nextafter(x, toward); }
#endif

// Using-declarations, not `using namespace shoal::math;`: a using-directive leaves the C library's
// global ::exp(double) & co. visible beside these, so every unqualified call on a double would be
// ambiguous. Block-scope using-declarations hide them and still let argument-dependent lookup add
// the overloads of other scalar types.
#define SHOAL_MATH_USING                                                                          \
  using shoal::math::lgamma; using shoal::math::digamma; using shoal::math::polygamma;            \
  using shoal::math::erf_inv;                                                                     \
  using shoal::math::exp; using shoal::math::exp2; using shoal::math::log;                        \
  using shoal::math::log1p; using shoal::math::expm1; using shoal::math::sqrt;                    \
  using shoal::math::cbrt; using shoal::math::sin; using shoal::math::cos; using shoal::math::tan; \
  using shoal::math::asin; using shoal::math::acos; using shoal::math::atan;                      \
  using shoal::math::sinh; using shoal::math::cosh; using shoal::math::tanh;                      \
  using shoal::math::asinh; using shoal::math::acosh; using shoal::math::atanh;                   \
  using shoal::math::erf; using shoal::math::erfc; using shoal::math::floor;                      \
  using shoal::math::ceil; using shoal::math::trunc; using shoal::math::fabs;                     \
  using shoal::math::pow; using shoal::math::atan2; using shoal::math::fmod;                      \
  using shoal::math::round_even; using shoal::math::round_away; using shoal::math::abs;           \
  using shoal::math::rsqrt; using shoal::math::square; using shoal::math::logistic;               \
  using shoal::math::sign; using shoal::math::max; using shoal::math::min;                        \
  using shoal::math::clamp; using shoal::math::integer_pow; using shoal::math::primal;            \
  using shoal::math::select; using shoal::math::is_finite;                                        \
  using shoal::math::lt_total; using shoal::math::search_sorted;                                  \
  using shoal::math::search_sorted_near; using shoal::math::indexed;                              \
  using shoal::math::pick; using shoal::math::gather; using shoal::math::to_double;               \
  using shoal::math::gather_indexed;                                                              \
  using shoal::math::scatter_add

}  // namespace math
}  // namespace shoal

// digamma, polygamma, erf_inv: special functions, in their own header.
#include "shoal/special.hpp"
