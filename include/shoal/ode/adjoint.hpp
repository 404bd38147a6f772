// Reverse mode of a solve: the discrete adjoint of the steps it took.
//
// jax.grad through solve() needs ctᵀ ∂ys/∂θ for one cotangent ct of the saves. Forward
// sensitivities integrate a column per entry of θ; here the cost is one extra forward solve and
// one backward sweep, whatever the number of parameters (a table of thousands of entries, a
// neural network's weights). Per trajectory:
//   1. The forward solve runs again (the same loop, integrate.hpp, hence the same steps and bits
//      as the primal solve, scalar or in the lanes) and records every accepted step's start t,
//      size h and end, and every stop's jump (3 numbers each), and the state y at the start of
//      every `spacing`-th of those records: its checkpoints. `spacing` starts at 1 and doubles
//      (every other checkpoint dropped) whenever the checkpoints would need more than the
//      options' adjoint_memory bytes, so a trajectory's recording holds at most that many bytes
//      of states, plus 3 numbers and a byte per step (max_steps bounds them).
//   2. Backwards over the records, with λ the cotangent of the current state. Where a record's
//      state is not a checkpoint, the steps from the checkpoint before it are taken again
//      (replay: the recorded t and h, the method's own step, bit for bit the recorded solve's),
//      a window of `spacing` states at a time. A step is evaluated again from its start (an
//      explicit method's from the stages the forward solve recorded for its first steps, within
//      StageBudgetBytes per worker thread) and transposed by the method's StepAdjoint
//      (explicit_rk_adjoint.hpp, rosenbrock_adjoint.hpp), which turns λ and the cotangents of
//      the saves the step served (a save inside the step is the method's continuous extension
//      at θ, one at or after the step's end the end state itself, as integrate.hpp records
//      them) into the cotangent of the step's start. A jump y⁺ = g(y⁻, s, p) at a stop s is
//      transposed as λ⁻ = g_yᵀ λ⁺, p̄ += g_pᵀ λ⁺ (saves after the stop record y⁺, those at it
//      y⁻). With a save_fn h, a save's cotangent w enters as h_yᵀ w at the state it recorded,
//      and h_pᵀ w joins p̄.
//   3. ȳ0 = λ at the start (plus the cotangents of the saves there), p̄ the sum of them all.
// The step sizes are held fixed, as the forward sensitivities hold them (the joint system's
// steps do not differentiate the controller), so both give the derivative of the same
// discretisation; with sens_error_control off, the same steps, and the two agree to rounding.
// The products wᵀ ∂g come from the model's `vjp`, `jump_vjp`, `save_vjp` (and `jvp_vjp` for a
// Rosenbrock method), JAX's own transposes printed as C++ (shoal/ode/_codegen/vjp.py): no
// Jacobian is formed for them.
//
// An event's state (at its time held fixed) gets its cotangent where the step that found it
// records it: the continuous extension at the event's θ, or the step's end; saves after a
// terminal event were never reached and take none. The event time's own derivative (the
// implicit-function rule) is applied in Python around this (shoal/ode/_events.py).
//
// A trajectory whose forward solve fails has NaN cotangents: never a silently partial gradient;
// so does one where two stops' jumps came without a step between them (whose intermediate state
// the recording does not see).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "shoal/config.hpp"
#include "shoal/ode/ensemble.hpp"
#include "shoal/ode/integrate.hpp"

namespace shoal {
namespace ode {

// Whether any of x[0 … count) is nonzero (a stage's cotangent: a zero one is skipped).
template <class T>
bool any_nonzero(const T* x, int count) {
  for (int i = 0; i < count; ++i) {
    if (x[i] != T(0)) return true;
  }
  return false;
}

// The products of the model's vector-Jacobian functions. Each writes its ∂/∂y part and adds
// its ∂/∂p part to what `out` holds behind it (shoal/ode/_codegen/vjp.py): there p̄ accumulates
// over the whole backward sweep, and a product touching a few entries of a large table costs a
// few operations, not a pass over the table.
template <class Model, class T>
struct ModelVjps {
  static constexpr int n = Model::n_vars;
  static constexpr int n_params = Model::n_params;
  static constexpr int n_out = n_saved<Model>();
  static constexpr int widest = 2 * n + 1 > n_out ? 2 * n + 1 : n_out;  // what follows p in q

  // [p, then a function's cotangent (and direction)] and [ȳ, p̄]: on the heap, since p may be
  // a table of thousands of entries.
  std::vector<T> q = std::vector<T>(n_params + widest), out = std::vector<T>(n + n_params);
  // Where p̄ is kept elsewhere during a sweep (the lanes' copy: adjoint_backward_lanes.hpp),
  // called before a jump's or a save's product adds to out's p̄, which must then hold it.
  void (*before_param_product)(void* context) = nullptr;
  void* param_product_context = nullptr;

  void begin(const T* p) {
    for (int i = 0; i < n_params; ++i) {
      q[i] = p[i];
      out[n + i] = T(0);
    }
  }
  // p̄: the sum of every product's ∂/∂p part since begin().
  void finish(T* p_bar) const {
    for (int i = 0; i < n_params; ++i) p_bar[i] = out[n + i];
  }
  // y_bar = f_yᵀ w at (y, t); p̄ += f_pᵀ w. y_bar may alias w.
  void rhs(const T* y, T t, const T* w, T* y_bar) {
    for (int i = 0; i < n; ++i) q[n_params + i] = w[i];
    Model::template vjp<T>(y, t, q.data(), out.data());
    collect(y_bar);
  }
  // y_bar = ∂/∂y [wᵀ (f_y v + f_t τ)] at (y, t); p̄ += ∂/∂p of the same.
  void rhs_second_order(const T* y, T t, const T* v, T tau, const T* w, T* y_bar) {
    if constexpr (has_jvp_vjp()) {
      for (int i = 0; i < n; ++i) {
        q[n_params + i] = v[i];
        q[n_params + n + 1 + i] = w[i];
      }
      q[n_params + n] = tau;
      Model::template jvp_vjp<T>(y, t, q.data(), out.data());
      collect(y_bar);
    }
  }
  void jump(const T* y, T t, const T* w, T* y_bar) {
    if constexpr (has_jump<Model>()) {
      for (int i = 0; i < n; ++i) q[n_params + i] = w[i];
      if (before_param_product != nullptr) before_param_product(param_product_context);
      Model::template jump_vjp<T>(y, t, q.data(), out.data());
      collect(y_bar);
    }
  }
  // A save of the state y at ts with cotangent w (n_out numbers): its cotangent added to acc.
  void save(const T* y, T ts, const T* w, T* acc) {
    if constexpr (has_save<Model>()) {
      for (int i = 0; i < n_out; ++i) q[n_params + i] = w[i];
      if (before_param_product != nullptr) before_param_product(param_product_context);
      Model::template save_vjp<T>(y, ts, q.data(), out.data());
      for (int i = 0; i < n; ++i) acc[i] += out[i];
    } else {
      (void)y;
      (void)ts;
      for (int i = 0; i < n; ++i) acc[i] += w[i];
    }
  }

 private:
  template <class M = Model>
  static constexpr auto jvp_vjp_of(int) -> decltype(&M::template jvp_vjp<T>, true) {
    return true;
  }
  static constexpr bool jvp_vjp_of(long) { return false; }
  static constexpr bool has_jvp_vjp() { return jvp_vjp_of(0); }

  void collect(T* y_bar) const {
    for (int i = 0; i < n; ++i) y_bar[i] = out[i];
  }
};

// One trajectory's adjoint: Stepper the method, StepAdjoint<Stepper, Model, T> its step's
// transpose, which offers
//   recorded, record(stepper, out)   what it keeps of an accepted step (`recorded` numbers,
//                                0: nothing), written by record() right after the step
//   prepare(y, t, h, p, dense, stages)   the step from (t, y) of size h evaluated again (with
//                                its dense output's extra work if `dense`), from its record
//                                `stages` where one was kept (else nullptr)
//   end_state(out), dense_state(θ, out)   the states its saves recorded
//   clear(); add_end(λ); add_save(θ, w)   cotangents of its end state and of saves inside it
//   transpose(vjps, y_bar)       the cotangent of its start (p̄ through vjps)
// What a worker thread keeps of explicit steps' stages for the backward sweep.
constexpr size_t kStageBudgetBytes = size_t(16) << 20;

// StageBudgetBytes bounds the step records kept per trajectory (the first steps' until it is
// reached; the later steps are evaluated again).
template <template <class, class> class Stepper,
          template <template <class, class> class, class, class> class StepAdjoint, class Model,
          class T, size_t StageBudgetBytes = kStageBudgetBytes>
struct Adjoint {
  using Step = StepAdjoint<Stepper, Model, T>;
  using SolvedModel = Model;
  static constexpr int n = Model::n_vars;
  static constexpr int n_out = n_saved<Model>();
  static constexpr size_t stage_limit = StageBudgetBytes / sizeof(T);
  // A record: an accepted step (its start t, size h and end) or a stop's jump (the stop, 0, 0).
  static constexpr int stride = 3;

  std::vector<T> records;  // stride numbers each, in the order they happened
  // Checkpoints: the state at records 0, spacing, 2·spacing, … (a step's start state, a jump's
  // state before it), n numbers each; at most state_limit numbers of them once there are two.
  std::vector<T> states;
  int64_t spacing = 1;
  size_t state_limit = 0;
  bool opt_terminal = true;  // whether the model's event ends the trajectory
  std::vector<unsigned char> is_jump;  // one per record
  std::vector<T> stage_records;  // Step::recorded numbers for each of the first accepted steps
  // What the backward sweep reads: the vectors above, or a row's numbers where they lie
  // (load_recording), which must then outlive the sweep.
  struct Recorded {
    const T* records = nullptr;
    const T* states = nullptr;
    const T* stages = nullptr;
    const unsigned char* is_jump = nullptr;
    size_t n_stage_numbers = 0, n_jumps = 0;
    int64_t spacing = 1;
  } recorded;
  bool in_row = false;  // whether `recorded` is a row's
  ModelVjps<Model, T> vjps;
  Step step;
  T lambda[n];
  // The recording's state between hooks: the state before the attempt in flight (or the jump),
  // that attempt's start, size and end, where its stages went, and the jumps seen.
  T before[n];
  T pending_t = T(0), pending_h = T(0), pending_end = T(0);
  size_t stage_at = 0;
  int32_t accepted_before = 0;
  uint32_t rewrites = 0;
  bool seen = true, recording = false;

  // Step 1: the forward solve, recording its accepted steps and jumps. false (the gradient is
  // NaN) where two stops' jumps came with no step between them, whose states it did not see.
  bool forward(const Trajectory<T>& tr, const IntegrateOptions<T>& opt, IntegrateStats* stats,
               Status* status) {
    Stepper<Model, T> stepper;
    Integration<Stepper, Model, T> run(tr, opt, stats);
    run.begin(stepper);
    begin_recording(run, opt);
    T y_new[n], err[n];
    for (;;) {
      const bool more = run.next_attempt(stepper);
      after_next_attempt(run);
      if (!more) break;
      stepper.step(run.y, run.t, run.h, tr.p, y_new, err);
      before_completion(run, [&](T* out) { Step::record(stepper, out); });
      run.complete_attempt(stepper, y_new, err);
      after_completion(run);
    }
    *status = run.finish();
    return seen;
  }

  // The recording, driven by a solve loop: forward() above, or the SIMD lanes' one
  // (lanes_ensemble.hpp, adjoint_lanes.hpp), whose lanes record one trajectory each. Run is the
  // trajectory's Integration (scalar, as the lanes keep one per lane).
  template <class Run>
  void begin_recording(const Run& run, const IntegrateOptions<T>& opt) {
    records.clear();
    states.clear();
    spacing = 1;
    state_limit = static_cast<size_t>(opt.adjoint_memory) / sizeof(T);
    is_jump.clear();
    stage_records.clear();
    in_row = false;
    recording = Step::recorded > 0;
    opt_terminal = opt.event_terminal;
    for (int i = 0; i < n; ++i) before[i] = run.y[i];
    rewrites = run.y_rewrites;
    seen = true;
  }
  // After each next_attempt: it set y where it arrived at a stop (and jumped, restarting one
  // float right of it).
  template <class Run>
  void after_next_attempt(const Run& run) {
    if (has_jump<Model>() && run.y_rewrites != rewrites) {
      seen = seen && run.y_rewrites == rewrites + 1;
      rewrites = run.y_rewrites;
      push(true, math::next_after(run.t, T(-1) / T(0)), T(0), T(0), before);
    }
  }
  // Before complete_attempt (which may move the stepper's stages: FSAL): the attempt's start
  // and its stages, record_stages(out) writing Step::recorded numbers; kept if it is accepted.
  template <class Run, class RecordStages>
  void before_completion(const Run& run, RecordStages&& record_stages) {
    accepted_before = run.stats->accepted;
    pending_t = run.t;
    pending_h = run.h;
    pending_end = run.attempt_end();
    for (int i = 0; i < n; ++i) before[i] = run.y[i];
    stage_at = stage_records.size();
    recording = recording && stage_at + Step::recorded <= stage_limit;
    if (recording) {
      stage_records.resize(stage_at + Step::recorded);
      record_stages(stage_records.data() + stage_at);
    }
  }
  // Accepted: counted as such (a step ending at a terminal event too, which moves no stages).
  template <class Run>
  void after_completion(const Run& run) {
    if (run.stats->accepted != accepted_before) {
      push(false, pending_t, pending_h, pending_end, before);
      for (int i = 0; i < n; ++i) before[i] = run.y[i];
    } else if (recording) {
      stage_records.resize(stage_at);
    }
  }
  bool all_seen() const { return seen; }

  // The recording as one row of bytes, so that it can travel from the value's solve to the
  // backward sweep in a buffer instead of being made again by a second forward solve
  // (record_range): a header, then the records, the stage records and the jump flags.
  // save_recording writes it where it fits in `capacity` bytes (else only a header marking the
  // row incomplete) and says whether it did; load_recording takes back a complete row and says
  // whether there was one. The backward sweep of a loaded recording is the original's, bit for
  // bit (tests/cpp/test_recording_row.cc).
  struct RowHeader {
    uint64_t magic;     // kRowMagic for a complete row
    uint64_t identity;  // of the trajectory recorded (recording_identity)
    uint64_t n_records, n_states, n_stage_numbers, n_jumps;
    int64_t spacing;    // of its checkpoints
    int32_t status;     // of its forward solve
    uint32_t flags;     // 1: the event is terminal, 2: every jump was seen
    double event_time;  // where its event was found (NaN: not found, or no event)
  };
  static constexpr uint64_t kRowMagic = 0x73686f616c726563ull;  // "shoalrec"

  static size_t row_bytes(size_t n_records, size_t n_states, size_t n_stage_numbers,
                          size_t n_jumps) {
    return sizeof(RowHeader) + (n_records + n_states + n_stage_numbers) * sizeof(T) + n_jumps;
  }
  // The bytes of a row holding this recording.
  size_t recording_bytes() const {
    return row_bytes(records.size(), states.size(), stage_records.size(), is_jump.size());
  }
  // The event's time (for the sweep: begin_backward) travels with it where the solve wrote one.
  bool save_recording(unsigned char* row, size_t capacity, Status status, uint64_t identity,
                      const T* event_time = nullptr) const {
    RowHeader h{0,
                identity,
                records.size(),
                states.size(),
                stage_records.size(),
                is_jump.size(),
                spacing,
                static_cast<int32_t>(status),
                (opt_terminal ? 1u : 0u) | (seen ? 2u : 0u),
                event_time != nullptr ? double(*event_time) : __builtin_nan("")};
    if (capacity < sizeof(RowHeader)) return false;
    const bool fits = recording_bytes() <= capacity;
    if (fits) {
      unsigned char* at = row + sizeof(RowHeader);
      at = copy_out(records.data(), h.n_records * sizeof(T), at);
      at = copy_out(states.data(), h.n_states * sizeof(T), at);
      at = copy_out(stage_records.data(), h.n_stage_numbers * sizeof(T), at);
      copy_out(is_jump.data(), h.n_jumps, at);
      h.magic = kRowMagic;
    }
    __builtin_memcpy(row, &h, sizeof h);
    return fits;
  }
  bool load_recording(const unsigned char* row, size_t capacity, uint64_t identity,
                      Status* status, T* event_time = nullptr) {
    if (capacity < sizeof(RowHeader)) return false;
    RowHeader h;
    __builtin_memcpy(&h, row, sizeof h);
    if (h.magic != kRowMagic || h.identity != identity || h.spacing < 1 ||
        row_bytes(h.n_records, h.n_states, h.n_stage_numbers, h.n_jumps) > capacity ||
        h.n_records != stride * h.n_jumps ||
        h.n_states != n * ((h.n_jumps + h.spacing - 1) / h.spacing)) {
      return false;
    }
    // Read where they lie when aligned (a row of a size that is a multiple of 64 bytes, as the
    // host gives), else copied.
    const unsigned char* at = row + sizeof(RowHeader);
    const unsigned char* checkpoints = at + h.n_records * sizeof(T);
    const unsigned char* stages = checkpoints + h.n_states * sizeof(T);
    const unsigned char* jumps = stages + h.n_stage_numbers * sizeof(T);
    in_row = reinterpret_cast<uintptr_t>(at) % alignof(T) == 0;  // so are the others
    if (in_row) {
      recorded = {reinterpret_cast<const T*>(at), reinterpret_cast<const T*>(checkpoints),
                  reinterpret_cast<const T*>(stages), jumps, h.n_stage_numbers, h.n_jumps,
                  h.spacing};
    } else {
      copy_in(at, h.n_records, records);
      copy_in(checkpoints, h.n_states, states);
      copy_in(stages, h.n_stage_numbers, stage_records);
      copy_in(jumps, h.n_jumps, is_jump);
      spacing = h.spacing;
    }
    opt_terminal = (h.flags & 1u) != 0;
    seen = (h.flags & 2u) != 0;
    *status = static_cast<Status>(h.status);
    if (event_time != nullptr) *event_time = static_cast<T>(h.event_time);
    return true;
  }

  // Steps 2 and 3: ȳ0 (n) and p̄ (n_params) from the saves' cotangents ys_bar (n_save, n_saved)
  // and, for a model with an event, event_bar (n): that of the state at the event's time held
  // fixed (the time's own part is the implicit-function rule's, in Python: _events.py).
  void backward(const Trajectory<T>& tr, const T* ys_bar, const T* event_bar, T* y0_bar,
                T* p_bar) {
    begin_backward(tr, ys_bar, event_bar);
    while (next_transpose()) step.transpose(vjps, lambda);
    end_backward(y0_bar);
    vjps.finish(p_bar);
  }

  // The same sweep as a loop its caller drives (adjoint_backward_lanes.hpp runs several
  // trajectories' steps together): begin_backward, then while next_transpose() (or next_step,
  // prepare, prepared: a step's bookkeeping up to its transpose) the caller transposes `step`
  // into `lambda`, then end_backward (ȳ0; p̄ is what the vjps accumulated).
  void begin_backward(const Trajectory<T>& tr, const T* ys_bar, const T* event_bar) {
    if (!in_row) {
      recorded = {records.data(), states.data(), stage_records.data(), is_jump.data(),
                  stage_records.size(), is_jump.size(), spacing};
    }
    window_first = -1;
    sweep.tr = tr;
    sweep.ys_bar = ys_bar;
    sweep.event_bar = event_bar;
    vjps.begin(tr.p);
    for (int i = 0; i < n; ++i) lambda[i] = T(0);
    sweep.j = tr.n_save - 1;
    // The event, if one was found: its time, and its state's cotangent still to be placed.
    sweep.t_event = T(1) / T(0);
    if constexpr (has_event<Model>()) {
      if (math::is_finite(tr.event_time[0])) sweep.t_event = tr.event_time[0];
      // Saves after a terminal event were never reached (NaN): their tangents are 0, as the
      // forward sensitivities have them.
      if (opt_terminal) {
        while (sweep.j >= 1 && tr.t_span[sweep.j] > sweep.t_event) --sweep.j;
      }
    }
    sweep.event_pending = sweep.t_event < T(1) / T(0);
    sweep.step_number = 0;  // of the record r among the accepted steps
    for (size_t r = 0; r < recorded.n_jumps; ++r) sweep.step_number += recorded.is_jump[r] ? 0 : 1;
    sweep.with_stages = Step::recorded > 0
                            ? static_cast<int64_t>(recorded.n_stage_numbers) / Step::recorded
                            : 0;
    sweep.r = static_cast<int64_t>(recorded.n_jumps);
  }

  // An accepted step to evaluate again: its start state, time and size, whether its dense output
  // is needed, its recorded stages (or nullptr), and whether it serves saves (whose states
  // prepared() forms from its stages: else only its stage points are read, by its transpose).
  struct StepToPrepare {
    const T* y;
    T t, h;
    bool dense;
    const T* stages;
    bool serves_saves;
  };

  // The records down to the next accepted step (jumps transposed on the way): the step to
  // evaluate again, which the caller prepares (step.prepare, or several trajectories' steps at
  // once: adjoint_backward_lanes.hpp) before prepared(); false when none is left.
  bool next_step(StepToPrepare* out) {
    const Trajectory<T>& tr = sweep.tr;
    int& j = sweep.j;
    while (sweep.r > 0) {
      const int64_t r = --sweep.r;
      const T* rec = recorded.records + r * stride;
      const T t = rec[0], h = rec[1], end = rec[2];
      const T* y = state_of(r);
      if (recorded.is_jump[r]) {
        // Saves after the stop recorded the jumped state; those at it, the state before.
        if (j >= 1 && tr.t_span[j] > t) {
          T y_after[n];
          if constexpr (has_jump<Model>()) Model::template jump<T>(y, t, tr.p, y_after);
          for (; j >= 1 && tr.t_span[j] > t; --j) vjps.save(y_after, tr.t_span[j], save_bar(j), lambda);
        }
        vjps.jump(y, t, lambda, lambda);
        continue;
      }
      // The saves this step served: its end state's (at or after its end), then those inside.
      int inside = j;
      while (inside >= 1 && tr.t_span[inside] >= end) --inside;
      int before = inside;
      while (before >= 1 && tr.t_span[before] > t) --before;
      // The event's state: the end state, or the continuous extension inside this step.
      const bool event_here = sweep.event_pending && sweep.t_event > t;
      const bool event_inside = event_here && sweep.t_event < end;
      const int64_t number = --sweep.step_number;
      sweep.at = {t, h, inside, before, event_here, event_inside};
      *out = {y, t, h, inside > before || event_inside,
              number < sweep.with_stages ? recorded.stages + number * Step::recorded : nullptr,
              j > before};
      return true;
    }
    return false;
  }

  // After the step next_step() gave is prepared: the cotangents of its end state and of the
  // saves and the event inside it, ready for its transpose.
  void prepared() {
    const Trajectory<T>& tr = sweep.tr;
    int& j = sweep.j;
    const auto& at = sweep.at;
    if (j > at.inside) {
      T y_end[n];
      step.end_state(y_end);
      for (; j > at.inside; --j) vjps.save(y_end, tr.t_span[j], save_bar(j), lambda);
    }
    if (at.event_here && !at.event_inside) {
      for (int i = 0; i < n; ++i) lambda[i] += sweep.event_bar[i];
    }
    step.clear();
    step.add_end(lambda);
    if (at.event_inside) step.add_save((sweep.t_event - at.t) / at.h, sweep.event_bar);
    if (at.event_here) sweep.event_pending = false;
    for (; j > at.before; --j) {
      const T theta = (tr.t_span[j] - at.t) / at.h;
      T w[n];
      if constexpr (has_save<Model>()) {
        T y_save[n];
        step.dense_state(theta, y_save);
        for (int i = 0; i < n; ++i) w[i] = T(0);
        vjps.save(y_save, tr.t_span[j], save_bar(j), w);
      } else {
        for (int i = 0; i < n; ++i) w[i] = save_bar(j)[i];
      }
      step.add_save(theta, w);
    }
  }

  // next_step, the step prepared here, then prepared(): the next step ready for its transpose.
  bool next_transpose() {
    StepToPrepare next;
    if (!next_step(&next)) return false;
    step.prepare(next.y, next.t, next.h, sweep.tr.p, next.dense, next.stages);
    prepared();
    return true;
  }

  // The parameters of the trajectory being swept.
  const T* sweep_params() const { return sweep.tr.p; }

  // ȳ0: λ at the start, with the cotangents of the saves there.
  void end_backward(T* y0_bar) {
    for (int& j = sweep.j; j >= 0; --j) vjps.save(sweep.tr.y0, sweep.tr.t_span[j], save_bar(j), lambda);
    for (int i = 0; i < n; ++i) y0_bar[i] = lambda[i];
  }

 private:
  static unsigned char* copy_out(const void* from, size_t bytes, unsigned char* to) {
    if (bytes > 0) __builtin_memcpy(to, from, bytes);
    return to + bytes;
  }
  template <class U>
  static void copy_in(const unsigned char* from, size_t count, std::vector<U>& to) {
    to.resize(count);
    if (count > 0) __builtin_memcpy(to.data(), from, count * sizeof(U));
  }

  // Where the backward sweep is (begin_backward … end_backward).
  struct Sweep {
    Trajectory<T> tr;
    const T* ys_bar = nullptr;
    const T* event_bar = nullptr;
    int j = 0;  // the last save not yet transposed
    int64_t r = 0;  // records left (the next is r − 1)
    int64_t step_number = 0, with_stages = 0;
    T t_event = T(0);
    bool event_pending = false;
    // The step next_step() gave: its start and size, and the saves and event it serves.
    struct {
      T t, h;
      int inside, before;
      bool event_here, event_inside;
    } at;
  } sweep;

  const T* save_bar(int save) const {
    return sweep.ys_bar + static_cast<int64_t>(save) * n_out;
  }

  void push(bool jump, T t, T h, T end, const T* y) {
    const int64_t r = static_cast<int64_t>(is_jump.size());
    const size_t at = records.size();
    records.resize(at + stride);
    records[at] = t;
    records[at + 1] = h;
    records[at + 2] = end;
    is_jump.push_back(jump ? 1 : 0);
    if (r % spacing != 0) return;
    if (states.size() + n > state_limit && states.size() >= 2 * size_t(n)) {
      thin();
      if (r % spacing != 0) return;
    }
    states.insert(states.end(), y, y + n);
  }
  // Every other checkpoint dropped (the first kept): spacing doubles.
  void thin() {
    const size_t kept = (states.size() / n + 1) / 2;
    for (size_t c = 1; c < kept; ++c) {
      for (int i = 0; i < n; ++i) states[c * n + i] = states[2 * c * n + i];
    }
    states.resize(kept * n);
    spacing *= 2;
  }

  // The states of the records in the window being swept: from its checkpoint, by replay().
  std::vector<T> window;
  int64_t window_first = -1;  // its first record (-1: none)

  // Record r's state: its checkpoint, or (replayed once per window) its window's.
  const T* state_of(int64_t r) {
    const int64_t s = recorded.spacing;
    const int64_t first = r - r % s;
    if (r == first) return recorded.states + (first / s) * n;
    if (window_first != first) {
      const int64_t last = first + s <= static_cast<int64_t>(recorded.n_jumps)
                               ? first + s - 1 : static_cast<int64_t>(recorded.n_jumps) - 1;
      replay(first, last);
    }
    return window.data() + (r - first) * n;
  }

  // The states of records (first, last] into the window, from record first's checkpoint: each
  // step taken again with its recorded t and h by the method itself, each jump applied, so the
  // states are the recorded solve's bit for bit. What a step carries to the next (a FSAL
  // tableau's last stage, f at the new state and t + h) is what init() at the next step's start
  // computes, since a step that does not land on a stop or the end ends at t + h; the recorded
  // solve restarted its stepper (init) at the start and after every stop.
  void replay(int64_t first, int64_t last) {
    window.resize(static_cast<size_t>(last - first + 1) * n);
    const T* p = sweep.tr.p;
    const T* checkpoint = recorded.states + (first / recorded.spacing) * n;
    for (int i = 0; i < n; ++i) window[i] = checkpoint[i];
    Stepper<Model, T> stepper;
    T err[n];
    for (int64_t q = first; q < last; ++q) {
      const T* rec = recorded.records + q * stride;
      const T* y = window.data() + (q - first) * n;
      T* next = window.data() + (q + 1 - first) * n;
      if (recorded.is_jump[q]) {
        if constexpr (has_jump<Model>()) Model::template jump<T>(y, rec[0], p, next);
        continue;
      }
      // A fresh start after a stop (just right of it, past the step's end) or a jump.
      if (q == first || recorded.is_jump[q - 1] || rec[0] != rec[2 - stride]) {
        stepper.init(y, rec[0], p);
      }
      stepper.step(y, rec[0], rec[1], p, next, err);
      stepper.accept();
    }
    window_first = first;
  }
};

// Whether a trajectory's forward solve ended so that its backward sweep may run.
template <class A>
bool differentiable(Status status, const A& adjoint) {
  return (status == kSuccess || status == kEvent) && adjoint.all_seen();
}

// Trajectory m's cotangents of its saves (n_save, n_saved), then of its event state (n; event
// models), in `a`.
template <class Model, class T>
const T* saves_cotangent(const ShoalEnsembleArgs& a, int64_t m) {
  const int64_t width =
      a.n_save * n_saved<Model>() + (has_event<Model>() ? Model::n_vars : 0);
  return static_cast<const T*>(a.ys_bar) + m * width;
}

// Trajectory m's cotangents y0_bar (n) and p_bar (n_params) into `a`, after adjoint's forward
// solve ended with `status`: its backward sweep, or NaN where the solve failed.
template <class A, class T>
void write_cotangents(const ShoalEnsembleArgs& a, int64_t m, const Trajectory<T>& tr,
                      Status status, A& adjoint) {
  using Model = typename A::SolvedModel;
  constexpr int n = Model::n_vars;
  constexpr int n_params = Model::n_params;
  T* y0_bar = static_cast<T*>(a.y0_bar) + m * n;
  T* p_bar = static_cast<T*>(a.p_bar) + m * n_params;
  if (differentiable(status, adjoint)) {
    const T* ys_bar = saves_cotangent<Model, T>(a, m);
    adjoint.backward(tr, ys_bar, ys_bar + a.n_save * n_saved<Model>(), y0_bar, p_bar);
  } else {
    const T nan = T(0) / T(0);
    for (int i = 0; i < n; ++i) y0_bar[i] = nan;
    for (int i = 0; i < n_params; ++i) p_bar[i] = nan;
  }
}

// The recordings of an ensemble's trajectories as rows of bytes (trajectory m's at bytes + m *
// row_bytes), so that the value's solve (record_range) hands them to the backward sweeps
// (adjoint_range) and the gradient solves forward once: `a.recording`, or none (null).
struct RecordingRows {
  unsigned char* bytes;
  int64_t row_bytes;
  static RecordingRows of(const ShoalEnsembleArgs& a) {
    return {static_cast<unsigned char*>(a.recording), a.recording_row_bytes};
  }
  unsigned char* row(int64_t m) const { return bytes + m * row_bytes; }
  size_t capacity() const { return static_cast<size_t>(row_bytes); }
};

// What a row's recording must have been made from, so that a row never serves another
// trajectory: a hash of the bits of trajectory m's y0, own parameters, row of shared ones, save
// times and stops. The rows that groups of trajectories share are hashed once per row a worker
// meets, not per trajectory: a neural network's thousands of shared weights would otherwise cost
// more to hash than its trajectory to solve. One per worker and call (the buffers do not change
// during a call).
template <class Model, class T>
class RecordingIdentity {
 public:
  uint64_t operator()(const ShoalEnsembleArgs& a, int64_t m, const Trajectory<T>& tr) {
    constexpr int n_shared = n_shared_params<Model>();
    uint64_t h = words(tr.y0, Model::n_vars, kBasis);
    h = words(own_params_of<Model, T>(a, m), Model::n_params - n_shared, h);
    if constexpr (n_shared > 0) {
      h = mix(h, shared_.of(shared_params_row<Model, T>(a, shared_row_of(a, m)), n_shared));
    }
    h = mix(h, t_span_.of(tr.t_span, tr.n_save));
    return mix(h, tstops_.of(tr.tstops, tr.n_tstops));
  }

 private:
  static constexpr uint64_t kBasis = 14695981039346656037ull, kPrime = 1099511628211ull;
  // FNV-1a over whole words (each number's bits) rather than bytes.
  static uint64_t words(const T* x, int64_t count, uint64_t h) {
    using Bits = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;
    for (int64_t i = 0; i < count; ++i) {
      Bits bits;
      __builtin_memcpy(&bits, x + i, sizeof bits);
      h = (h ^ bits) * kPrime;
    }
    return h;
  }
  static uint64_t mix(uint64_t h, uint64_t part) { return (h ^ part) * kPrime; }
  // The hash of the row last met at `at`.
  struct Cached {
    const T* at = nullptr;
    int64_t count = -1;
    uint64_t hash = 0;
    uint64_t of(const T* row, int64_t n) {
      if (row != at || n != count) {
        at = row;
        count = n;
        hash = words(row, n, kBasis);
      }
      return hash;
    }
  };
  Cached shared_, t_span_, tstops_;
};

// Where trajectory tr's event time is written, or null (a model without an event).
template <class Model, class T>
T* event_time_of(const Trajectory<T>& tr) {
  if constexpr (has_event<Model>()) {
    return tr.event_time;
  } else {
    return nullptr;
  }
}

// Trajectory m's recording loaded into `adjoint` from its row of `a.recording`, with the status
// of its forward solve; false where there is none, the row is incomplete (it did not fit) or
// another trajectory's. A trajectory loaded has no saves, event state or step counts written:
// only its status and its event's time (and its cotangents, by the caller).
template <class Model, class A, class T>
bool load_row(const ShoalEnsembleArgs& a, int64_t m, const Trajectory<T>& tr, A& adjoint,
              RecordingIdentity<Model, T>& identity, Status* status) {
  const RecordingRows rows = RecordingRows::of(a);
  if (rows.bytes == nullptr ||
      !adjoint.load_recording(rows.row(m), rows.capacity(), identity(a, m, tr), status,
                              event_time_of<Model>(tr))) {
    return false;
  }
  a.status[m] = *status;
  a.accepted[m] = 0;
  a.rejected[m] = 0;
  return true;
}

// Trajectories [begin, end) of `a` and those claimed from its work queue: each one's recording,
// by its forward solve (ys, statistics, status as a plain solve writes them) or, unless
// `record`, from its row of `a.recording` where that holds it (load_row); then its backward
// sweep (its cotangents) or, with `record`, its row.
template <template <class, class> class Stepper,
          template <template <class, class> class, class, class> class StepAdjoint, class Model,
          class T>
void adjoint_or_record_range(const ShoalEnsembleArgs& a, int64_t begin, int64_t end,
                             bool record) {
  constexpr int n_params = Model::n_params;
  const auto opt = IntegrateOptions<T>::from(a.options);
  const RecordingRows rows = RecordingRows::of(a);
  Adjoint<Stepper, StepAdjoint, Model, T> adjoint;
  RecordingIdentity<Model, T> identity;
  do {
    for (int64_t m = begin; m < end; ++m) {
      T p[n_params > 0 ? n_params : 1];
      Trajectory<T> tr = trajectory_of<Model, T>(a, m);
      tr.p = params_of<Model>(a, m, p);
      Status status;
      if (record || !load_row<Model>(a, m, tr, adjoint, identity, &status)) {
        IntegrateStats stats;
        adjoint.forward(tr, opt, &stats, &status);
        a.status[m] = status;
        a.accepted[m] = stats.accepted;
        a.rejected[m] = stats.rejected;
      }
      if (record) {
        adjoint.save_recording(rows.row(m), rows.capacity(), status, identity(a, m, tr),
                               event_time_of<Model>(tr));
      } else {
        write_cotangents(a, m, tr, status, adjoint);
      }
    }
    count_done(a, end - begin);
  } while (claim(a, &begin, &end));
}

// The cotangents y0_bar (n_traj, n) and p_bar (n_traj, n_params) of `a` from ys_bar (n_traj,
// n_save, n_saved): each trajectory's backward sweep from the value's recording where its row
// of a.recording holds it, else after solving it forward again.
template <template <class, class> class Stepper,
          template <template <class, class> class, class, class> class StepAdjoint, class Model,
          class T>
void adjoint_range(const ShoalEnsembleArgs& a, int64_t begin, int64_t end) {
  adjoint_or_record_range<Stepper, StepAdjoint, Model, T>(a, begin, end, false);
}

// The value's solve of a gradient by the adjoint: the plain solve's outputs, and each
// trajectory's recording saved to its row of a.recording (marked incomplete where it does not
// fit) for adjoint_range to sweep back from.
template <template <class, class> class Stepper,
          template <template <class, class> class, class, class> class StepAdjoint, class Model,
          class T>
void record_range(const ShoalEnsembleArgs& a, int64_t begin, int64_t end) {
  adjoint_or_record_range<Stepper, StepAdjoint, Model, T>(a, begin, end, true);
}

}  // namespace ode
}  // namespace shoal
