// Ctrl-C handling of CPU solves (src/ode/interrupt.hpp): the SIGINT handler a Scope installs
// sets the cancel flag and chains to the displaced handler, nested and concurrent scopes install
// it once and restore the displaced one when the last ends, and an ignored SIGINT stays ignored.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <thread>
#include <vector>

#include "../../src/ode/interrupt.hpp"

namespace {

using shoal::interrupt::Scope;

std::atomic<int> displaced_calls{0};
void displaced_handler(int) { displaced_calls.fetch_add(1); }

// The handler SIGINT has now, as the function the kernel would call.
void* current_handler() {
  struct sigaction now;
  sigaction(SIGINT, nullptr, &now);
  return (now.sa_flags & SA_SIGINFO) ? reinterpret_cast<void*>(now.sa_sigaction)
                                     : reinterpret_cast<void*>(now.sa_handler);
}

// Installs `handler` for SIGINT for one test, restoring what was there.
class SigintHandler {
 public:
  explicit SigintHandler(void (*handler)(int)) {
    struct sigaction a = {};
    a.sa_handler = handler;
    sigaction(SIGINT, &a, &saved_);
  }
  ~SigintHandler() { sigaction(SIGINT, &saved_, nullptr); }

 private:
  struct sigaction saved_;
};

TEST(Interrupt, SigintSetsTheFlagAndReachesTheDisplacedHandler) {
  SigintHandler python_like(displaced_handler);
  displaced_calls = 0;
  {
    Scope scope;
    EXPECT_EQ(*scope.flag(), 0);
    EXPECT_NE(current_handler(), reinterpret_cast<void*>(displaced_handler));
    raise(SIGINT);
    EXPECT_NE(*scope.flag(), 0);
    EXPECT_EQ(displaced_calls.load(), 1);
  }
  EXPECT_EQ(current_handler(), reinterpret_cast<void*>(displaced_handler));
  Scope next;  // a new outermost solve starts uncancelled
  EXPECT_EQ(*next.flag(), 0);
}

TEST(Interrupt, NestedAndConcurrentScopesInstallOnceAndRestoreAtTheLast) {
  SigintHandler python_like(displaced_handler);
  void* ours = nullptr;
  {
    Scope outer;
    ours = current_handler();
    EXPECT_NE(ours, reinterpret_cast<void*>(displaced_handler));
    std::vector<std::thread> solves;
    std::atomic<int> saw_ours{0};
    for (int i = 0; i < 8; ++i) {
      solves.emplace_back([&] {
        for (int j = 0; j < 200; ++j) {
          Scope inner;
          if (current_handler() == ours) saw_ours.fetch_add(1);
        }
      });
    }
    for (auto& t : solves) t.join();
    EXPECT_EQ(saw_ours.load(), 8 * 200);
    EXPECT_EQ(current_handler(), ours);  // the outer scope still runs
    displaced_calls = 0;
    raise(SIGINT);  // one chained call: the displaced handler was never overwritten with ours
    EXPECT_EQ(displaced_calls.load(), 1);
  }
  EXPECT_EQ(current_handler(), reinterpret_cast<void*>(displaced_handler));
  // Concurrent scopes alone, with no outer one: whatever the interleaving, the last restores.
  std::vector<std::thread> solves;
  for (int i = 0; i < 8; ++i) {
    solves.emplace_back([] {
      for (int j = 0; j < 200; ++j) Scope inner;
    });
  }
  for (auto& t : solves) t.join();
  EXPECT_EQ(current_handler(), reinterpret_cast<void*>(displaced_handler));
}

TEST(Interrupt, AnIgnoredSigintStaysIgnored) {
  SigintHandler ignored(SIG_IGN);
  Scope scope;
  EXPECT_EQ(current_handler(), reinterpret_cast<void*>(SIG_IGN));
  raise(SIGINT);
  EXPECT_EQ(*scope.flag(), 0);
}

TEST(Interrupt, AReplacedHandlerIsLeftInPlace) {
  SigintHandler python_like(displaced_handler);
  {
    Scope scope;
    signal(SIGINT, SIG_IGN);  // someone else's choice while the solve runs
  }
  EXPECT_EQ(current_handler(), reinterpret_cast<void*>(SIG_IGN));
}

TEST(InterruptDeathTest, TheDefaultActionStillEndsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        signal(SIGINT, SIG_DFL);
        Scope scope;
        raise(SIGINT);
        _exit(0);  // not reached: SIGINT's default action ends the process
      },
      testing::KilledBySignal(SIGINT), "");
}

}  // namespace
