// The CPU handlers (LAPACK through SciPy's cython_lapack pointers); contract in eigh_ffi.hpp.
//
// Outputs: w (..., m) real; v (..., n, m) same dtype as a, or an empty array when
// !options.vectors; info (...,) int32 per batch element (0 ok, kNonFiniteInput for NaN/Inf
// input, else LAPACK's info).
#include <atomic>
#include <complex>
#include <cstdint>
#include <exception>
#include <string>
#include <utility>

#include "../common/ffi_guard.hpp"
#include "../common/parallel_for.hpp"
#include "eigh_ffi.hpp"
#include "eigh_kernel.hpp"
#include "idle_cores.hpp"
#include "lapack.hpp"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace shoal::linalg {
namespace {

constexpr const char* kWho = "shoal.linalg eigh";

// Below this many flops (n³ per element, summed) a call runs on the calling thread: waking pool
// threads costs more than it saves.
constexpr double kParallelFlops = 2.0e5;

template <typename T>
ffi::Error run_batch(ffi::ThreadPool& pool, const EighProblem& p, int64_t batch, const void* a_raw,
                     const void* b_raw, void* w_raw, void* v_raw, int32_t* info) {
  using R = Real<T>;
  const T* a = static_cast<const T*>(a_raw);
  const T* b = static_cast<const T*>(b_raw);
  R* w = static_cast<R*>(w_raw);
  T* v = static_cast<T*>(v_raw);
  const int64_t nn = p.n * p.n, nm = p.n * p.m;
  std::atomic<bool> failed{false};
  std::string failure;  // written once, by the thread that flips `failed`
  const double flops = static_cast<double>(batch) * static_cast<double>(p.n) *
                       static_cast<double>(p.n) * static_cast<double>(p.n);
  const int64_t limit = max_batch_workers();
  const int64_t max_workers = flops < kParallelFlops ? 1 : (limit > 0 ? limit : batch);
  // One LAPACK call per core already fills the machine, and a lone small matrix gains nothing
  // from BLAS threads: one thread each. A lone large matrix gets the idle cores plus its own
  // (idle_cores.hpp): all of them on a quiet machine, as SciPy, but never spinning threads on
  // cores other processes keep busy.
  const int blas_threads =
      max_workers > 1 || p.n < threaded_blas_min_order() ? 1 : lone_matrix_blas_threads();
  // parallel_for's body must not throw: a failing chunk records why, the others carry on.
  auto body = [&](int64_t begin, int64_t end) {
    const ffi::Error error = without_exceptions(kWho, [&] {
      ScopedBlasThreads blas_guard(blas_threads);
      EighWorkspace<T> ws(p);
      for (int64_t i = begin; i < end; ++i) {
        const T* b_i = !p.generalized() ? nullptr : (p.shared_b ? b : b + i * nn);
        info[i] = ws.solve(a + i * nn, b_i, w + i * p.m, p.vectors ? v + i * nm : nullptr);
      }
      return ffi::Error::Success();
    });
    if (error.failure() && !failed.exchange(true)) failure = error.message();
  };
  parallel_for(pool, batch, max_workers, body);
  if (failed.load()) return ffi::Error::Internal(failure);
  return ffi::Error::Success();
}

ffi::Error eigh_impl(ffi::ThreadPool pool, ffi::AnyBuffer a, const ffi::AnyBuffer* b,
                     const EighOptions& options, ffi::Result<ffi::AnyBuffer> w,
                     ffi::Result<ffi::AnyBuffer> v, ffi::Result<ffi::Buffer<ffi::S32>> info) {
  if (!lapack_ready()) {
    return ffi::Error::Internal("shoal.linalg: LAPACK function pointers were not set at import");
  }
  ProblemShape s;
  if (ffi::Error e = check_problem(kWho, a, b, options, &s); e.failure()) return e;
  if (static_cast<int64_t>(info->element_count()) != s.batch ||
      static_cast<int64_t>(w->element_count()) != s.batch * s.m ||
      (options.vectors && static_cast<int64_t>(v->element_count()) != s.batch * s.n * s.m)) {
    return ffi::Error::InvalidArgument("shoal.linalg eigh: output shapes do not match the inputs");
  }
  const EighProblem p{options, s.n, s.m};
  const void* b_data = b != nullptr ? b->untyped_data() : nullptr;
  auto run = [&](auto tag) {
    return run_batch<decltype(tag)>(pool, p, s.batch, a.untyped_data(), b_data, w->untyped_data(),
                                    v->untyped_data(), info->typed_data());
  };
  switch (a.element_type()) {
    case ffi::DataType::F32:
      return run(float{});
    case ffi::DataType::F64:
      return run(double{});
    case ffi::DataType::C64:
      return run(std::complex<float>{});
    case ffi::DataType::C128:
      return run(std::complex<double>{});
    default:
      return ffi::Error::InvalidArgument(
          "shoal.linalg eigh: unsupported dtype (need float32, float64, complex64, complex128)");
  }
}

ffi::Error eigh_std(ffi::ThreadPool pool, ffi::AnyBuffer a, EighOptions options,
                    ffi::Result<ffi::AnyBuffer> w, ffi::Result<ffi::AnyBuffer> v,
                    ffi::Result<ffi::Buffer<ffi::S32>> info) {
  return without_exceptions(kWho, [&] { return eigh_impl(pool, a, nullptr, options, w, v, info); });
}

ffi::Error eigh_gen(ffi::ThreadPool pool, ffi::AnyBuffer a, ffi::AnyBuffer b, EighOptions options,
                    ffi::Result<ffi::AnyBuffer> w, ffi::Result<ffi::AnyBuffer> v,
                    ffi::Result<ffi::Buffer<ffi::S32>> info) {
  return without_exceptions(kWho, [&] { return eigh_impl(pool, a, &b, options, w, v, info); });
}

// The CPU results: w, v, info.
template <class Binding>
auto bind_cpu_results(Binding binding) {
  return std::move(binding)
      .template Ret<ffi::AnyBuffer>()
      .template Ret<ffi::AnyBuffer>()
      .template Ret<ffi::Buffer<ffi::S32>>();
}

}  // namespace
}  // namespace shoal::linalg

XLA_FFI_DEFINE_HANDLER_SYMBOL(ShoalLinalgEighCpu, shoal::linalg::eigh_std,
                              shoal::linalg::bind_cpu_results(shoal::linalg::bind_problem<1>(
                                  ffi::Ffi::Bind().Ctx<ffi::ThreadPool>())));

XLA_FFI_DEFINE_HANDLER_SYMBOL(ShoalLinalgEighGenCpu, shoal::linalg::eigh_gen,
                              shoal::linalg::bind_cpu_results(shoal::linalg::bind_problem<2>(
                                  ffi::Ffi::Bind().Ctx<ffi::ThreadPool>())));
