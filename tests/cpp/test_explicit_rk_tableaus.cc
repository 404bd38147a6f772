// The explicit Runge-Kutta tableaus (tsit5.hpp, vern7.hpp, vern9.hpp) against the order
// conditions of every rooted tree (Butcher): a method of order p has Σ_i b_i Φ_i(t) = 1/γ(t) for
// every tree t of at most p vertices, where Φ_i(t) = Π over t's root's subtrees u of (A Φ(u))_i
// and γ(t) = |t| Π γ(u). The trees are enumerated here (1, 1, 2, 4, 9, 20, 48, 115, 286, 719 of
// orders 1…10), not listed by hand. The same holds for the embedded weights b − e to the
// embedded order, and for the continuous extension b(θ) with θ^|t|/γ(t) on the right, over the
// extended tableau with the extra stages. Each weight set must also miss the next order, so the
// tests could fail.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "shoal/ode/tsit5.hpp"
#include "shoal/ode/vern7.hpp"
#include "shoal/ode/vern9.hpp"

namespace {

using Real = long double;

template <class Tab>
struct Trees {
  static constexpr int SD = Tab::dense_stages;
  struct Tree {
    int order;
    Real density;
    std::vector<Real> phi;  // over the SD stages of the extended tableau
  };
  std::vector<Tree> trees;  // ordered by order

  explicit Trees(int max_order) {
    trees.push_back({1, 1, std::vector<Real>(SD, 1)});
    for (int order = 2; order <= max_order; ++order) {
      const int known = static_cast<int>(trees.size());
      std::vector<int> children;
      add_forests(order, order - 1, 0, known, children);
    }
  }

  // The largest |Σ w Φ(t) − θ^|t|/γ(t)| over the trees of exactly `order` vertices.
  Real worst(const std::vector<Real>& w, int order, Real theta = 1) const {
    Real out = 0;
    for (const Tree& t : trees) {
      if (t.order != order) continue;
      Real s = 0;
      for (int i = 0; i < SD; ++i) s += w[i] * t.phi[i];
      out = std::max(out, std::abs(s - std::pow(theta, order) / t.density));
    }
    return out;
  }

  int count(int order) const {
    return static_cast<int>(std::count_if(trees.begin(), trees.end(),
                                          [&](const Tree& t) { return t.order == order; }));
  }

 private:
  static std::vector<Real> a_times(const std::vector<Real>& v) {
    std::vector<Real> out(SD, 0);
    for (int i = 0; i < SD; ++i) {
      for (int j = 0; j < i; ++j) out[i] += static_cast<Real>(Tab::a(i, j)) * v[j];
    }
    return out;
  }

  // Every multiset of earlier trees (indices ≥ first, nondecreasing) whose orders sum to
  // `left` becomes the subtrees of a new root.
  void add_forests(int order, int left, int first, int known, std::vector<int>& children) {
    if (left == 0) {
      Tree t{order, static_cast<Real>(order), std::vector<Real>(SD, 1)};
      for (int c : children) {
        t.density *= trees[c].density;
        const std::vector<Real> ac = a_times(trees[c].phi);
        for (int i = 0; i < SD; ++i) t.phi[i] *= ac[i];
      }
      trees.push_back(t);
      return;
    }
    for (int c = first; c < known; ++c) {
      if (trees[c].order > left) break;
      children.push_back(c);
      add_forests(order, left - trees[c].order, c, known, children);
      children.pop_back();
    }
  }
};

template <class Tab>
std::vector<Real> weights(bool embedded) {
  std::vector<Real> w(Tab::dense_stages, 0);
  for (int i = 0; i < Tab::stages; ++i) w[i] = Tab::b(i) - (embedded ? Tab::e(i) : 0.0);
  return w;
}

template <class Tab>
std::vector<Real> dense_weights(Real theta) {
  std::vector<Real> w(Tab::dense_stages, 0);
  for (int i = 0; i < Tab::dense_stages; ++i) {
    for (int j = 0; j < Tab::dense_degree; ++j) w[i] += Tab::r(i, j) * std::pow(theta, j + 1);
  }
  return w;
}

// What each tableau claims: orders of the solution, the embedded solution and the dense output
// (exactly), and a looser tolerance to which the dense output meets the next order's conditions
// (Vern7's, as published: the order-7 conditions to ~1e-7; 0 where it does not).
struct Claims {
  int order, embedded, dense;
  double dense_next_tol;
};

template <class Tab>
void check_tableau(const Claims& claims, double tol) {
  const Trees<Tab> trees(std::max(claims.order, claims.dense) + 1);
  // Node i is the row sum of a (f is evaluated at t + c_i h).
  for (int i = 0; i < Tab::dense_stages; ++i) {
    Real sum = 0;
    for (int j = 0; j < i; ++j) sum += Tab::a(i, j);
    EXPECT_NEAR(static_cast<double>(sum), Tab::c(i), 1e-14) << "stage " << i;
  }
  const std::vector<Real> b = weights<Tab>(false), b_hat = weights<Tab>(true);
  for (int k = 1; k <= claims.order; ++k) {
    EXPECT_LT(trees.worst(b, k), tol) << "solution, order " << k;
  }
  EXPECT_GT(trees.worst(b, claims.order + 1), 1e-8) << "the solution must not be of higher order";
  for (int k = 1; k <= claims.embedded; ++k) {
    EXPECT_LT(trees.worst(b_hat, k), tol) << "embedded, order " << k;
  }
  EXPECT_GT(trees.worst(b_hat, claims.embedded + 1), 1e-8) << "the estimate must be lower order";
  for (Real theta : {0.25L, 0.5L, 0.8L}) {
    const std::vector<Real> w = dense_weights<Tab>(theta);
    for (int k = 1; k <= claims.dense; ++k) {
      EXPECT_LT(trees.worst(w, k, theta), tol) << "dense output, θ = " << theta << ", order " << k;
    }
    const Real next = trees.worst(w, claims.dense + 1, theta);
    if (claims.dense_next_tol > 0) {
      EXPECT_LT(next, claims.dense_next_tol) << "θ = " << theta;
    }
    EXPECT_GT(next, 1e-9) << "the dense output must not be of higher order, θ = " << theta;
  }
  // At θ = 1 the dense output is the step's solution.
  const std::vector<Real> at_one = dense_weights<Tab>(1);
  for (int i = 0; i < Tab::dense_stages; ++i) {
    EXPECT_NEAR(static_cast<double>(at_one[i]), static_cast<double>(b[i]), 1e3 * tol)
        << "stage " << i;
  }
  // FSAL: the last stage's point is the solution (its row of a is b), at c = 1.
  if constexpr (Tab::fsal) {
    for (int j = 0; j < Tab::stages - 1; ++j) EXPECT_EQ(Tab::a(Tab::stages - 1, j), Tab::b(j));
    EXPECT_EQ(Tab::c(Tab::stages - 1), 1.0);
  }
}

TEST(ExplicitRungeKuttaTableaus, TreeCountsAreButchers) {
  const Trees<shoal::ode::Vern9Tableau> trees(9);
  const int expected[] = {1, 1, 2, 4, 9, 20, 48, 115, 286};
  for (int k = 1; k <= 9; ++k) EXPECT_EQ(trees.count(k), expected[k - 1]) << "order " << k;
}

TEST(ExplicitRungeKuttaTableaus, Tsit5) {
  check_tableau<shoal::ode::Tsit5Tableau>({5, 4, 4, 0}, 2e-14);
  for (int i = 0; i < shoal::ode::Tsit5Tableau::stages; ++i) {
    EXPECT_NEAR(shoal::ode::Tsit5Tableau::e(i),
                shoal::ode::Tsit5Tableau::b(i) - shoal::ode::Tsit5Tableau::b_hat(i), 4e-16);
  }
}

TEST(ExplicitRungeKuttaTableaus, Vern7) { check_tableau<shoal::ode::Vern7Tableau>({7, 6, 6, 1e-6}, 1e-13); }

TEST(ExplicitRungeKuttaTableaus, Vern9) { check_tableau<shoal::ode::Vern9Tableau>({9, 8, 9, 0}, 1e-12); }

}  // namespace
