// LAPACK entry points borrowed at run time from SciPy's scipy.linalg.cython_lapack.
//
// Nothing links against a BLAS/LAPACK: module import hands us the capsules of SciPy's C-ABI
// wrappers (the same trick jaxlib uses), so the LAPACK that SciPy ships is the one we call. The
// wrappers take every argument by pointer, use 32-bit Fortran integers, and have no hidden
// string-length arguments.
#pragma once

#include <complex>
#include <cstdint>
#include <string>

namespace shoal::linalg {

using lapack_int = int;

template <typename T>
struct RealOf {
  using type = T;
};
template <typename R>
struct RealOf<std::complex<R>> {
  using type = R;
};
template <typename T>
using Real = typename RealOf<T>::type;

template <typename T>
inline constexpr bool kIsComplex = !std::is_same_v<T, Real<T>>;

// Function-pointer types. Real routines (sy*) have no rwork; complex ones (he*) do.
template <typename T>
struct LapackFns;

template <typename T>
struct RealLapackFns {
  using Syevd = void(char* jobz, char* uplo, lapack_int* n, T* a, lapack_int* lda, T* w, T* work,
                     lapack_int* lwork, lapack_int* iwork, lapack_int* liwork, lapack_int* info);
  using Sygvd = void(lapack_int* itype, char* jobz, char* uplo, lapack_int* n, T* a,
                     lapack_int* lda, T* b, lapack_int* ldb, T* w, T* work, lapack_int* lwork,
                     lapack_int* iwork, lapack_int* liwork, lapack_int* info);
  using Syevr = void(char* jobz, char* range, char* uplo, lapack_int* n, T* a, lapack_int* lda,
                     T* vl, T* vu, lapack_int* il, lapack_int* iu, T* abstol, lapack_int* m, T* w,
                     T* z, lapack_int* ldz, lapack_int* isuppz, T* work, lapack_int* lwork,
                     lapack_int* iwork, lapack_int* liwork, lapack_int* info);
  using Sygvx = void(lapack_int* itype, char* jobz, char* range, char* uplo, lapack_int* n, T* a,
                     lapack_int* lda, T* b, lapack_int* ldb, T* vl, T* vu, lapack_int* il,
                     lapack_int* iu, T* abstol, lapack_int* m, T* w, T* z, lapack_int* ldz,
                     T* work, lapack_int* lwork, lapack_int* iwork, lapack_int* ifail,
                     lapack_int* info);
  using Potrf = void(char* uplo, lapack_int* n, T* a, lapack_int* lda, lapack_int* info);
  using Sygst = void(lapack_int* itype, char* uplo, lapack_int* n, T* a, lapack_int* lda, T* b,
                     lapack_int* ldb, lapack_int* info);
  using Trtrs = void(char* uplo, char* trans, char* diag, lapack_int* n, lapack_int* nrhs, T* a,
                     lapack_int* lda, T* b, lapack_int* ldb, lapack_int* info);
  static inline Syevd* syevd = nullptr;
  static inline Sygvd* sygvd = nullptr;
  static inline Syevr* syevr = nullptr;
  static inline Sygvx* sygvx = nullptr;
  static inline Potrf* potrf = nullptr;
  static inline Sygst* sygst = nullptr;
  static inline Trtrs* trtrs = nullptr;
};

template <typename C>
struct ComplexLapackFns {
  using R = Real<C>;
  using Syevd = void(char* jobz, char* uplo, lapack_int* n, C* a, lapack_int* lda, R* w, C* work,
                     lapack_int* lwork, R* rwork, lapack_int* lrwork, lapack_int* iwork,
                     lapack_int* liwork, lapack_int* info);
  using Sygvd = void(lapack_int* itype, char* jobz, char* uplo, lapack_int* n, C* a,
                     lapack_int* lda, C* b, lapack_int* ldb, R* w, C* work, lapack_int* lwork,
                     R* rwork, lapack_int* lrwork, lapack_int* iwork, lapack_int* liwork,
                     lapack_int* info);
  using Syevr = void(char* jobz, char* range, char* uplo, lapack_int* n, C* a, lapack_int* lda,
                     R* vl, R* vu, lapack_int* il, lapack_int* iu, R* abstol, lapack_int* m, R* w,
                     C* z, lapack_int* ldz, lapack_int* isuppz, C* work, lapack_int* lwork,
                     R* rwork, lapack_int* lrwork, lapack_int* iwork, lapack_int* liwork,
                     lapack_int* info);
  using Sygvx = void(lapack_int* itype, char* jobz, char* range, char* uplo, lapack_int* n, C* a,
                     lapack_int* lda, C* b, lapack_int* ldb, R* vl, R* vu, lapack_int* il,
                     lapack_int* iu, R* abstol, lapack_int* m, R* w, C* z, lapack_int* ldz,
                     C* work, lapack_int* lwork, R* rwork, lapack_int* iwork, lapack_int* ifail,
                     lapack_int* info);
  using Potrf = void(char* uplo, lapack_int* n, C* a, lapack_int* lda, lapack_int* info);
  using Sygst = void(lapack_int* itype, char* uplo, lapack_int* n, C* a, lapack_int* lda, C* b,
                     lapack_int* ldb, lapack_int* info);
  using Trtrs = void(char* uplo, char* trans, char* diag, lapack_int* n, lapack_int* nrhs, C* a,
                     lapack_int* lda, C* b, lapack_int* ldb, lapack_int* info);
  static inline Syevd* syevd = nullptr;
  static inline Sygvd* sygvd = nullptr;
  static inline Syevr* syevr = nullptr;
  static inline Sygvx* sygvx = nullptr;
  static inline Potrf* potrf = nullptr;
  static inline Sygst* sygst = nullptr;
  static inline Trtrs* trtrs = nullptr;
};

template <>
struct LapackFns<float> : RealLapackFns<float> {};
template <>
struct LapackFns<double> : RealLapackFns<double> {};
template <>
struct LapackFns<std::complex<float>> : ComplexLapackFns<std::complex<float>> {};
template <>
struct LapackFns<std::complex<double>> : ComplexLapackFns<std::complex<double>> {};

// Stores the pointer for a SciPy routine name ("dsyevd", "zhegvx", ...). Returns false for a name
// this module does not use.
bool set_lapack_function(const std::string& name, void* fn);

// Names of every routine the kernels need; all must be set before a kernel runs.
const char* const* lapack_function_names(int* count);

// True once every routine in lapack_function_names() has a pointer.
bool lapack_ready();

// OpenBLAS's per-thread thread count, `int openblas_set_num_threads_local(int)` (OpenBLAS >= 0.3.27),
// if the BLAS behind SciPy has it; nullptr otherwise. Batch workers that already run one LAPACK
// call per core must not have each call fan out over the cores again: on a loaded 2-core machine
// that oversubscription made 32×32 solves ten times slower.
void set_blas_local_threads_function(void* fn);

// A lone matrix of at least this order keeps the BLAS's own threading (default 256; smaller ones,
// and every matrix of a parallel batch, run with one BLAS thread).
void set_threaded_blas_min_order(int64_t n);
int64_t threaded_blas_min_order();

// Most threads a batch is spread over (caller included); 0: as many as XLA's CPU pool offers.
void set_max_batch_workers(int64_t n);
int64_t max_batch_workers();

// Sets the BLAS thread count of the calling thread for its lifetime (threads <= 0, or no hook:
// leaves it alone).
class ScopedBlasThreads {
 public:
  explicit ScopedBlasThreads(int threads);
  ~ScopedBlasThreads();
  ScopedBlasThreads(const ScopedBlasThreads&) = delete;
  ScopedBlasThreads& operator=(const ScopedBlasThreads&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace shoal::linalg
