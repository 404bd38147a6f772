// What a scalar type says about SIMD lanes: how many values it carries side by side (1 for
// float, double and the scalar dual numbers; W for simd::Lanes<T, W> and the duals built on it),
// its one-lane type, and the same lanes over another element type (an fp32 factorisation beside
// an fp64 state). Device-safe; the lanes themselves are host-only (simd/lanes.hpp).
#pragma once

#include "shoal/config.hpp"

namespace shoal {

template <class T>
struct LaneTraits {
  static constexpr int count = 1;
  using Scalar = T;
  template <class S>
  using Rebind = S;
};

template <class T>
SHOAL_HD constexpr int lane_count() {
  return LaneTraits<T>::count;
}

// S with T's lanes: S itself for a scalar T, simd::Lanes<S, W> for T = simd::Lanes<U, W>.
template <class T, class S>
using RebindLanes = typename LaneTraits<T>::template Rebind<S>;

// The integer type I with T's lanes: I itself for a scalar T (float, double, their duals, the
// sparsity tracer), simd::IntLanes<I, S, W> for simd::Lanes<S, W> and the duals built on it
// (simd/lanes.hpp). A generated rhs that runs in the lanes declares its integers through it
// (`using I32 = shoal::IntOf<T, int32_t>;`), so the scalar build compiles plain integers.
template <class T, class I>
struct IntOfT {
  using type = I;
};
template <class T, class I>
using IntOf = typename IntOfT<T, I>::type;

// Whether S is an integer or a mask in SIMD lanes (simd::IntLanes, simd::LaneMask): a dual over
// lanes converts from one explicitly (a generated `T(i)`).
template <class S>
struct IsLaneInt {
  static constexpr bool value = false;
};

// What a generated block product over shared parameters reads its weights as (contractions.py):
// the lanes' element type S for plain SIMD lanes simd::Lanes<S, W> (specialised in
// simd/lanes.hpp), T itself otherwise (scalars, duals, the sparsity tracer).
template <class T>
struct SharedParamScalar {
  using type = T;
  static constexpr bool plain_lanes = false;
};

#if !defined(__CUDACC__)
// The row of shared parameters that every lane of this thread's lane group reads, as scalars,
// while solve_range_lanes (ode/lanes_ensemble.hpp) knows the lanes hold one row; null otherwise.
// Reading a weight here and broadcasting it costs one scalar load, where the lanes' own copy of p
// holds each weight W times: a 64x64 layer's 32 KB become 256 KB and spill out of the cache.
template <class Model, class S>
struct SharedParamRow {
  static inline thread_local const S* row = nullptr;
};
#endif

// The shared-parameter row a generated rhs in the lanes may read its weights from (indexed from
// the first shared parameter), or null: then it reads p as always. Null for any T but plain
// lanes, and on the device.
template <class Model, class T>
SHOAL_HD const typename SharedParamScalar<T>::type* shared_param_row() {
#if defined(__CUDACC__)
  return nullptr;
#else
  if constexpr (SharedParamScalar<T>::plain_lanes) {
    return SharedParamRow<Model, typename SharedParamScalar<T>::type>::row;
  } else {
    return nullptr;
  }
#endif
}

// A model's right-hand side evaluated one lane at a time, for the models whose statements are not
// what the lanes compute (while loops, searches in run-time tables, libm functions): each lane runs
// exactly the scalar statements. Defined in simd/lanes.hpp; generated models call it from the
// lanes branch of their rhs (shoal/ode/_codegen/model_struct.py).
template <class Model, class V, class Params>
void rhs_per_lane(const V* y, const V& t, const Params& p, V* dy);

}  // namespace shoal
