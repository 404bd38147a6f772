// Per-trajectory outcome of an ensemble solve. The numeric values are part of the public API
// (shoal.ode.Status mirrors them); append, never renumber.
#pragma once

#include "shoal/config.hpp"

namespace shoal {
namespace ode {

enum Status : int32_t {
  kSuccess = 0,
  kMaxStepsReached = 1,    // accepted + rejected reached max_steps before the final time
  kStepSizeUnderflow = 2,  // the controller shrank the step below the resolution of t
  kNonFinite = 3,          // the state or every trial step went NaN/Inf
  kInvalidInput = 4,       // t_span not strictly increasing or not finite (seen inside jit);
                           // set in Python for a DAE member whose y0 is inconsistent
  kEvent = 5,              // stopped at a terminal event before the final time
  kCancelled = 6,          // the host asked the solve to stop (Ctrl-C: src/ode/interrupt.hpp)
  kSensitivityFailure = 7,  // a joint solve [y, S] failed on the sensitivities alone: the step
                            // size underflowed or they went non-finite while the state's own
                            // error was within tolerance (integrate.hpp)
};

}  // namespace ode
}  // namespace shoal
