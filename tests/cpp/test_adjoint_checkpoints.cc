// The adjoint's checkpoints (adjoint.hpp): a recording whose states would exceed the options'
// adjoint_memory keeps them every `spacing`-th record only, and the backward sweep takes the
// steps between again. The replayed states are the recorded solve's bit for bit, so the
// cotangents are the full recording's exactly, whatever the budget: with a FSAL method on a
// non-autonomous model (the carried stage's time matters), across stops with and without a jump
// (where the recorded solve restarted its stepper), and through a row of bytes.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "forced_adjoint_model.hpp"
#include "shoal/ode/adjoint.hpp"
#include "shoal/ode/explicit_rk_adjoint.hpp"
#include "shoal/ode/tsit5.hpp"
#include "shoal/ode/vern7.hpp"

namespace {

using shoal::ode::IntegrateStats;
using shoal::ode::Trajectory;

using forced_adjoint::Forced;
using forced_adjoint::kC;
using forced_adjoint::kSaves;

// Forced with an input switched on at the second stop: a step's stages there see it or not by
// their time alone, so a stepper not restarted where the recorded solve restarted it (just right
// of the stop) is caught.
struct Switched : Forced {
  template <class T>
  static void rhs(const T* y, const T& t, const T* p, T* out) {
    Forced::rhs(y, t, p, out);
    if (t > T(1.25)) out[1] += T(1);
  }
};

// Switched with a jump at each stop: y ↦ (y0 + p1, 0.5 y1), and its product.
struct Dosed : Switched {
  static constexpr bool has_jump = true;
  template <class T>
  static void jump(const T* y, const T&, const T* p, T* out) {
    out[0] = y[0] + p[1];
    out[1] = T(0.5) * y[1];
  }
  template <class T>
  static void jump_vjp(const T*, const T&, const T* q, T* out) {
    out[0] = q[2];
    out[1] = T(0.5) * q[3];
    out[3] += q[2];
  }
};

const double kStops[] = {0.4, 1.25, 2.2};

// The recording of one trajectory and its cotangents (ȳ0, p̄).
template <template <class, class> class Stepper, class Model>
struct Recording {
  using A = shoal::ode::Adjoint<Stepper, shoal::ode::ExplicitStepAdjoint, Model, double, 0>;
  A a;
  double out[kSaves * 2];

  Trajectory<double> trajectory(bool stops) {
    Trajectory<double> tr =
        forced_adjoint::trajectory(forced_adjoint::kY0, forced_adjoint::kP, out);
    if (stops) {
      tr.tstops = kStops;
      tr.n_tstops = 3;
    }
    return tr;
  }
  // No stage records (budget 0): every step is evaluated again from its state.
  void record(int64_t adjoint_memory, bool stops) {
    auto o = forced_adjoint::options();
    o.controller.rtol = 1e-11;
    o.controller.atol = 1e-13;
    o.adjoint_memory = adjoint_memory;
    IntegrateStats stats;
    shoal::ode::Status status;
    ASSERT_TRUE(a.forward(trajectory(stops), o, &stats, &status));
    ASSERT_EQ(status, shoal::ode::kSuccess);
  }
  std::vector<double> cotangents(bool stops) {
    std::vector<double> bar(4);
    a.backward(trajectory(stops), kC, nullptr, bar.data(), bar.data() + 2);
    return bar;
  }
};

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

// Budgets from two states' worth (the least kept) to one that holds every state.
template <template <class, class> class Stepper, class Model>
void thinned_sweeps_match(bool stops) {
  Recording<Stepper, Model> full;
  full.record(int64_t(1) << 30, stops);
  ASSERT_EQ(full.a.spacing, 1);
  const size_t records = full.a.is_jump.size();
  ASSERT_GT(records, 40u);
  ASSERT_EQ(full.a.states.size(), 2 * records);
  const std::vector<double> want = full.cotangents(stops);
  for (int64_t kept : {1, 2, 3, 5, 16}) {
    Recording<Stepper, Model> thin;
    thin.record(kept * 2 * int64_t(sizeof(double)), stops);
    EXPECT_GT(thin.a.spacing, 1) << kept;
    // At most the budget's states (two at the least), every spacing-th record's.
    const size_t checkpoints = (records + thin.a.spacing - 1) / thin.a.spacing;
    EXPECT_EQ(thin.a.states.size(), 2 * checkpoints) << kept;
    EXPECT_LE(checkpoints, size_t(kept < 2 ? 2 : kept)) << kept;
    for (size_t c = 0; c < checkpoints; ++c) {
      EXPECT_EQ(std::memcmp(&thin.a.states[2 * c], &full.a.states[2 * c * thin.a.spacing],
                            2 * sizeof(double)),
                0);
    }
    EXPECT_EQ(thin.a.records, full.a.records);
    EXPECT_TRUE(same_bits(thin.cotangents(stops), want)) << "kept " << kept;
  }
}

TEST(AdjointCheckpoints, Tsit5ReplaysTheRecordedStates) {
  thinned_sweeps_match<shoal::ode::Tsit5, Forced>(false);
}

TEST(AdjointCheckpoints, AcrossStopsWhereTheStepperRestarted) {
  thinned_sweeps_match<shoal::ode::Tsit5, Switched>(true);
}

TEST(AdjointCheckpoints, AcrossJumps) { thinned_sweeps_match<shoal::ode::Tsit5, Dosed>(true); }

TEST(AdjointCheckpoints, ANonFsalMethod) { thinned_sweeps_match<shoal::ode::Vern7, Dosed>(true); }

// A thinned recording through a row of bytes: the same cotangents, in place and copied.
TEST(AdjointCheckpoints, ThroughARow) {
  Recording<shoal::ode::Tsit5, Dosed> thin;
  thin.record(6 * 2 * sizeof(double), true);
  ASSERT_GT(thin.a.spacing, 1);
  const std::vector<double> want = thin.cotangents(true);
  for (size_t offset : {0, 1}) {
    std::vector<unsigned char> buffer(thin.a.recording_bytes() + 8);
    ASSERT_TRUE(thin.a.save_recording(buffer.data() + offset, thin.a.recording_bytes(),
                                      shoal::ode::kSuccess, 9));
    Recording<shoal::ode::Tsit5, Dosed> loaded;
    shoal::ode::Status status;
    ASSERT_TRUE(
        loaded.a.load_recording(buffer.data() + offset, thin.a.recording_bytes(), 9, &status));
    EXPECT_EQ(loaded.a.in_row, offset == 0);
    EXPECT_TRUE(same_bits(loaded.cotangents(true), want)) << offset;
  }
}

}  // namespace
