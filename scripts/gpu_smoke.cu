// Device smoke test of shoal's core headers, independent of Python, JAX and NVRTC.
//
// Compiled by nvcc (scripts/gpu_check.sh does it) with the same arithmetic rules as the JIT paths
// (--fmad=false on the device, -ffp-contract=off on the host), one trajectory per thread:
//   1. Decay y' = -k y, Tsit5 and Rodas5P (fp64 LU): against exp(-k t), 1e-7 relative.
//   2. Lorenz, Tsit5, 1000 trajectories over rho: the device against a host run of the same
//      template (solve_range): identical statuses and step counts, values to 1e-12 relative.
//   3. Robertson, Rodas5P fp64 and fp32 LU, 257 trajectories with k2 over four decades: the same.
// Exit status: 0 all passed, 1 a check failed, 77 no usable CUDA device (skipped).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "shoal/ode/ensemble.hpp"
#include "shoal/ode/host_ensemble.hpp"
#include "shoal/ode/rodas5p.hpp"
#include "shoal/ode/tsit5.hpp"

struct Decay {
  static constexpr int n_vars = 1;
  static constexpr int n_params = 1;
  template <class T>
  SHOAL_HD static void rhs(const T* y, const T&, const T* p, T* dy) {
    dy[0] = -(p[0] * y[0]);
  }
};

struct Lorenz {
  static constexpr int n_vars = 3;
  static constexpr int n_params = 3;  // sigma, rho, beta
  template <class T>
  SHOAL_HD static void rhs(const T* y, const T&, const T* p, T* dy) {
    dy[0] = p[0] * (y[1] - y[0]);
    dy[1] = y[0] * (p[1] - y[2]) - y[1];
    dy[2] = y[0] * y[1] - p[2] * y[2];
  }
};

struct Robertson {
  static constexpr int n_vars = 3;
  static constexpr int n_params = 3;  // k1, k2 (y2^2), k3 (y2 y3)
  template <class T>
  SHOAL_HD static void rhs(const T* y, const T&, const T* p, T* dy) {
    const T r1 = p[0] * y[0];
    const T r2 = p[1] * y[1] * y[1];
    const T r3 = p[2] * y[1] * y[2];
    dy[0] = r3 - r1;
    dy[1] = r1 - r2 - r3;
    dy[2] = r2;
  }
};

template <template <class, class> class Stepper, class Model>
__global__ void solve_kernel(ShoalEnsembleArgs a) {
  const int64_t m = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (m >= a.n_traj) return;
  const auto opt = shoal::ode::IntegrateOptions<double>::from(a.options);
  shoal::ode::solve_one<Stepper, Model, double>(a, opt, m);
}

struct Ensemble {
  int64_t n;
  int n_vars, n_params;
  std::vector<double> y0, p, t;
  double rtol, atol;
};

struct Result {
  std::vector<double> ys;
  std::vector<int32_t> accepted, rejected, status;
  bool ok = true;
};

static int failures = 0;

#define CUDA_OK(call)                                                                      \
  do {                                                                                     \
    cudaError_t err_ = (call);                                                             \
    if (err_ != cudaSuccess) {                                                             \
      std::printf("CUDA error %s at %s:%d: %s\n", cudaGetErrorName(err_), __FILE__, __LINE__, \
                  cudaGetErrorString(err_));                                               \
      return false;                                                                        \
    }                                                                                      \
  } while (0)

// The ensemble's arguments over the given buffers (host or device pointers alike).
template <class Model>
static ShoalEnsembleArgs args_for(const Ensemble& e, const double* y0, const double* p,
                                  const double* t, double* ys, int32_t* acc, int32_t* rej,
                                  int32_t* st) {
  ShoalSolveOptions options;  // the other options keep their defaults
  options.rtol = e.rtol;
  options.atol = e.atol;
  return shoal::ode::ensemble_args<Model>(e.n, (int)e.t.size(), y0, p, t, ys, acc, rej, st,
                                          options);
}

static Result allocate(const Ensemble& e) {
  Result r;
  r.ys.assign(e.n * e.t.size() * e.n_vars, 0.0);
  r.accepted.assign(e.n, -1);
  r.rejected.assign(e.n, -1);
  r.status.assign(e.n, -1);
  return r;
}

template <template <class, class> class Stepper, class Model>
Result run_host(const Ensemble& e) {
  Result r = allocate(e);
  const ShoalEnsembleArgs a =
      args_for<Model>(e, e.y0.data(), e.p.data(), e.t.data(), r.ys.data(), r.accepted.data(),
                      r.rejected.data(), r.status.data());
  shoal::ode::solve_range<Stepper, Model, double>(a, 0, e.n);
  return r;
}

template <class T>
static bool upload(T** dst, const std::vector<T>& src) {
  CUDA_OK(cudaMalloc(dst, src.size() * sizeof(T)));
  CUDA_OK(cudaMemcpy(*dst, src.data(), src.size() * sizeof(T), cudaMemcpyHostToDevice));
  return true;
}

template <class T>
static bool download(std::vector<T>& dst, const T* src) {
  CUDA_OK(cudaMemcpy(dst.data(), src, dst.size() * sizeof(T), cudaMemcpyDeviceToHost));
  return true;
}

template <template <class, class> class Stepper, class Model>
bool run_device_into(const Ensemble& e, Result& r) {
  double *y0, *p, *t, *ys;
  int32_t *acc, *rej, *st;
  if (!upload(&y0, e.y0) || !upload(&p, e.p) || !upload(&t, e.t) || !upload(&ys, r.ys) ||
      !upload(&acc, r.accepted) || !upload(&rej, r.rejected) || !upload(&st, r.status))
    return false;
  const ShoalEnsembleArgs a = args_for<Model>(e, y0, p, t, ys, acc, rej, st);
  const int block = 128;
  const int grid = (int)((e.n + block - 1) / block);
  solve_kernel<Stepper, Model><<<grid, block>>>(a);
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  if (!download(r.ys, ys) || !download(r.accepted, acc) || !download(r.rejected, rej) ||
      !download(r.status, st))
    return false;
  for (void* ptr : {(void*)y0, (void*)p, (void*)t, (void*)ys, (void*)acc, (void*)rej, (void*)st})
    cudaFree(ptr);
  return true;
}

template <template <class, class> class Stepper, class Model>
Result run_device(const Ensemble& e) {
  Result r = allocate(e);
  r.ok = run_device_into<Stepper, Model>(e, r);
  return r;
}

static void check(bool ok, const char* what) {
  std::printf("  [%s] %s\n", ok ? "ok" : "FAIL", what);
  failures += !ok;
}

// Device against host: statuses and step counts identical, values within rtol per component
// (floor: rtol times the component's largest magnitude).
static void compare(const char* name, const Ensemble& e, const Result& dev, const Result& host,
                    double rtol) {
  std::printf("%s (N = %lld):\n", name, (long long)e.n);
  if (!dev.ok) {
    check(false, "device run");
    return;
  }
  int64_t status_diff = 0, step_diff = 0, failed = 0;
  long long steps = 0;
  for (int64_t m = 0; m < e.n; ++m) {
    status_diff += dev.status[m] != host.status[m];
    step_diff += dev.accepted[m] != host.accepted[m] || dev.rejected[m] != host.rejected[m];
    failed += host.status[m] != shoal::ode::kSuccess;
    steps += host.accepted[m];
  }
  std::vector<double> scale(e.n_vars, 0.0);
  for (size_t i = 0; i < host.ys.size(); ++i)
    scale[i % e.n_vars] = std::fmax(scale[i % e.n_vars], std::fabs(host.ys[i]));
  double worst = 0.0;
  bool identical = true;
  for (size_t i = 0; i < host.ys.size(); ++i) {
    const double d = std::fabs(dev.ys[i] - host.ys[i]);
    identical = identical && (dev.ys[i] == host.ys[i]);
    worst = std::fmax(worst, d / (std::fabs(host.ys[i]) + scale[i % e.n_vars] + 1e-300));
    if (std::isnan(dev.ys[i]) != std::isnan(host.ys[i])) worst = INFINITY;
  }
  std::printf("  mean accepted steps %.1f; host failures %lld; max relative difference %.3g%s\n",
              double(steps) / e.n, (long long)failed, worst, identical ? " (bit-identical)" : "");
  check(failed == 0, "every host trajectory succeeded");
  check(status_diff == 0, "statuses identical");
  check(step_diff == 0, "accepted/rejected counts identical");
  check(worst <= rtol, "values agree to 1e-12 relative");
}

static bool device_available() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    std::printf("no usable CUDA device (%s): skipped\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "count 0");
    return false;
  }
  cudaDeviceProp prop;
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess)
    std::printf("device 0: %s, compute capability %d.%d\n", prop.name, prop.major, prop.minor);
  return true;
}

int main() {
  if (!device_available()) return 77;

  // 1. Decay against the closed form, both steppers.
  {
    Ensemble e{64, 1, 1, {}, {}, {}, 1e-10, 1e-12};
    for (int m = 0; m < e.n; ++m) {
      e.y0.push_back(1.0 + m);
      e.p.push_back(0.1 + 0.05 * m);
    }
    for (int j = 0; j <= 10; ++j) e.t.push_back(0.2 * j);
    const Result rt = run_device<shoal::ode::Tsit5, Decay>(e);
    const Result rr = run_device<shoal::ode::Rodas5PLu64, Decay>(e);
    std::printf("decay (N = %lld):\n", (long long)e.n);
    check(rt.ok && rr.ok, "device runs");
    double worst_t = 0.0, worst_r = 0.0;
    for (int m = 0; m < e.n && rt.ok && rr.ok; ++m)
      for (size_t j = 0; j < e.t.size(); ++j) {
        const double exact = e.y0[m] * std::exp(-e.p[m] * e.t[j]);
        worst_t = std::fmax(worst_t, std::fabs(rt.ys[m * e.t.size() + j] - exact) / exact);
        worst_r = std::fmax(worst_r, std::fabs(rr.ys[m * e.t.size() + j] - exact) / exact);
      }
    std::printf("  max relative error vs exp(-k t): Tsit5 %.3g, Rodas5P %.3g\n", worst_t, worst_r);
    check(rt.ok && worst_t < 1e-7, "Tsit5 matches the closed form to 1e-7");
    check(rr.ok && worst_r < 1e-7, "Rodas5P matches the closed form to 1e-7");
  }

  // 2. Lorenz, Tsit5: device against host.
  {
    Ensemble e{1000, 3, 3, {}, {}, {}, 1e-8, 1e-8};
    for (int m = 0; m < e.n; ++m) {
      e.y0.insert(e.y0.end(), {1.0, 0.0, 0.0});
      e.p.insert(e.p.end(), {10.0, 21.0 * m / (e.n - 1), 8.0 / 3.0});
    }
    for (int j = 0; j <= 10; ++j) e.t.push_back(0.1 * j);
    compare("Lorenz Tsit5", e, run_device<shoal::ode::Tsit5, Lorenz>(e),
            run_host<shoal::ode::Tsit5, Lorenz>(e), 1e-12);
  }

  // 3. Robertson, Rodas5P with fp64 and fp32 LU: device against host.
  {
    Ensemble e{257, 3, 3, {}, {}, {}, 1e-6, 1e-10};
    for (int m = 0; m < e.n; ++m) {
      e.y0.insert(e.y0.end(), {1.0, 0.0, 0.0});
      e.p.insert(e.p.end(), {0.04, 3.0 * std::pow(10.0, 3.0 + 4.0 * m / (e.n - 1)), 1e4});
    }
    e.t.push_back(0.0);
    for (int j = 0; j < 20; ++j) e.t.push_back(std::pow(10.0, -6.0 + 11.0 * j / 19.0));
    compare("Robertson Rodas5P (fp64 LU)", e, run_device<shoal::ode::Rodas5PLu64, Robertson>(e),
            run_host<shoal::ode::Rodas5PLu64, Robertson>(e), 1e-12);
    compare("Robertson Rodas5P (fp32 LU)", e, run_device<shoal::ode::Rodas5PLu32, Robertson>(e),
            run_host<shoal::ode::Rodas5PLu32, Robertson>(e), 1e-12);
  }

  std::printf("%s: %d check(s) failed\n", failures ? "FAILED" : "PASSED", failures);
  return failures ? 1 : 0;
}
