// f, ∂f/∂y and ∂f/∂t of a model at one point, by vector-mode dual numbers.
//
// The n state directions and the time direction are seeded together, at most Chunk at a time
// in sweeps of equal width (sweep_width), so a 3-variable model needs a single sweep of
// Dual<T, 4> that returns f (the primal), the whole Jacobian and the time derivative at once. The parameters are constants, read in place
// (param_reads.hpp).
#pragma once

#include "shoal/ad/dual.hpp"
#include "shoal/ad/param_reads.hpp"
#include "shoal/config.hpp"

namespace shoal {
namespace ad {

// f[i] = f_i; jac[i*n + j] = ∂f_i/∂y_j stored as S; ft[i] = ∂f_i/∂t.
template <class Model, class T, class S, int Chunk = 16>
SHOAL_HD void rhs_and_jacobian(const T* y, const T& t, const T* p, T* f, S* jac, T* ft) {
  constexpr int n = Model::n_vars;
  constexpr int directions = n + 1;  // y_0 … y_{n-1}, then t
  constexpr int C = sweep_width<directions, Chunk>();
  using D = Dual<T, C>;
  for (int first = 0; first < directions; first += C) {
    D yd[n], out[n];
    for (int j = 0; j < n; ++j) yd[j] = variable<T, C>(y[j], j - first);
    const D td = variable<T, C>(t, n - first);
    apply_reading<Model, RhsMap>(yd, td, param_reads<D>(ConstantReader<T>{p}), out);
    for (int i = 0; i < n; ++i) {
      if (first == 0) f[i] = out[i].v;
      for (int k = 0; k < C && first + k < directions; ++k) {
        const int col = first + k;
        if (col < n) {
          jac[i * n + col] = S(out[i].d[k]);
        } else {
          ft[i] = out[i].d[k];
        }
      }
    }
  }
}

}  // namespace ad
}  // namespace shoal
