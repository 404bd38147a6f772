// The CUDA handlers (cuSOLVER, dlopen'ed at run time); contract in eigh_ffi.hpp.
//
// Read as column-major, the row-major buffer is aᵀ = conj(a), so cuSOLVER is asked for the
// opposite triangle and solves the conjugate problem in place: a_out then holds conj(V)
// column-major, i.e. Vᴴ row-major (the Python side takes conj(aᵀ)). w: (..., n) real; info: (...,)
// int32 per element, cuSOLVER's devInfo (written on the device). The kernels compute all
// eigenpairs (options.subset must be kAll; subsets are selected in JAX). The standard handler's
// "algorithm" attribute picks the routine: kJacobi (batched syevjBatched, n <= 32) or kSyevd (per
// element); the generalized handler runs sygvd per element.
//
// Workspace comes from XLA's scratch allocator; the per-element loop only enqueues work on the
// stream XLA gives the handler, nothing here synchronizes.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <optional>
#include <string>

#include "../common/ffi_guard.hpp"
#include "../cuda/driver_api.hpp"
#include "cusolver_api.hpp"
#include "eigh_ffi.hpp"
#include "xla/ffi/api/ffi.h"

namespace shoal::linalg {

// The routine of the standard handler (its "algorithm" attribute; values as in _cuda.Algorithm).
enum class Algorithm : int64_t { kJacobi = 1, kSyevd = 2 };

}  // namespace shoal::linalg

XLA_FFI_REGISTER_ENUM_ATTR_DECODING(shoal::linalg::Algorithm);

namespace ffi = xla::ffi;

namespace shoal::linalg {
namespace {

namespace cs = cusolver;

constexpr const char* kWho = "shoal.linalg eigh (CUDA)";

// syevjBatched takes its batch size and workspace size as int; chunks of this many matrices
// keep both far from overflow (n <= 32: at most ~2^10 workspace elements per matrix).
constexpr int64_t kJacobiChunk = 1 << 16;

template <typename T>
struct Names;
template <>
struct Names<float> {
  static constexpr const char* syevd = "cusolverDnSsyevd";
  static constexpr const char* sygvd = "cusolverDnSsygvd";
  static constexpr const char* syevj = "cusolverDnSsyevjBatched";
};
template <>
struct Names<double> {
  static constexpr const char* syevd = "cusolverDnDsyevd";
  static constexpr const char* sygvd = "cusolverDnDsygvd";
  static constexpr const char* syevj = "cusolverDnDsyevjBatched";
};
template <>
struct Names<cs::Complex> {
  static constexpr const char* syevd = "cusolverDnCheevd";
  static constexpr const char* sygvd = "cusolverDnChegvd";
  static constexpr const char* syevj = "cusolverDnCheevjBatched";
};
template <>
struct Names<cs::DoubleComplex> {
  static constexpr const char* syevd = "cusolverDnZheevd";
  static constexpr const char* sygvd = "cusolverDnZhegvd";
  static constexpr const char* syevj = "cusolverDnZheevjBatched";
};

ffi::Error status_error(const std::string& what, cs::Status s) {
  const auto code =
      s == cs::kStatusAllocFailed ? ffi::ErrorCode::kResourceExhausted : ffi::ErrorCode::kInternal;
  return ffi::Error(code, std::string(kWho) + ": " + what + ": " + cs::status_message(s));
}

// The rare case XLA did not place an aliased output in its operand's buffer: copy on the stream
// with the driver API (src/cuda/driver_api: libcuda is there wherever a CUDA stream exists).
ffi::Error copy_device(void* dst, const void* src, size_t bytes, void* stream) {
  std::string why;
  const cuda::DriverApi* driver = cuda::driver(&why);
  if (driver == nullptr) {
    return ffi::Error::Internal(std::string(kWho) + ": output not aliased to its input, and " +
                                why);
  }
  const cuda::CUresult rc = driver->cuMemcpyAsync(reinterpret_cast<cuda::CUdeviceptr>(dst),
                                                  reinterpret_cast<cuda::CUdeviceptr>(src), bytes,
                                                  static_cast<cuda::CUstream>(stream));
  if (rc != cuda::CUDA_SUCCESS) {
    return ffi::Error::Internal(std::string(kWho) +
                                ": cuMemcpyAsync failed: " + cuda::describe(*driver, rc));
  }
  return ffi::Error::Success();
}

template <typename T>
T* allocate(ffi::ScratchAllocator& scratch, int64_t count, ffi::Error* error) {
  const size_t bytes = sizeof(T) * static_cast<size_t>(std::max<int64_t>(count, 1));
  std::optional<void*> p = scratch.Allocate(bytes, 16);
  if (!p.has_value() || *p == nullptr) {
    *error = ffi::Error(ffi::ErrorCode::kResourceExhausted,
                        std::string(kWho) + ": cannot allocate " + std::to_string(bytes) +
                            " bytes of cuSOLVER workspace (out of GPU memory: use a smaller "
                            "batch or lower XLA_PYTHON_CLIENT_MEM_FRACTION)");
    return nullptr;
  }
  return static_cast<T*>(*p);
}

// The batch and order of one call (cuSOLVER's API takes int orders).
struct Shape {
  int64_t batch = 1;
  int n = 0;
};

// Row-major lower triangle = column-major upper triangle.
int fill_mode(const EighOptions& o) { return o.lower() ? cs::kFillModeUpper : cs::kFillModeLower; }
int eig_mode(const EighOptions& o) { return o.vectors ? cs::kEigModeVector : cs::kEigModeNoVector; }

// One cuSOLVER call per batch element (syevd, sygvd): query(&lwork) sizes the workspace, solve(i,
// work, lwork) enqueues element i.
template <typename T, class Query, class Solve>
ffi::Error per_element(ffi::ScratchAllocator& scratch, Shape s, const char* routine, Query&& query,
                       Solve&& solve) {
  const std::string n = std::to_string(s.n);
  int lwork = 0;
  cs::Status st = query(&lwork);
  if (st != cs::kStatusSuccess) {
    return status_error(std::string(routine) + "_bufferSize (n=" + n + ")", st);
  }
  ffi::Error error;
  T* work = allocate<T>(scratch, lwork, &error);
  if (work == nullptr) return error;
  for (int64_t i = 0; i < s.batch; ++i) {
    st = solve(i, work, lwork);
    if (st != cs::kStatusSuccess) {
      return status_error(
          std::string(routine) + " (n=" + n + ", batch element " + std::to_string(i) + ")", st);
    }
  }
  return ffi::Error::Success();
}

template <typename T>
ffi::Error syevd(const cs::Api& api, cs::Handle h, ffi::ScratchAllocator& scratch, Shape s,
                 const EighOptions& o, void* a_raw, void* w_raw, int32_t* info) {
  const auto& r = cs::routines_for<T>(api);
  T* a = static_cast<T*>(a_raw);
  auto* w = static_cast<cs::RealOf<T>*>(w_raw);
  const int n = s.n, jobz = eig_mode(o), uplo = fill_mode(o);
  const int64_t nn = static_cast<int64_t>(n) * n;
  return per_element<T>(
      scratch, s, Names<T>::syevd,
      [&](int* lwork) { return r.syevd_buffer_size(h, jobz, uplo, n, a, n, w, lwork); },
      [&](int64_t i, T* work, int lwork) {
        return r.syevd(h, jobz, uplo, n, a + i * nn, n, w + i * n, work, lwork, info + i);
      });
}

template <typename T>
ffi::Error syevj_batched(const cs::Api& api, cs::Handle h, ffi::ScratchAllocator& scratch, Shape s,
                         const EighOptions& o, void* a_raw, void* w_raw, int32_t* info) {
  using R = cs::RealOf<T>;
  if (s.n > 32) {
    return ffi::Error::InvalidArgument(
        std::string(kWho) +
        ": the batched Jacobi solver needs n <= 32, got n = " + std::to_string(s.n));
  }
  const auto& r = cs::routines_for<T>(api);
  T* a = static_cast<T*>(a_raw);
  R* w = static_cast<R*>(w_raw);
  const int n = s.n, jobz = eig_mode(o), uplo = fill_mode(o);
  cs::SyevjInfo params = nullptr;
  cs::Status st = api.create_syevj_info(&params);
  if (st != cs::kStatusSuccess) return status_error("cusolverDnCreateSyevjInfo", st);
  // The parameters are read while the calls are enqueued; destroying them afterwards is safe.
  struct Guard {
    const cs::Api& api;
    cs::SyevjInfo p;
    ~Guard() { api.destroy_syevj_info(p); }
  } guard{api, params};
  // Ascending order is what callers (and the subset selection) rely on; it is the default,
  // set explicitly so a changed default cannot break us.
  st = api.syevj_set_sort_eig(params, 1);
  if (st != cs::kStatusSuccess) return status_error("cusolverDnXsyevjSetSortEig", st);
  const int chunk = static_cast<int>(std::min<int64_t>(s.batch, kJacobiChunk));
  int lwork = 0;
  st = r.syevj_batched_buffer_size(h, jobz, uplo, n, a, n, w, &lwork, params, chunk);
  if (st != cs::kStatusSuccess) {
    return status_error(std::string(Names<T>::syevj) + "_bufferSize (n=" + std::to_string(n) +
                            ", batch " + std::to_string(chunk) + ")",
                        st);
  }
  ffi::Error error;
  T* work = allocate<T>(scratch, lwork, &error);
  if (work == nullptr) return error;
  const int64_t nn = static_cast<int64_t>(n) * n;
  for (int64_t start = 0; start < s.batch; start += chunk) {
    const int count = static_cast<int>(std::min<int64_t>(chunk, s.batch - start));
    st = r.syevj_batched(h, jobz, uplo, n, a + start * nn, n, w + start * n, work, lwork,
                         info + start, params, count);
    if (st != cs::kStatusSuccess) {
      return status_error(std::string(Names<T>::syevj) + " (n=" + std::to_string(n) + ", batch " +
                              std::to_string(count) + ")",
                          st);
    }
  }
  return ffi::Error::Success();
}

template <typename T>
ffi::Error sygvd(const cs::Api& api, cs::Handle h, ffi::ScratchAllocator& scratch, Shape s,
                 const EighOptions& o, void* a_raw, void* b_raw, void* w_raw, int32_t* info) {
  const auto& r = cs::routines_for<T>(api);
  T* a = static_cast<T*>(a_raw);
  T* b = static_cast<T*>(b_raw);
  auto* w = static_cast<cs::RealOf<T>*>(w_raw);
  const int n = s.n, jobz = eig_mode(o), uplo = fill_mode(o);
  const int itype = o.itype();  // cusolverEigType_t values are the itypes
  const int64_t nn = static_cast<int64_t>(n) * n;
  return per_element<T>(
      scratch, s, Names<T>::sygvd,
      [&](int* lwork) {
        return r.sygvd_buffer_size(h, itype, jobz, uplo, n, a, n, b, n, w, lwork);
      },
      [&](int64_t i, T* work, int lwork) {
        return r.sygvd(h, itype, jobz, uplo, n, a + i * nn, n, b + i * nn, n, w + i * n, work,
                       lwork, info + i);
      });
}

const cs::Api* loaded_api(ffi::Error* error) {
  const cs::Api* api = cs::api();
  if (api == nullptr) {
    *error = ffi::Error(ffi::ErrorCode::kFailedPrecondition,
                        std::string(kWho) +
                            ": cuSOLVER is not loaded; import shoal.linalg and call eigh once (it "
                            "loads cuSOLVER), or set SHOAL_CUSOLVER to the path of libcusolver.so");
  }
  return api;
}

// Calls run(T{}) with T the cuSOLVER scalar type of `type`.
template <typename Run>
ffi::Error for_scalar_type(ffi::DataType type, Run&& run) {
  switch (type) {
    case ffi::DataType::F32:
      return run(float{});
    case ffi::DataType::F64:
      return run(double{});
    case ffi::DataType::C64:
      return run(cs::Complex{});
    case ffi::DataType::C128:
      return run(cs::DoubleComplex{});
    default:
      return ffi::Error::InvalidArgument(
          std::string(kWho) + ": unsupported dtype (need float32, float64, complex64, complex128)");
  }
}

// What both handlers do around their solver: the checks, the copies that XLA's aliasing
// normally makes unnecessary, a cuSOLVER handle; then solve(T{}, api, handle, shape) with T the
// cuSOLVER scalar type. b and b_out are nullptr for the standard problem.
template <class Solve>
ffi::Error run_cuda(void* stream, const ffi::AnyBuffer& a, const ffi::AnyBuffer* b,
                    const EighOptions& options, ffi::AnyBuffer& a_out, ffi::AnyBuffer* b_out,
                    const ffi::AnyBuffer& w, size_t info_count, Solve&& solve) {
  ffi::Error error;
  const cs::Api* api = loaded_api(&error);
  if (api == nullptr) return error;
  ProblemShape p;
  if (ffi::Error e = check_problem(kWho, a, b, options, &p); e.failure()) return e;
  if (options.subset != Subset::kAll) {
    return ffi::Error::InvalidArgument(std::string(kWho) +
                                       ": the kernels compute all eigenpairs (subset must be 0)");
  }
  if (p.n > INT_MAX) {
    return ffi::Error::InvalidArgument(std::string(kWho) + ": n = " + std::to_string(p.n) +
                                       " exceeds cuSOLVER's 32-bit API");
  }
  if (a_out.element_type() != a.element_type() || a_out.element_count() != a.element_count() ||
      (b_out != nullptr && b_out->element_count() != b->element_count()) ||
      static_cast<int64_t>(w.element_count()) != p.batch * p.n ||
      static_cast<int64_t>(info_count) != p.batch) {
    return ffi::Error::InvalidArgument(std::string(kWho) +
                                       ": output shapes do not match the inputs");
  }
  if (p.batch == 0) return ffi::Error::Success();
  const ffi::AnyBuffer* inputs[] = {&a, b};
  ffi::AnyBuffer* outputs[] = {&a_out, b_out};
  for (int i = 0; i < 2; ++i) {
    if (inputs[i] == nullptr || outputs[i]->untyped_data() == inputs[i]->untyped_data()) continue;
    if (ffi::Error e = copy_device(outputs[i]->untyped_data(), inputs[i]->untyped_data(),
                                   inputs[i]->size_bytes(), stream);
        e.failure()) {
      return e;
    }
  }
  cs::PooledHandle handle(stream);
  if (handle.handle() == nullptr) {
    return ffi::Error::Internal(std::string(kWho) + ": " + handle.error());
  }
  const Shape s{p.batch, static_cast<int>(p.n)};
  return for_scalar_type(a.element_type(),
                         [&](auto tag) { return solve(tag, *api, handle.handle(), s); });
}

ffi::Error eigh_cuda(void* stream, ffi::ScratchAllocator scratch, ffi::AnyBuffer a,
                     EighOptions options, ffi::Result<ffi::AnyBuffer> a_out,
                     ffi::Result<ffi::AnyBuffer> w, ffi::Result<ffi::Buffer<ffi::S32>> info,
                     Algorithm algorithm) {
  return without_exceptions(kWho, [&] {
    if (algorithm != Algorithm::kJacobi && algorithm != Algorithm::kSyevd) {
      return ffi::Error::InvalidArgument(std::string(kWho) + ": algorithm must be 1 or 2");
    }
    auto solve = [&](auto tag, const cs::Api& api, cs::Handle h, Shape s) {
      using T = decltype(tag);
      return algorithm == Algorithm::kJacobi
                 ? syevj_batched<T>(api, h, scratch, s, options, a_out->untyped_data(),
                                    w->untyped_data(), info->typed_data())
                 : syevd<T>(api, h, scratch, s, options, a_out->untyped_data(), w->untyped_data(),
                            info->typed_data());
    };
    return run_cuda(stream, a, nullptr, options, *a_out, nullptr, *w, info->element_count(), solve);
  });
}

ffi::Error eigh_gen_cuda(void* stream, ffi::ScratchAllocator scratch, ffi::AnyBuffer a,
                         ffi::AnyBuffer b, EighOptions options, ffi::Result<ffi::AnyBuffer> a_out,
                         ffi::Result<ffi::AnyBuffer> b_out, ffi::Result<ffi::AnyBuffer> w,
                         ffi::Result<ffi::Buffer<ffi::S32>> info) {
  return without_exceptions(kWho, [&] {
    auto solve = [&](auto tag, const cs::Api& api, cs::Handle h, Shape s) {
      return sygvd<decltype(tag)>(api, h, scratch, s, options, a_out->untyped_data(),
                                  b_out->untyped_data(), w->untyped_data(), info->typed_data());
    };
    return run_cuda(stream, a, &b, options, *a_out, &*b_out, *w, info->element_count(), solve);
  });
}

// The contexts every CUDA handler takes: the stream and XLA's scratch allocator.
auto bind_cuda() {
  return ffi::Ffi::Bind().Ctx<ffi::PlatformStream<void*>>().Ctx<ffi::ScratchAllocator>();
}

}  // namespace
}  // namespace shoal::linalg

XLA_FFI_DEFINE_HANDLER_SYMBOL(ShoalLinalgEighCuda, shoal::linalg::eigh_cuda,
                              shoal::linalg::bind_problem<1>(shoal::linalg::bind_cuda())
                                  .Ret<ffi::AnyBuffer>()  // a_out
                                  .Ret<ffi::AnyBuffer>()  // w
                                  .Ret<ffi::Buffer<ffi::S32>>()
                                  .Attr<shoal::linalg::Algorithm>("algorithm"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(ShoalLinalgEighGenCuda, shoal::linalg::eigh_gen_cuda,
                              shoal::linalg::bind_problem<2>(shoal::linalg::bind_cuda())
                                  .Ret<ffi::AnyBuffer>()  // a_out
                                  .Ret<ffi::AnyBuffer>()  // b_out
                                  .Ret<ffi::AnyBuffer>()  // w
                                  .Ret<ffi::Buffer<ffi::S32>>());
