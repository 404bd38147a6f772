#include "lapack.hpp"

#include <atomic>
#include <complex>

namespace shoal::linalg {
namespace {

constexpr const char* kNames[] = {
    "ssyevd", "dsyevd", "cheevd", "zheevd", "ssygvd", "dsygvd", "chegvd",
    "zhegvd", "ssyevr", "dsyevr", "cheevr", "zheevr", "ssygvx", "dsygvx",
    "chegvx", "zhegvx", "spotrf", "dpotrf", "cpotrf", "zpotrf", "ssygst",
    "dsygst", "chegst", "zhegst", "strtrs", "dtrtrs", "ctrtrs", "ztrtrs",
};

template <typename T>
bool assign(char kind, void* fn) {
  using F = LapackFns<T>;
  switch (kind) {
    case 'd':  // ?syevd / ?heevd
      F::syevd = reinterpret_cast<typename F::Syevd*>(fn);
      return true;
    case 'g':  // ?sygvd / ?hegvd
      F::sygvd = reinterpret_cast<typename F::Sygvd*>(fn);
      return true;
    case 'r':  // ?syevr / ?heevr
      F::syevr = reinterpret_cast<typename F::Syevr*>(fn);
      return true;
    case 'x':  // ?sygvx / ?hegvx
      F::sygvx = reinterpret_cast<typename F::Sygvx*>(fn);
      return true;
    case 'p':  // ?potrf
      F::potrf = reinterpret_cast<typename F::Potrf*>(fn);
      return true;
    case 's':  // ?sygst / ?hegst
      F::sygst = reinterpret_cast<typename F::Sygst*>(fn);
      return true;
    case 't':  // ?trtrs
      F::trtrs = reinterpret_cast<typename F::Trtrs*>(fn);
      return true;
  }
  return false;
}

template <typename T>
bool all_set() {
  using F = LapackFns<T>;
  return F::syevd && F::sygvd && F::syevr && F::sygvx && F::potrf && F::sygst && F::trtrs;
}

}  // namespace

bool set_lapack_function(const std::string& name, void* fn) {
  if (name.size() != 6 || fn == nullptr) return false;
  char kind;
  const std::string tail = name.substr(1);
  if (tail == "syevd" || tail == "heevd") {
    kind = 'd';
  } else if (tail == "sygvd" || tail == "hegvd") {
    kind = 'g';
  } else if (tail == "syevr" || tail == "heevr") {
    kind = 'r';
  } else if (tail == "sygvx" || tail == "hegvx") {
    kind = 'x';
  } else if (tail == "sygst" || tail == "hegst") {
    kind = 's';
  } else if (tail == "potrf") {
    kind = 'p';
  } else if (tail == "trtrs") {
    kind = 't';
  } else {
    return false;
  }
  // ?potrf and ?trtrs have one name for real and complex; the others are sy* or he*.
  const bool hermitian =
      (kind == 'p' || kind == 't') ? name[0] == 'c' || name[0] == 'z' : tail[0] == 'h';
  switch (name[0]) {
    case 's':
      return !hermitian && assign<float>(kind, fn);
    case 'd':
      return !hermitian && assign<double>(kind, fn);
    case 'c':
      return hermitian && assign<std::complex<float>>(kind, fn);
    case 'z':
      return hermitian && assign<std::complex<double>>(kind, fn);
  }
  return false;
}

const char* const* lapack_function_names(int* count) {
  *count = static_cast<int>(sizeof(kNames) / sizeof(kNames[0]));
  return kNames;
}

bool lapack_ready() {
  return all_set<float>() && all_set<double>() && all_set<std::complex<float>>() &&
         all_set<std::complex<double>>();
}

namespace {
using SetLocalThreads = int(int);
std::atomic<SetLocalThreads*> g_set_local_threads{nullptr};
std::atomic<int64_t> g_threaded_blas_min_order{256};
std::atomic<int64_t> g_max_batch_workers{0};
}  // namespace

void set_max_batch_workers(int64_t n) { g_max_batch_workers.store(n < 0 ? 0 : n); }
int64_t max_batch_workers() { return g_max_batch_workers.load(); }

void set_threaded_blas_min_order(int64_t n) { g_threaded_blas_min_order.store(n); }
int64_t threaded_blas_min_order() { return g_threaded_blas_min_order.load(); }

void set_blas_local_threads_function(void* fn) {
  g_set_local_threads.store(reinterpret_cast<SetLocalThreads*>(fn));
}

ScopedBlasThreads::ScopedBlasThreads(int threads) {
  SetLocalThreads* fn = g_set_local_threads.load();
  if (threads > 0 && fn != nullptr) previous_ = fn(threads);
}

ScopedBlasThreads::~ScopedBlasThreads() {
  SetLocalThreads* fn = g_set_local_threads.load();
  if (previous_ >= 0 && fn != nullptr) fn(previous_);
}

}  // namespace shoal::linalg
