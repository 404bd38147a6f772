// A process-wide pool of worker threads for embarrassingly parallel loops.
//
// parallel_for hands out chunks of [0, n) from an atomic counter, so a trajectory that needs a
// thousand times more steps than its neighbours delays only its own chunk. The calling thread works
// too; concurrent parallel_for calls (several XLA executables at once) are safe.
#pragma once

#include <cstdint>
#include <functional>

namespace shoal {

// Runs body(begin, end) over disjoint chunks covering [0, n). Returns when all chunks are done.
// body must not throw.
void parallel_for(int64_t n, int64_t chunk, const std::function<void(int64_t, int64_t)>& body);

// Number of threads parallel_for may use (workers + the caller).
int parallel_threads();

}  // namespace shoal
