// The Rosenbrock iteration matrix M = I/(hγ) − J (M/(hγ) − J with a mass matrix: mass.hpp): assembled from the model by dual numbers,
// factorised once per step, then used for every stage solve.
//
// A stepper is written against this interface (assemble, solve), so the dense LU here and the
// sparse direct solver (sparse_iteration_matrix.hpp) are interchangeable policies. LuScalar is
// the factorisation's precision; vectors keep the solve's precision T.
#pragma once

#include "shoal/ad/jacobian.hpp"
#include "shoal/config.hpp"
#include "shoal/linalg/dense_lu.hpp"
#include "shoal/ode/mass.hpp"

namespace shoal {
namespace ode {

template <class Model, class LuScalar>
struct DenseIterationMatrix {
  static constexpr int n = Model::n_vars;
  linalg::DenseLU<LuScalar, n> lu;  // holds −J, then M, then its factors

  // f(t, y), ∂f/∂t, and M = I/(hγ) − J factorised, all at (t, y). inv_hg = 1/(hγ).
  template <class T>
  SHOAL_HD void assemble(const T* y, const T& t, const T* p, const T& inv_hg, T* f0, T* ft) {
    ad::rhs_and_jacobian<Model, T, LuScalar>(y, t, p, f0, lu.a, ft);
    const LuScalar diag = LuScalar(inv_hg);
    for (int i = 0; i < n * n; ++i) lu.a[i] = -lu.a[i];
    if constexpr (has_mass<Model>()) {
      using Mass = typename Model::MassMatrix;
      for (int k = 0; k < Mass::nnz; ++k)
        lu.a[Mass::row(k) * n + Mass::col(k)] += diag * LuScalar(Mass::value(k));
    } else {
      for (int i = 0; i < n; ++i) lu.a[i * n + i] += diag;
    }
    lu.factor();
  }

  template <class T>
  SHOAL_HD void solve(T* b) const {
    lu.solve(b);
  }
  // b ← M⁻ᵀ b (the adjoint, rosenbrock_adjoint.hpp).
  template <class T>
  SHOAL_HD void solve_transposed(T* b) const {
    lu.solve_transposed(b);
  }

  // Lane l of a lanes matrix's factors (linalg/dense_lu_lanes.hpp), which are the scalar
  // factorisation's bits: the adjoint's backward sweeps evaluate W steps at once in the lanes,
  // then transpose each alone (adjoint_backward_lanes.hpp).
  static constexpr bool loads_lanes = true;
  template <class LanesMatrix>
  void load_lane(const LanesMatrix& from, int l) {
    for (int i = 0; i < n * n; ++i) lu.a[i] = lane(from.lu.a[i], l);
    for (int i = 0; i < n; ++i) lu.piv[i] = from.lu.piv[i][l];
  }
};

// The dense policy for a given factorisation precision, as a one-parameter template.
template <class LuScalar>
struct DenseMatrixOf {
  template <class Model>
  using Type = DenseIterationMatrix<Model, LuScalar>;
};
template <class Model>
using DenseMatrixLu64 = DenseIterationMatrix<Model, double>;
template <class Model>
using DenseMatrixLu32 = DenseIterationMatrix<Model, float>;

}  // namespace ode
}  // namespace shoal
