// The per-trajectory adaptive loop: steps, stops, saves by dense output, events, and the
// trajectory's status.
//
// The stepper (explicit_rk.hpp, rosenbrock.hpp) supplies init/step/accept/interpolate and its
// error order; everything about time stepping lives here once.
//   - Saves never constrain the step: every save time inside an accepted step is filled from the
//     stepper's continuous extension (through the model's save, if it has one: model_traits.hpp).
//   - Stops (tstops) do: the step before a stop s ends two floats before s, so its last stage's
//     time t + h, rounded, stays left of s, and the next step starts at the float after s. A
//     model whose f jumps at s (written `t < s` or `t <= s`) is thus evaluated on one side of s
//     per step, and the stepper restarts there after the model's jump, if it has one, maps the
//     state: Tsit5's FSAL stage recomputed, the step size re-estimated but kept at least the
//     controller's proposal, the controller's history cleared. A save at s records the state
//     before the jump. Stops in [t_0, t_final) count (one at t_0 jumps before the first step);
//     equal stops are one stop.
//   - The final step is clamped so it lands exactly on t_span[n_save-1].
//   - The first step, unless given: 1e-6 · (t_final − t_0), or for a joint system [y, S] the
//     smaller of that and the starting-step heuristic on the whole joint state (restart_step),
//     so a transient only the sensitivities have (a y0 column starting far from a fast
//     manifold) is not stepped over even when the state alone controls the steps.
//   - Before the first accepted step, an attempt whose error grew as h shrank sends the next one
//     above the best attempt so far instead of further down (at most 4 times): an L-stable step
//     damps a transient it cannot resolve, and the estimate is worst at λh ~ 10.
//   - A joint solve that fails on account of its sensitivities (the step size underflows, or
//     they go non-finite, while the state's own error was within tolerance) ends with
//     kSensitivityFailure, not the plain solve's statuses, so it is told apart under `grad`.
//   - An event g(y, t, p) (model_traits.hpp) is checked on every accepted step: a sign change
//     between its ends is located on the dense output by the Illinois method to a few ulps of t.
//     The first event's time and state are recorded; a terminal one ends the trajectory there.
#pragma once

#include "shoal/config.hpp"
#include "shoal/math.hpp"
#include "shoal/ode/cancel.hpp"
#include "shoal/ode/controller.hpp"
#include "shoal/ode/model_traits.hpp"
#include "shoal/ode/solve_options.hpp"
#include "shoal/ode/status.hpp"

namespace shoal {
namespace ode {

template <class T>
struct IntegrateOptions {
  ControllerOptions<T> controller;
  T first_step;              // ≤ 0 or non-finite: 1e-6 · (t_final − t_0)
  T max_step = T(-1);        // ≤ 0: unbounded
  int64_t max_steps;         // attempts (accepted + rejected)
  int error_components = 0;  // the norm covers components [0, this) only; 0 = all
  bool estimate_first_step = false;  // see integrate(): the heuristic's bound on the first step
  bool event_terminal = true;
  int event_direction = 0;  // +1: rising crossings only, −1: falling only, 0: both
  // Bytes of checkpoint states an adjoint's recording keeps per trajectory (adjoint.hpp).
  int64_t adjoint_memory = int64_t(4) << 20;

  // The run-time options in the solve's precision (once per ensemble slice, not per step).
  SHOAL_HD static IntegrateOptions from(const ShoalSolveOptions& o) {
    IntegrateOptions opt;
    opt.controller = ControllerOptions<T>::from(o);
    opt.first_step = T(-1);
    opt.max_step = T(o.max_step);
    opt.max_steps = o.max_steps;
    opt.error_components = static_cast<int>(o.error_components);
    opt.estimate_first_step = o.first_step_estimate != 0;
    opt.event_terminal = o.event_terminal != 0;
    opt.event_direction = static_cast<int>(o.event_direction);
    opt.adjoint_memory = o.adjoint_memory;
    return opt;
  }
};

struct IntegrateStats {
  int32_t accepted = 0;
  int32_t rejected = 0;
};

// One trajectory's inputs and outputs.
template <class T>
struct Trajectory {
  const T* y0 = nullptr;      // (n)
  const T* p = nullptr;       // the model's parameters
  const T* t_span = nullptr;  // (n_save), strictly increasing
  int n_save = 0;
  const T* tstops = nullptr;  // (n_tstops), ascending; those outside (t_0, t_final) are ignored
  int n_tstops = 0;
  const T* weights = nullptr;  // (n) error weights, or null for all ones
  const T* atol = nullptr;     // (n) absolute tolerances, or null for the options' scalar
  T first_step = T(-1);        // > 0 and finite: overrides the options'
  T* out = nullptr;            // (n_save, n_saved<Model>()) row-major
  T* event_time = nullptr;     // (1) and (n), written when the model has an event
  T* event_state = nullptr;
  const int32_t* cancel = nullptr;  // nonzero (set by the host, any time): stop (cancel.hpp)
};

namespace detail {

// A step size for restarting at (t, y) after a stop: Hairer, Nørsett & Wanner's starting-step
// heuristic (Solving ODEs I, II.4): an explicit Euler probe of f's variation, scaled for the
// method's error order, and at most `span` (the distance to the next stop or the end).
template <class Model, class T>
SHOAL_HD T restart_step(const T* y, T t, const T* p, T span, int n_error, int count,
                        const T* weights, const T* atol, const ControllerOptions<T>& c,
                        int order) {
  constexpr int n = Model::n_vars;
  T f0[n], y1[n], f1[n];
  Model::template rhs<T>(y, t, p, f0);
  T d0 = T(0), d1 = T(0);
  for (int i = 0; i < n_error; ++i) {
    const T w = weights ? weights[i] : T(1);
    if (w == T(0)) continue;
    const T scale = (abs_tol(atol, i, c) + c.rtol * math::abs(y[i])) / w;
    d0 += (y[i] / scale) * (y[i] / scale);
    d1 += (f0[i] / scale) * (f0[i] / scale);
  }
  d0 = math::sqrt(d0 / T(count));
  d1 = math::sqrt(d1 / T(count));
  T h0 = (d0 < T(1e-5) || d1 < T(1e-5)) ? T(1e-6) * span : T(0.01) * d0 / d1;
  h0 = math::min(h0, span);
  for (int i = 0; i < n; ++i) y1[i] = y[i] + h0 * f0[i];
  Model::template rhs<T>(y1, t + h0, p, f1);
  T d2 = T(0);
  for (int i = 0; i < n_error; ++i) {
    const T w = weights ? weights[i] : T(1);
    if (w == T(0)) continue;
    const T scale = (abs_tol(atol, i, c) + c.rtol * math::abs(y[i])) / w;
    d2 += ((f1[i] - f0[i]) / scale) * ((f1[i] - f0[i]) / scale);
  }
  d2 = math::sqrt(d2 / T(count)) / h0;
  const T d = math::max(d1, d2);
  const T h1 = d <= T(1e-15) ? math::max(T(1e-6) * span, h0 * T(1e-3))
                             : math::pow(T(0.01) / d, T(1) / T(order));
  const T h = math::min(T(100) * h0, h1);
  // A NaN probe (f undefined just past the stop) falls back to a small step.
  return math::is_finite(h) && h > T(0) ? math::min(h, span) : T(1e-6) * span;
}

// Whether g going from g0 to g1 is a crossing the event counts.
template <class T>
SHOAL_HD bool crosses(T g0, T g1, int direction) {
  const bool rising = g0 < T(0) && g1 >= T(0);
  const bool falling = g0 > T(0) && g1 <= T(0);
  return direction > 0 ? rising : direction < 0 ? falling : (rising || falling);
}

}  // namespace detail

// One trajectory's adaptive loop as a resumable machine, so that the same statements serve the
// scalar path (integrate() below: one machine, one stepper) and the SIMD lanes engine
// (lanes_ensemble.hpp: W machines whose step attempts run together in the lanes of one stepper).
//   begin(stepper)             the first save, the first step size, the stepper's init
//   next_attempt(stepper)      runs until a step attempt is due: true with (t, h) set, or false
//                              once the trajectory is over (arrivals at stops and their saves
//                              happen here)
//   complete_attempt(stepper, y_new, err)   the attempt's verdict: the controller, events, saves
//   finish()                   the unreached saves set to NaN; the status
// `stepper` is anything with init/interpolate/accept of a stepper (the scalar stepper itself, or
// one lane's view of the lanes stepper); step() is the caller's.
template <template <class, class> class Stepper, class Model, class T>
struct Integration {
  static constexpr int n = Model::n_vars;
  static constexpr int n_out = n_saved<Model>();
  using S = Stepper<Model, T>;

  Trajectory<T> tr;
  IntegrateOptions<T> opt;
  IntegrateStats* stats;
  T y[n];
  T t = T(0), h = T(0);
  Status status = kSuccess;
  // How often y was set other than by accepting a step (the start, a stop's arrival): the lanes
  // engine keeps y in its lanes and copies it from here only then.
  uint32_t y_rewrites = 0;

  SHOAL_HD Integration(const Trajectory<T>& trajectory, const IntegrateOptions<T>& options,
                       IntegrateStats* statistics)
      : tr(trajectory), opt(options), stats(statistics), ctrl{options.controller, S::error_order} {}

  template <class St>
  SHOAL_HD void begin(St& stepper) {
    const T* t_span = tr.t_span;
    const int n_save = tr.n_save;
    stats->accepted = 0;
    stats->rejected = 0;
    const T nan = T(0) / T(0);
    if constexpr (has_event<Model>()) {
      tr.event_time[0] = nan;
      for (int i = 0; i < n; ++i) tr.event_state[i] = nan;
    }
    bool valid = n_save >= 1 && math::is_finite(t_span[0]);
    for (int j = 1; valid && j < n_save; ++j)
      valid = math::is_finite(t_span[j]) && t_span[j] > t_span[j - 1];
    bool finite_y0 = true;
    for (int i = 0; i < n; ++i) finite_y0 = finite_y0 && math::is_finite(tr.y0[i]);
    if (!valid) {
      status = kInvalidInput;
      over = true;
      return;
    }
    if (!finite_y0) {
      status = kNonFinite;
      over = true;
      return;
    }
    for (int i = 0; i < n; ++i) y[i] = tr.y0[i];
    ++y_rewrites;
    record(0, y);
    saved = 1;

    t0 = t_span[0];
    t_final = t_span[n_save - 1];
    max_step = opt.max_step > T(0) ? opt.max_step : inf();
    t = t0;
    n_error = opt.error_components > 0 && opt.error_components < n ? opt.error_components : n;
    count = weighted_count(n_error, tr.weights);

    h = tr.first_step > T(0) && math::is_finite(tr.first_step) ? tr.first_step : opt.first_step;
    if (!(h > T(0)) || !math::is_finite(h)) {
      h = T(1e-6) * (t_final - t0);
      if (opt.estimate_first_step) {
        const T estimate = detail::restart_step<Model>(y, t0, tr.p, t_final - t0, n,
                                                       weighted_count(n, tr.weights), tr.weights,
                                                       tr.atol, opt.controller, S::error_order);
        // At least a few floats of t, so that the step is one. (On the BBN network a y0
        // column's transient at 1e16/s made 1e-6 · the span 1.7e-3 wrong in its gradient.)
        const T ulp = math::next_after(math::abs(t0), inf()) - math::abs(t0);
        h = math::min(h, math::max(estimate, T(4) * ulp));
      }
    }
    // The first stop at or after the start (a NaN one is skipped): one at t_0 itself applies
    // its jump before the first step, after the first save has recorded y0 as given.
    while (next_stop < tr.n_tstops && !(tr.tstops[next_stop] >= t)) ++next_stop;
    stepper.init(y, t, tr.p);
    if constexpr (has_event<Model>()) Model::template event<T>(y, t, tr.p, &g_prev);
  }

  template <class St>
  SHOAL_HD bool next_attempt(St& stepper) {
    const T* t_span = tr.t_span;
    const int n_save = tr.n_save;
    for (;;) {
      if (arrival_pending) {
        arrival_pending = false;
        arrive(stepper);
      }
      if (over || saved >= n_save) return false;
      stop_ahead = next_stop < tr.n_tstops && tr.tstops[next_stop] < t_final;
      target = stop_ahead ? tr.tstops[next_stop] : t_final;
      // Where a step that reaches the target ends: the target itself, or left of a stop.
      const T end = stop_ahead ? math::next_after(math::next_after(target, -inf()), -inf())
                               : target;
      if (stop_ahead && !(end > t)) {  // already within two floats of the stop
        while (saved < n_save && t_span[saved] <= target) record(saved++, y);
        arrival_pending = true;
        continue;
      }
      if (cancelled(tr.cancel)) return end_with(kCancelled);
      if (attempts >= opt.max_steps) return end_with(kMaxStepsReached);
      if (h > max_step) h = max_step;
      // Land exactly on the end rather than leave a sliver for one more step.
      lands = h >= end - t;
      if (lands) h = end - t;
      t_next = lands ? end : t + h;
      if (!(t_next > t)) {
        return end_with(last_rejection_by_sensitivities ? kSensitivityFailure
                        : last_rejection_non_finite     ? kNonFinite
                                                        : kStepSizeUnderflow);
      }
      ++attempts;
      return true;
    }
  }

  template <class St>
  SHOAL_HD void complete_attempt(St& stepper, const T* y_new, const T* err) {
    const T norm = attempt_norm(y_new, err);
    const T root = ctrl.takes_root() ? ctrl.root_of(norm) : T(0);
    // The state's own norm is read only where a joint system's attempt is rejected.
    const bool needs_state_norm = state_vars<Model>() < n && !PidController<T>::accepts(norm);
    complete_attempt(stepper, y_new, norm, root, needs_state_norm ? state_norm(y_new, err) : T(0));
  }

  // The attempt's error norm; components outside it still may not go NaN or Inf.
  SHOAL_HD T attempt_norm(const T* y_new, const T* err) const {
    T norm = error_norm(n_error, count, err, y, y_new, tr.weights, tr.atol, ctrl.opt);
    for (int i = n_error; i < n; ++i) {
      if (!math::is_finite(y_new[i])) norm = inf();
    }
    return norm;
  }
  // A joint system's norm over its state components alone (with the state's weighted count):
  // whether a rejection is the sensitivities' doing.
  SHOAL_HD T state_norm(const T* y_new, const T* err) const {
    constexpr int n_state = state_vars<Model>();
    return error_norm(n_state, weighted_count(n_state, tr.weights), err, y, y_new, tr.weights,
                      tr.atol, ctrl.opt);
  }
  SHOAL_HD bool takes_root() const { return ctrl.takes_root(); }
  // Where the attempt in flight (next_attempt to complete_attempt) ends (the adjoint's record).
  SHOAL_HD T attempt_end() const { return t_next; }
  // The components the norm covers ([0, error_components())) and the count it averages over, as
  // set by begin() (the lanes engine computes the norm of all its lanes at once).
  SHOAL_HD int error_components() const { return n_error; }
  SHOAL_HD int error_count() const { return count; }

  // The verdict given the attempt's norm (attempt_norm), root = PidController::root_of(norm)
  // where takes_root(), and for a joint system whose attempt is rejected its state_norm:
  // the lanes engine computes them for all its lanes first. y_new is read only when the norm
  // accepts the attempt.
  template <class St>
  SHOAL_HD void complete_attempt(St& stepper, const T* y_new, T norm, T root, T state_norm) {
    const T* t_span = tr.t_span;
    const int n_save = tr.n_save;
    const bool accepted = PidController<T>::accepts(norm);
    const T factor = ctrl.factor(norm, accepted, root);
    if (!accepted) {
      ++stats->rejected;
      last_rejection_non_finite = !math::is_finite(norm);
      last_rejection_by_sensitivities = false;
      if constexpr (state_vars<Model>() < n) {
        last_rejection_by_sensitivities = PidController<T>::accepts(state_norm);
      }
      // Before any accepted step, an error that grew as h shrank is a transient the steps
      // cannot resolve (an L-stable step over it is accurate; the estimate is worst at
      // λh ~ 10): go back above the best attempt instead of shrinking into it, a few times.
      if (stats->accepted == 0 && math::is_finite(norm)) {
        if (norm > search_norm && h < search_h && search_turns < 4) {
          ++search_turns;
          h = search_h * ctrl.opt.factor_max;
          search_norm = inf();
          return;
        }
        if (norm < search_norm) {
          search_norm = norm;
          search_h = h;
        }
      }
      h *= factor;
      return;
    }
    ++stats->accepted;
    last_rejection_non_finite = false;
    last_rejection_by_sensitivities = false;

    // An event inside (t, t_next]: where the dense output's g changes sign.
    T t_event = inf();
    if constexpr (has_event<Model>()) {
      T g_new;
      Model::template event<T>(y_new, t_next, tr.p, &g_new);
      if (!event_found && detail::crosses(g_prev, g_new, opt.event_direction)) {
        t_event = locate_event(stepper, y_new, g_new);
      }
      g_prev = g_new;
    }

    // Every save time in (t, t_next] is served by this step, and one at the stop too; after a
    // terminal event only those up to it.
    const T served_to = math::min(lands && stop_ahead ? target : t_next, t_event);
    while (saved < n_save && t_span[saved] <= served_to) {
      if (t_span[saved] >= t_next) {
        record(saved, y_new);
      } else {
        T y_save[n];
        stepper.interpolate(y, t, h, (t_span[saved] - t) / h, tr.p, y_save);
        record(saved, y_save);
      }
      ++saved;
    }
    if (t_event < inf()) {
      end_with(kEvent);
      return;
    }
    for (int i = 0; i < n; ++i) y[i] = y_new[i];
    stepper.accept();
    t = t_next;
    h *= factor;
    arrival_pending = lands && stop_ahead;
  }

  SHOAL_HD Status finish() {
    const T nan = T(0) / T(0);
    for (int j = saved; j < tr.n_save; ++j) {
      for (int i = 0; i < n_out; ++i) tr.out[static_cast<int64_t>(j) * n_out + i] = nan;
    }
    return status;
  }

 private:
  PidController<T> ctrl;
  int saved = 0;  // saves written so far
  bool over = false;
  T t0 = T(0), t_final = T(0), max_step = T(0);
  int n_error = n, count = n;
  int next_stop = 0;
  int64_t attempts = 0;
  // Whether the last rejected attempt failed on the sensitivities alone (see the top).
  bool last_rejection_by_sensitivities = false;
  bool last_rejection_non_finite = false;
  // The first step's search: its best rejected attempt so far, and the turns taken.
  T search_h = T(0), search_norm = inf();
  int search_turns = 0;
  T g_prev = T(0);
  bool event_found = false;
  // The attempt in flight (next_attempt to complete_attempt), and a stop reached by it.
  bool stop_ahead = false, lands = false, arrival_pending = false;
  T target = T(0), t_next = T(0);

  SHOAL_HD static T inf() { return T(1) / T(0); }

  SHOAL_HD bool end_with(Status s) {
    status = s;
    over = true;
    return false;
  }

  // What save j records of the state at its time.
  SHOAL_HD void record(int j, const T* state) {
    T* dst = tr.out + static_cast<int64_t>(j) * n_out;
    if constexpr (has_save<Model>()) {
      Model::template save<T>(state, tr.t_span[j], tr.p, dst);
    } else {
      for (int i = 0; i < n; ++i) dst[i] = state[i];
    }
  }

  // The crossing inside the accepted step (t, t_next], by the Illinois method on the dense
  // output; records the event and returns its time if it ends the trajectory, else inf.
  template <class St>
  SHOAL_HD T locate_event(St& stepper, const T* y_new, const T& g_new) {
    T lo = T(0), hi = T(1), g_lo = g_prev, g_hi = g_new, y_mid[n];
    int side = 0;  // Illinois: halve the value kept twice in a row
    for (int it = 0; it < 200 && (hi - lo) * h > T(4) * math::abs(t_next) *
                                                      (T(1) - math::next_after(T(1), T(0)));
         ++it) {
      T theta = (lo * g_hi - hi * g_lo) / (g_hi - g_lo);
      if (!(theta > lo && theta < hi)) theta = T(0.5) * (lo + hi);
      stepper.interpolate(y, t, h, theta, tr.p, y_mid);
      T g_mid;
      Model::template event<T>(y_mid, t + theta * h, tr.p, &g_mid);
      if (detail::crosses(g_lo, g_mid, opt.event_direction) ||
          (opt.event_direction != 0 && g_mid == T(0))) {
        hi = theta;
        g_hi = g_mid;
        if (side == -1) g_lo *= T(0.5);
        side = -1;
      } else {
        lo = theta;
        g_lo = g_mid;
        if (side == 1) g_hi *= T(0.5);
        side = 1;
      }
    }
    // The right end of the bracket: the first time the crossing has happened.
    event_found = true;
    const T t_event = hi >= T(1) ? t_next : t + hi * h;
    tr.event_time[0] = t_event;
    if (hi >= T(1)) {
      for (int i = 0; i < n; ++i) tr.event_state[i] = y_new[i];
    } else {
      stepper.interpolate(y, t, h, hi, tr.p, tr.event_state);
    }
    return opt.event_terminal ? t_event : inf();
  }

  // At a stop just reached: the jump, then a fresh start just right of it.
  template <class St>
  SHOAL_HD void arrive(St& stepper) {
    if constexpr (has_jump<Model>()) {
      T jumped[n];
      Model::template jump<T>(y, target, tr.p, jumped);
      for (int i = 0; i < n; ++i) y[i] = jumped[i];
    }
    ++y_rewrites;
    t = math::next_after(target, inf());
    while (next_stop < tr.n_tstops && !(tr.tstops[next_stop] > t)) ++next_stop;
    const bool more = next_stop < tr.n_tstops && tr.tstops[next_stop] < t_final;
    const T span = (more ? tr.tstops[next_stop] : t_final) - t;
    if (span > T(0)) {
      stepper.init(y, t, tr.p);
      // Re-estimated, but never below the controller's proposal: across a stop where f only
      // switches, the step that suited before usually suits after (diffrax keeps it); where it
      // does not, the controller shrinks it on the first rejection. The estimate is at most
      // `span`, so a proposal reaching the next stop needs none (stops at a table's knots: it
      // was a third of the work).
      if (h < span) {
        h = math::max(h, detail::restart_step<Model>(y, t, tr.p, span, n_error, count,
                                                     tr.weights, tr.atol, ctrl.opt,
                                                     S::error_order));
      }
      ctrl = PidController<T>{opt.controller, S::error_order};
      if constexpr (has_event<Model>()) Model::template event<T>(y, t, tr.p, &g_prev);
    } else {
      // The end is within a float of the stop: it records the state after the jump.
      while (saved < tr.n_save) record(saved++, y);
    }
  }
};

// Integrates one trajectory. out[0] records y0. On failure the saves not reached are NaN and
// the returned status says why; after a terminal event too (status kEvent).
template <template <class, class> class Stepper, class Model, class T>
SHOAL_HD Status integrate(const Trajectory<T>& tr, const IntegrateOptions<T>& opt,
                          IntegrateStats* stats) {
  constexpr int n = Model::n_vars;
  Stepper<Model, T> stepper;
  Integration<Stepper, Model, T> run(tr, opt, stats);
  run.begin(stepper);
  T y_new[n], err[n];
  while (run.next_attempt(stepper)) {
    stepper.step(run.y, run.t, run.h, tr.p, y_new, err);
    run.complete_attempt(stepper, y_new, err);
  }
  return run.finish();
}

// The same without stops, per-trajectory first step or events' outputs: `out` is
// (n_save, n_saved<Model>()), `weights` may be null.
template <template <class, class> class Stepper, class Model, class T>
SHOAL_HD Status integrate(const T* y0, const T* p, const T* t_span, int n_save, const T* weights,
                          const IntegrateOptions<T>& opt, T* out, IntegrateStats* stats) {
  Trajectory<T> tr;
  tr.y0 = y0;
  tr.p = p;
  tr.t_span = t_span;
  tr.n_save = n_save;
  tr.weights = weights;
  tr.out = out;
  return integrate<Stepper, Model, T>(tr, opt, stats);
}

}  // namespace ode
}  // namespace shoal
