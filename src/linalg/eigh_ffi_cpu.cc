#include "eigh_ffi.hpp"

#include <atomic>
#include <complex>
#include <cstdint>
#include <exception>
#include <string>

#include "eigh_kernel.hpp"
#include "lapack.hpp"
#include "parallel.hpp"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace shoal::linalg {
namespace {

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
  // One LAPACK call per core already fills the machine; a lone small matrix gains nothing from
  // BLAS threads either. A lone large matrix keeps the BLAS's own threading, as in SciPy.
  const bool single_threaded_blas = max_workers > 1 || p.n < threaded_blas_min_order();
  auto body = [&](int64_t begin, int64_t end) {
    try {
      ScopedSingleThreadedBlas blas_guard(single_threaded_blas);
      EighWorkspace<T> ws(p);
      for (int64_t i = begin; i < end; ++i) {
        info[i] = ws.solve(a + i * nn, p.generalized ? b + i * nn : nullptr, w + i * p.m,
                           p.vectors ? v + i * nm : nullptr);
      }
    } catch (const std::exception& e) {
      if (!failed.exchange(true)) failure = e.what();
    } catch (...) {
      if (!failed.exchange(true)) failure = "unknown error";
    }
  };
  parallel_chunks(pool, batch, max_workers, body);
  if (failed.load()) {
    return ffi::Error::Internal("shoal.linalg eigh kernel: " + failure);
  }
  return ffi::Error::Success();
}

ffi::Error eigh_impl(ffi::ThreadPool pool, ffi::AnyBuffer a, const ffi::AnyBuffer* b,
                     ffi::Result<ffi::AnyBuffer> w, ffi::Result<ffi::AnyBuffer> v,
                     ffi::Result<ffi::Buffer<ffi::S32>> info, bool lower, bool vectors,
                     int64_t subset, int64_t il, int64_t iu, double vl, double vu,
                     int64_t itype) {
  if (!lapack_ready()) {
    return ffi::Error::Internal("shoal.linalg: LAPACK function pointers were not set at import");
  }
  const auto dims = a.dimensions();
  if (dims.size() < 2 || dims[dims.size() - 1] != dims[dims.size() - 2]) {
    return ffi::Error::InvalidArgument("shoal.linalg eigh: a must have shape (..., n, n)");
  }
  if (subset < 0 || subset > 2) {
    return ffi::Error::InvalidArgument("shoal.linalg eigh: subset must be 0, 1 or 2");
  }
  if (b != nullptr) {
    if (b->element_type() != a.element_type() || b->element_count() != a.element_count()) {
      return ffi::Error::InvalidArgument("shoal.linalg eigh: b must match a in shape and dtype");
    }
    if (itype < 1 || itype > 3) {
      return ffi::Error::InvalidArgument("shoal.linalg eigh: itype must be 1, 2 or 3");
    }
  }
  EighProblem p;
  p.n = dims[dims.size() - 1];
  p.generalized = b != nullptr;
  p.itype = itype;
  p.vectors = vectors;
  p.lower = lower;
  p.subset = static_cast<Subset>(subset);
  p.il = il;
  p.iu = iu;
  p.vl = vl;
  p.vu = vu;
  if (p.subset == Subset::kByIndex) {
    if (il < 0 || iu < il || iu >= p.n) {
      return ffi::Error::InvalidArgument("shoal.linalg eigh: need 0 <= il <= iu < n");
    }
    p.m = iu - il + 1;
  } else {
    p.m = p.n;
  }
  if (p.subset == Subset::kByValue && !(vl < vu)) {
    return ffi::Error::InvalidArgument("shoal.linalg eigh: need vl < vu");
  }
  int64_t batch = 1;
  for (size_t i = 0; i + 2 < dims.size(); ++i) batch *= dims[i];
  if (static_cast<int64_t>(info->element_count()) != batch ||
      static_cast<int64_t>(w->element_count()) != batch * p.m ||
      (vectors && static_cast<int64_t>(v->element_count()) != batch * p.n * p.m)) {
    return ffi::Error::InvalidArgument("shoal.linalg eigh: output shapes do not match the inputs");
  }
  const void* b_data = b != nullptr ? b->untyped_data() : nullptr;
  int32_t* info_data = info->typed_data();
  switch (a.element_type()) {
    case ffi::DataType::F32:
      return run_batch<float>(pool, p, batch, a.untyped_data(), b_data, w->untyped_data(),
                              v->untyped_data(), info_data);
    case ffi::DataType::F64:
      return run_batch<double>(pool, p, batch, a.untyped_data(), b_data, w->untyped_data(),
                               v->untyped_data(), info_data);
    case ffi::DataType::C64:
      return run_batch<std::complex<float>>(pool, p, batch, a.untyped_data(), b_data,
                                            w->untyped_data(), v->untyped_data(), info_data);
    case ffi::DataType::C128:
      return run_batch<std::complex<double>>(pool, p, batch, a.untyped_data(), b_data,
                                             w->untyped_data(), v->untyped_data(), info_data);
    default:
      return ffi::Error::InvalidArgument(
          "shoal.linalg eigh: unsupported dtype (need float32, float64, complex64, complex128)");
  }
}

// No C++ exception may cross the FFI boundary (e.g. bad_alloc setting up the workers).
template <typename F>
ffi::Error guarded(F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return ffi::Error::Internal(std::string("shoal.linalg eigh kernel: ") + e.what());
  } catch (...) {
    return ffi::Error::Internal("shoal.linalg eigh kernel: unknown error");
  }
}

ffi::Error eigh_std(ffi::ThreadPool pool, ffi::AnyBuffer a, ffi::Result<ffi::AnyBuffer> w,
                    ffi::Result<ffi::AnyBuffer> v, ffi::Result<ffi::Buffer<ffi::S32>> info,
                    bool lower, bool vectors, int64_t subset, int64_t il, int64_t iu, double vl,
                    double vu) {
  return guarded([&] {
    return eigh_impl(pool, a, nullptr, w, v, info, lower, vectors, subset, il, iu, vl, vu, 1);
  });
}

ffi::Error eigh_gen(ffi::ThreadPool pool, ffi::AnyBuffer a, ffi::AnyBuffer b,
                    ffi::Result<ffi::AnyBuffer> w, ffi::Result<ffi::AnyBuffer> v,
                    ffi::Result<ffi::Buffer<ffi::S32>> info, bool lower, bool vectors,
                    int64_t subset, int64_t il, int64_t iu, double vl, double vu, int64_t itype) {
  return guarded([&] {
    return eigh_impl(pool, a, &b, w, v, info, lower, vectors, subset, il, iu, vl, vu, itype);
  });
}

}  // namespace
}  // namespace shoal::linalg

XLA_FFI_DEFINE_HANDLER_SYMBOL(ShoalLinalgEighCpu, shoal::linalg::eigh_std,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Ret<ffi::Buffer<ffi::S32>>()
                                  .Attr<bool>("lower")
                                  .Attr<bool>("vectors")
                                  .Attr<int64_t>("subset")
                                  .Attr<int64_t>("il")
                                  .Attr<int64_t>("iu")
                                  .Attr<double>("vl")
                                  .Attr<double>("vu"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(ShoalLinalgEighGenCpu, shoal::linalg::eigh_gen,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Ret<ffi::Buffer<ffi::S32>>()
                                  .Attr<bool>("lower")
                                  .Attr<bool>("vectors")
                                  .Attr<int64_t>("subset")
                                  .Attr<int64_t>("il")
                                  .Attr<int64_t>("iu")
                                  .Attr<double>("vl")
                                  .Attr<double>("vu")
                                  .Attr<int64_t>("itype"));
