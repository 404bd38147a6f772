// Forward-mode dual numbers: Dual<T, N> carries a value and N tangent directions.
//
// For a function f and a dual x = v + Σ_k d_k ε_k (ε_k ε_l = 0), f(x) = f(v) + f'(v) Σ_k d_k ε_k:
// every overload below computes the value with the scalar function and multiplies the tangents by
// the derivative stated beside it. Seeding direction k of y_j with δ_jk gives a column of ∂f/∂y
// per direction in one evaluation (vector mode). T may itself be a Dual, so Dual<Dual<double,1>,1>
// carries second derivatives: the tangent of the tangent is a second directional derivative.
//
// Comparisons look at values only (so control flow follows the primal computation), and functions
// that are piecewise constant (floor, ceil, round, sign) have zero derivative, as in JAX.
#pragma once

#include "shoal/config.hpp"
#include "shoal/math.hpp"

namespace shoal {
namespace ad {

// Scalars that may meet a Dual in an expression (NVRTC has no <type_traits>).
template <class S>
struct IsArithmetic {
  static constexpr bool value = false;
};
#define SHOAL_ARITHMETIC(type)                \
  template <>                                 \
  struct IsArithmetic<type> {                 \
    static constexpr bool value = true;       \
  };
SHOAL_ARITHMETIC(float)
SHOAL_ARITHMETIC(double)
SHOAL_ARITHMETIC(int)
SHOAL_ARITHMETIC(unsigned)
SHOAL_ARITHMETIC(long)
SHOAL_ARITHMETIC(unsigned long)
SHOAL_ARITHMETIC(long long)
SHOAL_ARITHMETIC(unsigned long long)
SHOAL_ARITHMETIC(bool)
#undef SHOAL_ARITHMETIC

template <bool B, class R = void>
struct EnableIf {};
template <class R>
struct EnableIf<true, R> {
  using type = R;
};
template <class S, class R>
using IfArithmetic = typename EnableIf<IsArithmetic<S>::value, R>::type;

template <class T, int N>
struct Dual {
  T v;
  T d[N];

  // Left uninitialised, as a double is: the operators below declare their result and set every
  // part, and zeroing a nested dual over lanes (kilobytes) first was 20 % of a sensitivity
  // solve. Value-initialisation (`Dual()`, `Dual{}`, `T(0)`) is still zero.
  Dual() = default;
  // A constant: any arithmetic scalar or the value type itself.
  SHOAL_HD Dual(const T& value) : v(value) {  // NOLINT(google-explicit-constructor)
    for (int k = 0; k < N; ++k) d[k] = T(0);
  }
  template <class S, class = IfArithmetic<S, void>>
  SHOAL_HD Dual(S value) : v(T(value)) {  // NOLINT(google-explicit-constructor)
    for (int k = 0; k < N; ++k) d[k] = T(0);
  }
  // An integer or a mask in SIMD lanes (lane_traits.hpp): its value in every lane, as T(i).
  template <class S, class = typename EnableIf<IsLaneInt<S>::value, void>::type>
  SHOAL_HD explicit Dual(const S& value) : v(T(value)) {
    for (int k = 0; k < N; ++k) d[k] = T(0);
  }
  // Explicit conversion to a plain scalar drops the tangents (used for integer casts).
  template <class S, class = IfArithmetic<S, void>>
  SHOAL_HD explicit operator S() const {
    using math::primal;
    return static_cast<S>(primal(v));
  }

  SHOAL_HD Dual& operator+=(const Dual& o) { return *this = *this + o; }
  SHOAL_HD Dual& operator-=(const Dual& o) { return *this = *this - o; }
  SHOAL_HD Dual& operator*=(const Dual& o) { return *this = *this * o; }
  SHOAL_HD Dual& operator/=(const Dual& o) { return *this = *this / o; }
};

}  // namespace ad

// A dual over SIMD lanes (simd/lanes.hpp) carries its lanes' count; one lane of it is the dual
// over the lane's scalar.
template <class T, int N>
struct LaneTraits<ad::Dual<T, N>> {
  static constexpr int count = LaneTraits<T>::count;
  using Scalar = ad::Dual<typename LaneTraits<T>::Scalar, N>;
};

namespace ad {

// The directions each sweep of a Jacobian seeds when `directions` are swept at most `most` at a
// time: as few sweeps as that allows, each as wide as the others, since every sweep evaluates
// the whole model at its width (17 directions in two sweeps of 16 would evaluate it at 32; in
// two of 9, at 18: the DISCO-EB-sized model's sparse solve 35 -> 29 ms). A width one short of a
// multiple of 4 is rounded up: scalar duals of 15 ran 3 % slower than of 16 (a partial vector
// costs a whole one). The directions never mix in dual arithmetic, so widths change no bits.
template <int directions, int most>
constexpr int sweep_width() {
  constexpr int sweeps = (directions + most - 1) / most;
  constexpr int width = (directions + sweeps - 1) / sweeps;
  return width % 4 == 3 && width + 1 <= most ? width + 1 : width;
}

// A dual with value v and zero tangents except direction k = 1: seeds one column of a Jacobian.
// Every tangent is written once, 1 or 0 by a comparison (a select in registers): zeroing them and
// then storing the 1 at a run-time k made the sweep's first read of the dual wait on a store it
// could not forward (the DISCO-EB-sized model's sparse seeding: a third of its stepper's time).
template <class T, int N>
SHOAL_HD Dual<T, N> variable(const T& v, int k) {
  Dual<T, N> x;
  x.v = v;
  for (int j = 0; j < N; ++j) x.d[j] = j == k ? T(1) : T(0);
  return x;
}

// Whether a scalar or a dual (value and every nested tangent) is exactly zero.
SHOAL_INLINE bool is_zero(double x) { return x == 0.0; }
SHOAL_INLINE bool is_zero(float x) { return x == 0.0f; }
template <class T, int N>
SHOAL_INLINE bool is_zero(const Dual<T, N>& x) {
  bool z = is_zero(x.v);
  for (int k = 0; k < N; ++k) z = z && is_zero(x.d[k]);
  return z;
}

// f(x) with value `value` and derivative `slope` at x.v. A direction in which x does not move
// contributes nothing even where the slope is infinite or NaN (√ or log at 0, asin at 1: JAX's
// symbolic zeros), so a constant such as a parameter inside f's Jacobian sweep never makes it
// NaN: −y + 0·√p at p = 0 failed every Rodas5P step. The check runs only when the slope is not
// finite.
template <class T, int N>
SHOAL_INLINE Dual<T, N> chain(const Dual<T, N>& x, const T& value, const T& slope) {
  using math::is_finite;
  Dual<T, N> r;
  r.v = value;
  if constexpr (LaneTraits<T>::count > 1) {
    // The same choice per lane, by masks (simd/lanes_math.hpp).
    const auto infinite = !lane_is_finite(slope);
    for (int k = 0; k < N; ++k) {
      r.d[k] = select(infinite && lane_is_zero(x.d[k]), T(0), slope * x.d[k]);
    }
  } else if (is_finite(slope)) {
    for (int k = 0; k < N; ++k) r.d[k] = slope * x.d[k];
  } else {
    for (int k = 0; k < N; ++k) r.d[k] = is_zero(x.d[k]) ? T(0) : slope * x.d[k];
  }
  return r;
}

// ---- arithmetic --------------------------------------------------------------------------------
template <class T, int N>
SHOAL_INLINE Dual<T, N> operator+(const Dual<T, N>& x) {
  return x;
}
template <class T, int N>
SHOAL_INLINE Dual<T, N> operator-(const Dual<T, N>& x) {  // d(-x) = -dx
  Dual<T, N> r;
  r.v = -x.v;
  for (int k = 0; k < N; ++k) r.d[k] = -x.d[k];
  return r;
}
template <class T, int N>
SHOAL_INLINE Dual<T, N> operator+(const Dual<T, N>& a, const Dual<T, N>& b) {  // da + db
  Dual<T, N> r;
  r.v = a.v + b.v;
  for (int k = 0; k < N; ++k) r.d[k] = a.d[k] + b.d[k];
  return r;
}
template <class T, int N>
SHOAL_INLINE Dual<T, N> operator-(const Dual<T, N>& a, const Dual<T, N>& b) {  // da - db
  Dual<T, N> r;
  r.v = a.v - b.v;
  for (int k = 0; k < N; ++k) r.d[k] = a.d[k] - b.d[k];
  return r;
}
template <class T, int N>
SHOAL_INLINE Dual<T, N> operator*(const Dual<T, N>& a, const Dual<T, N>& b) {  // b da + a db
  Dual<T, N> r;
  r.v = a.v * b.v;
  for (int k = 0; k < N; ++k) r.d[k] = a.d[k] * b.v + a.v * b.d[k];
  return r;
}
template <class T, int N>
SHOAL_INLINE Dual<T, N> operator/(const Dual<T, N>& a, const Dual<T, N>& b) {
  // d(a/b) = (da - (a/b) db) / b
  Dual<T, N> r;
  r.v = a.v / b.v;
  for (int k = 0; k < N; ++k) r.d[k] = (a.d[k] - r.v * b.d[k]) / b.v;
  return r;
}

// Nested duals (second derivatives: Rosenbrock's joint system, rosenbrock_joint.hpp) are
// kilobytes each over SIMD lanes, and the operators above build every inner part as a temporary
// and copy it into the result: a fifth of a forward-sensitivity solve was memmove. These
// overloads, chosen for any Dual of a Dual, write each inner part in place with the operations
// the operators above perform, in their order, so the bits are the same.
namespace nested {
// out = a b (a dual over S), part by part.
template <class S, int M>
SHOAL_INLINE void product(Dual<S, M>& out, const Dual<S, M>& a, const Dual<S, M>& b) {
  out.v = a.v * b.v;
  for (int j = 0; j < M; ++j) out.d[j] = a.d[j] * b.v + a.v * b.d[j];
}
// out = a b + c d.
template <class S, int M>
SHOAL_INLINE void two_products(Dual<S, M>& out, const Dual<S, M>& a, const Dual<S, M>& b,
                               const Dual<S, M>& c, const Dual<S, M>& d) {
  out.v = a.v * b.v + c.v * d.v;
  for (int j = 0; j < M; ++j) {
    out.d[j] = (a.d[j] * b.v + a.v * b.d[j]) + (c.d[j] * d.v + c.v * d.d[j]);
  }
}
// out = a + b, or a − b.
template <class S, int M>
SHOAL_INLINE void sum(Dual<S, M>& out, const Dual<S, M>& a, const Dual<S, M>& b, bool minus) {
  if (minus) {
    out.v = a.v - b.v;
    for (int j = 0; j < M; ++j) out.d[j] = a.d[j] - b.d[j];
  } else {
    out.v = a.v + b.v;
    for (int j = 0; j < M; ++j) out.d[j] = a.d[j] + b.d[j];
  }
}
// out = a / b.
template <class S, int M>
SHOAL_INLINE void quotient(Dual<S, M>& out, const Dual<S, M>& a, const Dual<S, M>& b) {
  out.v = a.v / b.v;
  for (int j = 0; j < M; ++j) out.d[j] = (a.d[j] - out.v * b.d[j]) / b.v;
}
// out = (a − q c) / b, q c a product of duals: the outer quotient's tangent.
template <class S, int M>
SHOAL_INLINE void quotient_tangent(Dual<S, M>& out, const Dual<S, M>& a, const Dual<S, M>& q,
                                   const Dual<S, M>& c, const Dual<S, M>& b) {
  const S u = a.v - q.v * c.v;
  out.v = u / b.v;
  for (int j = 0; j < M; ++j) {
    const S ud = a.d[j] - (q.d[j] * c.v + q.v * c.d[j]);
    out.d[j] = (ud - out.v * b.d[j]) / b.v;
  }
}
}  // namespace nested

template <class S, int M, int N>
SHOAL_INLINE Dual<Dual<S, M>, N> operator-(const Dual<Dual<S, M>, N>& x) {
  Dual<Dual<S, M>, N> r;
  r.v.v = -x.v.v;
  for (int j = 0; j < M; ++j) r.v.d[j] = -x.v.d[j];
  for (int k = 0; k < N; ++k) {
    r.d[k].v = -x.d[k].v;
    for (int j = 0; j < M; ++j) r.d[k].d[j] = -x.d[k].d[j];
  }
  return r;
}
template <class S, int M, int N>
SHOAL_INLINE Dual<Dual<S, M>, N> operator+(const Dual<Dual<S, M>, N>& a,
                                           const Dual<Dual<S, M>, N>& b) {
  Dual<Dual<S, M>, N> r;
  nested::sum(r.v, a.v, b.v, false);
  for (int k = 0; k < N; ++k) nested::sum(r.d[k], a.d[k], b.d[k], false);
  return r;
}
template <class S, int M, int N>
SHOAL_INLINE Dual<Dual<S, M>, N> operator-(const Dual<Dual<S, M>, N>& a,
                                           const Dual<Dual<S, M>, N>& b) {
  Dual<Dual<S, M>, N> r;
  nested::sum(r.v, a.v, b.v, true);
  for (int k = 0; k < N; ++k) nested::sum(r.d[k], a.d[k], b.d[k], true);
  return r;
}
template <class S, int M, int N>
SHOAL_INLINE Dual<Dual<S, M>, N> operator*(const Dual<Dual<S, M>, N>& a,
                                           const Dual<Dual<S, M>, N>& b) {
  Dual<Dual<S, M>, N> r;
  nested::product(r.v, a.v, b.v);
  for (int k = 0; k < N; ++k) nested::two_products(r.d[k], a.d[k], b.v, a.v, b.d[k]);
  return r;
}
template <class S, int M, int N>
SHOAL_INLINE Dual<Dual<S, M>, N> operator/(const Dual<Dual<S, M>, N>& a,
                                           const Dual<Dual<S, M>, N>& b) {
  Dual<Dual<S, M>, N> r;
  nested::quotient(r.v, a.v, b.v);
  for (int k = 0; k < N; ++k) nested::quotient_tangent(r.d[k], a.d[k], r.v, b.d[k], b.v);
  return r;
}

// Mixed Dual-scalar forms promote the scalar to a constant dual.
#define SHOAL_MIXED(op)                                                         \
  template <class T, int N, class S>                                            \
  SHOAL_INLINE IfArithmetic<S, Dual<T, N>> operator op(const Dual<T, N>& a, S b) { \
    return a op Dual<T, N>(b);                                                  \
  }                                                                             \
  template <class T, int N, class S>                                            \
  SHOAL_INLINE IfArithmetic<S, Dual<T, N>> operator op(S a, const Dual<T, N>& b) { \
    return Dual<T, N>(a) op b;                                                  \
  }
SHOAL_MIXED(+)
SHOAL_MIXED(-)
SHOAL_MIXED(*)
SHOAL_MIXED(/)
#undef SHOAL_MIXED

// ---- comparisons: values only (bool, or a mask for duals over SIMD lanes) ------------------------------------------------------------------
#define SHOAL_COMPARE(op)                                                          \
  template <class T, int N>                                                        \
  SHOAL_INLINE auto operator op(const Dual<T, N>& a, const Dual<T, N>& b) {        \
    return a.v op b.v;                                                             \
  }                                                                                \
  template <class T, int N, class S, class = IfArithmetic<S, void>>                \
  SHOAL_INLINE auto operator op(const Dual<T, N>& a, S b) {                        \
    return a.v op T(b);                                                            \
  }                                                                                \
  template <class T, int N, class S, class = IfArithmetic<S, void>>                \
  SHOAL_INLINE auto operator op(S a, const Dual<T, N>& b) {                        \
    return T(a) op b.v;                                                            \
  }
SHOAL_COMPARE(<)
SHOAL_COMPARE(<=)
SHOAL_COMPARE(>)
SHOAL_COMPARE(>=)
SHOAL_COMPARE(==)
SHOAL_COMPARE(!=)
#undef SHOAL_COMPARE

template <class T, int N>
SHOAL_INLINE auto primal(const Dual<T, N>& x) {
  using math::primal;
  return primal(x.v);
}
template <class T, int N>
SHOAL_INLINE bool is_finite(const Dual<T, N>& x) {
  using math::is_finite;
  bool ok = is_finite(x.v);
  for (int k = 0; k < N; ++k) ok = ok && is_finite(x.d[k]);
  return ok;
}

// ---- elementary functions ----------------------------------------------------------------------
// Each: value r = f(a), slope = f'(a), with a = x.v. `using` brings the scalar overloads into
// scope so that, for nested duals, the calls on x.v recurse through these same definitions.
#define SHOAL_DUAL_UNARY(name, value_expr, slope_expr)    \
  template <class T, int N>                               \
  SHOAL_INLINE Dual<T, N> name(const Dual<T, N>& x) {     \
    SHOAL_MATH_USING;                                     \
    const T& a = x.v;                                     \
    const T r = value_expr;                               \
    (void)r;                                              \
    return chain(x, r, T(slope_expr));                    \
  }

SHOAL_DUAL_UNARY(exp, exp(a), r)                                           // e^a
SHOAL_DUAL_UNARY(exp2, exp2(a), r * T(0.69314718055994530942))             // 2^a ln 2
SHOAL_DUAL_UNARY(log, log(a), T(1) / a)                                    // 1/a
SHOAL_DUAL_UNARY(log1p, log1p(a), T(1) / (T(1) + a))                       // 1/(1+a)
SHOAL_DUAL_UNARY(expm1, expm1(a), r + T(1))                                // e^a
SHOAL_DUAL_UNARY(sqrt, sqrt(a), T(0.5) / r)                                // 1/(2√a)
SHOAL_DUAL_UNARY(cbrt, cbrt(a), T(1) / (T(3) * r * r))                     // 1/(3 a^{2/3})
SHOAL_DUAL_UNARY(sin, sin(a), cos(a))                                      // cos a
SHOAL_DUAL_UNARY(cos, cos(a), -sin(a))                                     // −sin a
SHOAL_DUAL_UNARY(tan, tan(a), T(1) + r * r)                                // 1 + tan² a
SHOAL_DUAL_UNARY(asin, asin(a), T(1) / sqrt(T(1) - a * a))                 // 1/√(1−a²)
SHOAL_DUAL_UNARY(acos, acos(a), T(-1) / sqrt(T(1) - a * a))                // −1/√(1−a²)
SHOAL_DUAL_UNARY(atan, atan(a), T(1) / (T(1) + a * a))                     // 1/(1+a²)
SHOAL_DUAL_UNARY(sinh, sinh(a), cosh(a))                                   // cosh a
SHOAL_DUAL_UNARY(cosh, cosh(a), sinh(a))                                   // sinh a
SHOAL_DUAL_UNARY(tanh, tanh(a), T(1) - r * r)                              // 1 − tanh² a
SHOAL_DUAL_UNARY(asinh, asinh(a), T(1) / sqrt(a * a + T(1)))               // 1/√(a²+1)
SHOAL_DUAL_UNARY(acosh, acosh(a), T(1) / (sqrt(a - T(1)) * sqrt(a + T(1))))  // 1/√(a²−1)
SHOAL_DUAL_UNARY(atanh, atanh(a), T(1) / (T(1) - a * a))                   // 1/(1−a²)
SHOAL_DUAL_UNARY(erf, erf(a), T(1.12837916709551257390) * exp(-a * a))     // 2/√π e^{−a²}
SHOAL_DUAL_UNARY(erfc, erfc(a), T(-1.12837916709551257390) * exp(-a * a))  // −2/√π e^{−a²}
SHOAL_DUAL_UNARY(erf_inv, erf_inv(a), T(0.88622692545275801365) * exp(r * r))  // √π/2 e^{r²}
SHOAL_DUAL_UNARY(lgamma, lgamma(a), digamma(a))                            // ψ(a)
SHOAL_DUAL_UNARY(digamma, digamma(a), polygamma(1, a))                     // ψ'(a)
SHOAL_DUAL_UNARY(floor, floor(a), T(0))                                    // piecewise constant
SHOAL_DUAL_UNARY(ceil, ceil(a), T(0))
SHOAL_DUAL_UNARY(trunc, trunc(a), T(0))
SHOAL_DUAL_UNARY(round_even, round_even(a), T(0))
SHOAL_DUAL_UNARY(round_away, round_away(a), T(0))
// |a|' = sign(a) (0 at 0, as JAX)
SHOAL_DUAL_UNARY(abs, abs(a), select(a > T(0), T(1), select(a < T(0), T(-1), T(0))))
SHOAL_DUAL_UNARY(fabs, abs(a), select(a > T(0), T(1), select(a < T(0), T(-1), T(0))))
#undef SHOAL_DUAL_UNARY

// ψ^(k)(a)' = ψ^(k+1)(a): the order is a constant of the model, not differentiated.
template <class T, int N>
SHOAL_INLINE Dual<T, N> polygamma(int k, const Dual<T, N>& x) {
  SHOAL_MATH_USING;
  return chain(x, polygamma(k, x.v), T(polygamma(k + 1, x.v)));
}

// sign is piecewise constant: zero derivative everywhere, at 0 too (math::sign returns x there,
// which would carry x's tangents).
template <class T, int N>
SHOAL_INLINE Dual<T, N> sign(const Dual<T, N>& x) {
  using math::sign;
  return Dual<T, N>(sign(x.v));
}

// a^b: ∂/∂a = b a^{b−1} (0 where b = 0), ∂/∂b = a^b ln a (0 where a = 0), JAX's conventions.
// A direction in which a (or b) does not move contributes nothing, even where its partial is not
// finite: a constant exponent (every literal, T(2.0)) must not bring ln a, NaN for a < 0, and a
// constant base must not bring b a^{b−1}, infinite at a = 0 for b < 1 (JAX's symbolic zeros).
template <class T, int N>
SHOAL_INLINE Dual<T, N> pow(const Dual<T, N>& x, const Dual<T, N>& y) {
  SHOAL_MATH_USING;
  const T r = pow(x.v, y.v);
  const T da = select(y.v == T(0), T(0), y.v * pow(x.v, y.v - T(1)));
  const T db = select(x.v == T(0), T(0), r * log(x.v));
  Dual<T, N> out;
  out.v = r;
  if constexpr (LaneTraits<T>::count > 1) {  // the same choices per lane, by masks
    for (int k = 0; k < N; ++k) {
      out.d[k] = select(lane_is_zero(x.d[k]), T(0), da * x.d[k]) +
                 select(lane_is_zero(y.d[k]), T(0), db * y.d[k]);
    }
  } else {
    for (int k = 0; k < N; ++k) {
      out.d[k] = (is_zero(x.d[k]) ? T(0) : da * x.d[k]) + (is_zero(y.d[k]) ? T(0) : db * y.d[k]);
    }
  }
  return out;
}
template <class T, int N, class S>
SHOAL_INLINE IfArithmetic<S, Dual<T, N>> pow(const Dual<T, N>& x, S y) {
  return pow(x, Dual<T, N>(y));
}
template <class T, int N, class S>
SHOAL_INLINE IfArithmetic<S, Dual<T, N>> pow(S x, const Dual<T, N>& y) {
  return pow(Dual<T, N>(x), y);
}

// atan2(y, x): d = (x dy − y dx) / (x² + y²)
template <class T, int N>
SHOAL_INLINE Dual<T, N> atan2(const Dual<T, N>& y, const Dual<T, N>& x) {
  SHOAL_MATH_USING;
  Dual<T, N> out;
  out.v = atan2(y.v, x.v);
  const T inv = T(1) / (x.v * x.v + y.v * y.v);
  for (int k = 0; k < N; ++k) out.d[k] = (x.v * y.d[k] - y.v * x.d[k]) * inv;
  return out;
}

// fmod(a, b) = a − trunc(a/b) b: d = da − trunc(a/b) db
template <class T, int N>
SHOAL_INLINE Dual<T, N> fmod(const Dual<T, N>& a, const Dual<T, N>& b) {
  SHOAL_MATH_USING;
  Dual<T, N> out;
  out.v = fmod(a.v, b.v);
  const T q = trunc(a.v / b.v);
  for (int k = 0; k < N; ++k) out.d[k] = a.d[k] - q * b.d[k];
  return out;
}

}  // namespace ad
}  // namespace shoal
