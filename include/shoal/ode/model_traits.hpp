// What the ensemble machinery asks of a model beyond n_vars, n_params and rhs.
//
// A model may declare `static constexpr int n_shared`: the LAST n_shared of its n_params
// parameters are shared by the whole ensemble (tables, constants) and travel once per call
// instead of once per trajectory. A model without it has none.
#pragma once

#include "shoal/config.hpp"

namespace shoal {
namespace ode {
namespace detail {

template <class Model>
SHOAL_HD constexpr auto shared_params_of(int) -> decltype(Model::n_shared) {
  return Model::n_shared;
}
template <class Model>
SHOAL_HD constexpr int shared_params_of(long) {
  return 0;
}

}  // namespace detail

// The number of trailing parameters of Model that are shared by the ensemble.
template <class Model>
SHOAL_HD constexpr int n_shared_params() {
  return detail::shared_params_of<Model>(0);
}

}  // namespace ode
}  // namespace shoal
