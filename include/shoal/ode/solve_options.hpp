// The run-time options of an ensemble solve: one record from Python to the kernels.
//
// shoal/ode/_options.py (SolveOptions.kernel_attributes) lowers these fields as ONE dictionary
// attribute, "options"; the host handlers decode it straight into ShoalSolveOptions (XLA's struct
// attribute decoding, generated from the list below in src/ode/ensemble_call.hpp) and embed it in
// the argument block every kernel reads (ensemble.hpp). Nothing else spells an option's name, and
// the ensemble ABI folds in the list's spelling (shoal_solve_options_layout), so adding one is a
// line here, a field in the Python record, and the code that uses it.
//
// Stored in double / int64 whatever the solve's precision: the ABI is the same for float and
// double models, and the kernel converts once per ensemble slice (IntegrateOptions::from).
#pragma once

#include "shoal/config.hpp"

// X(type, name, default, meaning)
#define SHOAL_SOLVE_OPTION_FIELDS(X)                                                          \
  X(double, rtol, 1e-8, "relative tolerance")                                                 \
  X(double, atol, 1e-8, "absolute tolerance")                                                 \
  X(double, max_step, -1.0, "largest step; <= 0: unbounded")                                  \
  X(double, pcoeff, 0.0, "PID proportional gain")                                             \
  X(double, icoeff, 1.0, "PID integral gain")                                                 \
  X(double, dcoeff, 0.0, "PID derivative gain")                                               \
  X(double, factor_min, 0.2, "smallest step-size factor per attempt")                         \
  X(double, factor_max, 10.0, "largest step-size factor after an accepted step")              \
  X(int64_t, max_steps, 100000, "step attempts (accepted + rejected) per trajectory")         \
  X(int64_t, error_components, 0, "the error norm covers components [0, this) only; 0 = all") \
  X(int64_t, event_terminal, 1, "an event stops its trajectory")                              \
  X(int64_t, event_direction, 0, "crossings counted: +1 rising, -1 falling, 0 both")          \
  X(int64_t, first_step_estimate, 0,                                                          \
    "a joint solve: bound the default first step (integrate.hpp)")                            \
  X(int64_t, adjoint_memory, 4194304, "an adjoint recording's most bytes of states")

extern "C" {

#define SHOAL_SOLVE_OPTION_MEMBER(type, name, value, meaning) type name = value;
typedef struct ShoalSolveOptions {
  SHOAL_SOLVE_OPTION_FIELDS(SHOAL_SOLVE_OPTION_MEMBER)
} ShoalSolveOptions;
#undef SHOAL_SOLVE_OPTION_MEMBER

}  // extern "C"

// Every field is 8 bytes, so the struct has no padding and one layout on every compiler.
#define SHOAL_SOLVE_OPTION_COUNT(type, name, value, meaning) +1
static_assert(sizeof(ShoalSolveOptions) ==
                  8 * (0 SHOAL_SOLVE_OPTION_FIELDS(SHOAL_SOLVE_OPTION_COUNT)),
              "every solve option is a double or an int64_t");
#undef SHOAL_SOLVE_OPTION_COUNT

namespace shoal {
namespace ode {

// A hash (FNV-1a, 24 bits) of the field list's types and names, in order: two builds agree on the
// options' layout exactly when they agree on it.
SHOAL_HD constexpr int32_t solve_options_layout() {
#define SHOAL_SOLVE_OPTION_SPELLING(type, name, value, meaning) #type " " #name ";"
  const char* s = SHOAL_SOLVE_OPTION_FIELDS(SHOAL_SOLVE_OPTION_SPELLING);
#undef SHOAL_SOLVE_OPTION_SPELLING
  uint32_t h = 2166136261u;
  for (; *s; ++s) h = (h ^ static_cast<uint8_t>(*s)) * 16777619u;
  return static_cast<int32_t>(h & 0xffffffu);
}

}  // namespace ode
}  // namespace shoal
