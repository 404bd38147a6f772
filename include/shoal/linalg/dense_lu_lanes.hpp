// DenseLU over SIMD lanes: W independent small matrices factorised in lock-step, each lane with
// its own pivoting (scaled in double, plain in float, as the scalar's), and each lane computing
// exactly the scalar DenseLU's operations.
//
// Pivoting per lane, by masked swaps. At column k every lane finds its own pivot row by the
// scalar loop's rule (the first strict maximum of |a_ik| scaled by 1 / its row's largest |entry|
// of A, i ≥ k), as an index vector; then, for
// each row i > k that some lane chose, rows k and i are exchanged in those lanes only (bit
// selects). The alternative, a lane-wise gather of whole rows through the pivot indices, moves
// N values per row and lane through memory on every column whether or not a lane pivots; the
// masked swap costs nothing when no lane pivots (checked per column), which is the common case
// for M = I/(hγ) − J, whose diagonal 1/(hγ) dominates at the step sizes a stiff solve takes, and
// a row's swap is 2N selects when some lane does. The solve gathers b through each lane's own
// permutation once (N loads per lane); elimination and substitution are plain lane arithmetic.
#pragma once

#include "shoal/linalg/dense_lu.hpp"
#include "shoal/simd/lanes.hpp"

namespace shoal {
namespace linalg {

template <class S, int W, int N>
struct DenseLU<simd::Lanes<S, W>, N> {
  using L = simd::Lanes<S, W>;
  using Mask = typename L::Mask;
  L a[N * N];          // row-major, one matrix per lane
  int32_t piv[N][W];   // lane l's row i of the factors came from its row piv[i][l] of A

  bool factor() {
    bool regular = true;
    L scale[N];  // the scalar's row scales, per lane
    for (int i = 0; i < N; ++i) {
      for (int l = 0; l < W; ++l) piv[i][l] = i;
      scale[i] = L(S(1));
      if constexpr (kScaledPivoting<S>) {
        L largest(S(0));
        for (int j = 0; j < N; ++j) {
          const L v = simd::abs(a[i * N + j]);
          largest = simd::select<S, W>(v.v > largest.v, v, largest);
        }
        scale[i] = simd::select<S, W>(largest.v > S(0), L(S(1)) / largest, L(S(1)));
      }
    }
    for (int k = 0; k < N; ++k) {
      Mask p = Mask{} + k;
      L best = simd::abs(a[k * N + k]) * scale[k];
      for (int i = k + 1; i < N; ++i) {
        const L v = simd::abs(a[i * N + k]) * scale[i];
        const Mask larger = v.v > best.v;
        best = simd::select<S, W>(larger, v, best);
        p = simd::select_int(larger, Mask{} + i, p);
      }
      if (simd::any(p != k)) {
        for (int i = k + 1; i < N; ++i) {
          const Mask swap = p == i;
          if (!simd::any(swap)) continue;
          for (int j = 0; j < N; ++j) {
            const L top = a[k * N + j];
            a[k * N + j] = simd::select<S, W>(swap, a[i * N + j], top);
            a[i * N + j] = simd::select<S, W>(swap, top, a[i * N + j]);
          }
          const L top_scale = scale[k];
          scale[k] = simd::select<S, W>(swap, scale[i], top_scale);
          scale[i] = simd::select<S, W>(swap, top_scale, scale[i]);
          for (int l = 0; l < W; ++l) {
            if (!swap[l]) continue;
            const int32_t t = piv[k][l];
            piv[k][l] = piv[i][l];
            piv[i][l] = t;
          }
        }
      }
      const L pivot = a[k * N + k];
      if (simd::any(pivot.v == S(0))) regular = false;
      const L inv = L(S(1)) / pivot;
      for (int i = k + 1; i < N; ++i) {
        const L l = a[i * N + k] * inv;
        a[i * N + k] = l;
        for (int j = k + 1; j < N; ++j) a[i * N + j] -= l * a[k * N + j];
      }
    }
    return regular;
  }

  // Overwrites b with A⁻¹ b in every lane: row by row (measured as fast here as the scalar's
  // columns), each entry's subtractions in the scalar solve's order (j ascending forwards,
  // descending backwards), so each lane gets the scalar bits.
  template <class T>
  void solve(T* b) const {
    T x[N];
    for (int i = 0; i < N; ++i) {
      T acc;
      for (int l = 0; l < W; ++l) simd::set_lane(acc, l, simd::lane(b[piv[i][l]], l));
      for (int j = 0; j < i; ++j) acc -= T(a[i * N + j]) * x[j];
      x[i] = acc;
    }
    for (int i = N - 1; i >= 0; --i) {
      T acc = x[i];
      for (int j = N - 1; j > i; --j) acc -= T(a[i * N + j]) * x[j];
      x[i] = acc / T(a[i * N + i]);
    }
    for (int i = 0; i < N; ++i) b[i] = x[i];
  }

  // Overwrites b with A⁻ᵀ b in every lane, as the scalar solve_transposed computes it (the
  // adjoint's transposes: ode/rosenbrock_adjoint.hpp).
  template <class T>
  void solve_transposed(T* b) const {
    T w[N];
    transposed_substitution<N>(a, b, w);
    for (int i = 0; i < N; ++i)
      for (int l = 0; l < W; ++l) simd::set_lane(b[piv[i][l]], l, simd::lane(w[i], l));
  }
};

}  // namespace linalg
}  // namespace shoal
