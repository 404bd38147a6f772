#include "progress.hpp"

namespace shoal {
namespace progress {
namespace {

// One cache line per slot: concurrent solves on different slots do not share counters' lines.
struct alignas(64) Slot {
  Counter counter;
  std::atomic<bool> in_use{false};
};

Slot slots[kSlots];

}  // namespace

int open() {
  for (int i = 0; i < kSlots; ++i) {
    bool expected = false;
    if (slots[i].in_use.compare_exchange_strong(expected, true)) {
      __atomic_store_n(&slots[i].counter.done, 0, __ATOMIC_RELAXED);
      __atomic_store_n(&slots[i].counter.total, 0, __ATOMIC_RELAXED);
      return i;
    }
  }
  return -1;
}

void close(int slot) {
  if (slot >= 0 && slot < kSlots) slots[slot].in_use.store(false);
}

Counter* counter(int slot) {
  if (slot < 0 || slot >= kSlots || !slots[slot].in_use.load()) return nullptr;
  return &slots[slot].counter;
}

}  // namespace progress
}  // namespace shoal
