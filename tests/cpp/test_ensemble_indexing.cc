// Ensembles past 2^31 elements: every offset into ShoalEnsembleArgs' buffers is a 64-bit
// product, so the last trajectories of an ensemble with 2^32 saved numbers read and write their
// own rows (a 32-bit product would wrap onto the first rows). The buffers are virtual regions reserved with mmap(MAP_NORESERVE), where Linux
// commits only the pages touched: the test uses a few pages of 32 GiB of addresses.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cmath>
#include <cstdint>

#include "shoal/ode/host_ensemble.hpp"
#include "shoal/ode/tsit5.hpp"

namespace {

struct Decay {  // y' = -k y
  static constexpr int n_vars = 1;
  static constexpr int n_params = 1;
  template <class T>
  static void rhs(const T* y, const T&, const T* p, T* dy) {
    dy[0] = -p[0] * y[0];
  }
};

// `count` zeroed Ts of address space, committed page by page as they are written.
template <class T>
class Reserved {
 public:
  explicit Reserved(int64_t count) : bytes_(static_cast<size_t>(count) * sizeof(T)) {
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    data_ = p == MAP_FAILED ? nullptr : static_cast<T*>(p);
  }
  ~Reserved() {
    if (data_) munmap(data_, bytes_);
  }
  Reserved(const Reserved&) = delete;
  Reserved& operator=(const Reserved&) = delete;
  T* data() const { return data_; }

 private:
  size_t bytes_;
  T* data_ = nullptr;
};

TEST(EnsembleIndexing, TrajectoriesPastTwoToThe31ElementsWriteTheirOwnRows) {
  constexpr int n_save = 1 << 10;
  constexpr int64_t first = int64_t{1} << 22;  // solved: the last two, at offsets 2^32 and past
  constexpr int64_t n_traj = first + 2;
  Reserved<double> y0(n_traj), k(n_traj), ys(n_traj * n_save);
  Reserved<int32_t> accepted(n_traj), rejected(n_traj), status(n_traj);
  if (!ys.data() || !y0.data() || !k.data() || !status.data()) {
    GTEST_SKIP() << "this system refuses a 32 GiB MAP_NORESERVE mapping (vm.overcommit_memory=2?)";
  }
  double t_span[n_save];
  for (int j = 0; j < n_save; ++j) t_span[j] = 0.01 * j;
  for (int64_t m = first; m < n_traj; ++m) {
    y0.data()[m] = 1.0 + static_cast<double>(m - first);
    k.data()[m] = 0.5;
  }
  ShoalSolveOptions options;
  options.rtol = 1e-10;
  options.atol = 1e-12;
  const ShoalEnsembleArgs a = shoal::ode::ensemble_args<Decay, double>(
      n_traj, n_save, y0.data(), k.data(), t_span, ys.data(), accepted.data(), rejected.data(),
      status.data(), options);
  shoal::ode::solve_range<shoal::ode::Tsit5, Decay, double>(a, first, n_traj);

  for (int64_t m = first; m < n_traj; ++m) {
    EXPECT_EQ(status.data()[m], shoal::ode::kSuccess);
    const double* row = ys.data() + m * n_save;
    for (int j = 0; j < n_save; j += 97) {
      EXPECT_NEAR(row[j], y0.data()[m] * std::exp(-0.5 * t_span[j]), 1e-8) << m << " " << j;
    }
    EXPECT_NEAR(row[n_save - 1], y0.data()[m] * std::exp(-0.5 * t_span[n_save - 1]), 1e-8);
  }
  // Where 32-bit offsets would have put them: the first two rows, never written.
  for (int64_t i = 0; i < 2 * n_save; ++i) ASSERT_EQ(ys.data()[i], 0.0) << i;
  EXPECT_EQ(status.data()[0], 0);
  EXPECT_EQ(accepted.data()[0], 0);
}

}  // namespace
