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
//      size h, end and state y, and every stop's jump with the state before it: (n + 3)
//      numbers each, in a buffer held only while the trajectory is being differentiated (one
//      per worker thread, at most max_steps records long).
//   2. Backwards over the records, with λ the cotangent of the current state: a step's stages
//      are evaluated again from its start (Y_s = y + h Σ_j a_sj k_j, k_s = f(t + c_s h, Y_s)),
//      and the step is transposed:
//        k̄_s = h (w_s λ + Σ_saves b_s(θ) ȳ_save),     ȳ = λ + Σ_saves ȳ_save,
//      then for s from the last stage down: (ū, p̄_s) = k̄_sᵀ (∂f/∂y, ∂f/∂p) at (Y_s, t + c_s h),
//      ȳ += ū, p̄ += p̄_s, k̄_j += h a_sj ū for j < s; the step's ȳ is the λ before it.
//      w is the solution's weights (a FSAL tableau's last row of a); a save inside the step
//      is the continuous extension at θ (with the extra dense stages of a Verner tableau), one
//      at or after the step's end the end state itself, as integrate.hpp records them. A jump
//      y⁺ = g(y⁻, s, p) at a stop s is transposed as λ⁻ = g_yᵀ λ⁺, p̄ += g_pᵀ λ⁺ (saves after
//      the stop record y⁺, those at it y⁻). With a save_fn h, a save's cotangent w enters as
//      h_yᵀ w at the state it recorded, and h_pᵀ w joins p̄.
//   3. ȳ0 = λ at the start (plus the cotangents of the saves there), p̄ the sum of them all.
// The step sizes are held fixed, as the forward sensitivities hold them (the joint system's
// steps do not differentiate the controller), so both give the derivative of the same
// discretisation; with sens_error_control off, the same steps, and the two agree to rounding.
// The products wᵀ ∂g come from the model's `vjp`, `jump_vjp` and `save_vjp`
// (shoal/ode/_codegen/vjp.py), JAX's own transposes printed as C++: no Jacobian is formed. A
// stage whose cotangent is all zeros is skipped, so an infinite Jacobian entry never meets a zero
// weight.
//
// A trajectory whose forward solve fails has NaN cotangents: never a silently partial gradient;
// so does one where two stops' jumps came without a step between them (whose intermediate state
// the recording does not see). Events are not transposed here (the Python layer refuses them
// with the forward-mode alternative).
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
  static constexpr int n_out = n_saved<Model>();
  // A record of the forward solve: an accepted step (its start t, size h, end, and the state y
  // at its start) or a stop's jump (the stop, 0, 0, the state before the jump).
  static constexpr int stride = n + 3;
  static constexpr int last = Tab::stages - 1;
  static constexpr int widest = n > n_out ? n : n_out;  // of the cotangents a vjp reads

  std::vector<T> records;  // stride numbers each, in the order they happened
  std::vector<unsigned char> is_jump;
  // The vjps' input [p, w] and output [ȳ, p̄]: on the heap, since p may be a table of
  // thousands of entries.
  std::vector<T> q = std::vector<T>(n_params + widest), out = std::vector<T>(n + n_params);
  // Cotangents of y, of p (accumulated, in the order of the records, backwards) and the
  // stages' working storage.
  T lambda[n];
  T* p_bar = nullptr;
  const T* p = nullptr;

  // Step 1: the forward solve, recording its accepted steps and jumps. false (the gradient is
  // NaN) where two stops' jumps came with no step between them, whose states it did not see.
  bool forward(const Trajectory<T>& tr, const IntegrateOptions<T>& opt, IntegrateStats* stats,
               Status* status) {
    records.clear();
    is_jump.clear();
    Stepper<Model, T> stepper;
    Integration<Stepper, Model, T> run(tr, opt, stats);
    run.begin(stepper);
    T y_new[n], err[n], before[n];
    for (int i = 0; i < n; ++i) before[i] = run.y[i];
    uint32_t rewrites = run.y_rewrites;
    bool seen = true;
    // A jump happened inside next_attempt when it set y (an arrival at a stop).
    auto note_jumps = [&]() {
      if (!has_jump<Model>() || run.y_rewrites == rewrites) return;
      seen = seen && run.y_rewrites == rewrites + 1;
      rewrites = run.y_rewrites;
      // The arrival restarts one float right of the stop (integrate.hpp).
      push(true, math::next_after(run.t, T(-1) / T(0)), T(0), T(0), before);
    };
    for (;;) {
      const bool more = run.next_attempt(stepper);
      note_jumps();
      if (!more) break;
      stepper.step(run.y, run.t, run.h, tr.p, y_new, err);
      const int32_t accepted = stats->accepted;
      const T t = run.t, h = run.h;
      for (int i = 0; i < n; ++i) before[i] = run.y[i];
      run.complete_attempt(stepper, y_new, err);
      if (stats->accepted != accepted) {
        push(false, t, h, run.t, before);  // run.t: where it ended, before any stop's restart
        for (int i = 0; i < n; ++i) before[i] = run.y[i];
      }
    }
    *status = run.finish();
    return seen;
  }

  // Steps 2 and 3: ȳ0 (n) and p̄ (n_params) from the saves' cotangents ys_bar (n_save, n_saved).
  void backward(const Trajectory<T>& tr, const T* ys_bar, T* y0_bar, T* p_bar_out) {
    p = tr.p;
    p_bar = p_bar_out;
    for (int i = 0; i < n; ++i) lambda[i] = T(0);
    for (int i = 0; i < n_params; ++i) {
      p_bar[i] = T(0);
      q[i] = tr.p[i];
    }
    int j = tr.n_save - 1;  // the last save not yet transposed
    auto save_bar = [&](int save) { return ys_bar + static_cast<int64_t>(save) * n_out; };
    for (int64_t r = static_cast<int64_t>(is_jump.size()) - 1; r >= 0; --r) {
      const T* rec = records.data() + r * stride;
      const T t = rec[0];
      const T* y = rec + 3;
      if (is_jump[r]) {
        // Saves after the stop recorded the jumped state; those at it, the state before.
        if (j >= 1 && tr.t_span[j] > t) {
          T y_after[n];
          if constexpr (has_jump<Model>()) Model::template jump<T>(y, t, p, y_after);
          for (; j >= 1 && tr.t_span[j] > t; --j) add_save(y_after, tr.t_span[j], save_bar(j), lambda);
        }
        if constexpr (has_jump<Model>()) {
          transpose<kJumpVjp>(y, t, lambda, n, lambda);
        }
        continue;
      }
      step_backward(tr, rec[0], rec[1], rec[2], y, save_bar, &j);
    }
    for (; j >= 0; --j) add_save(tr.y0, tr.t_span[j], save_bar(j), lambda);  // at the start
    for (int i = 0; i < n; ++i) y0_bar[i] = lambda[i];
  }

 private:
  static constexpr int kRhsVjp = 0, kJumpVjp = 1, kSaveVjp = 2;

  void push(bool jump, T t, T h, T end, const T* y) {
    const size_t at = records.size();
    records.resize(at + stride);
    records[at] = t;
    records[at + 1] = h;
    records[at + 2] = end;
    for (int i = 0; i < n; ++i) records[at + 3 + i] = y[i];
    is_jump.push_back(jump ? 1 : 0);
  }

  // (ȳ, p̄) += wᵀ ∂g/∂(y, p) at (y, t) for g = f, jump_fn or save_fn (which) and its output's
  // cotangent w (m numbers): ȳ is written to y_bar (which may be w itself), p̄ added to p_bar.
  template <int which>
  void transpose(const T* y, T t, const T* w, int m, T* y_bar) {
    for (int i = 0; i < m; ++i) q[n_params + i] = w[i];
    if constexpr (which == kRhsVjp) {
      Model::template vjp<T>(y, t, q.data(), out.data());
    } else if constexpr (which == kJumpVjp) {
      if constexpr (has_jump<Model>()) Model::template jump_vjp<T>(y, t, q.data(), out.data());
    } else {
      if constexpr (has_save<Model>()) Model::template save_vjp<T>(y, t, q.data(), out.data());
    }
    for (int i = 0; i < n_params; ++i) p_bar[i] += out[n + i];
    for (int i = 0; i < n; ++i) y_bar[i] = out[i];
  }

  // A save of the state y at time ts with cotangent w: its cotangent added to acc (n).
  void add_save(const T* y, T ts, const T* w, T* acc) {
    if constexpr (has_save<Model>()) {
      T y_bar[n];
      transpose<kSaveVjp>(y, ts, w, n_out, y_bar);
      for (int i = 0; i < n; ++i) acc[i] += y_bar[i];
    } else {
      (void)y;
      (void)ts;
      for (int i = 0; i < n; ++i) acc[i] += w[i];
    }
  }

  // One accepted step from (t, y) of size h ending at `end`, transposed: lambda (its end
  // state's cotangent) becomes its start's, with the saves it served (j down to those after t).
  template <class SaveBar>
  void step_backward(const Trajectory<T>& tr, T t, T h, T end, const T* y,
                     const SaveBar& save_bar, int* j) {
    // Which saves it served: the end state's (at or after its end), then those inside.
    int first_inside = *j;
    while (first_inside >= 1 && tr.t_span[first_inside] >= end) --first_inside;
    int last_served = first_inside;
    while (last_served >= 1 && tr.t_span[last_served] > t) --last_served;
    const bool dense = first_inside > last_served;

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
      Model::template rhs<T>(point[s], t + T(Tab::c(s)) * h, p, k[s]);
    }
    if (*j > first_inside) {  // saves of the end state
      T y_end[n];
      for (int i = 0; i < n; ++i) {
        T acc = T(0);
        for (int s = 0; s < Tab::stages; ++s) {
          const double w = Tab::fsal ? Tab::a(last, s) : Tab::b(s);
          if (w != 0.0) acc += T(w) * k[s][i];
        }
        y_end[i] = y[i] + h * acc;
      }
      for (; *j > first_inside; --*j) add_save(y_end, tr.t_span[*j], save_bar(*j), lambda);
    }

    T k_bar[Tab::dense_stages][n];
    for (int s = 0; s < Tab::dense_stages; ++s)
      for (int i = 0; i < n; ++i) k_bar[s][i] = T(0);
    T y_bar[n];
    for (int i = 0; i < n; ++i) y_bar[i] = lambda[i];
    for (; *j > last_served; --*j) {  // saves inside: the continuous extension at θ
      const T theta = (tr.t_span[*j] - t) / h;
      T bt[Tab::dense_stages];
      for (int s = 0; s < Tab::dense_stages; ++s) {
        T acc = T(Tab::r(s, Tab::dense_degree - 1));
        for (int d = Tab::dense_degree - 2; d >= 0; --d) acc = T(Tab::r(s, d)) + theta * acc;
        bt[s] = theta * acc;
      }
      T w[n];
      if constexpr (has_save<Model>()) {
        T y_save[n];
        for (int i = 0; i < n; ++i) {
          T acc = T(0);
          for (int s = 0; s < Tab::dense_stages; ++s) {
            if (bt[s] != T(0)) acc += bt[s] * k[s][i];
          }
          y_save[i] = y[i] + h * acc;
        }
        for (int i = 0; i < n; ++i) w[i] = T(0);
        add_save(y_save, tr.t_span[*j], save_bar(*j), w);
      } else {
        for (int i = 0; i < n; ++i) w[i] = save_bar(*j)[i];
      }
      for (int s = 0; s < Tab::dense_stages; ++s) {
        if (bt[s] == T(0)) continue;
        for (int i = 0; i < n; ++i) k_bar[s][i] += h * bt[s] * w[i];
      }
      for (int i = 0; i < n; ++i) y_bar[i] += w[i];
    }
    for (int s = 0; s < Tab::stages; ++s) {
      const double w = Tab::fsal ? Tab::a(last, s) : Tab::b(s);
      if (w != 0.0)
        for (int i = 0; i < n; ++i) k_bar[s][i] += h * T(w) * lambda[i];
    }
    // Transposed, last stage first.
    for (int s = used - 1; s >= 0; --s) {
      bool any = false;
      for (int i = 0; i < n; ++i) any = any || k_bar[s][i] != T(0);
      if (!any) continue;
      T u[n];
      transpose<kRhsVjp>(point[s], t + T(Tab::c(s)) * h, k_bar[s], n, u);
      for (int i = 0; i < n; ++i) y_bar[i] += u[i];
      for (int l = 0; l < s; ++l) {
        const double a = Tab::a(s, l);
        if (a != 0.0)
          for (int i = 0; i < n; ++i) k_bar[l][i] += h * T(a) * u[i];
      }
    }
    for (int i = 0; i < n; ++i) lambda[i] = y_bar[i];
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
      Status status;
      const bool seen = adjoint.forward(tr, opt, &stats, &status);
      a.status[m] = status;
      a.accepted[m] = stats.accepted;
      a.rejected[m] = stats.rejected;
      T* y0_bar = static_cast<T*>(a.y0_bar) + m * n;
      T* p_bar = static_cast<T*>(a.p_bar) + m * n_params;
      if (status == kSuccess && seen) {
        const T* ys_bar =
            static_cast<const T*>(a.ys_bar) + m * a.n_save * n_saved<Model>();
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
