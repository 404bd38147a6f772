// A constant mass matrix: the Rosenbrock methods solve M y' = f(y, t, p), with M possibly
// singular (an index-1 differential-algebraic system: a zero row of M makes its row of f an
// algebraic equation).
//
// Hairer & Wanner (Solving ODEs II, Sec. VI.4) carry a Rosenbrock method over unchanged except
// for where the identity stood: the iteration matrix becomes M/(hγ) − J and the stages' coupling
// terms Σ_j (C_ij/h) k_j are multiplied by M (rosenbrock.hpp). Rodas4 and Rodas5P were built
// for this (their coefficients satisfy the extra order conditions of index-1 problems); the
// explicit methods cannot take a singular M and are refused in Python.
//
// A Mass policy is generated per matrix (shoal/ode/_mass.py) as its nonzeros:
//   static constexpr int nnz;  row(k), col(k), value(k) for k < nnz, in row-major order.
// WithMass<Model, Mass> is Model with that matrix attached; a model without one has M = I.
#pragma once

#include "shoal/config.hpp"
#include "shoal/ode/model_traits.hpp"

namespace shoal {
namespace ode {

template <class Model, class Mass>
struct WithMass : Model {
  static constexpr bool has_mass = true;
  using MassMatrix = Mass;
};

// out = M v for Model's state size (out and v distinct). Row-major order of the nonzeros fixes
// the summation order, so lanes and the scalar path get the same bits.
template <class Model, class T>
SHOAL_HD void mass_times(const T* v, T* out) {
  using Mass = typename Model::MassMatrix;
  for (int i = 0; i < Model::n_vars; ++i) out[i] = T(0);
  for (int k = 0; k < Mass::nnz; ++k) out[Mass::row(k)] += T(Mass::value(k)) * v[Mass::col(k)];
}

// out = Mᵀ v (the adjoint's transposed coupling terms, rosenbrock_adjoint.hpp).
template <class Model, class T>
SHOAL_HD void mass_transposed_times(const T* v, T* out) {
  using Mass = typename Model::MassMatrix;
  for (int i = 0; i < Model::n_vars; ++i) out[i] = T(0);
  for (int k = 0; k < Mass::nnz; ++k) out[Mass::col(k)] += T(Mass::value(k)) * v[Mass::row(k)];
}

}  // namespace ode
}  // namespace shoal
