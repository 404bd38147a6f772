// How many of this process's CPUs nothing else wants right now.
//
// Threaded BLAS (OpenBLAS) spins its helper threads while it waits for them; on cores that other
// processes keep busy that spinning turns a 1024x1024 generalized solve from ~0.3 s into 0.8-10 s
// (measured on a 2-core VM at load 3, SciPy and shoal alike). The kernels therefore hand a lone
// large matrix to the BLAS's threads only when at least two cores are idle at the call.
#pragma once

namespace shoal::linalg {

// CPUs this process may run on (affinity mask) minus the other runnable threads of the machine at
// this instant (/proc/loadavg's running count, less the caller). -1 where that is unknown (no
// /proc). The running count is system-wide: in a container that sees the host's /proc it is an
// overestimate of the competition, which errs towards one BLAS thread, never towards spinning.
int idle_cores();

}  // namespace shoal::linalg
