#include "interrupt.hpp"

#include <signal.h>

#include <mutex>

namespace shoal {
namespace interrupt {
namespace {

std::mutex mu;
int running = 0;           // solves inside a Scope
bool installed = false;    // whether on_sigint is SIGINT's handler (by us)
struct sigaction displaced;  // written under mu before on_sigint is installed
int32_t cancel_flag = 0;   // atomic builtins only: the handler and the trajectories share it

// Async-signal-safe: an atomic store, then the displaced handler as the kernel would have run it.
void on_sigint(int sig, siginfo_t* info, void* context) {
  __atomic_store_n(&cancel_flag, 1, __ATOMIC_RELAXED);
  if (displaced.sa_flags & SA_SIGINFO) {
    if (displaced.sa_sigaction != nullptr) displaced.sa_sigaction(sig, info, context);
  } else if (displaced.sa_handler == SIG_DFL) {
    // Without us the process would end: end it the same way once this handler returns.
    signal(sig, SIG_DFL);
    raise(sig);
  } else if (displaced.sa_handler != SIG_IGN) {
    displaced.sa_handler(sig);
  }
}

}  // namespace

Scope::Scope() {
  std::lock_guard<std::mutex> lock(mu);
  if (running++ > 0) return;
  __atomic_store_n(&cancel_flag, 0, __ATOMIC_RELAXED);
  struct sigaction current;
  if (sigaction(SIGINT, nullptr, &current) != 0) return;
  if (!(current.sa_flags & SA_SIGINFO) && current.sa_handler == SIG_IGN) return;
  displaced = current;
  struct sigaction ours = {};
  ours.sa_sigaction = on_sigint;
  ours.sa_mask = current.sa_mask;
  // Python installs its handler without SA_RESTART (its blocking calls retry after EINTR
  // themselves, PEP 475); keep whatever the displaced handler asked for.
  ours.sa_flags = SA_SIGINFO | (current.sa_flags & (SA_RESTART | SA_ONSTACK));
  installed = sigaction(SIGINT, &ours, nullptr) == 0;
}

Scope::~Scope() {
  std::lock_guard<std::mutex> lock(mu);
  if (--running > 0 || !installed) return;
  installed = false;
  struct sigaction current;
  if (sigaction(SIGINT, nullptr, &current) != 0) return;
  if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == on_sigint) {
    sigaction(SIGINT, &displaced, nullptr);
  }
}

const int32_t* Scope::flag() const { return &cancel_flag; }

}  // namespace interrupt
}  // namespace shoal
