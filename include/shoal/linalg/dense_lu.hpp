// Dense LU factorisation with scaled partial pivoting, in place, for one small matrix per
// trajectory.
//
// P A = L U with unit-diagonal L stored below the diagonal and U on and above it. The pivot of
// column k is the row i >= k whose |a_ik| is largest relative to its row of A (|a_ik| / max_j
// |A_ij|; the first such row on ties), not the largest |a_ik| outright: a stiff model's
// iteration matrix I/(hγ) − J mixes rows of very different sizes (a Boltzmann hierarchy's
// Thomson-coupled rows, ~1e17 at early times, beside O(1) ones), and an unscaled choice swaps a
// small row's equation under a huge row's entry, whose elimination then cancels the small row's
// information: measured on benchmarks/boltzmann_modes.py, the k = 0.1/Mpc mode at rtol 1e-8
// ended 1.5e-5 off the reference (1.8e-9 with the sparse solver, which pivots on the diagonal)
// and rejected 20 % more steps; with scaled pivoting 8e-10. The scales choose pivots only: the
// factors are those of P A itself.
//
// Float factors (lu_precision="fp32") keep plain partial pivoting, multipliers at most 1: a float
// factorisation's accuracy is its rounding (6e-8) times the elements' growth, which a
// row-relative choice lets grow (Robertson's mass drift with float factors, 3.6e-11 plain,
// 9.0e-10 scaled; tests/cpp/test_rodas5p_convergence.cc), and on the Boltzmann model float factors
// are too coarse under either rule. In double the growth costs nothing measurable. The storage type
// S (float or double) is the factorisation's precision; solve() works on vectors of any scalar type
// T, reading the factors as T, so an fp32 factorisation can serve an fp64 state. A zero pivot is
// not an error here: the division produces Inf/NaN, which the step's error norm turns into a
// rejection and a smaller step (larger 1/(hγ) on the diagonal).
#pragma once

#include "shoal/config.hpp"
#include "shoal/math.hpp"

namespace shoal {
namespace linalg {

// Whether factors of precision S choose their pivots relative to their rows (double) or plainly
// (float); see above.
template <class S>
constexpr bool kScaledPivoting = sizeof(S) >= 8;

// w = L⁻ᵀ U⁻ᵀ b for the factors a (N × N row-major: U on and above the diagonal, the unit
// lower L below it), the transposed solve before its permutation (shared by the lanes' LU,
// dense_lu_lanes.hpp, so both compute alike). By columns of the transposed triangles, i.e. rows
// of a (contiguous): each w[i] receives its subtractions in the order of the solve's rows —
// Uᵀ forwards (j = 0, 1, …), Lᵀ backwards (j = N−1, N−2, …) — while the chains of different
// i are independent and overlap (see DenseLU::solve).
template <int N, class A, class T>
SHOAL_HD void transposed_substitution(const A* a, const T* b, T* w) {
  for (int i = 0; i < N; ++i) w[i] = b[i];
  for (int j = 0; j < N; ++j) {
    w[j] = w[j] / T(a[j * N + j]);
    const T wj = w[j];
    for (int i = j + 1; i < N; ++i) w[i] -= T(a[j * N + i]) * wj;
  }
  for (int j = N - 1; j > 0; --j) {
    const T wj = w[j];
    for (int i = 0; i < j; ++i) w[i] -= T(a[j * N + i]) * wj;
  }
}

template <class S, int N>
struct DenseLU {
  S a[N * N];  // row-major
  int piv[N];  // row i of the factors came from row piv[i] of A

  // Factors a in place. Returns false if a pivot was exactly zero.
  SHOAL_HD bool factor() {
    bool regular = true;
    // 1 / the largest |entry| of each row of A (1 for a zero row, and for float factors),
    // moving with its row.
    S scale[N];
    for (int i = 0; i < N; ++i) {
      piv[i] = i;
      scale[i] = S(1);
      if constexpr (kScaledPivoting<S>) {
        S largest = S(0);
        for (int j = 0; j < N; ++j) {
          const S v = math::abs(a[i * N + j]);
          if (v > largest) largest = v;
        }
        if (largest > S(0)) scale[i] = S(1) / largest;
      }
    }
    for (int k = 0; k < N; ++k) {
      int p = k;
      S best = math::abs(a[k * N + k]) * scale[k];
      for (int i = k + 1; i < N; ++i) {
        const S v = math::abs(a[i * N + k]) * scale[i];
        if (v > best) {
          best = v;
          p = i;
        }
      }
      if (p != k) {
        for (int j = 0; j < N; ++j) {
          const S tmp = a[k * N + j];
          a[k * N + j] = a[p * N + j];
          a[p * N + j] = tmp;
        }
        const S s = scale[k];
        scale[k] = scale[p];
        scale[p] = s;
        const int t = piv[k];
        piv[k] = piv[p];
        piv[p] = t;
      }
      const S pivot = a[k * N + k];
      if (pivot == S(0)) regular = false;
      const S inv = S(1) / pivot;
      for (int i = k + 1; i < N; ++i) {
        const S l = a[i * N + k] * inv;
        a[i * N + k] = l;
        for (int j = k + 1; j < N; ++j) a[i * N + j] -= l * a[k * N + j];
      }
    }
    return regular;
  }

  // Overwrites b with A⁻¹ b. By columns: x[i] receives its subtractions in the order
  // j = 0, 1, …, i−1 forwards and j = N−1, N−2, …, i+1 backwards, the chains of different i
  // independent, so they overlap where a row-by-row dot product waits on each subtraction in
  // turn (72 variables: 2.3 → 1.2 µs a solve). The lanes' LU (dense_lu_lanes.hpp) keeps the row
  // form, its chains already W wide, with the same order per entry: the same bits.
  template <class T>
  SHOAL_HD void solve(T* b) const {
    T x[N];
    for (int i = 0; i < N; ++i) x[i] = b[piv[i]];
    for (int j = 0; j < N; ++j) {
      const T xj = x[j];
      for (int i = j + 1; i < N; ++i) x[i] -= T(a[i * N + j]) * xj;
    }
    for (int j = N - 1; j >= 0; --j) {
      x[j] = x[j] / T(a[j * N + j]);
      const T xj = x[j];
      for (int i = 0; i < j; ++i) x[i] -= T(a[i * N + j]) * xj;
    }
    for (int i = 0; i < N; ++i) b[i] = x[i];
  }

  // Overwrites b with A⁻ᵀ b (the adjoint's solves): Aᵀ = Uᵀ Lᵀ P, so Uᵀ z = b forwards, then
  // Lᵀ w = z backwards (transposed_substitution), then x[piv[i]] = w[i].
  template <class T>
  SHOAL_HD void solve_transposed(T* b) const {
    T w[N];
    transposed_substitution<N>(a, b, w);
    for (int i = 0; i < N; ++i) b[piv[i]] = w[i];
  }
};

}  // namespace linalg
}  // namespace shoal
