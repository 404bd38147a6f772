// Dense LU factorisation with partial pivoting, in place, for one small matrix per trajectory.
//
// P A = L U with unit-diagonal L stored below the diagonal and U on and above it. The storage type
// S (float or double) is the factorisation's precision; solve() works on vectors of any scalar type
// T, reading the factors as T, so an fp32 factorisation can serve an fp64 state. A zero pivot is
// not an error here: the division produces Inf/NaN, which the step's error norm turns into a
// rejection and a smaller step (larger 1/(hγ) on the diagonal).
#pragma once

#include "shoal/config.hpp"
#include "shoal/math.hpp"

namespace shoal {
namespace linalg {

template <class S, int N>
struct DenseLU {
  S a[N * N];  // row-major
  int piv[N];  // row i of the factors came from row piv[i] of A

  // Factors a in place. Returns false if a pivot was exactly zero.
  SHOAL_HD bool factor() {
    bool regular = true;
    for (int i = 0; i < N; ++i) piv[i] = i;
    for (int k = 0; k < N; ++k) {
      int p = k;
      S best = math::abs(a[k * N + k]);
      for (int i = k + 1; i < N; ++i) {
        const S v = math::abs(a[i * N + k]);
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

  // Overwrites b with A⁻¹ b.
  template <class T>
  SHOAL_HD void solve(T* b) const {
    T x[N];
    for (int i = 0; i < N; ++i) {
      T acc = b[piv[i]];
      for (int j = 0; j < i; ++j) acc -= T(a[i * N + j]) * x[j];
      x[i] = acc;
    }
    for (int i = N - 1; i >= 0; --i) {
      T acc = x[i];
      for (int j = i + 1; j < N; ++j) acc -= T(a[i * N + j]) * x[j];
      x[i] = acc / T(a[i * N + i]);
    }
    for (int i = 0; i < N; ++i) b[i] = x[i];
  }
};

}  // namespace linalg
}  // namespace shoal
