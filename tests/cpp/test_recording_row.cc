// The adjoint's recording as a row of bytes (adjoint.hpp: save_recording, load_recording): a
// recording saved and loaded into a fresh Adjoint sweeps backward to the original's cotangents,
// bit for bit, with and without stage records; a row too small is marked incomplete and is not
// loaded; a damaged header is refused.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "forced_adjoint_model.hpp"
#include "shoal/ode/adjoint.hpp"
#include "shoal/ode/adjoint_lanes.hpp"
#include "shoal/ode/explicit_rk_adjoint.hpp"
#include "shoal/ode/tsit5.hpp"

namespace {

using shoal::ode::IntegrateStats;
using shoal::ode::Trajectory;

using forced_adjoint::Forced;
using forced_adjoint::kSaves;
using forced_adjoint::kTSpan;
using forced_adjoint::options;

using forced_adjoint::kC;

template <size_t Budget>
using A = shoal::ode::Adjoint<shoal::ode::Tsit5, shoal::ode::ExplicitStepAdjoint, Forced, double,
                              Budget>;

Trajectory<double> trajectory(double* out) {
  return forced_adjoint::trajectory(forced_adjoint::kY0, forced_adjoint::kP, out);
}

template <size_t Budget>
void recorded(A<Budget>& a, double* out) {
  IntegrateStats stats;
  shoal::ode::Status status;
  ASSERT_TRUE(a.forward(trajectory(out), options(), &stats, &status));
  ASSERT_EQ(status, shoal::ode::kSuccess);
}

template <size_t Budget>
std::vector<double> cotangents(A<Budget>& a, double* out) {
  std::vector<double> bar(4);
  a.backward(trajectory(out), kC, nullptr, bar.data(), bar.data() + 2);
  return bar;
}

// A row at `offset` bytes into a buffer: where its numbers are aligned the sweep reads them in
// place, else from copies; either way the original's bits.
template <size_t Budget>
void round_trip(size_t offset) {
  double out[kSaves * 2];
  A<Budget> original;
  recorded(original, out);
  constexpr size_t kRow = size_t(1) << 20;
  std::vector<unsigned char> buffer(kRow + 8);
  unsigned char* row = buffer.data() + offset;
  ASSERT_TRUE(original.save_recording(row, kRow, shoal::ode::kSuccess, 42));
  A<Budget> loaded;
  shoal::ode::Status status = shoal::ode::kInvalidInput;
  ASSERT_TRUE(loaded.load_recording(row, kRow, 42, &status));
  EXPECT_EQ(status, shoal::ode::kSuccess);
  EXPECT_FALSE(loaded.load_recording(row, kRow, 43, &status));  // another's
  EXPECT_EQ(loaded.in_row, offset % alignof(double) == 0);
  if (!loaded.in_row) {
    EXPECT_EQ(loaded.records, original.records);
    EXPECT_EQ(loaded.states, original.states);
    EXPECT_EQ(loaded.spacing, original.spacing);
    EXPECT_EQ(loaded.stage_records, original.stage_records);
    EXPECT_EQ(loaded.is_jump, original.is_jump);
  }
  const std::vector<double> want = cotangents(original, out);
  const std::vector<double> got = cotangents(loaded, out);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), 4 * sizeof(double)), 0);
}

TEST(RecordingRow, ALoadedRecordingSweepsToTheSameBits) {
  round_trip<size_t(1) << 24>(0);
  round_trip<size_t(1) << 24>(1);  // misaligned: copied
}

TEST(RecordingRow, WithoutStageRecordsToo) {
  round_trip<0>(0);
  round_trip<0>(1);
}

TEST(RecordingRow, ARowTooSmallIsMarkedIncompleteAndNotLoaded) {
  double out[kSaves * 2];
  A<size_t(1) << 24> a;
  recorded(a, out);
  const size_t need = a.recording_bytes();
  std::vector<unsigned char> row(need - 1, 0xff);
  const auto ok = shoal::ode::kSuccess;
  EXPECT_FALSE(a.save_recording(row.data(), row.size(), ok, 7));
  A<size_t(1) << 24> b;
  shoal::ode::Status status;
  EXPECT_FALSE(b.load_recording(row.data(), row.size(), 7, &status));
  row.assign(need, 0);
  EXPECT_TRUE(a.save_recording(row.data(), row.size(), ok, 7));
  EXPECT_FALSE(b.load_recording(row.data(), row.size() - 1, 7, &status));  // cut short
  row[0] ^= 1;  // a damaged header
  EXPECT_FALSE(b.load_recording(row.data(), row.size(), 7, &status));
}

// Forced with t for sin t, so that it computes in SIMD lanes too (its vjp, Forced's, as well).
struct Poly : Forced {
  static constexpr bool vjp_in_lanes = true;
  template <class T, class P>
  static void rhs(const T* y, const T& t, P p, T* out) {
    out[0] = -p[0] * y[0] + y[1];
    out[1] = -p[1] * y[0] * y[1] + t * T(0.5);
  }
};

// An ensemble of members (shared t_span, own y0 and p, N of them) with its buffers.
template <int Members = 5>
struct Ensemble {
  static constexpr int N = Members;
  std::vector<double> y0, p, ys, ys_bar, y0_bar, p_bar;
  std::vector<int32_t> accepted, rejected, status;
  ShoalEnsembleArgs args{};
  Ensemble()
      : y0(2 * N), p(2 * N), ys(N * kSaves * 2), ys_bar(N * kSaves * 2), y0_bar(2 * N),
        p_bar(2 * N), accepted(N), rejected(N), status(N) {
    for (int m = 0; m < N; ++m) {
      y0[2 * m] = (1.0 + 0.3 * m) * (m % 3 == 0 ? 8.0 : 1.0);  // unlike numbers of steps
      y0[2 * m + 1] = -0.5 + 0.1 * m;
      p[2 * m] = 0.8 + 0.05 * m;
      p[2 * m + 1] = 1.3 - 0.1 * m;
      for (int i = 0; i < kSaves * 2; ++i) ys_bar[m * kSaves * 2 + i] = kC[i] * (1.0 + 0.1 * m);
    }
    ShoalSolveOptions o{};
    o.rtol = 1e-9;
    o.atol = 1e-11;
    o.max_steps = 100000;
    o.max_step = -1;
    o.icoeff = 1;
    o.factor_min = 0.2;
    o.factor_max = 10;
    args.n_traj = N;
    args.t_span_group = N;
    args.shared_group = N;
    args.tstops_group = N;
    args.y0 = y0.data();
    args.params = p.data();
    args.t_span = kTSpan;
    args.ys = ys.data();
    args.accepted = accepted.data();
    args.rejected = rejected.data();
    args.status = status.data();
    args.options = o;
    args.n_vars = 2;
    args.n_params = 2;
    args.n_save = kSaves;
    args.n_saved = 2;
    args.ys_bar = ys_bar.data();
    args.y0_bar = y0_bar.data();
    args.p_bar = p_bar.data();
  }
  std::vector<double> cotangents() const {
    std::vector<double> out(y0_bar);
    out.insert(out.end(), p_bar.begin(), p_bar.end());
    return out;
  }
};

using shoal::ode::ExplicitStepAdjoint;
using shoal::ode::Tsit5;

std::vector<double> by_adjoint_range(Ensemble<>& e) {
  shoal::ode::adjoint_range<Tsit5, ExplicitStepAdjoint, Forced, double>(e.args, 0, e.N);
  return e.cotangents();
}

TEST(RecordingRow, RecordThenAdjointRangeFromTheRowsGivesTheSameBits) {
  Ensemble<> plain;
  shoal::ode::solve_range<Tsit5, Forced, double>(plain.args, 0, plain.N);
  const std::vector<double> ys_want = plain.ys;
  Ensemble<> e;
  const std::vector<double> want = by_adjoint_range(e);
  EXPECT_EQ(e.ys, ys_want);
  for (const int64_t row_bytes : {int64_t(1) << 16, int64_t(64)}) {  // fits; never fits
    Ensemble<> r;
    std::vector<unsigned char> rows(static_cast<size_t>(row_bytes) * r.N);
    r.args.recording = rows.data();
    r.args.recording_row_bytes = row_bytes;
    shoal::ode::record_range<Tsit5, ExplicitStepAdjoint, Forced, double>(r.args, 0, r.N);
    EXPECT_EQ(r.ys, ys_want) << row_bytes;  // the value, as the plain solve writes it
    for (int m = 0; m < r.N; ++m) EXPECT_EQ(r.status[m], shoal::ode::kSuccess);
    std::fill(r.status.begin(), r.status.end(), -1);
    shoal::ode::adjoint_range<Tsit5, ExplicitStepAdjoint, Forced, double>(r.args, 0, r.N);
    for (int m = 0; m < r.N; ++m) EXPECT_EQ(r.status[m], shoal::ode::kSuccess);
    const std::vector<double> got = r.cotangents();
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(double)), 0) << row_bytes;
  }
}

TEST(RecordingRow, ARowOfAnotherTrajectoryIsSolvedAgain) {
  Ensemble<> r;
  std::vector<unsigned char> rows(size_t(1) << 16 << 3);
  r.args.recording = rows.data();
  r.args.recording_row_bytes = int64_t(1) << 16;
  shoal::ode::record_range<Tsit5, ExplicitStepAdjoint, Forced, double>(r.args, 0, r.N);
  r.y0[4] += 0.25;  // trajectory 2 is no longer what its row recorded
  std::fill(r.ys.begin(), r.ys.end(), 0.0);
  shoal::ode::adjoint_range<Tsit5, ExplicitStepAdjoint, Forced, double>(r.args, 0, r.N);
  Ensemble<> e;
  e.y0[4] += 0.25;
  const std::vector<double> want = by_adjoint_range(e);
  const std::vector<double> got = r.cotangents();
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(double)), 0);
  // Only trajectory 2 was solved again: its saves are written, the others' are not.
  for (int m = 0; m < r.N; ++m) {
    const bool solved = std::equal(r.ys.begin() + m * kSaves * 2,
                                   r.ys.begin() + (m + 1) * kSaves * 2,
                                   e.ys.begin() + m * kSaves * 2);
    EXPECT_EQ(solved, m == 2) << m;
  }
}

// Poly whose vjp does not run in the lanes: its sweeps side by side evaluate their steps on
// the lanes and transpose them one at a time.
struct PolyScalarVjp : Poly {
  static constexpr bool vjp_in_lanes = false;
};

// In the lanes, with the backward sweeps side by side (batched), their products on the lanes or
// not: rows that fit, rows that never fit, and one row of another trajectory.
template <class Model>
void lanes_record_then_adjoint() {
  constexpr int W = 4;
  using shoal::ode::adjoint_range_lanes;
  using shoal::ode::record_range_lanes;
  Ensemble<11> scalar;  // 11 members: two full batches of 4 and a partial one
  shoal::ode::adjoint_range<Tsit5, ExplicitStepAdjoint, Model, double>(scalar.args, 0, scalar.N);
  Ensemble<11> e;
  adjoint_range_lanes<Tsit5, Tsit5, ExplicitStepAdjoint, Model, double, W>(e.args, 0, e.N);
  const std::vector<double> want = e.cotangents();
  ASSERT_EQ(want, scalar.cotangents());
  for (const int64_t row_bytes : {int64_t(1) << 16, int64_t(64)}) {  // fits; never fits
    Ensemble<11> r;
    std::vector<unsigned char> rows(static_cast<size_t>(row_bytes) * r.N);
    r.args.recording = rows.data();
    r.args.recording_row_bytes = row_bytes;
    record_range_lanes<Tsit5, Tsit5, ExplicitStepAdjoint, Model, double, W>(r.args, 0, r.N);
    EXPECT_EQ(r.ys, e.ys) << row_bytes;
    EXPECT_EQ(r.accepted, e.accepted) << row_bytes;
    if (row_bytes > 64) rows[5 * row_bytes + 8] ^= 1;  // trajectory 5's identity: not its own
    std::fill(r.ys.begin(), r.ys.end(), 0.0);
    adjoint_range_lanes<Tsit5, Tsit5, ExplicitStepAdjoint, Model, double, W>(r.args, 0, r.N);
    for (int m = 0; m < r.N; ++m) {
      EXPECT_EQ(r.status[m], shoal::ode::kSuccess);
      // Solved again (its saves written) only where its row did not serve.
      const bool solved = std::equal(r.ys.begin() + m * kSaves * 2,
                                     r.ys.begin() + (m + 1) * kSaves * 2,
                                     e.ys.begin() + m * kSaves * 2);
      EXPECT_EQ(solved, row_bytes == 64 || m == 5) << row_bytes << " " << m;
    }
    const std::vector<double> got = r.cotangents();
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(double)), 0) << row_bytes;
  }
}

TEST(RecordingRow, InTheLanesWithBatchedSweepsTheSameBits) {
  static_assert(shoal::ode::AdjointLanes<Tsit5, Tsit5, ExplicitStepAdjoint, Poly, double,
                                         4>::batched,
                "the backward sweeps run side by side in the lanes (BackwardLanes)");
  lanes_record_then_adjoint<Poly>();
}

TEST(RecordingRow, InTheLanesWithScalarProductsTheSameBits) {
  using A = shoal::ode::AdjointLanes<Tsit5, Tsit5, ExplicitStepAdjoint, PolyScalarVjp, double, 4>;
  static_assert(A::batched && !shoal::ode::products_in_lanes<typename A::A>(),
                "PolyScalarVjp's steps are evaluated on the lanes, its products one at a time");
  lanes_record_then_adjoint<PolyScalarVjp>();
}

}  // namespace
