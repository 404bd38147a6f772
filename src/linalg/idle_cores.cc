#include "idle_cores.hpp"

#include <algorithm>
#include <cstdio>
#include <thread>

#if defined(__linux__)
#include <sched.h>
#endif

namespace shoal::linalg {
namespace {

int usable_cpus() {
#if defined(__linux__)
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
#endif
  return static_cast<int>(std::thread::hardware_concurrency());
}

}  // namespace

int idle_cores() {
  std::FILE* f = std::fopen("/proc/loadavg", "r");
  if (f == nullptr) return -1;
  double one = 0, five = 0, fifteen = 0;
  int running = 0, total = 0;
  const int read = std::fscanf(f, "%lf %lf %lf %d/%d", &one, &five, &fifteen, &running, &total);
  std::fclose(f);
  if (read != 5 || running < 1) return -1;
  return std::max(0, usable_cpus() - (running - 1));  // the caller is one of the running
}

int lone_matrix_blas_threads() {
  const int idle = idle_cores();
  if (idle < 0) return 0;
  return std::max(1, std::min(usable_cpus(), idle + 1));
}

}  // namespace shoal::linalg
