// Spreads independent work items over XLA's CPU intra-op thread pool (ffi::ThreadPool).
//
// Chunks of [0, n) are claimed from an atomic counter by the calling thread and by helper tasks
// scheduled on the pool. The caller waits only for chunks that have been claimed, so a helper
// that starts late (pool busy with other work) finds nothing left and exits without touching
// caller state: no deadlock, and no dangling reference, because the shared state is reference
// counted.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

#include "xla/ffi/api/ffi.h"

namespace shoal {

// The default chunk size of parallel_for: a few chunks per worker balance uneven item costs
// without much counter traffic.
inline int64_t default_chunk(int64_t n, int64_t workers) {
  return std::max<int64_t>(1, n / (4 * workers));
}

// Runs body(begin, end) over disjoint chunks covering [0, n), on at most max_workers threads (the
// caller included; at most the pool's threads + 1). Chunks hold `chunk` items (<= 0: the default
// above). body must not throw.
inline void parallel_for(xla::ffi::ThreadPool& pool, int64_t n, int64_t max_workers,
                         const std::function<void(int64_t, int64_t)>& body, int64_t chunk = 0) {
  if (n <= 0) return;
  const int64_t pool_threads = std::max<int64_t>(0, pool.num_threads());
  const int64_t workers = std::max<int64_t>(1, std::min({max_workers, pool_threads + 1, n}));
  if (workers == 1) {
    body(0, n);
    return;
  }
  struct State {
    std::atomic<int64_t> next{0};
    std::atomic<int64_t> done{0};
    int64_t n = 0, chunk = 1;
    std::function<void(int64_t, int64_t)> body;
    std::mutex mu;
    std::condition_variable cv;
  };
  auto state = std::make_shared<State>();
  state->n = n;
  state->chunk = chunk > 0 ? chunk : default_chunk(n, workers);
  state->body = body;
  auto work = [](const std::shared_ptr<State>& s) {
    for (;;) {
      const int64_t begin = s->next.fetch_add(s->chunk);
      if (begin >= s->n) return;
      const int64_t end = std::min(s->n, begin + s->chunk);
      s->body(begin, end);
      if (s->done.fetch_add(end - begin) + (end - begin) == s->n) {
        std::lock_guard<std::mutex> lock(s->mu);
        s->cv.notify_all();
      }
    }
  };
  for (int64_t i = 1; i < workers; ++i) pool.Schedule([state, work] { work(state); });
  work(state);
  std::unique_lock<std::mutex> lock(state->mu);
  state->cv.wait(lock, [&] { return state->done.load() == state->n; });
}

}  // namespace shoal
