// A small non-autonomous model with its vector-Jacobian product written out, and the solve
// options and save times, shared by the C++ tests of the adjoint's recordings
// (test_adjoint_stages.cc, test_recording_row.cc).
#pragma once

#include <cmath>

#include "shoal/ode/integrate.hpp"

namespace forced_adjoint {

// y0' = −p0 y0 + y1, y1' = −p1 y0 y1 + sin t (non-autonomous, so a stage's time matters), with
// its vector-Jacobian product: q = [p0, p1, w0, w1], out = [ȳ (2), p̄ (2, added)].
struct Forced {
  static constexpr int n_vars = 2;
  static constexpr int n_params = 2;
  template <class T>
  static void rhs(const T* y, const T& t, const T* p, T* out) {
    out[0] = -p[0] * y[0] + y[1];
    out[1] = -p[1] * y[0] * y[1] + std::sin(t);
  }
  template <class T>
  static void vjp(const T* y, const T&, const T* q, T* out) {
    const T w0 = q[2], w1 = q[3];
    out[0] = -q[0] * w0 - q[1] * y[1] * w1;
    out[1] = w0 - q[1] * y[0] * w1;
    out[2] += -y[0] * w0;
    out[3] += -y[0] * y[1] * w1;
  }
};

// t0, the saves (the last one the end).
constexpr double kTSpan[] = {0.0, 0.7, 1.9, 3.0};
constexpr int kSaves = 4;

// A start, parameters, and a cotangent of the saves (kSaves x 2).
constexpr double kY0[] = {1.0, -0.5}, kP[] = {0.8, 1.3};
constexpr double kC[] = {0.3, -1.0, 0.5, 0.25, -0.7, 1.1, 0.9, 0.4};

// The trajectory from y0 with parameters p over kTSpan, its saves written to out (kSaves x 2).
inline shoal::ode::Trajectory<double> trajectory(const double* y0, const double* p, double* out) {
  shoal::ode::Trajectory<double> tr;
  tr.y0 = y0;
  tr.p = p;
  tr.t_span = kTSpan;
  tr.n_save = kSaves;
  tr.out = out;
  return tr;
}

inline shoal::ode::IntegrateOptions<double> options() {
  shoal::ode::IntegrateOptions<double> o;
  o.controller.rtol = 1e-9;
  o.controller.atol = 1e-11;
  o.first_step = -1.0;
  o.max_steps = 100000;
  return o;
}

}  // namespace forced_adjoint
