// Model mathematics on SIMD lanes and on the dual numbers built on them: masked choices (select,
// max, min, sign) and the elementary functions, each computing in every lane the bits the scalar
// code computes (the functions are the same routines, elementary/*.hpp). Found by
// argument-dependent lookup from a generated model's unqualified calls.
#pragma once

#ifndef SHOAL_DEVICE_COMPILE
#include <type_traits>

#include "shoal/ad/dual.hpp"
#include "shoal/ad/param_reads.hpp"
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

// Rounding to integers: exact operations, each lane the scalar's result.
#define SHOAL_LANES_ROUNDING(name, builtin)                     \
  template <class T, int W>                                     \
  Lanes<T, W> name(const Lanes<T, W>& x) {                      \
    Lanes<T, W> r;                                              \
    for (int l = 0; l < W; ++l) {                               \
      if constexpr (sizeof(T) == 4) {                           \
        r.v[l] = __builtin_##builtin##f(x.v[l]);                \
      } else {                                                  \
        r.v[l] = __builtin_##builtin(x.v[l]);                   \
      }                                                         \
    }                                                           \
    return r;                                                   \
  }
SHOAL_LANES_ROUNDING(floor, floor)
SHOAL_LANES_ROUNDING(ceil, ceil)
SHOAL_LANES_ROUNDING(trunc, trunc)
SHOAL_LANES_ROUNDING(round_even, nearbyint)
SHOAL_LANES_ROUNDING(round_away, round)
#undef SHOAL_LANES_ROUNDING

// ---- integers and table reads: the scalar statements' choices and reads in every lane -----------
// (math.hpp's pick, gather, search_sorted, search_sorted_near, primal, to_double for scalars.)
template <class T, int W>
Lanes<T, W> primal(const Lanes<T, W>& x) {
  return x;
}
template <class T, int W>
Lanes<double, W> to_double(const Lanes<T, W>& x) {
  return Lanes<double, W>(x);
}
template <class I, class S, int W>
IntLanes<I, S, W> pick(const LaneMask<S, W>& m, const IntLanes<I, S, W>& on_true,
                       const IntLanes<I, S, W>& on_false) {
  using Vec = typename IntLanes<I, S, W>::Vec;
  const Vec bits = __builtin_convertvector(m.m, Vec);
  return IntLanes<I, S, W>::of((bits & on_true.v) | (~bits & on_false.v));
}
template <class S, int W, class A, class B>
LaneMask<S, W> pick_mask(const LaneMask<S, W>& m, const A& on_true, const B& on_false) {
  return {(m.m & as_mask<S, W>(on_true).m) | (~m.m & as_mask<S, W>(on_false).m)};
}
template <class S, int W>
LaneMask<S, W> pick(const LaneMask<S, W>& m, const LaneMask<S, W>& a, const LaneMask<S, W>& b) {
  return pick_mask(m, a, b);
}
template <class S, int W>
LaneMask<S, W> pick(const LaneMask<S, W>& m, bool a, const LaneMask<S, W>& b) {
  return pick_mask(m, a, b);
}
template <class S, int W>
LaneMask<S, W> pick(const LaneMask<S, W>& m, const LaneMask<S, W>& a, bool b) {
  return pick_mask(m, a, b);
}
template <class S, int W>
LaneMask<S, W> pick(const LaneMask<S, W>& m, bool a, bool b) {
  return pick_mask(m, a, b);
}
template <class I, class S, int W>
IntLanes<I, S, W> select(const LaneMask<S, W>& m, const IntLanes<I, S, W>& on_true,
                         const IntLanes<I, S, W>& on_false) {
  return pick(m, on_true, on_false);
}
template <class I, class S, int W>
IntLanes<I, S, W> max(const IntLanes<I, S, W>& a, const IntLanes<I, S, W>& b) {
  return pick(a > b, a, b);
}
template <class I, class S, int W>
IntLanes<I, S, W> min(const IntLanes<I, S, W>& a, const IntLanes<I, S, W>& b) {
  return pick(a < b, a, b);
}
template <class I, class S, int W>
IntLanes<I, S, W> clamp(const IntLanes<I, S, W>& lo, const IntLanes<I, S, W>& x,
                        const IntLanes<I, S, W>& hi) {
  return min(max(x, lo), hi);
}
template <class I, class S, int W>
IntLanes<I, S, W> abs(const IntLanes<I, S, W>& x) {
  return pick(x < IntLanes<I, S, W>(0), -x, x);
}

// The lanes behind a value (a dual's innermost lanes) and their element type.
template <class R>
struct BaseLanes;
template <class T, int W>
struct BaseLanes<Lanes<T, W>> {
  using type = Lanes<T, W>;
  using Scalar = T;
};
template <class I, class S, int W>
struct BaseLanes<IntLanes<I, S, W>> {
  using type = IntLanes<I, S, W>;
  using Scalar = I;
};
template <class V, int N>
struct BaseLanes<ad::Dual<V, N>> : BaseLanes<V> {};

// Element i[l] of the array in lane l, as an R: a constant table's entry converted as R(entry)
// converts it (a dual's tangents zero), or lane l of an array of R (a local array, p).
template <class R, class E, class I, class S, int W>
R gather(const E* array, const IntLanes<I, S, W>& i) {
  if constexpr (std::is_arithmetic_v<E>) {
    using B = BaseLanes<R>;
    typename B::type r;
    for (int l = 0; l < W; ++l) r.v[l] = static_cast<typename B::Scalar>(array[i.v[l]]);
    return R(r);
  } else {
    R r;
    for (int l = 0; l < W; ++l) simd::set_lane(r, l, simd::lane(array[i.v[l]], l));
    return r;
  }
}
// Lane l of `value` added into lane l of entry i[l]: each lane's own sum, in the scalar's order
// (distinct lanes never collide, whatever their indices).
template <class A, class I, class S, int W, class V>
void scatter_add(A* array, const IntLanes<I, S, W>& i, const V& value) {
  const A added(value);
  for (int l = 0; l < W; ++l) {
    A& entry = array[i.v[l]];
    simd::set_lane(entry, l, simd::lane(entry, l) + simd::lane(added, l));
  }
}
// Entry i[l] of a grid in lane l (math.hpp: Linspace), computed as the scalar computes it
// (i·h + x0 in double, the last entry where i is n − 1): vector arithmetic instead of a gather.
template <class I, class S, int W>
Lanes<double, W> linspace_entries(const math::Linspace& table, const IntLanes<I, S, W>& i) {
  using D = Lanes<double, W>;
  using Bits = typename LaneMask<double, W>::Bits;
  const D x = D(i) * D(table.h) + D(table.x0);
  const Bits last = __builtin_convertvector(i.v == static_cast<I>(table.n - 1), Bits);
  return D::of(last ? D(table.last).v : x.v);
}
template <class R, class I, class S, int W>
R gather(const math::Linspace& table, const IntLanes<I, S, W>& i) {
  using B = BaseLanes<R>;
  return R(typename B::type(linspace_entries(table, i)));
}
// Parameters read in place (ad/param_reads.hpp) at an index per lane: lane l of entry i[l].
template <class R, class D, class Reader, class I, class S, int W>
R gather(const ad::ParamReads<D, Reader>& array, const IntLanes<I, S, W>& i) {
  R r;
  for (int l = 0; l < W; ++l) simd::set_lane(r, l, simd::lane(array[i.v[l]], l));
  return r;
}
// Entry e of a searched table as lane l sees it: a constant table's entry itself; a run-time
// table's (parameters: each lane its own, maybe dual numbers) lane l of its primal value.
template <class Q, class E>
Q table_entry(const E& e, int l) {
  if constexpr (std::is_arithmetic<E>::value) {
    (void)l;
    return static_cast<Q>(e);
  } else {
    using math::primal;
    return static_cast<Q>(lane(primal(e), l));
  }
}
// jnp.searchsorted in the lanes: in every lane the scalar search's count (math.hpp), found by the
// same steps. Whether table[i] counts as below x (math::search_sorted's test, lax's total
// order), lane by lane; i must be a valid index in every lane.
template <class Table, class Q, int W>
LaneMask<Q, W> below_in_table(const Table& table, const IntLanes<int64_t, Q, W>& i,
                              const Lanes<Q, W>& x, bool right) {
  Lanes<Q, W> v;
  if constexpr (std::is_same_v<Table, math::Linspace>) {
    v = Lanes<Q, W>(linspace_entries(table, i));
  } else {
    for (int l = 0; l < W; ++l) v.v[l] = table_entry<Q>(table[i.v[l]], l);
  }
  // lt_total(a, b) = a == a && (b != b || a < b)
  if (right) return !(x == x && (v != v || x < v));
  return v == v && (x != x || v < x);
}
// The binary search of math::search_sorted, every lane stepping together: a lane whose interval
// is empty keeps it (its reads are at a clamped index and unused), so each lane takes the
// scalar's steps and ends where the scalar ends.
template <class Table, class Q, int W>
IntLanes<int64_t, Q, W> search_sorted(const Table& table, int64_t n, const Lanes<Q, W>& x,
                                      bool right) {
  using IL = IntLanes<int64_t, Q, W>;
  IL lo(0), hi(n);
  const IL last(n > 0 ? n - 1 : 0);
  for (;;) {
    const LaneMask<Q, W> active = lo < hi;
    if (!simd::any(active.m)) break;
    const IL mid = lo + IL::of((hi.v - lo.v) / 2);
    const LaneMask<Q, W> below = below_in_table(table, pick(mid > last, last, mid), x, right);
    lo = pick(active && below, mid + IL(1), lo);
    hi = pick(active && !below, mid, hi);
  }
  return lo;
}
// math::search_sorted_near in the lanes: the guess g from the position, then the first k of
// g − 1, g, g + 1 (within [0, n]) that the table confirms, from four reads per lane; a lane none
// confirms (a NaN query or position) takes the scalar binary search, as the scalar does.
template <class Table, class Q, int W>
IntLanes<int64_t, Q, W> search_sorted_near(const Table& table, int64_t n, const Lanes<Q, W>& x,
                                           bool right, const Lanes<double, W>& position) {
  using IL = IntLanes<int64_t, Q, W>;
  using D = Lanes<double, W>;
  using M = LaneMask<Q, W>;
  const auto as_q = [](const LaneMask<double, W>& m) {
    return M{__builtin_convertvector(m.m, typename M::Bits)};
  };
  if (n <= 0) return IL(0);
  // g = n at or past the end, ceil(position) inside, 0 before (and for a NaN position).
  const LaneMask<double, W> end = position >= D(static_cast<double>(n));
  const LaneMask<double, W> inside = !end && position > D(0.0);
  const D within = select(inside, position, D(0.0));
  IL g = IL::of(__builtin_convertvector(within.v, typename IL::Vec));  // truncation
  g = pick(as_q(D(g) < within), g + IL(1), g);
  g = pick(as_q(end), IL(n), pick(as_q(inside), g, IL(0)));
  // The guess itself first, from two reads per lane: where it is confirmed it is the scalar's
  // answer (g − 1 cannot be confirmed too: that needs entry g − 1 not below x, g needs it below),
  // and on a grid the position maps exactly it nearly always.
  const IL last(n - 1);
  const M g_ok = (g == IL(0) || below_in_table(table, clamp(IL(0), g - IL(1), last), x, right)) &&
                 (g == IL(n) || !below_in_table(table, clamp(IL(0), g, last), x, right));
  if (!simd::any((!g_ok).m)) return g;
  const IL first = pick(g > IL(0), g - IL(1), IL(0));
  const IL top = pick(g + IL(1) < IL(n), g + IL(1), IL(n));  // the last candidate
  // below[j]: whether entry first − 1 + j is below x (read at an index clamped into the table).
  M below[4];
  for (int j = 0; j < 4; ++j) {
    const IL at = first + IL(j - 1);
    below[j] = below_in_table(table, clamp(IL(0), at, IL(n - 1)), x, right);
  }
  IL result(0);
  M found = as_mask<Q, W>(false);
  for (int c = 2; c >= 0; --c) {  // the smallest confirmed candidate wins
    const IL k = first + IL(c);
    const M ok = k <= top && (k == IL(0) || below[c]) && (k == IL(n) || !below[c + 1]);
    result = pick(ok, k, result);
    found = found || ok;
  }
  if (!simd::any((!found).m)) return result;
  for (int l = 0; l < W; ++l) {
    if (!found.m[l]) result.v[l] = math::search_sorted(table, n, x.v[l], right);
  }
  return result;
}
// An integer query (a search in an integer table): the scalar search lane by lane.
template <class E, class I, class S, int W>
IntLanes<int64_t, S, W> search_sorted(const E* table, int64_t n, const IntLanes<I, S, W>& x,
                                      bool right) {
  IntLanes<int64_t, S, W> r;
  for (int l = 0; l < W; ++l) r.v[l] = math::search_sorted(table, n, x.v[l], right);
  return r;
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
