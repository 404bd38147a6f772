// Forward sensitivities along given tangent directions: the JVP of a solve in M directions at
// once, whatever the number of parameters.
//
// Column k of S is the derivative of y along direction k: S_k(0) is that direction of y0 and
//   S_k' = J_y S_k + J_p P_k,
// with P_k that direction of the parameters, so differentiating through a 3 000-entry table that
// three scalars produce costs three columns, not 3 000. The directions travel as parameters; the
// model's p is
//   [own (n_own), own directions (M × n_own), shared (n_shared), shared directions (M × n_shared)]
// so per-trajectory directions stay per trajectory and shared ones are passed once (this model's
// n_shared is the base's times 1 + M, model_traits.hpp). The joint state is [y, S_1, ..., S_M]
// as for Sensitivity (sensitivity.hpp), and every stepper integrates either the same way.
#pragma once

#include "shoal/ad/dual.hpp"
#include "shoal/ad/param_reads.hpp"
#include "shoal/config.hpp"
#include "shoal/ode/model_traits.hpp"
#include "shoal/ode/sensitivity.hpp"

namespace shoal {
namespace ode {

template <class Base, int M>
struct DirectionalSensitivity
    : SensitivityMembers<DirectionalSensitivity<Base, M>, Base, M> {
  static_assert(M > 0, "a sensitivity model needs at least one direction");
  using BaseModel = Base;
  static constexpr int n_base = Base::n_vars;
  static constexpr int n_sens = M;
  static constexpr int n_vars = n_base * (1 + M);
  static constexpr int n_base_shared = n_shared_params<Base>();
  static constexpr int n_base_own = Base::n_params - n_base_shared;
  static constexpr int n_params = Base::n_params * (1 + M);
  static constexpr int n_shared = n_base_shared * (1 + M);

  // Base parameter j (own, then shared) as a D with its M directions.
  template <class V>
  struct Reader {
    const V* p;
    template <class D>
    SHOAL_HD D read(int64_t j) const {
      // Each block is [values (m), directions (M × m)]: own first, then shared.
      const bool own = j < n_base_own;
      const V* block = own ? p : p + n_base_own * (1 + M);
      const int64_t m = own ? n_base_own : n_base_shared, at = own ? j : j - n_base_own;
      D x(block[at]);
      for (int k = 0; k < M; ++k) x.d[k] = block[m + k * m + at];
      return x;
    }
  };

  template <class T>
  SHOAL_HD static void rhs(const T* z, const T& t, const T* p, T* dz) {
    sensitivity_rhs<DirectionalSensitivity>(z, t, p, dz);
  }

  // The base model's parameters [own, shared], gathered into scratch (Base::n_params).
  template <class T>
  SHOAL_HD static const T* base_params(const T* p, T* scratch) {
    for (int j = 0; j < n_base_own; ++j) scratch[j] = p[j];
    const T* shared = p + n_base_own * (1 + M);
    for (int j = 0; j < n_base_shared; ++j) scratch[n_base_own + j] = shared[j];
    return scratch;
  }
};

}  // namespace ode
}  // namespace shoal
