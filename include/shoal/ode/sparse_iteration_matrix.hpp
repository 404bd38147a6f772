// The Rosenbrock iteration matrix M = I/(hγ) − J (or M/(hγ) − J: mass.hpp) with a sparse direct solver compiled for one
// pattern (the interchangeable twin of DenseIterationMatrix in iteration_matrix.hpp).
//
// Structure is generated per pattern on the host (shoal/ode/_sparse/): a fill-reducing
// symmetric permutation (AMD), the exact symbolic factorisation, one CSR image of L+U, the column
// colouring, and the factor/solve routines (straight-line or table-driven). Here the Jacobian is
// recovered with one dual-number sweep per colour — columns sharing no row are seeded together —
// and each −J_ij is written straight into its CSR slot; fill slots are cleared first, the
// diagonal gets 1/(hγ), and the factorisation runs in place without pivoting: the symmetric
// permutation keeps the diagonal on the diagonal, where 1/(hγ) grows as the step shrinks.
#pragma once

#include "shoal/ad/dual.hpp"
#include "shoal/ad/param_reads.hpp"
#include "shoal/config.hpp"
#include "shoal/ode/mass.hpp"

namespace shoal {
namespace ode {

template <class Model, class Structure, class LuScalar, int Chunk = 16>
struct SparseIterationMatrix {
  static constexpr int n = Model::n_vars;
  static_assert(Structure::n == Model::n_vars, "sparse structure built for another model size");
  LuScalar a[Structure::nnz];

  template <class T>
  SHOAL_HD void assemble(const T* y, const T& t, const T* p, const T& inv_hg, T* f0, T* ft) {
    for (int s = 0; s < Structure::nnz; ++s) a[s] = LuScalar(0);
    constexpr int directions = Structure::n_colours + 1;  // one per colour, then t
    constexpr int C = ad::sweep_width<directions, Chunk>();
    using D = ad::Dual<T, C>;
    for (int first = 0; first < directions; first += C) {
      D yd[n], out[n];
      for (int j = 0; j < n; ++j) yd[j] = ad::variable<T, C>(y[j], Structure::colour(j) - first);
      const D td = ad::variable<T, C>(t, Structure::n_colours - first);
      ad::apply_reading<Model, ad::RhsMap>(yd, td, ad::param_reads<D>(ad::ConstantReader<T>{p}),
                                           out);
      for (int i = 0; i < n; ++i) {
        if (first == 0) f0[i] = out[i].v;
        for (int k = 0; k < C && first + k < directions; ++k) {
          const int colour = first + k;
          if (colour == Structure::n_colours) {
            ft[i] = out[i].d[k];
          } else {
            const int slot = Structure::jacobian_slot(i, colour);
            if (slot >= 0) a[slot] = -LuScalar(out[i].d[k]);
          }
        }
      }
    }
    const LuScalar diag = LuScalar(inv_hg);
    if constexpr (has_mass<Model>()) {
      // M/(hγ): the pattern holds M's nonzeros (shoal/ode/_model.py adds them), each in the
      // slot of its column's colour.
      using Mass = typename Model::MassMatrix;
      for (int k = 0; k < Mass::nnz; ++k) {
        const int i = Mass::row(k), j = Mass::col(k);
        const int slot = i == j ? Structure::diagonal_slot(i)
                                : Structure::jacobian_slot(i, Structure::colour(j));
        a[slot] += diag * LuScalar(Mass::value(k));
      }
    } else {
      for (int i = 0; i < n; ++i) a[Structure::diagonal_slot(i)] += diag;
    }
    Structure::factor(a);
  }

  template <class T>
  SHOAL_HD void solve(T* b) const {
    Structure::solve(a, b);
  }
  // b ← M⁻ᵀ b (the adjoint, rosenbrock_adjoint.hpp): the same factors, the transposed pattern.
  template <class T>
  SHOAL_HD void solve_transposed(T* b) const {
    Structure::solve_transposed(a, b);
  }

  // Lane l of a lanes matrix's factors (the same static pivot order, so the scalar
  // factorisation's bits): the adjoint's backward sweeps evaluate W steps at once in the lanes,
  // then transpose each alone (adjoint_backward_lanes.hpp).
  static constexpr bool loads_lanes = true;
  template <class LanesMatrix>
  void load_lane(const LanesMatrix& from, int l) {
    for (int s = 0; s < Structure::nnz; ++s) a[s] = lane(from.a[s], l);
  }
};

}  // namespace ode
}  // namespace shoal
