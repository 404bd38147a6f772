// The order conditions of a Rosenbrock tableau (rodas5p.hpp, rodas4.hpp, rosenbrock23.hpp), for
// the tableau tests.
//
// The stepper stores the method in the transformed form of Hairer & Wanner (Solving ODEs II,
// Sec. IV.7): with the stage increments u_i = Σ_j γ_ij k_j (Γ lower triangular, γ on its diagonal),
//   a = α Γ⁻¹,   C = diag(1/γ) − Γ⁻¹,   y1 = y0 + Σ m_j u_j with m = b Γ⁻¹.
// A stiffly accurate tableau's y_new = u_s + k_s gives m_j = a_sj (j < s) and m_s = 1, and its
// embedded ŷ = u_s gives m̂ = row s of a; any other gives m = its b and m̂ = b − e (err = y_new − ŷ). Conditions<Tab> converts the tableau back to the standard form (α, Γ, b) and
// evaluates the conditions of rooted trees: a vertex with one child contributes β = α + Γ (the
// f'(y) k and J Γ k terms together), a vertex with several children contributes α, and
// Σ b Φ(t) = 1/γ(t) (the tree's density). This gives Table 7.1 of HW IV.7 with the γ-polynomials
// moved to the right, e.g. Σ b_i β_i' = 1/2 − γ, Σ b_i β_ij β_j' = 1/6 − γ + γ².
#pragma once

#include <algorithm>
#include <array>
#include <initializer_list>
#include <cmath>

template <class Tab>
struct Conditions {
  static constexpr int S = Tab::stages;
  using V = std::array<double, S>;
  using Mat = std::array<V, S>;

  static double a_t(int i, int j) { return j < i ? Tab::a(i, j) : 0.0; }  // transformed a
  static double c_t(int i, int j) { return j < i ? Tab::C(i, j) : 0.0; }  // transformed C

  Mat alpha{}, gam{}, beta{};  // α, Γ (with γ on the diagonal), β = α + Γ
  V m{};                       // the solution's weights on the transformed increments
  V b{}, b_hat{};              // solution and embedded weights

  Conditions() {
    Mat gamma_inv{};
    for (int i = 0; i < S; ++i) {
      for (int j = 0; j < S; ++j) gamma_inv[i][j] = (i == j ? 1.0 / Tab::gamma : 0.0) - c_t(i, j);
    }
    // Γ from Γ⁻¹ (lower triangular): forward substitution column by column.
    for (int col = 0; col < S; ++col) {
      for (int i = 0; i < S; ++i) {
        double acc = i == col ? 1.0 : 0.0;
        for (int j = 0; j < i; ++j) acc -= gamma_inv[i][j] * gam[j][col];
        gam[i][col] = acc / gamma_inv[i][i];
      }
    }
    for (int i = 0; i < S; ++i) {
      for (int j = 0; j < S; ++j) {
        for (int k = 0; k < S; ++k) alpha[i][j] += a_t(i, k) * gam[k][j];  // α = a Γ
      }
    }
    for (int i = 0; i < S; ++i) {
      for (int j = 0; j < S; ++j) beta[i][j] = alpha[i][j] + gam[i][j];
    }
    V m_hat{};
    if constexpr (Tab::stiffly_accurate) {
      for (int j = 0; j < S; ++j) m[j] = m_hat[j] = a_t(S - 1, j);
      m[S - 1] = 1.0;  // y_new = u_s + k_s
    } else {
      for (int j = 0; j < S; ++j) {
        m[j] = Tab::b(j);
        m_hat[j] = Tab::b(j) - Tab::e(j);  // err = y_new − ŷ
      }
    }
    b = row_times(m, gam);
    b_hat = row_times(m_hat, gam);
  }

  static V row_times(const V& m, const Mat& a) {  // m A (row vector)
    V out{};
    for (int j = 0; j < S; ++j) {
      for (int i = 0; i < S; ++i) out[j] += m[i] * a[i][j];
    }
    return out;
  }
  static V ones() {
    V r;
    r.fill(1.0);
    return r;
  }
  static V mul(const Mat& m, const V& v) {
    V r{};
    for (int i = 0; i < S; ++i) {
      for (int j = 0; j < S; ++j) r[i] += m[i][j] * v[j];
    }
    return r;
  }
  static V times(const V& a, const V& b) {
    V r;
    for (int i = 0; i < S; ++i) r[i] = a[i] * b[i];
    return r;
  }
  static double dot(const V& w, const V& v) {
    double s = 0;
    for (int i = 0; i < S; ++i) s += w[i] * v[i];
    return s;
  }

  // Φ(t) for the 17 trees of order ≤ 5 (α below bushy vertices, β below linear ones), with the
  // densities γ(t): the conditions are Σ_i b_i Φ_i(t) = θ^|t| / γ(t) (θ = 1 for the step's end).
  struct Tree {
    const char* name;
    int order;
    double density;
    V phi;
  };
  static constexpr int kTrees = 17;
  static constexpr int kTreesThroughOrder[6] = {0, 1, 2, 4, 8, 17};

  std::array<Tree, kTrees> trees() const {
    const Mat &A = alpha, &B = beta;
    const V e = ones();
    const V c = mul(A, e);   // α_i = Σ_j α_ij
    const V Be = mul(B, e);  // β_i' (with γ)
    const V ABe = mul(A, Be);
    const V BBe = mul(B, Be);
    const V c2 = times(c, c), c3 = times(c2, c);
    return {{{"τ: Σb = 1", 1, 1, e},
             {"[τ]: Σ b β'", 2, 2, Be},
             {"[τ,τ]: Σ b c²", 3, 3, c2},
             {"[[τ]]: Σ b β β'", 3, 6, BBe},
             {"[τ,τ,τ]: Σ b c³", 4, 4, c3},
             {"[τ,[τ]]: Σ b c α β'", 4, 8, times(c, ABe)},
             {"[[τ,τ]]: Σ b β c²", 4, 12, mul(B, c2)},
             {"[[[τ]]]: Σ b β β β'", 4, 24, mul(B, BBe)},
             {"[τ,τ,τ,τ]: Σ b c⁴", 5, 5, times(c3, c)},
             {"[τ,τ,[τ]]: Σ b c² α β'", 5, 10, times(c2, ABe)},
             {"[τ,[τ,τ]]: Σ b c α c²", 5, 15, times(c, mul(A, c2))},
             {"[τ,[[τ]]]: Σ b c α β β'", 5, 30, times(c, mul(A, BBe))},
             {"[[τ],[τ]]: Σ b (α β')²", 5, 20, times(ABe, ABe)},
             {"[[τ,τ,τ]]: Σ b β c³", 5, 20, mul(B, c3)},
             {"[[τ,[τ]]]: Σ b β (c α β')", 5, 40, mul(B, times(c, ABe))},
             {"[[[τ,τ]]]: Σ b β β c²", 5, 60, mul(B, mul(B, c2))},
             {"[[[[τ]]]]: Σ b β β β β'", 5, 120, mul(B, mul(B, BBe))}}};
  }

  // The largest |Σ w Φ(t) − θ^|t|/γ(t)| over the trees of orders order_from..order_to.
  double worst_residual(const V& w, int order_from, int order_to, double theta = 1.0) const {
    const std::array<Tree, kTrees> t = trees();
    double worst = 0;
    for (int k = kTreesThroughOrder[order_from - 1]; k < kTreesThroughOrder[order_to]; ++k) {
      worst = std::max(worst,
                       std::abs(dot(w, t[k].phi) - std::pow(theta, t[k].order) / t[k].density));
    }
    return worst;
  }

  // Stiffly accurate (R(∞) = 0) in the standard form: b is the last row of β = α + Γ and b̂ the
  // one before. The largest deviation.
  double stiffly_accurate_residual() const {
    double worst = 0;
    for (int j = 0; j < S; ++j) {
      worst = std::max({worst, std::abs(b[j] - beta[S - 1][j]),
                        std::abs(b_hat[j] - beta[S - 2][j])});
    }
    return worst;
  }

  // The largest deviation of the nodes c_i from Σ_j α_ij (f at t + c_i h) and of the time
  // weights d_i from Σ_j γ_ij (the h d_i ∂f/∂t term).
  double row_sum_residual() const {
    double worst = 0;
    for (int i = 0; i < S; ++i) {
      double alpha_sum = 0, gamma_sum = 0;
      for (int j = 0; j < S; ++j) {
        alpha_sum += alpha[i][j];
        gamma_sum += gam[i][j];
      }
      worst = std::max({worst, std::abs(alpha_sum - Tab::c(i)), std::abs(gamma_sum - Tab::d(i))});
    }
    return worst;
  }

  // Dense output: y(θ) = (1−θ) y0 + θ (y1 + (1−θ)(K_0 + θ (K_1 + …))), K_r = Σ_i h_ri u_i, so
  // y(θ) − y0 = Σ_j m_j(θ) u_j with m(θ) = θ m + θ(1−θ)(h_0 + θ h_1 + …), and b(θ) = m(θ) Γ.
  V dense_weights(double theta) const {
    V m_theta;
    for (int j = 0; j < S; ++j) {
      double poly = 0;
      for (int r = Tab::dense_rows - 1; r >= 0; --r) poly = Tab::h(r, j) + theta * poly;
      m_theta[j] = theta * m[j] + theta * (1 - theta) * poly;
    }
    return row_times(m_theta, gam);
  }

  // The dense output's largest residual of the conditions of orders 1..order over θ in a sweep,
  // and its largest deviation at θ = 1 from the solution and at θ = 0 from zero weights.
  double dense_residual(int order) const {
    double worst = 0;
    for (double theta : {0.0, 0.1, 0.25, 0.5, 0.7, 0.9, 1.0}) {
      worst = std::max(worst, worst_residual(dense_weights(theta), 1, order, theta));
    }
    const V b1 = dense_weights(1.0), b0 = dense_weights(0.0);
    for (int j = 0; j < S; ++j) worst = std::max({worst, std::abs(b1[j] - b[j]), std::abs(b0[j])});
    return worst;
  }
};
