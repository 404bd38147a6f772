// Rodas5P on the joint system [y, S]: the Rosenbrock engine over JointSystem
// (rosenbrock_joint.hpp), whose stages are block forward substitutions against one factorisation
// of the state's iteration matrix.
#pragma once

#include "shoal/ode/iteration_matrix.hpp"
#include "shoal/ode/rodas5p.hpp"
#include "shoal/ode/rosenbrock_joint.hpp"

namespace shoal {
namespace ode {

// Matrix<Base> is the iteration-matrix policy for the state block M0 (dense or sparse).
template <template <class> class Matrix>
struct Rodas5PSensitivityUsing {
  template <class SensModel, class T>
  using Stepper =
      typename Rosenbrock<Rodas5PTableau,
                          JointSystem<Matrix>::template Type>::template Stepper<SensModel, T>;
};

template <class SensModel, class T>
using Rodas5PSensitivityLu64 =
    typename Rodas5PSensitivityUsing<DenseMatrixLu64>::template Stepper<SensModel, T>;
template <class SensModel, class T>
using Rodas5PSensitivityLu32 =
    typename Rodas5PSensitivityUsing<DenseMatrixLu32>::template Stepper<SensModel, T>;

}  // namespace ode
}  // namespace shoal
