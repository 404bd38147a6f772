// XLA FFI handlers (CUDA) for the symmetric/Hermitian eigenproblem through cuSOLVER.
//
//   shoal_linalg_eigh_cuda(a)        -> (a_out, w, info)           a_out aliases a
//   shoal_linalg_eigh_gen_cuda(a, b) -> (a_out, b_out, w, info)    a_out aliases a, b_out b
//
// a, b: (..., n, n) row-major device buffers of one dtype (f32, f64, c64, c128); the lower
// (lower=true) or upper triangle is read. Read as column-major, the buffer is aᵀ = conj(a), so
// cuSOLVER is asked for the opposite triangle and solves the conjugate problem in place: a_out
// then holds conj(V) column-major, i.e. Vᴴ row-major (the Python side takes conj(aᵀ)). w: (..., n)
// real; info: (...,) int32 per element, cuSOLVER's devInfo (written on the device).
// Attributes: lower, vectors (jobz), algorithm (standard only: 1 batched Jacobi syevjBatched,
// needs n <= 32; 2 syevd per element), itype (generalized: sygvd per element).
//
// Workspace comes from XLA's scratch allocator; the per-element loop only enqueues work on the
// stream XLA gives the handler, nothing here synchronizes.
#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <exception>
#include <string>

#include "cusolver_api.hpp"
#include "eigh_ffi.hpp"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace shoal::linalg {
namespace {

namespace cs = cusolver;

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
  return ffi::Error(code, "shoal.linalg eigh (CUDA): " + what + ": " + cs::status_message(s));
}

// The rare case XLA did not place an aliased output in its operand's buffer: copy with the
// driver API's cuMemcpyAsync (libcuda is always loaded where a CUDA stream exists).
ffi::Error copy_device(void* dst, const void* src, size_t bytes, void* stream) {
  using MemcpyAsync = int (*)(unsigned long long, unsigned long long, size_t, void*);  // NOLINT
  static MemcpyAsync memcpy_async = [] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    return lib != nullptr ? reinterpret_cast<MemcpyAsync>(dlsym(lib, "cuMemcpyAsync")) : nullptr;
  }();
  if (memcpy_async == nullptr) {
    return ffi::Error::Internal(
        "shoal.linalg eigh (CUDA): output not aliased to its input and cuMemcpyAsync not found");
  }
  int rc = memcpy_async(reinterpret_cast<unsigned long long>(dst),                  // NOLINT
                        reinterpret_cast<unsigned long long>(src), bytes, stream);  // NOLINT
  if (rc != 0) {
    return ffi::Error::Internal("shoal.linalg eigh (CUDA): cuMemcpyAsync failed with CUresult " +
                                std::to_string(rc));
  }
  return ffi::Error::Success();
}

template <typename T>
T* allocate(ffi::ScratchAllocator& scratch, int64_t count, ffi::Error* error) {
  const size_t bytes = sizeof(T) * static_cast<size_t>(std::max<int64_t>(count, 1));
  std::optional<void*> p = scratch.Allocate(bytes, 16);
  if (!p.has_value() || *p == nullptr) {
    *error = ffi::Error(ffi::ErrorCode::kResourceExhausted,
                        "shoal.linalg eigh (CUDA): cannot allocate " + std::to_string(bytes) +
                            " bytes of cuSOLVER workspace (out of GPU memory: use a smaller "
                            "batch or lower XLA_PYTHON_CLIENT_MEM_FRACTION)");
    return nullptr;
  }
  return static_cast<T*>(*p);
}

struct Shape {
  int64_t batch = 1;
  int n = 0;
};

ffi::Error check_shapes(const ffi::AnyBuffer& a, const ffi::AnyBuffer& a_out,
                        const ffi::AnyBuffer& w, size_t info_count, Shape* shape) {
  const auto dims = a.dimensions();
  if (dims.size() < 2 || dims[dims.size() - 1] != dims[dims.size() - 2]) {
    return ffi::Error::InvalidArgument("shoal.linalg eigh (CUDA): a must have shape (..., n, n)");
  }
  const int64_t n = dims[dims.size() - 1];
  if (n > INT_MAX) {
    return ffi::Error::InvalidArgument("shoal.linalg eigh (CUDA): n = " + std::to_string(n) +
                                       " exceeds cuSOLVER's 32-bit API");
  }
  int64_t batch = 1;
  for (size_t i = 0; i + 2 < dims.size(); ++i) batch *= dims[i];
  if (a_out.element_type() != a.element_type() || a_out.element_count() != a.element_count() ||
      static_cast<int64_t>(w.element_count()) != batch * n ||
      static_cast<int64_t>(info_count) != batch) {
    return ffi::Error::InvalidArgument(
        "shoal.linalg eigh (CUDA): output shapes do not match the inputs");
  }
  shape->batch = batch;
  shape->n = static_cast<int>(n);
  return ffi::Error::Success();
}

// Row-major lower triangle = column-major upper triangle.
int fill_mode(bool lower) { return lower ? cs::kFillModeUpper : cs::kFillModeLower; }
int eig_mode(bool vectors) { return vectors ? cs::kEigModeVector : cs::kEigModeNoVector; }

template <typename T>
ffi::Error syevd(const cs::Api& api, cs::Handle h, ffi::ScratchAllocator& scratch, Shape s,
                 bool lower, bool vectors, void* a_raw, void* w_raw, int32_t* info) {
  using R = typename cs::RealType<T>::type;
  const auto& r = cs::RoutinesFor<T>::get(api);
  T* a = static_cast<T*>(a_raw);
  R* w = static_cast<R*>(w_raw);
  const int n = s.n, jobz = eig_mode(vectors), uplo = fill_mode(lower);
  int lwork = 0;
  cs::Status st = r.syevd_buffer_size(h, jobz, uplo, n, a, n, w, &lwork);
  if (st != cs::kStatusSuccess) {
    return status_error(std::string(Names<T>::syevd) + "_bufferSize (n=" + std::to_string(n) + ")",
                        st);
  }
  ffi::Error error;
  T* work = allocate<T>(scratch, lwork, &error);
  if (work == nullptr) return error;
  const int64_t nn = static_cast<int64_t>(n) * n;
  for (int64_t i = 0; i < s.batch; ++i) {
    st = r.syevd(h, jobz, uplo, n, a + i * nn, n, w + i * n, work, lwork, info + i);
    if (st != cs::kStatusSuccess) {
      return status_error(std::string(Names<T>::syevd) + " (n=" + std::to_string(n) +
                              ", batch element " + std::to_string(i) + ")",
                          st);
    }
  }
  return ffi::Error::Success();
}

template <typename T>
ffi::Error syevj_batched(const cs::Api& api, cs::Handle h, ffi::ScratchAllocator& scratch, Shape s,
                         bool lower, bool vectors, void* a_raw, void* w_raw, int32_t* info) {
  using R = typename cs::RealType<T>::type;
  if (s.n > 32) {
    return ffi::Error::InvalidArgument(
        "shoal.linalg eigh (CUDA): the batched Jacobi solver "
        "needs n <= 32, got n = " +
        std::to_string(s.n));
  }
  const auto& r = cs::RoutinesFor<T>::get(api);
  T* a = static_cast<T*>(a_raw);
  R* w = static_cast<R*>(w_raw);
  const int n = s.n, jobz = eig_mode(vectors), uplo = fill_mode(lower);
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
                 int itype, bool lower, bool vectors, void* a_raw, void* b_raw, void* w_raw,
                 int32_t* info) {
  using R = typename cs::RealType<T>::type;
  const auto& r = cs::RoutinesFor<T>::get(api);
  T* a = static_cast<T*>(a_raw);
  T* b = static_cast<T*>(b_raw);
  R* w = static_cast<R*>(w_raw);
  const int n = s.n, jobz = eig_mode(vectors), uplo = fill_mode(lower);
  int lwork = 0;
  cs::Status st = r.sygvd_buffer_size(h, itype, jobz, uplo, n, a, n, b, n, w, &lwork);
  if (st != cs::kStatusSuccess) {
    return status_error(std::string(Names<T>::sygvd) + "_bufferSize (n=" + std::to_string(n) + ")",
                        st);
  }
  ffi::Error error;
  T* work = allocate<T>(scratch, lwork, &error);
  if (work == nullptr) return error;
  const int64_t nn = static_cast<int64_t>(n) * n;
  for (int64_t i = 0; i < s.batch; ++i) {
    st = r.sygvd(h, itype, jobz, uplo, n, a + i * nn, n, b + i * nn, n, w + i * n, work, lwork,
                 info + i);
    if (st != cs::kStatusSuccess) {
      return status_error(std::string(Names<T>::sygvd) + " (n=" + std::to_string(n) +
                              ", batch element " + std::to_string(i) + ")",
                          st);
    }
  }
  return ffi::Error::Success();
}

const cs::Api* loaded_api(ffi::Error* error) {
  const cs::Api* api = cs::api();
  if (api == nullptr) {
    *error = ffi::Error(ffi::ErrorCode::kFailedPrecondition,
                        "shoal.linalg eigh (CUDA): cuSOLVER is not loaded; import shoal.linalg "
                        "and call eigh once (it loads cuSOLVER), or set SHOAL_CUSOLVER to the "
                        "path of libcusolver.so");
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
          "shoal.linalg eigh (CUDA): unsupported dtype (need float32, float64, complex64, "
          "complex128)");
  }
}

ffi::Error eigh_cuda_impl(void* stream, ffi::ScratchAllocator& scratch, ffi::AnyBuffer a,
                          ffi::Result<ffi::AnyBuffer> a_out, ffi::Result<ffi::AnyBuffer> w,
                          ffi::Result<ffi::Buffer<ffi::S32>> info, bool lower, bool vectors,
                          int64_t algorithm) {
  ffi::Error error;
  const cs::Api* api = loaded_api(&error);
  if (api == nullptr) return error;
  Shape s;
  if (ffi::Error e = check_shapes(a, *a_out, *w, info->element_count(), &s); e.failure()) return e;
  if (algorithm != 1 && algorithm != 2) {
    return ffi::Error::InvalidArgument("shoal.linalg eigh (CUDA): algorithm must be 1 or 2");
  }
  if (s.batch == 0) return ffi::Error::Success();
  if (a_out->untyped_data() != a.untyped_data()) {
    if (ffi::Error e = copy_device(a_out->untyped_data(), a.untyped_data(), a.size_bytes(), stream);
        e.failure()) {
      return e;
    }
  }
  cs::PooledHandle handle(stream);
  if (handle.handle() == nullptr) {
    return ffi::Error::Internal("shoal.linalg eigh (CUDA): " + handle.error());
  }
  void* a_data = a_out->untyped_data();
  void* w_data = w->untyped_data();
  int32_t* info_data = info->typed_data();
  auto run = [&](auto tag) {
    using T = decltype(tag);
    return algorithm == 1 ? syevj_batched<T>(*api, handle.handle(), scratch, s, lower, vectors,
                                             a_data, w_data, info_data)
                          : syevd<T>(*api, handle.handle(), scratch, s, lower, vectors, a_data,
                                     w_data, info_data);
  };
  return for_scalar_type(a.element_type(), run);
}

ffi::Error eigh_gen_cuda_impl(void* stream, ffi::ScratchAllocator& scratch, ffi::AnyBuffer a,
                              ffi::AnyBuffer b, ffi::Result<ffi::AnyBuffer> a_out,
                              ffi::Result<ffi::AnyBuffer> b_out, ffi::Result<ffi::AnyBuffer> w,
                              ffi::Result<ffi::Buffer<ffi::S32>> info, bool lower, bool vectors,
                              int64_t itype) {
  ffi::Error error;
  const cs::Api* api = loaded_api(&error);
  if (api == nullptr) return error;
  Shape s;
  if (ffi::Error e = check_shapes(a, *a_out, *w, info->element_count(), &s); e.failure()) return e;
  if (b.element_type() != a.element_type() || b.element_count() != a.element_count() ||
      b_out->element_count() != b.element_count()) {
    return ffi::Error::InvalidArgument(
        "shoal.linalg eigh (CUDA): b must match a in shape and dtype");
  }
  if (itype < 1 || itype > 3) {
    return ffi::Error::InvalidArgument("shoal.linalg eigh (CUDA): itype must be 1, 2 or 3");
  }
  if (s.batch == 0) return ffi::Error::Success();
  if (a_out->untyped_data() != a.untyped_data()) {
    if (ffi::Error e = copy_device(a_out->untyped_data(), a.untyped_data(), a.size_bytes(), stream);
        e.failure()) {
      return e;
    }
  }
  if (b_out->untyped_data() != b.untyped_data()) {
    if (ffi::Error e = copy_device(b_out->untyped_data(), b.untyped_data(), b.size_bytes(), stream);
        e.failure()) {
      return e;
    }
  }
  cs::PooledHandle handle(stream);
  if (handle.handle() == nullptr) {
    return ffi::Error::Internal("shoal.linalg eigh (CUDA): " + handle.error());
  }
  void* a_data = a_out->untyped_data();
  void* b_data = b_out->untyped_data();
  void* w_data = w->untyped_data();
  int32_t* info_data = info->typed_data();
  const int it = static_cast<int>(itype);  // cusolverEigType_t values are the itypes
  auto run = [&](auto tag) {
    using T = decltype(tag);
    return sygvd<T>(*api, handle.handle(), scratch, s, it, lower, vectors, a_data, b_data, w_data,
                    info_data);
  };
  return for_scalar_type(a.element_type(), run);
}

// No C++ exception may cross the FFI boundary (std::string and the pool can throw bad_alloc).
template <typename F>
ffi::Error guarded(F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return ffi::Error::Internal(std::string("shoal.linalg eigh (CUDA): ") + e.what());
  } catch (...) {
    return ffi::Error::Internal("shoal.linalg eigh (CUDA): unknown error");
  }
}

ffi::Error eigh_cuda(void* stream, ffi::ScratchAllocator scratch, ffi::AnyBuffer a,
                     ffi::Result<ffi::AnyBuffer> a_out, ffi::Result<ffi::AnyBuffer> w,
                     ffi::Result<ffi::Buffer<ffi::S32>> info, bool lower, bool vectors,
                     int64_t algorithm) {
  return guarded([&] {
    return eigh_cuda_impl(stream, scratch, a, a_out, w, info, lower, vectors, algorithm);
  });
}

ffi::Error eigh_gen_cuda(void* stream, ffi::ScratchAllocator scratch, ffi::AnyBuffer a,
                         ffi::AnyBuffer b, ffi::Result<ffi::AnyBuffer> a_out,
                         ffi::Result<ffi::AnyBuffer> b_out, ffi::Result<ffi::AnyBuffer> w,
                         ffi::Result<ffi::Buffer<ffi::S32>> info, bool lower, bool vectors,
                         int64_t itype) {
  return guarded([&] {
    return eigh_gen_cuda_impl(stream, scratch, a, b, a_out, b_out, w, info, lower, vectors, itype);
  });
}

}  // namespace
}  // namespace shoal::linalg

XLA_FFI_DEFINE_HANDLER_SYMBOL(ShoalLinalgEighCuda, shoal::linalg::eigh_cuda,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<void*>>()
                                  .Ctx<ffi::ScratchAllocator>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Ret<ffi::Buffer<ffi::S32>>()
                                  .Attr<bool>("lower")
                                  .Attr<bool>("vectors")
                                  .Attr<int64_t>("algorithm"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(ShoalLinalgEighGenCuda, shoal::linalg::eigh_gen_cuda,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<void*>>()
                                  .Ctx<ffi::ScratchAllocator>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Ret<ffi::AnyBuffer>()
                                  .Ret<ffi::Buffer<ffi::S32>>()
                                  .Attr<bool>("lower")
                                  .Attr<bool>("vectors")
                                  .Attr<int64_t>("itype"));
