// shoal::math::fifth_root against a long double reference: the proven bound of
// include/shoal/fifth_root.hpp (|y / x^(1/5) - 1| <= 1.81 u), the seed bound its proof rests on,
// the special values and exact fifth powers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <random>

#include "shoal/fifth_root.hpp"

namespace {

using shoal::math::fifth_root;

// x^(1/5) in long double, independent of the routine under test: x = t 2^(5q) exactly with
// t in [1, 32), powl on t (where 0.2L's representation error costs < 1e-19 relative), then one
// long double Newton step. Relative error ~1e-19, i.e. ~0.001 u of double.
long double ref_fifth_root(long double x) {
  int e;
  long double f = frexpl(x, &e);  // x = f 2^e, f in [0.5, 1)
  f *= 2;
  e -= 1;
  int q = e >= 0 ? e / 5 : -((-e + 4) / 5);  // floor(e / 5)
  long double t = ldexpl(f, e - 5 * q);
  long double y = powl(t, 0.2L);
  long double y4 = (y * y) * (y * y);
  y = y - (y - t / y4) / 5;
  return ldexpl(y, q);
}

template <class T>
struct Limits;
template <>
struct Limits<double> {
  static constexpr long double u = 0x1p-53L;
  static constexpr int mant = 52;
  static constexpr int min_exp2 = -1074, max_exp2 = 1023;
  static const char* name() { return "double"; }
};
template <>
struct Limits<float> {
  static constexpr long double u = 0x1p-24L;
  static constexpr int mant = 23;
  static constexpr int min_exp2 = -149, max_exp2 = 127;
  static const char* name() { return "float"; }
};

// The bound stated in the header, plus the reference's own error.
template <class T>
long double bound() {
  return 1.81L * Limits<T>::u + 4 * 0x1p-64L;
}

// Running maxima of the relative error (units of u) and of the error in ulps of the result type.
struct ErrStats {
  long double max_rel_u = 0, max_ulp = 0;
  double worst_x = 0;
  long count = 0;
};

template <class T>
void check(T x, ErrStats& st) {
  const T y = fifth_root(x);
  const long double ref = ref_fifth_root(static_cast<long double>(x));
  const long double rel = fabsl(static_cast<long double>(y) / ref - 1);
  const long double ulp = ldexpl(1.0L, ilogbl(ref) - Limits<T>::mant);
  const long double ulps = fabsl(static_cast<long double>(y) - ref) / ulp;
  ++st.count;
  if (rel / Limits<T>::u > st.max_rel_u) {
    st.max_rel_u = rel / Limits<T>::u;
    st.worst_x = static_cast<double>(x);
  }
  if (ulps > st.max_ulp) st.max_ulp = ulps;
  ASSERT_LE(rel, bound<T>()) << Limits<T>::name() << " x = " << static_cast<double>(x)
                             << " (hexfloat " << std::hexfloat << static_cast<double>(x) << ")";
}

template <class T>
void report(const char* what, const ErrStats& st) {
  std::printf(
      "[fifth_root %-6s %-12s] n = %8ld  max rel err = %.4Lf u  max err = %.4Lf ulp  (x = %a)\n",
      Limits<T>::name(), what, st.count, st.max_rel_u, st.max_ulp, st.worst_x);
}

template <class T>
void powers_of_two() {
  ErrStats st;
  for (int k = Limits<T>::min_exp2; k <= Limits<T>::max_exp2; ++k) {
    check(static_cast<T>(ldexpl(1.0L, k)), st);
    if (testing::Test::HasFatalFailure()) return;
  }
  report<T>("powers of 2", st);
}

// Uniform over positive finite bit patterns: log-uniform across the whole range, subnormals in it.
template <class T, class Bits>
void random_bits(long n) {
  std::mt19937_64 rng(12345);
  ErrStats st;
  const Bits exp_mask = static_cast<Bits>(((Bits(1) << (sizeof(Bits) * 8 - 1)) - 1) >>
                                          Limits<T>::mant << Limits<T>::mant);
  for (long i = 0; i < n; ++i) {
    Bits b = static_cast<Bits>(rng()) & (exp_mask | ((Bits(1) << Limits<T>::mant) - 1));
    if ((b & exp_mask) == exp_mask || b == 0) continue;  // inf / NaN / zero: tested apart
    T x;
    std::memcpy(&x, &b, sizeof x);
    check(x, st);
    if (testing::Test::HasFatalFailure()) return;
  }
  report<T>("random bits", st);
}

// What the controller sees: 1 / ||err|| over 1e-12 .. 1e12, log-uniform.
template <class T>
void controller_range(long n) {
  std::mt19937_64 rng(777);
  std::uniform_real_distribution<double> expo(-12.0, 12.0);
  ErrStats st;
  for (long i = 0; i < n; ++i) {
    check(static_cast<T>(std::pow(10.0, expo(rng))), st);
    if (testing::Test::HasFatalFailure()) return;
  }
  report<T>("1e-12..1e12", st);
}

TEST(FifthRoot, DoublePowersOfTwo) { powers_of_two<double>(); }
TEST(FifthRoot, FloatPowersOfTwo) { powers_of_two<float>(); }
TEST(FifthRoot, DoubleRandom) { random_bits<double, uint64_t>(1000000); }
TEST(FifthRoot, FloatRandom) { random_bits<float, uint32_t>(1000000); }
TEST(FifthRoot, DoubleControllerRange) { controller_range<double>(300000); }
TEST(FifthRoot, FloatControllerRange) { controller_range<float>(300000); }

// Every 16th float in [1, 32): all residues r = 0..4 of the reduction. (Every float there,
// 5 * 2^23 of them, also passes, with max 1.576 u; it takes ~25 s.)
TEST(FifthRoot, FloatDenseReduced) {
  ErrStats st;
  for (uint32_t b = 0x3f800000u; b < 0x42000000u; b += 16) {
    float x;
    std::memcpy(&x, &b, sizeof x);
    check(x, st);
    if (HasFatalFailure()) return;
  }
  report<float>("[1,32) dense", st);
}

// The seed bound the proof starts from: |p(m) c_r / (m 2^r)^(1/5) - 1| <= 8e-6 in T arithmetic.
template <class T>
void seed_bound() {
  const long n = 1 << 20;
  long double worst = 0;
  for (int r = 0; r < 5; ++r) {
    typedef typename shoal::math::detail::FifthRootTraits<T>::Bits Bits;
    const T c = shoal::math::detail::fifth_root_two_pow<T>(static_cast<Bits>(r));
    for (long i = 0; i < n; ++i) {
      const T m = T(1) + static_cast<T>(i) / static_cast<T>(n);
      const long double y0 = static_cast<long double>(shoal::math::detail::fifth_root_poly(m) * c);
      const long double rel = fabsl(y0 / ref_fifth_root(ldexpl(m, r)) - 1);
      if (rel > worst) worst = rel;
    }
  }
  std::printf("[fifth_root %-6s seed        ] max rel err = %.4Le\n", Limits<T>::name(), worst);
  EXPECT_LE(worst, 8e-6L);
}
TEST(FifthRoot, DoubleSeedBound) { seed_bound<double>(); }
TEST(FifthRoot, FloatSeedBound) { seed_bound<float>(); }

template <class T>
void specials() {
  typedef std::numeric_limits<T> L;
  EXPECT_EQ(fifth_root(T(0)), T(0));
  EXPECT_FALSE(std::signbit(fifth_root(T(0))));
  EXPECT_EQ(fifth_root(-T(0)), T(0));
  EXPECT_TRUE(std::signbit(fifth_root(-T(0))));  // like cbrt and sqrt
  EXPECT_EQ(fifth_root(L::infinity()), L::infinity());
  EXPECT_TRUE(std::isnan(fifth_root(-L::infinity())));
  EXPECT_TRUE(std::isnan(fifth_root(L::quiet_NaN())));
  EXPECT_TRUE(std::isnan(fifth_root(-L::quiet_NaN())));
  EXPECT_TRUE(std::isnan(fifth_root(L::signaling_NaN())));
  EXPECT_TRUE(std::isnan(fifth_root(T(-1))));
  EXPECT_TRUE(std::isnan(fifth_root(T(-32))));
  EXPECT_TRUE(std::isnan(fifth_root(-L::denorm_min())));
  EXPECT_TRUE(std::isnan(fifth_root(-L::max())));
  ErrStats st;
  for (T x : {L::min(), L::denorm_min(), L::max(), std::nextafter(L::min(), T(0)),
              std::nextafter(L::min(), T(1)), T(1), std::nextafter(T(1), T(0)),
              std::nextafter(T(1), T(2)), T(32), std::nextafter(T(32), T(0))}) {
    check(x, st);
  }
  EXPECT_EQ(fifth_root(T(1)), T(1));
  EXPECT_EQ(fifth_root(T(32)), T(2));
  EXPECT_EQ(fifth_root(T(1) / T(32)), T(0.5));
  // 2^(5j) -> 2^j over the whole range, the smallest ones subnormal.
  for (int j = Limits<T>::min_exp2 / 5; 5 * j <= Limits<T>::max_exp2; ++j) {
    EXPECT_EQ(fifth_root(static_cast<T>(ldexpl(1.0L, 5 * j))), static_cast<T>(ldexpl(1.0L, j)))
        << "j = " << j;
  }
}
TEST(FifthRoot, DoubleSpecials) { specials<double>(); }
TEST(FifthRoot, FloatSpecials) { specials<float>(); }

// n^5 is exact in T for n^5 < 2^(mant + 1); so is n^5 2^(5j) while that stays representable
// (for the smallest j, only the small n: the subnormal ones). The bound (1.81 u) does not by
// itself imply these come back exact; they do, and this checks they keep doing so.
template <class T>
void exact_fifth_powers(std::initializer_list<int> js) {
  long n_max = 1;
  while (powl(static_cast<long double>(n_max + 1), 5) < ldexpl(1.0L, Limits<T>::mant + 1)) ++n_max;
  long tested = 0;
  for (long n = 1; n <= n_max; ++n) {
    const long double p = powl(static_cast<long double>(n), 5);
    for (int j : js) {
      const T x = static_cast<T>(ldexpl(p, 5 * j));
      if (static_cast<long double>(x) != ldexpl(p, 5 * j)) continue;  // not representable
      EXPECT_EQ(fifth_root(x), static_cast<T>(ldexpl(n, j))) << "n = " << n << ", j = " << j;
      ++tested;
    }
  }
  std::printf("[fifth_root %-6s exact       ] n^5 2^(5j), n <= %ld: %ld values\n",
              Limits<T>::name(), n_max, tested);
}
TEST(FifthRoot, DoubleExactFifthPowers) {
  exact_fifth_powers<double>({-215, -212, -205, -100, -7, -1, 0, 1, 4, 11, 100, 194});
}
TEST(FifthRoot, FloatExactFifthPowers) {
  exact_fifth_powers<float>({-29, -27, -25, -20, -7, -1, 0, 1, 4, 11, 20});
}

// Sanity on the names the controller uses: float and double agree to float precision.
TEST(FifthRoot, FloatMatchesDouble) {
  for (double x : {1e-12, 3e-7, 0.5, 2.0, 7.0, 1e5, 1e12}) {
    EXPECT_NEAR(fifth_root(static_cast<float>(x)), static_cast<float>(fifth_root(x)),
                3e-7 * fifth_root(x));
  }
}

}  // namespace
