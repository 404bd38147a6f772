// The slice of the cuSOLVER dense API that the CUDA eigensolvers call, declared here so that
// building shoal needs no CUDA toolkit and nothing links against libcusolver: the library is
// dlopen'ed at run time (cusolver.cc) and these are the types of the pointers we dlsym.
//
// ABI notes (C ABI, as in cusolverDn.h / cusolver_common.h / cublas_api.h):
//   - opaque handles (cusolverDnHandle_t, syevjInfo_t, cudaStream_t) are pointers: void*;
//   - enums (cusolverStatus_t, cusolverEigMode_t, cublasFillMode_t, cusolverEigType_t) are
//     4-byte integers in the C ABI: int, with the documented values below;
//   - cuComplex / cuDoubleComplex are {x, y} pairs, only ever passed by pointer.
// tests/linalg/test_cusolver_abi.py compiles a translation unit with the real header (when a
// toolkit is installed) and static_asserts that every declaration here matches it.
#pragma once

#include <string>
#include <type_traits>

namespace shoal::linalg::cusolver {

using Status = int;       // cusolverStatus_t
using Handle = void*;     // cusolverDnHandle_t
using SyevjInfo = void*;  // syevjInfo_t
using Stream = void*;     // cudaStream_t

struct Complex {  // cuComplex (float2)
  float x, y;
};
struct DoubleComplex {  // cuDoubleComplex (double2)
  double x, y;
};

// The eigenvalue type of element type T.
template <typename T>
using RealOf = std::conditional_t<std::is_same_v<T, Complex>, float,
                                  std::conditional_t<std::is_same_v<T, DoubleComplex>, double, T>>;

// cusolverStatus_t
inline constexpr Status kStatusSuccess = 0;
inline constexpr Status kStatusNotInitialized = 1;
inline constexpr Status kStatusAllocFailed = 2;
inline constexpr Status kStatusInvalidValue = 3;
inline constexpr Status kStatusArchMismatch = 4;
inline constexpr Status kStatusMappingError = 5;
inline constexpr Status kStatusExecutionFailed = 6;
inline constexpr Status kStatusInternalError = 7;
inline constexpr Status kStatusMatrixTypeNotSupported = 8;
inline constexpr Status kStatusNotSupported = 9;
inline constexpr Status kStatusInvalidWorkspace = 31;
// cublasFillMode_t
inline constexpr int kFillModeLower = 0;
inline constexpr int kFillModeUpper = 1;
// cusolverEigMode_t
inline constexpr int kEigModeNoVector = 0;
inline constexpr int kEigModeVector = 1;
// cusolverEigType_t: the itype values themselves (1, 2, 3).
inline constexpr int kEigType1 = 1;
inline constexpr int kEigType2 = 2;
inline constexpr int kEigType3 = 3;

// Function-pointer types, one per cuSOLVER signature. T is the matrix element type, R the
// (real) eigenvalue type.
using CreateFn = Status (*)(Handle* handle);
using DestroyFn = Status (*)(Handle handle);
using SetStreamFn = Status (*)(Handle handle, Stream stream);
using GetVersionFn = Status (*)(int* version);
using CreateSyevjInfoFn = Status (*)(SyevjInfo* info);
using DestroySyevjInfoFn = Status (*)(SyevjInfo info);
using SyevjSetSortEigFn = Status (*)(SyevjInfo info, int sort_eig);

template <typename T, typename R>
using SyevdBufferSizeFn = Status (*)(Handle handle, int jobz, int uplo, int n, const T* a, int lda,
                                     const R* w, int* lwork);
template <typename T, typename R>
using SyevdFn = Status (*)(Handle handle, int jobz, int uplo, int n, T* a, int lda, R* w, T* work,
                           int lwork, int* info);
template <typename T, typename R>
using SygvdBufferSizeFn = Status (*)(Handle handle, int itype, int jobz, int uplo, int n,
                                     const T* a, int lda, const T* b, int ldb, const R* w,
                                     int* lwork);
template <typename T, typename R>
using SygvdFn = Status (*)(Handle handle, int itype, int jobz, int uplo, int n, T* a, int lda, T* b,
                           int ldb, R* w, T* work, int lwork, int* info);
template <typename T, typename R>
using SyevjBatchedBufferSizeFn = Status (*)(Handle handle, int jobz, int uplo, int n, const T* a,
                                            int lda, const R* w, int* lwork, SyevjInfo params,
                                            int batch_size);
template <typename T, typename R>
using SyevjBatchedFn = Status (*)(Handle handle, int jobz, int uplo, int n, T* a, int lda, R* w,
                                  T* work, int lwork, int* info, SyevjInfo params, int batch_size);

// The routines of one element type (S, D, C or Z prefix).
template <typename T, typename R>
struct Routines {
  SyevdBufferSizeFn<T, R> syevd_buffer_size = nullptr;
  SyevdFn<T, R> syevd = nullptr;
  SygvdBufferSizeFn<T, R> sygvd_buffer_size = nullptr;
  SygvdFn<T, R> sygvd = nullptr;
  SyevjBatchedBufferSizeFn<T, R> syevj_batched_buffer_size = nullptr;
  SyevjBatchedFn<T, R> syevj_batched = nullptr;
};

struct Api {
  CreateFn create = nullptr;
  DestroyFn destroy = nullptr;
  SetStreamFn set_stream = nullptr;
  GetVersionFn get_version = nullptr;
  CreateSyevjInfoFn create_syevj_info = nullptr;
  DestroySyevjInfoFn destroy_syevj_info = nullptr;
  SyevjSetSortEigFn syevj_set_sort_eig = nullptr;
  Routines<float, float> s;
  Routines<double, double> d;
  Routines<Complex, float> c;
  Routines<DoubleComplex, double> z;
};

// The routines of element type T (float, double, Complex, DoubleComplex).
template <typename T>
const Routines<T, RealOf<T>>& routines_for(const Api& api) {
  if constexpr (std::is_same_v<T, float>) {
    return api.s;
  } else if constexpr (std::is_same_v<T, double>) {
    return api.d;
  } else if constexpr (std::is_same_v<T, Complex>) {
    return api.c;
  } else {
    static_assert(std::is_same_v<T, DoubleComplex>, "a cuSOLVER element type");
    return api.z;
  }
}

// Opens `path` (a soname or a file path) and resolves every symbol. With `noload`, only a
// library already loaded in the process is used (RTLD_NOLOAD). Returns "" on success (the
// first success wins; later calls are no-ops), else why it failed. Thread-safe.
std::string load(const std::string& path, bool noload);

// The loaded API, or nullptr when load() has not succeeded.
const Api* api();

// The path or soname that was loaded ("" if none) and cusolverGetVersion's value (0 if none).
std::string loaded_path();
int version();

// Creates and destroys a handle: the check that a usable device and driver exist. Returns ""
// on success, else a message.
std::string probe();

// "CUSOLVER_STATUS_ALLOC_FAILED (out of GPU memory ...)": the status name and what to do.
std::string status_message(Status status);

// A cuSOLVER handle borrowed from the per-stream pool, bound to `stream`; returned to the pool
// on destruction. Handles are created on first need and never destroyed (a handle owns device
// resources of the device current at creation; keying by stream keeps each on its device).
class PooledHandle {
 public:
  // On failure `handle()` is nullptr and `error()` says why.
  explicit PooledHandle(Stream stream);
  ~PooledHandle();
  PooledHandle(const PooledHandle&) = delete;
  PooledHandle& operator=(const PooledHandle&) = delete;

  Handle handle() const { return handle_; }
  const std::string& error() const { return error_; }

 private:
  Stream stream_;
  Handle handle_ = nullptr;
  std::string error_;
};

}  // namespace shoal::linalg::cusolver
