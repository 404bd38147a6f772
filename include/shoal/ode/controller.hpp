// Step-size control: the scaled RMS error norm and a PID controller.
//
// Norm: sqrt(mean_i (w_i err_i / (atol_i + rtol max(|y_i|, |y_new_i|)))^2), the mean over the
// components with w_i ≠ 0; a step is accepted when it is ≤ 1. A NaN or Inf anywhere makes the norm non-finite, which rejects the step and shrinks
// it by the minimum factor: a model that leaves its domain is stepped back into it, never trusted.
//
// PID (Söderlind's form as diffrax writes it, on inverse scaled errors δ_n = 1/‖err_n‖):
//   h_{n+1} = h_n · safety · δ_n^{(p+i+d)/k} · δ_{n-1}^{-(p+2d)/k} · δ_{n-2}^{d/k},
// k = the order of the error estimate, clipped to [factor_min, factor_max]; after a rejection the
// factor is capped at `safety` so the retry is strictly smaller. The default gains (p, i, d) =
// (0, 1, 0) are the classical integral controller.
//
// The integral controller's exponents 1/k of the methods' estimates are roots, not pow: 1/5
// (Rodas5P, Tsit5) by fifth_root (fifth_root.hpp: a few IEEE operations, a proven error bound of
// 1.81 ulp), 1/4 (Rodas4) as sqrt(sqrt(·)) (two correctly rounded operations), 1/3
// (Rosenbrock23) by shoal's own cbrt (elementary/cbrt.hpp, ≤ 0.5001 ulp), any other (Vern7's 1/7,
// Vern9's 1/9, other gains) by shoal's own pow. Each gives the same bits on every CPU and GPU
// (libm's and CUDA's pow differ, and so would the step sizes) and is vectorisable: the lanes
// engine takes the root of all its lanes' norms at once (root_of; pow in the lanes took a quarter
// of Vern9's time on Lorenz when each lane took its own).
#pragma once

#include "shoal/config.hpp"
#include "shoal/fifth_root.hpp"
#include "shoal/math.hpp"
#include "shoal/ode/solve_options.hpp"

namespace shoal {
namespace ode {

template <class T>
struct ControllerOptions {
  T rtol;
  T atol;
  T pcoeff = T(0);
  T icoeff = T(1);
  T dcoeff = T(0);
  T safety = T(0.9);
  T factor_min = T(0.2);
  T factor_max = T(10);

  SHOAL_HD static ControllerOptions from(const ShoalSolveOptions& o) {
    ControllerOptions c;
    c.rtol = T(o.rtol);
    c.atol = T(o.atol);
    c.pcoeff = T(o.pcoeff);
    c.icoeff = T(o.icoeff);
    c.dcoeff = T(o.dcoeff);
    c.factor_min = T(o.factor_min);
    c.factor_max = T(o.factor_max);
    return c;
  }
};

// The number of components the RMS averages over: those of [0, n) with a nonzero weight (all of
// them when `weights` is null). A component weighted 0 leaves the mean, so controlling 6 of 72
// states needs no rescaling of the weights; at least 1, so all-zero weights give a zero norm.
template <class T>
SHOAL_HD int weighted_count(int n, const T* weights) {
  if (!weights) return n;
  int count = 0;
  for (int i = 0; i < n; ++i) count += weights[i] != T(0) ? 1 : 0;
  return count > 0 ? count : 1;
}

// Component i's absolute tolerance: its own (a joint solve's sensitivity rows have theirs,
// shoal/ode/_directional.py) or the options' scalar.
template <class T>
SHOAL_HD T abs_tol(const T* atol, int i, const ControllerOptions<T>& opt) {
  return atol ? atol[i] : opt.atol;
}

// Scaled RMS norm of an error estimate over [0, n), averaged over `count` components
// (weighted_count). `weights` and `atol` may be null (all ones, the options' scalar).
template <class T>
SHOAL_HD T error_norm(int n, int count, const T* err, const T* y, const T* y_new,
                      const T* weights, const T* atol, const ControllerOptions<T>& opt) {
  T sum = T(0);
  for (int i = 0; i < n; ++i) {
    if (weights && weights[i] == T(0)) {
      // Out of the mean, but a NaN or Inf there still rejects the step.
      if (!math::is_finite(err[i])) sum += err[i] * err[i] + T(1) / T(0);
      continue;
    }
    const T scale =
        abs_tol(atol, i, opt) + opt.rtol * math::max(math::abs(y[i]), math::abs(y_new[i]));
    T e = err[i] / scale;
    if (weights) e *= weights[i];
    sum += e * e;
  }
  return math::sqrt(sum / T(count));
}

template <class T>
struct PidController {
  ControllerOptions<T> opt;
  int error_order;
  T prev_inv = T(1);       // δ_{n-1}
  T prev_prev_inv = T(1);  // δ_{n-2}

  SHOAL_HD static bool accepts(T norm) { return norm <= T(1); }

  // How factor() takes (1/norm)^exponent() (see the top); kNone: not at all (a zero exponent).
  enum class Root { kNone, kFifth, kFourth, kCube, kPow };
  SHOAL_HD Root root() const {
    const T c = exponent();
    if (c == T(1) / T(5)) return Root::kFifth;
    if (c == T(1) / T(4)) return Root::kFourth;
    if (c == T(1) / T(3)) return Root::kCube;
    return c != T(0) ? Root::kPow : Root::kNone;
  }
  SHOAL_HD bool takes_root() const { return root() != Root::kNone; }
  // (1/norm)^exponent() where takes_root() (lanes_ensemble.hpp takes all its lanes' at once).
  SHOAL_HD T root_of(T norm) const {
    const T inv = T(1) / norm;
    switch (root()) {
      case Root::kFifth:
        return fifth_root_of(norm);
      case Root::kFourth:
        return math::sqrt(math::sqrt(inv));
      case Root::kCube:
        return math::cbrt(inv);
      default:
        return math::pow(inv, exponent());
    }
  }
  // The integral exponent (p + i + d)/k.
  SHOAL_HD T exponent() const {
    return (opt.pcoeff + opt.icoeff + opt.dcoeff) / T(error_order);
  }

  // root_of(norm) where root() is kFifth, with nothing to decide: a loop of it over the lanes
  // vectorises (lanes_ensemble.hpp).
  SHOAL_HD static T fifth_root_of(T norm) { return math::fifth_root(T(1) / norm); }

  // The factor to multiply h by, given this attempt's error norm. Call once per attempt; the
  // history advances only on accepted steps.
  SHOAL_HD T factor(T norm, bool accepted) {
    return factor(norm, accepted, takes_root() ? root_of(norm) : T(0));
  }
  // The same with root_of(norm) computed by the caller (for all lanes at once).
  SHOAL_HD T factor(T norm, bool accepted, T root) {
    if (!math::is_finite(norm)) return opt.factor_min;
    const T k = T(error_order);
    T f;
    if (norm == T(0)) {
      f = opt.factor_max;
    } else {
      const T inv = T(1) / norm;
      f = opt.safety;
      const T c2 = -(opt.pcoeff + T(2) * opt.dcoeff) / k;
      const T c3 = opt.dcoeff / k;
      if (takes_root()) f *= root;
      if (c2 != T(0)) f *= math::pow(prev_inv, c2);
      if (c3 != T(0)) f *= math::pow(prev_prev_inv, c3);
      if (accepted) {
        prev_prev_inv = prev_inv;
        prev_inv = inv;
      }
    }
    const T hi = accepted ? opt.factor_max : opt.safety;
    f = f < opt.factor_min ? opt.factor_min : f;
    f = f > hi ? hi : f;
    return f;
  }
};

}  // namespace ode
}  // namespace shoal
