#include "eigh_kernel.hpp"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace shoal::linalg {
namespace {

template <typename T>
bool is_finite(const T& x) {
  if constexpr (kIsComplex<T>) {
    return std::isfinite(x.real()) && std::isfinite(x.imag());
  } else {
    return std::isfinite(x);
  }
}

// Only the triangle LAPACK reads is checked: garbage in the other one is allowed, as in SciPy.
template <typename T>
bool triangle_finite(const T* x, int64_t n, bool lower) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t begin = lower ? 0 : i, end = lower ? i + 1 : n;
    for (int64_t j = begin; j < end; ++j) {
      if (!is_finite(x[i * n + j])) return false;
    }
  }
  return true;
}

template <typename T>
T conj_if_complex(const T& x) {
  if constexpr (kIsComplex<T>) {
    return std::conj(x);
  } else {
    return x;
  }
}

// LAPACK reports workspace sizes as floating point; in single precision a large size can come
// back rounded down, so round up generously (harmless: a little more memory).
template <typename R>
lapack_int workspace_size(R reported) {
  const double value = std::ceil(static_cast<double>(reported) * (1.0 + 1e-6));
  if (!(value <= static_cast<double>(std::numeric_limits<lapack_int>::max()))) {
    throw std::length_error("LAPACK workspace exceeds the 32-bit integer range");
  }
  return std::max<lapack_int>(1, static_cast<lapack_int>(value));
}

template <typename T>
double real_part(const T& x) {
  if constexpr (kIsComplex<T>) {
    return static_cast<double>(x.real());
  } else {
    return static_cast<double>(x);
  }
}

// v (row-major n×m) = conj(Z)ᵀ for column-major Z with leading dimension n; blocked so that
// neither side is walked with a large stride for long.
template <typename T>
void copy_out_vectors(const T* z, int64_t n, int64_t m, T* v) {
  constexpr int64_t kBlock = 32;
  for (int64_t j0 = 0; j0 < m; j0 += kBlock) {
    const int64_t j1 = std::min(m, j0 + kBlock);
    for (int64_t k0 = 0; k0 < n; k0 += kBlock) {
      const int64_t k1 = std::min(n, k0 + kBlock);
      for (int64_t j = j0; j < j1; ++j) {
        for (int64_t k = k0; k < k1; ++k) v[k * m + j] = conj_if_complex(z[j * n + k]);
      }
    }
  }
}

}  // namespace

template <typename T>
EighWorkspace<T>::EighWorkspace(const EighProblem& p) : p_(p) {
  if (p.n > std::numeric_limits<lapack_int>::max() / 2) {
    throw std::length_error("matrix order exceeds the 32-bit LAPACK integer range");
  }
  n_ = static_cast<lapack_int>(p.n);
  const int64_t nn = p.n * p.n;  // 64-bit: n up to 46340 would overflow int
  a_.resize(static_cast<size_t>(std::max<int64_t>(1, nn)));
  if (p.generalized()) b_.resize(static_cast<size_t>(std::max<int64_t>(1, nn)));
  w_.resize(static_cast<size_t>(std::max<int64_t>(1, p.n)));
  if (p.subset != Subset::kAll) {
    if (p.vectors)
      z_.resize(static_cast<size_t>(std::max<int64_t>(1, p.n * std::max<int64_t>(1, p.m))));
    isuppz_.resize(static_cast<size_t>(std::max<int64_t>(2, 2 * p.n)));
    ifail_.resize(static_cast<size_t>(std::max<int64_t>(1, p.n)));
  }
  if (p.n > 0) query();
}

template <typename T>
void EighWorkspace<T>::query() {
  using F = LapackFns<T>;
  char jobz = p_.vectors ? 'V' : 'N';
  char uplo = p_.lower() ? 'U' : 'L';  // row-major lower = column-major upper
  lapack_int n = n_, lda = std::max<lapack_int>(1, n_), info = 0, query = -1;
  lapack_int itype = static_cast<lapack_int>(p_.itype());
  T work_q{};
  R rwork_q{};
  lapack_int iwork_q = 0;
  if (p_.subset == Subset::kAll) {
    if (!solves_generalized()) {
      if constexpr (kIsComplex<T>) {
        F::syevd(&jobz, &uplo, &n, a_.data(), &lda, w_.data(), &work_q, &query, &rwork_q, &query,
                 &iwork_q, &query, &info);
      } else {
        F::syevd(&jobz, &uplo, &n, a_.data(), &lda, w_.data(), &work_q, &query, &iwork_q, &query,
                 &info);
      }
    } else {
      if constexpr (kIsComplex<T>) {
        F::sygvd(&itype, &jobz, &uplo, &n, a_.data(), &lda, b_.data(), &lda, w_.data(), &work_q,
                 &query, &rwork_q, &query, &iwork_q, &query, &info);
      } else {
        F::sygvd(&itype, &jobz, &uplo, &n, a_.data(), &lda, b_.data(), &lda, w_.data(), &work_q,
                 &query, &iwork_q, &query, &info);
      }
    }
    lwork_ = workspace_size(real_part(work_q));
    lrwork_ = workspace_size(rwork_q);
    liwork_ = std::max<lapack_int>(1, iwork_q);
  } else if (!solves_generalized()) {
    char range = p_.subset == Subset::kByIndex ? 'I' : 'V';
    R vl = static_cast<R>(p_.vl), vu = static_cast<R>(p_.vu), abstol = 0;
    lapack_int il = 1, iu = std::max<lapack_int>(1, n), m = 0;
    T* z = p_.vectors ? z_.data() : a_.data();
    if constexpr (kIsComplex<T>) {
      F::syevr(&jobz, &range, &uplo, &n, a_.data(), &lda, &vl, &vu, &il, &iu, &abstol, &m,
               w_.data(), z, &lda, isuppz_.data(), &work_q, &query, &rwork_q, &query, &iwork_q,
               &query, &info);
    } else {
      F::syevr(&jobz, &range, &uplo, &n, a_.data(), &lda, &vl, &vu, &il, &iu, &abstol, &m,
               w_.data(), z, &lda, isuppz_.data(), &work_q, &query, &iwork_q, &query, &info);
    }
    lwork_ = workspace_size(real_part(work_q));
    lrwork_ = workspace_size(rwork_q);
    liwork_ = std::max<lapack_int>(1, iwork_q);
  } else {
    // ?sygvx: documented sizes (its query reports only lwork).
    char range = p_.subset == Subset::kByIndex ? 'I' : 'V';
    R vl = static_cast<R>(p_.vl), vu = static_cast<R>(p_.vu), abstol = 0;
    lapack_int il = 1, iu = std::max<lapack_int>(1, n), m = 0;
    T* z = p_.vectors ? z_.data() : a_.data();
    if constexpr (kIsComplex<T>) {
      F::sygvx(&itype, &jobz, &range, &uplo, &n, a_.data(), &lda, b_.data(), &lda, &vl, &vu, &il,
               &iu, &abstol, &m, w_.data(), z, &lda, &work_q, &query, &rwork_q, &iwork_q,
               ifail_.data(), &info);
    } else {
      F::sygvx(&itype, &jobz, &range, &uplo, &n, a_.data(), &lda, b_.data(), &lda, &vl, &vu, &il,
               &iu, &abstol, &m, w_.data(), z, &lda, &work_q, &query, &iwork_q, ifail_.data(),
               &info);
    }
    const int64_t min_lwork = kIsComplex<T> ? 2 * p_.n : 8 * p_.n;
    lwork_ = std::max<lapack_int>(workspace_size(real_part(work_q)),
                                  static_cast<lapack_int>(std::max<int64_t>(1, min_lwork)));
    lrwork_ = static_cast<lapack_int>(std::max<int64_t>(1, 7 * p_.n));
    liwork_ = static_cast<lapack_int>(std::max<int64_t>(1, 5 * p_.n));
  }
  work_.resize(static_cast<size_t>(lwork_));
  if constexpr (kIsComplex<T>) rwork_.resize(static_cast<size_t>(lrwork_));
  iwork_.resize(static_cast<size_t>(liwork_));
}

template <typename T>
int32_t EighWorkspace<T>::run_lapack(lapack_int* found) {
  using F = LapackFns<T>;
  char jobz = p_.vectors ? 'V' : 'N';
  char uplo = p_.lower() ? 'U' : 'L';  // row-major lower = column-major upper
  lapack_int n = n_, lda = std::max<lapack_int>(1, n_), info = 0;
  lapack_int itype = static_cast<lapack_int>(p_.itype());
  lapack_int lwork = lwork_, lrwork = lrwork_, liwork = liwork_;
  *found = n;
  if (p_.subset == Subset::kAll) {
    if (!solves_generalized()) {
      if constexpr (kIsComplex<T>) {
        F::syevd(&jobz, &uplo, &n, a_.data(), &lda, w_.data(), work_.data(), &lwork, rwork_.data(),
                 &lrwork, iwork_.data(), &liwork, &info);
      } else {
        F::syevd(&jobz, &uplo, &n, a_.data(), &lda, w_.data(), work_.data(), &lwork, iwork_.data(),
                 &liwork, &info);
      }
    } else {
      if constexpr (kIsComplex<T>) {
        F::sygvd(&itype, &jobz, &uplo, &n, a_.data(), &lda, b_.data(), &lda, w_.data(),
                 work_.data(), &lwork, rwork_.data(), &lrwork, iwork_.data(), &liwork, &info);
      } else {
        F::sygvd(&itype, &jobz, &uplo, &n, a_.data(), &lda, b_.data(), &lda, w_.data(),
                 work_.data(), &lwork, iwork_.data(), &liwork, &info);
      }
    }
    return info;
  }
  char range = p_.subset == Subset::kByIndex ? 'I' : 'V';
  R vl = static_cast<R>(p_.vl), vu = static_cast<R>(p_.vu);
  // Twice the underflow threshold: LAPACK's advice for the most accurate eigenvalues.
  R abstol = 2 * std::numeric_limits<R>::min();
  lapack_int il = static_cast<lapack_int>(p_.il + 1), iu = static_cast<lapack_int>(p_.iu + 1);
  if (p_.subset == Subset::kByValue) il = 1, iu = std::max<lapack_int>(1, n);
  lapack_int m = 0;
  T* z = p_.vectors ? z_.data() : a_.data();
  if (!solves_generalized()) {
    if constexpr (kIsComplex<T>) {
      F::syevr(&jobz, &range, &uplo, &n, a_.data(), &lda, &vl, &vu, &il, &iu, &abstol, &m,
               w_.data(), z, &lda, isuppz_.data(), work_.data(), &lwork, rwork_.data(), &lrwork,
               iwork_.data(), &liwork, &info);
    } else {
      F::syevr(&jobz, &range, &uplo, &n, a_.data(), &lda, &vl, &vu, &il, &iu, &abstol, &m,
               w_.data(), z, &lda, isuppz_.data(), work_.data(), &lwork, iwork_.data(), &liwork,
               &info);
    }
  } else {
    if constexpr (kIsComplex<T>) {
      F::sygvx(&itype, &jobz, &range, &uplo, &n, a_.data(), &lda, b_.data(), &lda, &vl, &vu, &il,
               &iu, &abstol, &m, w_.data(), z, &lda, work_.data(), &lwork, rwork_.data(),
               iwork_.data(), ifail_.data(), &info);
    } else {
      F::sygvx(&itype, &jobz, &range, &uplo, &n, a_.data(), &lda, b_.data(), &lda, &vl, &vu, &il,
               &iu, &abstol, &m, w_.data(), z, &lda, work_.data(), &lwork, iwork_.data(),
               ifail_.data(), &info);
    }
  }
  *found = m;
  return info;
}

// ?sygvd / ?sygvx in their steps, with the Cholesky factor of the shared b computed once per
// workspace (thread): potrf, then per element ?sygst, the standard solver on the reduced
// matrix, and the back-transform. Status codes are ?sygvd's (n + k: the minor of order k of b).
template <typename T>
int32_t EighWorkspace<T>::solve_shared_b(const T* b, lapack_int* found) {
  using F = LapackFns<T>;
  char uplo = p_.lower() ? 'U' : 'L';  // row-major lower = column-major upper
  lapack_int n = n_, lda = std::max<lapack_int>(1, n_), info = 0;
  lapack_int itype = static_cast<lapack_int>(p_.itype());
  if (!factored_) {
    std::memcpy(b_.data(), b, sizeof(T) * static_cast<size_t>(p_.n * p_.n));
    F::potrf(&uplo, &n, b_.data(), &lda, &info);
    factor_info_ = info;
    factored_ = true;
  }
  *found = 0;
  if (factor_info_ != 0) return factor_info_ > 0 ? n + factor_info_ : factor_info_;
  F::sygst(&itype, &uplo, &n, a_.data(), &lda, b_.data(), &lda, &info);
  if (info != 0) return info;
  if (const int32_t status = run_lapack(found); status != 0) return status;
  if (!p_.vectors || *found == 0) return 0;
  T* z = p_.subset == Subset::kAll ? a_.data() : z_.data();
  lapack_int cols = *found;
  if (p_.itype() != 3) {  // x = U⁻¹ y (upper) or L⁻ᴴ y (lower)
    char trans = uplo == 'U' ? 'N' : (kIsComplex<T> ? 'C' : 'T'), diag = 'N';
    F::trtrs(&uplo, &trans, &diag, &n, &cols, b_.data(), &lda, z, &lda, &info);
    return info;
  }
  // type 3: x = Uᴴ y (upper) or L y (lower), row by row from the bottom so y is read before
  // it is overwritten (both are lower triangular in effect: x_i uses y_k for k <= i).
  const T* t = b_.data();
  for (lapack_int j = 0; j < cols; ++j) {
    T* y = z + static_cast<int64_t>(j) * n;
    for (lapack_int i = n - 1; i >= 0; --i) {
      T sum{};
      for (lapack_int k = 0; k <= i; ++k) {
        sum += (uplo == 'U' ? conj_if_complex(t[k + static_cast<int64_t>(i) * n])
                            : t[i + static_cast<int64_t>(k) * n]) *
               y[k];
      }
      y[i] = sum;
    }
  }
  return 0;
}

template <typename T>
int32_t EighWorkspace<T>::solve(const T* a, const T* b, R* w, T* v) {
  const int64_t n = p_.n, m = p_.m, nn = n * n;
  const R nan = std::numeric_limits<R>::quiet_NaN();
  if (n == 0) return 0;
  int32_t status = 0;
  lapack_int found = 0;
  if (!triangle_finite(a, n, p_.lower()) ||
      (p_.generalized() && !triangle_finite(b, n, p_.lower()))) {
    status = kNonFiniteInput;
  } else {
    std::memcpy(a_.data(), a, sizeof(T) * static_cast<size_t>(nn));
    if (shares_b()) {
      status = solve_shared_b(b, &found);
    } else {
      if (p_.generalized()) std::memcpy(b_.data(), b, sizeof(T) * static_cast<size_t>(nn));
      status = run_lapack(&found);
    }
  }
  if (status != 0) {
    std::fill(w, w + m, nan);
    if (v != nullptr) std::fill(v, v + n * m, T(nan));
    return status;
  }
  const int64_t kept = std::min<int64_t>(found, m);
  std::copy(w_.data(), w_.data() + kept, w);
  std::fill(w + kept, w + m, nan);
  if (v != nullptr) {
    const T* z = p_.subset == Subset::kAll ? a_.data() : z_.data();
    if (kept == m) {
      copy_out_vectors(z, n, m, v);
    } else {
      // By-value subset with fewer eigenvalues in range than the padded width: the padding
      // columns are zero (their eigenvalues are NaN).
      for (int64_t k = 0; k < n; ++k) {
        for (int64_t j = 0; j < m; ++j)
          v[k * m + j] = j < kept ? conj_if_complex(z[j * n + k]) : T(0);
      }
    }
  }
  return 0;
}

template class EighWorkspace<float>;
template class EighWorkspace<double>;
template class EighWorkspace<std::complex<float>>;
template class EighWorkspace<std::complex<double>>;

}  // namespace shoal::linalg
