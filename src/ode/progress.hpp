// Live progress of CPU ensemble solves: a fixed table of counters that the solve handler adds its
// finished trajectories to while Python polls them (shoal/ode/_progress.py).
//
// A solve with progress on receives the index of a slot claimed at run time (open()) as its last
// operand; -1 means off. The table is process-wide and lock-free: claiming is a compare-exchange
// on the slot's flag, counting a relaxed fetch_add per chunk of trajectories.
#pragma once

#include <atomic>
#include <cstdint>

namespace shoal {
namespace progress {

constexpr int kSlots = 256;

// Plain integers read and written with the __atomic builtins: a solve's work queue
// (ShoalWorkQueue, ensemble.hpp) counts finished trajectories into `done` from inside the compiled
// model library, which sees a C struct, not std::atomic.
struct Counter {
  int64_t done = 0;   // trajectories finished
  int64_t total = 0;  // trajectories of the solves that have started on this slot
};

// Claims a free slot with its counters at zero; -1 when every slot is in use.
int open();

// Frees a slot claimed by open() (an index that is not one does nothing).
void close(int slot);

// The counters of an open slot, or nullptr for -1 (off), a slot out of range or one not open.
Counter* counter(int slot);

}  // namespace progress
}  // namespace shoal
