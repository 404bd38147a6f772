// The per-trajectory adaptive loop: steps, saves by dense output, and the trajectory's status.
//
// The stepper (Tsit5, Rodas5P) supplies init/step/accept/interpolate and its error order;
// everything about time stepping lives here once. Saves never constrain the step: every save time
// inside an accepted step is filled from the stepper's continuous extension, and the final step is
// clamped so it lands exactly on t_span[n_save-1].
#pragma once

#include "shoal/config.hpp"
#include "shoal/math.hpp"
#include "shoal/ode/controller.hpp"
#include "shoal/ode/solve_options.hpp"
#include "shoal/ode/status.hpp"

namespace shoal {
namespace ode {

template <class T>
struct IntegrateOptions {
  ControllerOptions<T> controller;
  T first_step;              // ≤ 0 or non-finite: 1e-6 · (t_final − t_0)
  int64_t max_steps;         // attempts (accepted + rejected)
  int error_components = 0;  // the norm covers components [0, this) only; 0 = all

  // The run-time options in the solve's precision (once per ensemble slice, not per step).
  SHOAL_HD static IntegrateOptions from(const ShoalSolveOptions& o) {
    IntegrateOptions opt;
    opt.controller = ControllerOptions<T>::from(o);
    opt.first_step = T(o.first_step);
    opt.max_steps = o.max_steps;
    opt.error_components = static_cast<int>(o.error_components);
    return opt;
  }
};

struct IntegrateStats {
  int32_t accepted = 0;
  int32_t rejected = 0;
};

// Integrates one trajectory. `out` is (n_save, n) row-major; out[0] = y0. On failure the saves
// not reached are NaN and the returned status says why. `weights` may be null.
template <template <class, class> class Stepper, class Model, class T>
SHOAL_HD Status integrate(const T* y0, const T* p, const T* t_span, int n_save, const T* weights,
                          const IntegrateOptions<T>& opt, T* out, IntegrateStats* stats) {
  constexpr int n = Model::n_vars;
  using S = Stepper<Model, T>;
  stats->accepted = 0;
  stats->rejected = 0;

  int saved = 0;  // saves written so far
  Status status = kSuccess;
  bool valid = n_save >= 1 && math::is_finite(t_span[0]);
  for (int j = 1; valid && j < n_save; ++j)
    valid = math::is_finite(t_span[j]) && t_span[j] > t_span[j - 1];
  bool finite_y0 = true;
  for (int i = 0; i < n; ++i) finite_y0 = finite_y0 && math::is_finite(y0[i]);

  if (!valid) {
    status = kInvalidInput;
  } else if (!finite_y0) {
    status = kNonFinite;
  } else {
    T y[n], y_new[n], err[n];
    for (int i = 0; i < n; ++i) y[i] = out[i] = y0[i];
    saved = 1;

    const T t0 = t_span[0];
    const T t_final = t_span[n_save - 1];
    T t = t0;
    T h = opt.first_step;
    if (!(h > T(0)) || !math::is_finite(h)) h = T(1e-6) * (t_final - t0);

    const int n_error =
        opt.error_components > 0 && opt.error_components < n ? opt.error_components : n;
    S stepper;
    stepper.init(y, t, p);
    PidController<T> ctrl{opt.controller, S::error_order};
    bool last_rejection_non_finite = false;
    int64_t attempts = 0;

    while (saved < n_save) {
      if (attempts >= opt.max_steps) {
        status = kMaxStepsReached;
        break;
      }
      // Land exactly on the final time rather than leave a sliver for one more step.
      bool final_step = false;
      if (h >= t_final - t) {
        h = t_final - t;
        final_step = true;
      }
      const T t_next = final_step ? t_final : t + h;
      if (!(t_next > t)) {
        status = last_rejection_non_finite ? kNonFinite : kStepSizeUnderflow;
        break;
      }
      ++attempts;
      stepper.step(y, t, h, p, y_new, err);
      const T norm = error_norm(n_error, err, y, y_new, weights, ctrl.opt);
      const bool accepted = PidController<T>::accepts(norm);
      const T factor = ctrl.factor(norm, accepted);
      if (!accepted) {
        ++stats->rejected;
        last_rejection_non_finite = !math::is_finite(norm);
        h *= factor;
        continue;
      }
      ++stats->accepted;
      last_rejection_non_finite = false;
      // Every save time in (t, t_next] is served by this step.
      while (saved < n_save && t_span[saved] <= t_next) {
        T* dst = out + saved * n;
        if (t_span[saved] == t_next) {
          for (int i = 0; i < n; ++i) dst[i] = y_new[i];
        } else {
          stepper.interpolate(y, h, (t_span[saved] - t) / h, dst);
        }
        ++saved;
      }
      for (int i = 0; i < n; ++i) y[i] = y_new[i];
      stepper.accept();
      t = t_next;
      h *= factor;
    }
  }

  const T nan = T(0) / T(0);
  for (int j = saved; j < n_save; ++j) {
    for (int i = 0; i < n; ++i) out[j * n + i] = nan;
  }
  return status;
}

}  // namespace ode
}  // namespace shoal
