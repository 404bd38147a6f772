// How many of this process's CPUs nothing else wants right now.
//
// Threaded BLAS (OpenBLAS) spins its helper threads while it waits for them; on cores that other
// processes keep busy that spinning turns a 1024x1024 generalized solve from ~0.3 s into 0.8-10 s
// (measured on a 2-core VM at load 3, SciPy and shoal alike), while with one core taken by a
// lighter job two BLAS threads still won 1.6x (SciPy, load 1.5). The kernels therefore give a lone
// large matrix as many BLAS threads as there are idle cores plus one (its own share).
#pragma once

namespace shoal::linalg {

// CPUs this process may run on (affinity mask) minus the other runnable threads of the machine at
// this instant (/proc/loadavg's running count, less the caller), at least 0; -1 where that is
// unknown (no /proc). The running count is system-wide: in a container that sees the host's /proc
// it overestimates the competition, which errs towards one BLAS thread, never towards spinning.
int idle_cores();

// BLAS threads for one lone large matrix: min(usable CPUs, idle_cores() + 1), at least 1; 0 where
// idle_cores() is unknown (leave the BLAS's own setting, as SciPy would).
int lone_matrix_blas_threads();

}  // namespace shoal::linalg
