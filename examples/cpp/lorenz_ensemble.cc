// shoal from C++ alone: a hand-written model solved as an ensemble with the core headers.
//
// A model is any type with n_vars, n_params and a templated rhs; solve_range integrates a slice of
// the ensemble, and host_ensemble.hpp spreads the slices over threads. This program sweeps the
// Lorenz system over 1000 values of rho on all hardware threads, checks every trajectory
// succeeded, and cross-checks one against a much tighter solve. It exits non-zero on failure (it
// runs under ctest).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "shoal/ode/host_ensemble.hpp"
#include "shoal/ode/tsit5.hpp"

struct Lorenz {
  static constexpr int n_vars = 3;
  static constexpr int n_params = 3;  // sigma, rho, beta
  template <class T>
  static void rhs(const T* y, const T&, const T* p, T* dy) {
    dy[0] = p[0] * (y[1] - y[0]);
    dy[1] = y[0] * (p[1] - y[2]) - y[1];
    dy[2] = y[0] * y[1] - p[2] * y[2];
  }
};

int main() {
  const int64_t n_traj = 1000;
  const int n_save = 11;
  std::vector<double> y0(n_traj * 3), params(n_traj * 3), t_span(n_save);
  for (int64_t m = 0; m < n_traj; ++m) {
    y0[3 * m + 0] = 1.0;
    y0[3 * m + 1] = 0.0;
    y0[3 * m + 2] = 0.0;
    params[3 * m + 0] = 10.0;
    params[3 * m + 1] = 21.0 * m / (n_traj - 1);
    params[3 * m + 2] = 8.0 / 3.0;
  }
  for (int j = 0; j < n_save; ++j) t_span[j] = j / double(n_save - 1);
  std::vector<double> ys(n_traj * n_save * 3);
  std::vector<int32_t> accepted(n_traj), rejected(n_traj), status(n_traj);

  ShoalSolveOptions options;
  options.rtol = 1e-8;
  options.atol = 1e-8;
  const ShoalEnsembleArgs args = shoal::ode::ensemble_args<Lorenz>(
      n_traj, n_save, y0.data(), params.data(), t_span.data(), ys.data(), accepted.data(),
      rejected.data(), status.data(), options);
  const int threads = shoal::ode::solve_ensemble<shoal::ode::Tsit5, Lorenz, double>(args);

  int failures = 0;
  int64_t steps = 0;
  for (int64_t m = 0; m < n_traj; ++m) {
    failures += status[m] != shoal::ode::kSuccess;
    steps += accepted[m];
  }

  // Reference for the last trajectory (rho = 21) at a far tighter tolerance.
  ShoalEnsembleArgs tight = args;
  std::vector<double> ref(n_save * 3);
  tight.n_traj = 1;
  tight.t_span_group = 1;
  tight.y0 = &y0[3 * (n_traj - 1)];
  tight.params = &params[3 * (n_traj - 1)];
  tight.ys = ref.data();
  tight.options.rtol = tight.options.atol = 1e-13;
  shoal::ode::solve_range<shoal::ode::Tsit5, Lorenz, double>(tight, 0, 1);
  double worst = 0;
  const double* last = &ys[(n_traj - 1) * n_save * 3];
  for (int i = 0; i < n_save * 3; ++i) worst = std::max(worst, std::abs(last[i] - ref[i]));

  std::printf(
      "Lorenz ensemble: %lld trajectories on %d threads, %lld accepted steps, "
      "%d failures\n",
      static_cast<long long>(n_traj), threads, static_cast<long long>(steps), failures);
  std::printf("rho = 21 final state (%.6f, %.6f, %.6f), max deviation from rtol=1e-13: %.2e\n",
              last[3 * (n_save - 1)], last[3 * (n_save - 1) + 1], last[3 * (n_save - 1) + 2],
              worst);
  return (failures == 0 && worst < 1e-5) ? 0 : 1;
}
