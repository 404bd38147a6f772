// Ctrl-C during CPU solves. While any solve runs, a SIGINT handler sets a process-wide cancel
// flag, which every running trajectory reads once per step attempt (include/shoal/ode/cancel.hpp)
// and then ends with kCancelled, and calls the handler it displaced: Python's, which schedules a
// KeyboardInterrupt for when the main thread is back in Python. So a long solve returns within a
// step per thread, and Python raises as it would for any other Ctrl-C.
//
// The first solve to start installs the handler and clears the flag; the last to end puts the
// displaced handler back (unless someone replaced ours meanwhile: theirs stays). A reference
// count under a mutex makes nested and concurrent solves safe. An ignored SIGINT (SIG_IGN) stays
// ignored: nothing is installed and nothing is cancelled.
#pragma once

#include <cstdint>

namespace shoal {
namespace interrupt {

// Ctrl-C handling for the lifetime of one solve.
class Scope {
 public:
  Scope();
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

  // The flag to hand the trajectories (ShoalEnsembleArgs::cancel): nonzero once interrupted.
  const int32_t* flag() const;
};

}  // namespace interrupt
}  // namespace shoal
