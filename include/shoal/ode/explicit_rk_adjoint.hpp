// Reverse mode of an explicit Runge-Kutta solve: the discrete adjoint of the steps it took.
//
// jax.grad through solve() needs ct · ∂ys/∂θ for one cotangent ct of the saves. Forward
// sensitivities integrate a column per entry of θ; here the cost is one extra forward solve and
// one backward sweep, whatever the number of parameters (a table of thousands of entries, a
// neural network's weights).
//
// Per trajectory:
//   1. The forward solve runs again (the same loop, integrate.hpp, hence the same steps and bits
//      as the primal solve, scalar or in the lanes) and records every accepted step's start t,
//      size h, end and state y: (n + 3) numbers a step, in a buffer held only while the
//      trajectory is being differentiated (one per worker thread, at most max_steps long).
//   2. Backwards over the steps, with λ the cotangent of the step's end state: the step's stages
//      are evaluated again from its start (Y_s = y + h Σ_j a_sj k_j, k_s = f(t + c_s h, Y_s)),
//      and the step is transposed:
//        k̄_s = h (w_s λ + Σ_saves b_s(θ) ȳ_save),     ȳ = λ + Σ_saves ȳ_save,
//      then for s from the last stage down: (ū, p̄_s) = k̄_sᵀ (∂f/∂y, ∂f/∂p) at (Y_s, t + c_s h),
//      ȳ += ū, p̄ += p̄_s, k̄_j += h a_sj ū for j < s; the step's ȳ is the previous step's λ.
//      w is the solution's weights (a FSAL tableau's last row of a); a save inside the step
//      is the continuous extension at θ (with the extra dense stages of a Verner tableau), one
//      at or after the step's end the end state itself, as integrate.hpp records them.
//   3. ȳ0 = λ at the start (plus the first save's cotangent), p̄ the sum over all stages.
// The step sizes are held fixed, as the forward sensitivities hold them (the joint system's
// steps do not differentiate the controller), so both give the derivative of the same
// discretisation; with sens_error_control off, the same steps, and the two agree to rounding.
// The products k̄ᵀ ∂f come from the model's `vjp` (shoal/ode/_codegen/vjp.py), JAX's own
// transpose of f printed as C++: no Jacobian is formed. A stage whose cotangent is all zeros is
// skipped, so an infinite Jacobian entry never meets a zero weight.
//
// A trajectory whose forward solve fails has NaN cotangents: never a silently partial gradient.
// Stops are honoured as the forward solve honours them; jumps at stops, events and save
// functions are not transposed here (the Python layer refuses them with the forward-mode
// alternative).
#pragma once

#include <cstdint>
#include <vector>

#include "shoal/config.hpp"
#include "shoal/ode/ensemble.hpp"
#include "shoal/ode/integrate.hpp"

namespace shoal {
namespace ode {

template <template <class, class> class Stepper, class Model, class T>
struct ExplicitAdjoint {
  using Tab = typename Stepper<Model, T>::Tableau;
  static constexpr int n = Model::n_vars;
  static constexpr int n_params = Model::n_params;
  static constexpr int stride = n + 3;  // t, h, end, y
  static constexpr int last = Tab::stages - 1;

  std::vector<T> steps;  // stride numbers per accepted step

  // Step 1: the forward solve, recording its accepted steps.
  Status forward(const Trajectory<T>& tr, const IntegrateOptions<T>& opt,
                 IntegrateStats* stats) {
    steps.clear();
    Stepper<Model, T> stepper;
    Integration<Stepper, Model, T> run(tr, opt, stats);
    run.begin(stepper);
    T y_new[n], err[n];
    while (run.next_attempt(stepper)) {
      stepper.step(run.y, run.t, run.h, tr.p, y_new, err);
      const int32_t accepted = stats->accepted;
      const T t = run.t, h = run.h;
      const size_t at = steps.size();
      steps.resize(at + stride);
      steps[at] = t;
      steps[at + 1] = h;
      for (int i = 0; i < n; ++i) steps[at + 3 + i] = run.y[i];
      run.complete_attempt(stepper, y_new, err);
      if (stats->accepted == accepted) {
        steps.resize(at);  // rejected
      } else {
        steps[at + 2] = run.t;  // where it ended (before any stop's restart)
      }
    }
    return run.finish();
  }

  // Steps 2 and 3: ȳ0 (n) and p̄ (n_params) from the saves' cotangents ys_bar (n_save, n).
  void backward(const Trajectory<T>& tr, const T* ys_bar, T* y0_bar, T* p_bar) {
    T lambda[n], q[n_params + n], out[n + n_params];
    for (int i = 0; i < n; ++i) lambda[i] = T(0);
    for (int i = 0; i < n_params; ++i) {
      p_bar[i] = T(0);
      q[i] = tr.p[i];
    }
    int j = tr.n_save - 1;  // the last save not yet transposed
    const int64_t n_steps = static_cast<int64_t>(steps.size() / stride);
    for (int64_t step = n_steps - 1; step >= 0; --step) {
      const T* rec = steps.data() + step * stride;
      const T t = rec[0], h = rec[1], end = rec[2];
      const T* y = rec + 3;
      T k_bar[Tab::dense_stages][n];
      for (int s = 0; s < Tab::dense_stages; ++s)
        for (int i = 0; i < n; ++i) k_bar[s][i] = T(0);
      T y_bar[n];
      bool dense = false;
      // The saves this step served: after its start, at or before its end state's time.
      for (int i = 0; i < n; ++i) y_bar[i] = T(0);
      for (; j >= 1 && tr.t_span[j] > t; --j) {
        const T* w = ys_bar + static_cast<int64_t>(j) * n;
        if (tr.t_span[j] >= end) {
          for (int i = 0; i < n; ++i) lambda[i] += w[i];
          continue;
        }
        dense = true;
        const T theta = (tr.t_span[j] - t) / h;
        for (int s = 0; s < Tab::dense_stages; ++s) {
          T acc = T(Tab::r(s, Tab::dense_degree - 1));
          for (int d = Tab::dense_degree - 2; d >= 0; --d) acc = T(Tab::r(s, d)) + theta * acc;
          const T weight = h * (theta * acc);
          if (weight != T(0))
            for (int i = 0; i < n; ++i) k_bar[s][i] += weight * w[i];
        }
        for (int i = 0; i < n; ++i) y_bar[i] += w[i];
      }
      for (int s = 0; s < Tab::stages; ++s) {
        const double weight = Tab::fsal ? Tab::a(last, s) : Tab::b(s);
        if (weight != 0.0)
          for (int i = 0; i < n; ++i) k_bar[s][i] += h * T(weight) * lambda[i];
      }
      for (int i = 0; i < n; ++i) y_bar[i] += lambda[i];

      // The stages again, from the step's start.
      const int used = dense ? Tab::dense_stages : Tab::stages;
      T point[Tab::dense_stages][n], k[Tab::dense_stages][n];
      for (int s = 0; s < used; ++s) {
        for (int i = 0; i < n; ++i) {
          T acc = T(0);
          for (int l = 0; l < s; ++l) {
            if (Tab::a(s, l) != 0.0) acc += T(Tab::a(s, l)) * k[l][i];
          }
          point[s][i] = y[i] + h * acc;
        }
        Model::template rhs<T>(point[s], t + T(Tab::c(s)) * h, tr.p, k[s]);
      }
      // Transposed, last stage first.
      for (int s = used - 1; s >= 0; --s) {
        bool any = false;
        for (int i = 0; i < n; ++i) any = any || k_bar[s][i] != T(0);
        if (!any) continue;
        for (int i = 0; i < n; ++i) q[n_params + i] = k_bar[s][i];
        Model::template vjp<T>(point[s], t + T(Tab::c(s)) * h, q, out);
        for (int i = 0; i < n_params; ++i) p_bar[i] += out[n + i];
        for (int i = 0; i < n; ++i) y_bar[i] += out[i];
        for (int l = 0; l < s; ++l) {
          const double a = Tab::a(s, l);
          if (a != 0.0)
            for (int i = 0; i < n; ++i) k_bar[l][i] += h * T(a) * out[i];
        }
      }
      for (int i = 0; i < n; ++i) lambda[i] = y_bar[i];
    }
    for (; j >= 0; --j) {  // saves at the start (the first, and any a failed solve left)
      for (int i = 0; i < n; ++i) lambda[i] += ys_bar[static_cast<int64_t>(j) * n + i];
    }
    for (int i = 0; i < n; ++i) y0_bar[i] = lambda[i];
  }
};

// Trajectories [begin, end) of `a` and those claimed from its work queue: each one's forward
// solve (ys, statistics, status as a plain solve writes them) and its cotangents
// y0_bar (n_traj, n) and p_bar (n_traj, n_params) from ys_bar (n_traj, n_save, n).
template <template <class, class> class Stepper, class Model, class T>
void adjoint_range(const ShoalEnsembleArgs& a, int64_t begin, int64_t end) {
  constexpr int n = Model::n_vars;
  constexpr int n_params = Model::n_params;
  const auto opt = IntegrateOptions<T>::from(a.options);
  ExplicitAdjoint<Stepper, Model, T> adjoint;
  do {
    for (int64_t m = begin; m < end; ++m) {
      T p[n_params > 0 ? n_params : 1];
      Trajectory<T> tr = trajectory_of<Model, T>(a, m);
      tr.p = params_of<Model>(a, m, p);
      IntegrateStats stats;
      const Status status = adjoint.forward(tr, opt, &stats);
      a.status[m] = status;
      a.accepted[m] = stats.accepted;
      a.rejected[m] = stats.rejected;
      T* y0_bar = static_cast<T*>(a.y0_bar) + m * n;
      T* p_bar = static_cast<T*>(a.p_bar) + m * n_params;
      if (status == kSuccess) {
        const T* ys_bar = static_cast<const T*>(a.ys_bar) + m * a.n_save * n;
        adjoint.backward(tr, ys_bar, y0_bar, p_bar);
      } else {
        const T nan = T(0) / T(0);
        for (int i = 0; i < n; ++i) y0_bar[i] = nan;
        for (int i = 0; i < n_params; ++i) p_bar[i] = nan;
      }
    }
    count_done(a, end - begin);
  } while (claim(a, &begin, &end));
}

}  // namespace ode
}  // namespace shoal
