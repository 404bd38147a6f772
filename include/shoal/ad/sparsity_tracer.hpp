// A dependency-tracing scalar: instantiating a model with it yields the structural pattern of its
// Jacobian ∂f/∂y.
//
// Each Tracer carries the set of state variables it depends on (a bitset, Words × 64 bits). Every
// arithmetic operation and function returns the union of its operands' sets; constants depend on
// nothing. The pattern is structural — an entry is present when f_i is computed from y_j at all,
// whatever the numbers — so it never misses an entry that some values would make nonzero. Control
// flow in generated models comes from select (jnp.where, max, min, clamp, ...), whose tracer
// overloads take the union of both branches, and from while loops (which iterate until their
// carries' sets stop growing) and branches holding them (all taken): math::ControlFlow below.
// Comparisons carry no dependency.
#pragma once

#include "shoal/config.hpp"
#include "shoal/math.hpp"

namespace shoal {
namespace ad {

template <int Words>
struct Tracer {
  uint64_t bits[Words];

  SHOAL_HD Tracer() {
    for (int w = 0; w < Words; ++w) bits[w] = 0;
  }
  // Any number is a constant: no dependencies.
  template <class S>
  SHOAL_HD Tracer(S) : Tracer() {}  // NOLINT(google-explicit-constructor)
  template <class S>
  SHOAL_HD explicit operator S() const {
    return S(0);
  }

  // The tracer of state variable j.
  SHOAL_HD static Tracer variable(int j) {
    Tracer t;
    t.bits[j / 64] = uint64_t(1) << (j % 64);
    return t;
  }
  SHOAL_HD bool depends_on(int j) const { return (bits[j / 64] >> (j % 64)) & 1u; }

  SHOAL_HD Tracer& operator+=(const Tracer& o) { return *this = join(*this, o); }
  SHOAL_HD Tracer& operator-=(const Tracer& o) { return *this = join(*this, o); }
  SHOAL_HD Tracer& operator*=(const Tracer& o) { return *this = join(*this, o); }
  SHOAL_HD Tracer& operator/=(const Tracer& o) { return *this = join(*this, o); }

  SHOAL_HD static Tracer join(const Tracer& a, const Tracer& b) {
    Tracer r;
    for (int w = 0; w < Words; ++w) r.bits[w] = a.bits[w] | b.bits[w];
    return r;
  }
};

template <int W>
SHOAL_INLINE Tracer<W> operator+(const Tracer<W>& a) {
  return a;
}
template <int W>
SHOAL_INLINE Tracer<W> operator-(const Tracer<W>& a) {
  return a;
}

#define SHOAL_TRACER_BINARY(op)                                                   \
  template <int W>                                                                \
  SHOAL_INLINE Tracer<W> operator op(const Tracer<W>& a, const Tracer<W>& b) {    \
    return Tracer<W>::join(a, b);                                                 \
  }                                                                               \
  template <int W, class S>                                                       \
  SHOAL_INLINE Tracer<W> operator op(const Tracer<W>& a, const S&) {              \
    return a;                                                                     \
  }                                                                               \
  template <int W, class S>                                                       \
  SHOAL_INLINE Tracer<W> operator op(const S&, const Tracer<W>& b) {              \
    return b;                                                                     \
  }
SHOAL_TRACER_BINARY(+)
SHOAL_TRACER_BINARY(-)
SHOAL_TRACER_BINARY(*)
SHOAL_TRACER_BINARY(/)
#undef SHOAL_TRACER_BINARY

// Comparisons decide nothing here (select joins both branches); they carry no dependency.
#define SHOAL_TRACER_COMPARE(op)                                              \
  template <int W>                                                            \
  SHOAL_INLINE bool operator op(const Tracer<W>&, const Tracer<W>&) {         \
    return false;                                                             \
  }                                                                           \
  template <int W, class S>                                                   \
  SHOAL_INLINE bool operator op(const Tracer<W>&, const S&) {                 \
    return false;                                                             \
  }                                                                           \
  template <int W, class S>                                                   \
  SHOAL_INLINE bool operator op(const S&, const Tracer<W>&) {                 \
    return false;                                                             \
  }
SHOAL_TRACER_COMPARE(<)
SHOAL_TRACER_COMPARE(<=)
SHOAL_TRACER_COMPARE(>)
SHOAL_TRACER_COMPARE(>=)
SHOAL_TRACER_COMPARE(==)
SHOAL_TRACER_COMPARE(!=)
#undef SHOAL_TRACER_COMPARE

// Functions of one argument keep its dependencies.
#define SHOAL_TRACER_UNARY(name)                         \
  template <int W>                                       \
  SHOAL_INLINE Tracer<W> name(const Tracer<W>& x) {      \
    return x;                                            \
  }
SHOAL_TRACER_UNARY(exp)
SHOAL_TRACER_UNARY(exp2)
SHOAL_TRACER_UNARY(log)
SHOAL_TRACER_UNARY(log1p)
SHOAL_TRACER_UNARY(expm1)
SHOAL_TRACER_UNARY(sqrt)
SHOAL_TRACER_UNARY(cbrt)
SHOAL_TRACER_UNARY(sin)
SHOAL_TRACER_UNARY(cos)
SHOAL_TRACER_UNARY(tan)
SHOAL_TRACER_UNARY(asin)
SHOAL_TRACER_UNARY(acos)
SHOAL_TRACER_UNARY(atan)
SHOAL_TRACER_UNARY(sinh)
SHOAL_TRACER_UNARY(cosh)
SHOAL_TRACER_UNARY(tanh)
SHOAL_TRACER_UNARY(asinh)
SHOAL_TRACER_UNARY(acosh)
SHOAL_TRACER_UNARY(atanh)
SHOAL_TRACER_UNARY(erf)
SHOAL_TRACER_UNARY(erfc)
SHOAL_TRACER_UNARY(abs)
SHOAL_TRACER_UNARY(fabs)
SHOAL_TRACER_UNARY(rsqrt)
SHOAL_TRACER_UNARY(square)
SHOAL_TRACER_UNARY(logistic)
SHOAL_TRACER_UNARY(lgamma)
SHOAL_TRACER_UNARY(digamma)
SHOAL_TRACER_UNARY(erf_inv)
#undef SHOAL_TRACER_UNARY
template <int W>
SHOAL_INLINE Tracer<W> polygamma(int, const Tracer<W>& x) {
  return x;
}

// Piecewise-constant functions have zero derivative: no dependency survives them.
#define SHOAL_TRACER_FLAT(name)                          \
  template <int W>                                       \
  SHOAL_INLINE Tracer<W> name(const Tracer<W>&) {        \
    return Tracer<W>();                                  \
  }
SHOAL_TRACER_FLAT(floor)
SHOAL_TRACER_FLAT(ceil)
SHOAL_TRACER_FLAT(trunc)
SHOAL_TRACER_FLAT(round_even)
SHOAL_TRACER_FLAT(round_away)
SHOAL_TRACER_FLAT(sign)
#undef SHOAL_TRACER_FLAT

#define SHOAL_TRACER_BINARY_FN(name)                                     \
  template <int W>                                                       \
  SHOAL_INLINE Tracer<W> name(const Tracer<W>& a, const Tracer<W>& b) {  \
    return Tracer<W>::join(a, b);                                        \
  }
SHOAL_TRACER_BINARY_FN(pow)
SHOAL_TRACER_BINARY_FN(atan2)
SHOAL_TRACER_BINARY_FN(fmod)
SHOAL_TRACER_BINARY_FN(max)
SHOAL_TRACER_BINARY_FN(min)
#undef SHOAL_TRACER_BINARY_FN

template <int W>
SHOAL_INLINE Tracer<W> clamp(const Tracer<W>& lo, const Tracer<W>& x, const Tracer<W>& hi) {
  return Tracer<W>::join(Tracer<W>::join(lo, x), hi);
}
// Both branches: the structural pattern must hold whichever one the numbers pick.
template <int W>
SHOAL_INLINE Tracer<W> select(bool, const Tracer<W>& on_true, const Tracer<W>& on_false) {
  return Tracer<W>::join(on_true, on_false);
}
// A read at a run-time index depends on what the index was computed from, whatever it reads.
template <int W, class... D>
SHOAL_INLINE Tracer<W> indexed(const Tracer<W>& value, const D&... from) {
  Tracer<W> r = value;
  ((r = Tracer<W>::join(r, from)), ...);
  return r;
}
template <int W>
SHOAL_INLINE Tracer<W> integer_pow(const Tracer<W>& x, int) {
  return x;
}
template <int W>
SHOAL_INLINE double primal(const Tracer<W>&) {
  return 0.0;
}
template <int W>
SHOAL_INLINE bool is_finite(const Tracer<W>&) {
  return true;
}

}  // namespace ad

namespace math {
// A value chosen at a run-time index depends on what the index was computed from (math.hpp).
template <int W>
struct IndexDependent<ad::Tracer<W>> {
  static constexpr bool value = true;
};
// Every branch; a while loop's carries grow to the union over every trip count: iterate while any
// set grows.
template <int W>
struct ControlFlow<ad::Tracer<W>> {
  SHOAL_HD static bool test(bool, bool tracer) { return tracer; }
  SHOAL_HD static bool update(ad::Tracer<W>& variable, const ad::Tracer<W>& value) {
    bool grew = false;
    for (int w = 0; w < W; ++w) {
      const uint64_t joined = variable.bits[w] | value.bits[w];
      grew = grew || joined != variable.bits[w];
      variable.bits[w] = joined;
    }
    return grew;
  }
};
}  // namespace math
}  // namespace shoal
