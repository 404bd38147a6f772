// A trajectory's cancellation check, once per step attempt (integrate.hpp): the host sets a flag
// that running trajectories read (src/ode/interrupt.hpp sets it on SIGINT). The flag only goes
// from 0 to nonzero during a solve and a late read costs one more step, so a relaxed load is
// enough. A null flag (the CUDA kernels, direct callers) never cancels.
#pragma once

#include "shoal/config.hpp"

namespace shoal {
namespace ode {

SHOAL_INLINE bool cancelled(const int32_t* flag) {
  if (flag == nullptr) return false;
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
  return *static_cast<const volatile int32_t*>(flag) != 0;
#else
  return __atomic_load_n(flag, __ATOMIC_RELAXED) != 0;
#endif
}

}  // namespace ode
}  // namespace shoal
