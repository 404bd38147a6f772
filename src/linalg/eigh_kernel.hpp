// One dense (generalized) symmetric/Hermitian eigenproblem at a time, through LAPACK.
//
// Layout: inputs arrive row-major, and only one triangle of each is read (SciPy's semantics).
// Read column-major, the row-major lower triangle is the upper one, and the Hermitian matrix it
// defines is the conjugate of ours, so LAPACK (uplo flipped) solves conj(A) z = λ conj(B) z; the
// eigenvectors we want are conj(z). The copy-out therefore transposes and conjugates, which also
// turns LAPACK's column-major Z into our row-major V. No symmetrized copy is ever made.
#pragma once

#include <cstdint>
#include <vector>

#include "eigh_options.hpp"
#include "lapack.hpp"

namespace shoal::linalg {

// The options (what is solved: vectors give jobz, the triangle uplo, the problem itype) for
// matrices of order n.
struct EighProblem : EighOptions {
  int64_t n = 0;  // matrix order
  int64_t m = 0;  // eigenpairs returned: length of w, columns of v
};

// Status of one batch element: 0 success, kNonFiniteInput for NaN/Inf input, otherwise LAPACK's
// info (interpreted in Python with the routine and n at hand).
inline constexpr int32_t kNonFiniteInput = -1000;

// Scratch memory and LAPACK workspace for one thread; sized once (with LAPACK's workspace
// queries), reused for every batch element that thread solves.
template <typename T>
class EighWorkspace {
 public:
  using R = Real<T>;
  // May throw std::bad_alloc or std::length_error (workspace beyond 32-bit LAPACK integers).
  explicit EighWorkspace(const EighProblem& p);

  // a, b: row-major n×n, only the named triangle read (b ignored for the standard problem; with
  // options.shared_b, read on the first call only: every call must pass the same b).
  // w: m values (NaN padding for a by-value subset with fewer than m eigenvalues in range).
  // v: row-major n×m, or nullptr when !vectors. Returns the status code described above; on
  // failure w and v are NaN.
  int32_t solve(const T* a, const T* b, R* w, T* v);

 private:
  void query();
  int32_t run_lapack(lapack_int* found);
  int32_t solve_shared_b(const T* b, lapack_int* found);
  // A generalized problem whose b is the same for every element is reduced here (potrf once,
  // then ?sygst) and LAPACK solves a standard problem.
  bool shares_b() const { return p_.generalized() && p_.shared_b; }
  bool solves_generalized() const { return p_.generalized() && !p_.shared_b; }

  EighProblem p_;
  lapack_int n_;
  std::vector<T> a_, b_, z_, work_;
  std::vector<R> w_, rwork_;
  std::vector<lapack_int> iwork_, isuppz_, ifail_;
  lapack_int lwork_ = 1, lrwork_ = 1, liwork_ = 1;
  bool factored_ = false;       // shares_b(): b_ holds the Cholesky factor
  lapack_int factor_info_ = 0;  // potrf's info for it
};

extern template class EighWorkspace<float>;
extern template class EighWorkspace<double>;
extern template class EighWorkspace<std::complex<float>>;
extern template class EighWorkspace<std::complex<double>>;

}  // namespace shoal::linalg
