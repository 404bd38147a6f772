// Double-double building blocks shared by the elementary functions (elementary/ops.hpp's value
// types: scalars and lanes, the same bits everywhere): error-free sums, products by an explicit
// fused multiply-add (the build uses -ffp-contract=off: nothing else is fused), Veltkamp's split,
// and an integer splat.
// All assume round-to-nearest and no overflow in the intermediate values; the products
// are exact barring underflow. Each routine is a fixed sequence of IEEE operations: callers
// whose bits depend on a particular order of operations use the variant named for it.
#pragma once

#include "shoal/config.hpp"
#include "shoal/elementary/ops.hpp"

namespace shoal {
namespace elementary {

// hi + lo, |lo| small against hi (normalised or not, as each routine says).
template <class V>
struct DD {
  V hi, lo;
};

// a + b = s + e exactly, whatever the magnitudes (Knuth's TwoSum); s = fl(a + b).
template <class V>
SHOAL_INLINE DD<V> two_sum(V a, V b) {
  const V s = a + b;
  const V bb = s - a;
  return {s, (a - (s - bb)) + (b - bb)};
}

// a + b = s + e exactly if a = 0 or exponent(a) >= exponent(b) (Fast2Sum), e = (a − s) + b.
template <class V>
SHOAL_INLINE DD<V> fast_two_sum(V a, V b) {
  const V s = a + b;
  return {s, (a - s) + b};
}

// fast_two_sum with the error formed as b − (s − a) (Dekker's order; same preconditions): the
// same value, but e = −0 where b = −0 and s = a (fast_two_sum gives +0); log.hpp uses this one.
template <class V>
SHOAL_INLINE DD<V> fast_two_sum_b_minus(V a, V b) {
  const V s = a + b;
  return {s, b - (s - a)};
}

// a = hi + lo exactly, hi and lo with at most 26 significant bits each (Veltkamp's split with
// 2^27 + 1); |a| < 2^995 (no overflow of the scaled copy).
template <class V>
SHOAL_INLINE DD<V> split(V a) {
  const V c = V(134217729.0) * a;  // 2^27 + 1
  const V hi = c - (c - a);
  return {hi, a - hi};
}

// a b = p + e exactly, p = fl(a b), e = fma(a, b, −p): the error of a product is representable
// and the fused multiply-add computes it exactly, barring underflow of e; |a b| finite. (Dekker's
// product on Veltkamp's splits gives the same p and e in 17 operations instead of 2.)
template <class V>
SHOAL_INLINE DD<V> two_prod(V a, V b) {
  const V p = a * b;
  return {p, Ops<V>::fma(a, b, V(0.0) - p)};
}

// The integer v in every lane of an integer value shaped like `like` (scalar or lanes).
template <class I>
SHOAL_INLINE I splat(const I& like, int64_t v) {
  return (like & 0) + v;
}

}  // namespace elementary
}  // namespace shoal
