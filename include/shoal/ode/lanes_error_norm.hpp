// The step's error norm for W trajectories at once, in SIMD lanes (the lanes engine,
// lanes_ensemble.hpp).
//
// Each lane computes exactly the operations of controller.hpp's error_norm and Integration's
// attempt_norm, in their order (scale, quotient, weight, square, running sum, mean, sqrt): only
// the branches become selects, so every lane's norm has the scalar path's bits. Keep the two in
// step. Where the scalar skips a component (weight 0), the lane computes the skipped terms too and
// keeps the sum unchanged by a select; a division by zero or NaN there is discarded, never read.
//
// Why in lanes: a 64-variable Tsit5 step spent as long in W scalar norms (a division and a
// serially dependent add per component per lane) as in the stages themselves.
#pragma once

#ifndef SHOAL_DEVICE_COMPILE
#include "shoal/ode/controller.hpp"
#include "shoal/simd/lanes.hpp"
#include "shoal/simd/lanes_math.hpp"

namespace shoal {
namespace ode {

// Per-lane inputs of the norm that stay fixed along a trajectory: its weights and absolute
// tolerances (lane l holds trajectory l's), or none, and per lane T(count) of weighted_count over
// the error's components and over the state's (a joint system's rejection test).
template <class T, int W, int n>
struct LaneTolerances {
  using L = simd::Lanes<T, W>;
  L weights[n];
  L atol[n];
  L count, state_count;
  bool has_weights = false;  // the ensemble's, the same for every lane
  bool has_atol = false;

  // Lane l takes a trajectory's weights and atol (either may be null) and its counts.
  void set_lane(int l, const T* w, const T* a, int error_count, int state_error_count) {
    has_weights = w != nullptr;
    has_atol = a != nullptr;
    for (int i = 0; i < n; ++i) {
      if (w) weights[i].set(l, w[i]);
      if (a) atol[i].set(l, a[i]);
    }
    count.set(l, T(error_count));
    state_count.set(l, T(state_error_count));
  }
};

// error_norm over components [0, n_norm) of every lane, with `count` the lanes' weighted counts.
template <class T, int W, int n>
simd::Lanes<T, W> lanes_error_norm(int n_norm, const simd::Lanes<T, W>& count,
                                   const simd::Lanes<T, W>* err, const simd::Lanes<T, W>* y,
                                   const simd::Lanes<T, W>* y_new,
                                   const LaneTolerances<T, W, n>& tol,
                                   const ControllerOptions<T>& opt) {
  using L = simd::Lanes<T, W>;
  const L rtol(opt.rtol), atol(opt.atol), zero(T(0)), inf(T(1) / T(0));
  L sum(T(0));
  for (int i = 0; i < n_norm; ++i) {
    const L scale = (tol.has_atol ? tol.atol[i] : atol) + rtol * max(abs(y[i]), abs(y_new[i]));
    L e = err[i] / scale;
    if (tol.has_weights) {
      e = e * tol.weights[i];
      // Weighted out: only a NaN or Inf there still counts (it rejects the step).
      const L out = select(lane_is_finite(err[i]).m, sum, sum + (err[i] * err[i] + inf));
      sum = select((tol.weights[i] == zero).m, out, sum + e * e);
    } else {
      sum = sum + e * e;
    }
  }
  return sqrt(sum / count);
}

// Integration::attempt_norm of every lane: the norm over [0, n_error), infinite in a lane where
// a component beyond it is not finite.
template <class T, int W, int n>
simd::Lanes<T, W> lanes_attempt_norm(int n_error, const simd::Lanes<T, W>* err,
                                     const simd::Lanes<T, W>* y, const simd::Lanes<T, W>* y_new,
                                     const LaneTolerances<T, W, n>& tol,
                                     const ControllerOptions<T>& opt) {
  using L = simd::Lanes<T, W>;
  L norm = lanes_error_norm<T, W, n>(n_error, tol.count, err, y, y_new, tol, opt);
  for (int i = n_error; i < n; ++i) {
    norm = select(lane_is_finite(y_new[i]).m, norm, L(T(1) / T(0)));
  }
  return norm;
}

}  // namespace ode
}  // namespace shoal
#endif  // SHOAL_DEVICE_COMPILE
