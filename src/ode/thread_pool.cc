#include "thread_pool.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace shoal {
namespace {

// SHOAL_NUM_THREADS overrides the hardware count (useful to pin benchmarks or share a machine).
int configured_threads() {
  if (const char* env = std::getenv("SHOAL_NUM_THREADS")) {
    const int v = std::atoi(env);
    if (v > 0) return v;
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? static_cast<int>(hw) : 1;
}

class Pool {
 public:
  explicit Pool(int n_workers) {
    for (int i = 0; i < n_workers; ++i) workers_.emplace_back([this] { run(); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
  }
  void submit(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }
  int size() const { return static_cast<int>(workers_.size()); }

 private:
  void run() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
        if (stop_ && tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> workers_;
  bool stop_ = false;
};

Pool& pool() {
  // Leaked on purpose: joining threads from a static destructor at interpreter exit can deadlock.
  static Pool* p = new Pool(std::max(0, configured_threads() - 1));
  return *p;
}

struct Job {
  std::atomic<int64_t> next{0};
  int64_t n = 0;
  int64_t chunk = 1;
  const std::function<void(int64_t, int64_t)>* body = nullptr;
  std::mutex mu;
  std::condition_variable done_cv;
  int active_helpers = 0;

  void work() {
    for (;;) {
      const int64_t begin = next.fetch_add(chunk);
      if (begin >= n) return;
      (*body)(begin, std::min(n, begin + chunk));
    }
  }
};

}  // namespace

int parallel_threads() { return pool().size() + 1; }

void parallel_for(int64_t n, int64_t chunk, const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  chunk = std::max<int64_t>(1, chunk);
  const int64_t n_chunks = (n + chunk - 1) / chunk;
  const int helpers = static_cast<int>(std::min<int64_t>(pool().size(), n_chunks - 1));
  if (helpers <= 0) {
    body(0, n);
    return;
  }
  auto job = std::make_shared<Job>();
  job->n = n;
  job->chunk = chunk;
  job->body = &body;
  job->active_helpers = helpers;
  for (int i = 0; i < helpers; ++i) {
    pool().submit([job] {
      job->work();
      std::lock_guard<std::mutex> lock(job->mu);
      if (--job->active_helpers == 0) job->done_cv.notify_all();
    });
  }
  job->work();
  // `body` lives on our stack: wait until no helper can touch it.
  std::unique_lock<std::mutex> lock(job->mu);
  job->done_cv.wait(lock, [&] { return job->active_helpers == 0; });
}

}  // namespace shoal
