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
#include "shoal/ad/param_reads.hpp"
#include "shoal/config.hpp"
#include "shoal/ode/model_traits.hpp"

namespace shoal {
namespace ode {

// The joint right-hand side of a sensitivity model (Sensitivity here, DirectionalSensitivity in
// directional_sensitivity.hpp): one dual sweep of the base model with the model's seeds.
template <class SensModel, class T>
SHOAL_HD void sensitivity_rhs(const T* z, const T& t, const T* p, T* dz) {
  using Base = typename SensModel::BaseModel;
  constexpr int n_base = Base::n_vars, n_sens = SensModel::n_sens;
  using D = ad::Dual<T, n_sens>;
  D yd[n_base], out[n_base];
  SensModel::template seed<D, T>(z, z + n_base, yd);
  ad::apply_reading<Base, ad::RhsMap>(yd, D(t), SensModel::template param_reads<D>(p), out);
  for (int i = 0; i < n_base; ++i) {
    dz[i] = out[i].v;
    for (int k = 0; k < n_sens; ++k) dz[n_base * (1 + k) + i] = out[i].d[k];
  }
}

// The base model's jump or save (Map below) along a sensitivity model's seeds: the value (K
// numbers) and its derivative along each column, out = [value, d_0, d_1, ...], so a jump maps
// [y, S] to [g, g_y S_k + g_p e_k] — the joint state after the stop — and a save records h and
// its sensitivities in the joint layout.
template <class SensModel, class Map, class T>
SHOAL_HD void sensitivity_map(const T* z, const T& t, const T* p, T* out) {
  using Base = typename SensModel::BaseModel;
  constexpr int n_base = Base::n_vars, n_sens = SensModel::n_sens;
  constexpr int K = Map::template size<Base>();
  using D = ad::Dual<T, n_sens>;
  D yd[n_base], res[K];
  SensModel::template seed<D, T>(z, z + n_base, yd);
  ad::apply_reading<Base, Map>(yd, D(t), SensModel::template param_reads<D>(p), res);
  for (int i = 0; i < K; ++i) {
    out[i] = res[i].v;
    for (int k = 0; k < n_sens; ++k) out[K * (1 + k) + i] = res[i].d[k];
  }
}

struct JumpMap {
  template <class Base>
  SHOAL_HD static constexpr int size() {
    return Base::n_vars;
  }
  template <class Base, class D, class Params>
  SHOAL_HD static void apply(const D* y, const D& t, const Params& p, D* out) {
    Base::template jump<D>(y, t, p, out);
  }
};

struct SaveMap {
  template <class Base>
  SHOAL_HD static constexpr int size() {
    return n_saved<Base>();
  }
  template <class Base, class D, class Params>
  SHOAL_HD static void apply(const D* y, const D& t, const Params& p, D* out) {
    Base::template save<D>(y, t, p, out);
  }
};

// What a sensitivity model SensModel (with NSens columns over Base) offers of the base model's
// optional members (model_traits.hpp): its jump and save along the columns, its event on the
// state part. Always has a save: without the base's, the whole joint state.
template <class SensModel, class Base, int NSens>
struct SensitivityMembers {
  static constexpr bool has_jump = ode::has_jump<Base>();
  static constexpr bool has_event = ode::has_event<Base>();
  static constexpr int n_saved = ode::n_saved<Base>() * (1 + NSens);

  // Seeds the duals of y: direction k = column k of S (the n × NSens block, column-major in the
  // columns). D's value type V may itself be a dual.
  template <class D, class V>
  SHOAL_HD static void seed(const V* y, const V* S, D* yd) {
    constexpr int n = Base::n_vars;
    for (int j = 0; j < n; ++j) {
      yd[j] = D(y[j]);
      for (int k = 0; k < NSens; ++k) yd[j].d[k] = S[k * n + j];
    }
  }
  // The base model's parameters as a sweep along the columns reads them (SensModel::Reader).
  template <class D, class V>
  SHOAL_HD static auto param_reads(const V* p) {
    return ad::param_reads<D>(typename SensModel::template Reader<V>{p});
  }

  template <class T>
  SHOAL_HD static void jump(const T* z, const T& t, const T* p, T* out) {
    sensitivity_map<SensModel, JumpMap>(z, t, p, out);
  }
  template <class T>
  SHOAL_HD static void save(const T* z, const T& t, const T* p, T* out) {
    if constexpr (ode::has_save<Base>()) {
      sensitivity_map<SensModel, SaveMap>(z, t, p, out);
    } else {
      for (int i = 0; i < n_saved; ++i) out[i] = z[i];
    }
  }
  template <class T>
  SHOAL_HD static void event(const T* z, const T& t, const T* p, T* out) {
    T scratch[Base::n_params > 0 ? Base::n_params : 1];
    Base::template event<T>(z, t, SensModel::base_params(p, scratch), out);
  }
};

template <class Base, bool WithY0, int ParamBegin, int ParamEnd>
struct Sensitivity
    : SensitivityMembers<Sensitivity<Base, WithY0, ParamBegin, ParamEnd>, Base,
                         (WithY0 ? Base::n_vars : 0) + ParamEnd - ParamBegin> {
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

  // Parameter j as a D: direction n_y0_cols + j − ParamBegin for a differentiated one.
  template <class V>
  struct Reader {
    const V* p;
    template <class D>
    SHOAL_HD D read(int64_t j) const {
      D x(p[j]);
      if (ParamBegin <= j && j < ParamEnd) x.d[n_y0_cols + j - ParamBegin] = V(1);
      return x;
    }
  };

  template <class T>
  SHOAL_HD static void rhs(const T* z, const T& t, const T* p, T* dz) {
    sensitivity_rhs<Sensitivity>(z, t, p, dz);
  }

  // The base model's parameters within p: p itself.
  template <class T>
  SHOAL_HD static const T* base_params(const T* p, T* /*scratch*/) {
    return p;
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
