// Continuous forward sensitivities: the joint system [y, S] as a model of its own.
//
// S = ∂y/∂θ for θ the differentiated inputs: the n entries of y0 (columns starting from I) and/or
// the parameters p[ParamBegin..ParamEnd) (columns starting from 0) — all of them, a model's own
// ones or its shared ones (model_traits.hpp), so a table nobody differentiates costs no column. Differentiating y' = f(y, t, p) gives
//   S_k' = J_y S_k + J_p e_k        (e_k only for a parameter column),
// which is the directional derivative D f(y, t, p)[S_k, 0, e_k]: one vector-mode dual sweep with a
// direction per column yields f and every S_k' together, without forming J_y or J_p.
//
// Joint state layout: z = [y (n), S_0 (n), S_1 (n), ...], column-major in the columns, so the
// state is always the leading n components (the error norm's n_error = n keeps it alone in step
// control). Any stepper integrates Sensitivity<Model, ...> as an ordinary model (Tsit5 does);
// the Rosenbrock engine has a joint system of its own (rosenbrock_joint.hpp) that exploits its
// structure.
#pragma once

#include "shoal/ad/dual.hpp"
#include "shoal/config.hpp"
#include "shoal/ode/model_traits.hpp"

namespace shoal {
namespace ode {

template <class Base, bool WithY0, int ParamBegin, int ParamEnd>
struct Sensitivity {
  static_assert(0 <= ParamBegin && ParamBegin <= ParamEnd && ParamEnd <= Base::n_params,
                "the differentiated parameters must be a range of the model's");
  using BaseModel = Base;
  static constexpr int n_base = Base::n_vars;
  static constexpr int n_params = Base::n_params;
  static constexpr int n_shared = n_shared_params<Base>();
  static constexpr int n_y0_cols = WithY0 ? n_base : 0;
  static constexpr int n_param_cols = ParamEnd - ParamBegin;
  static constexpr int n_sens = n_y0_cols + n_param_cols;
  static constexpr int n_vars = n_base * (1 + n_sens);
  static_assert(n_sens > 0, "a sensitivity model needs at least one column");

  // Seeds the duals of y (direction k = column k of S) and p (direction of its parameter column).
  // D's value type V may itself be a dual; `S` points at the n*n_sens sensitivity block.
  template <class D, class V>
  SHOAL_HD static void seed(const V* y, const V* S, const V* p, D* yd, D* pd) {
    for (int j = 0; j < n_base; ++j) {
      yd[j] = D(y[j]);
      for (int k = 0; k < n_sens; ++k) yd[j].d[k] = S[k * n_base + j];
    }
    for (int j = 0; j < n_params; ++j) {
      pd[j] = D(p[j]);
      if (ParamBegin <= j && j < ParamEnd) pd[j].d[n_y0_cols + j - ParamBegin] = V(1);
    }
  }

  template <class T>
  SHOAL_HD static void rhs(const T* z, const T& t, const T* p, T* dz) {
    using D = ad::Dual<T, n_sens>;
    D yd[n_base], out[n_base];
    D pd[n_params > 0 ? n_params : 1];
    seed<D, T>(z, z + n_base, p, yd, pd);
    Base::template rhs<D>(yd, D(t), pd, out);
    for (int i = 0; i < n_base; ++i) {
      dz[i] = out[i].v;
      for (int k = 0; k < n_sens; ++k) dz[n_base * (1 + k) + i] = out[i].d[k];
    }
  }

  // The joint initial state: y0, then I for the y0 columns and 0 for the parameter columns.
  template <class T>
  SHOAL_HD static void initial_state(const T* y0, T* z) {
    for (int i = 0; i < n_vars; ++i) z[i] = T(0);
    for (int i = 0; i < n_base; ++i) z[i] = y0[i];
    for (int k = 0; k < n_y0_cols; ++k) z[n_base * (1 + k) + k] = T(1);
  }
};

}  // namespace ode
}  // namespace shoal
