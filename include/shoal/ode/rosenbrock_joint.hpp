// The Rosenbrock engine's system for the joint state [y, S] (forward sensitivities), without
// ever factorising the joint matrix.
//
// The joint Jacobian is block lower triangular, because f does not depend on S:
//   A = [[J_y, 0], [L_k, J_y]],  L_k = ∂/∂y (J_y S_k + J_p e_k) = D²f[·, S_k] + ∂²f/∂y∂p_k,
// so M = I/(hγ) − A has M0 = I/(hγ) − J_y on every diagonal block and each stage is a block
// forward substitution against ONE factorisation of M0:
//   M0 k_y = r_y,   M0 k_{S_k} = r_{S_k} + L_k k_y.
// L_k k_y is a second-order directional derivative, taken with nested duals at the step's start
// (where A is evaluated): the outer direction moves y along k_y, the inner ones along (S_k, e_k),
// and the ε·δ_k cross term is L_k k_y for every k at once. The matrix L_k is never formed. The
// sensitivity rows' ∂F/∂t comes from the same nesting with the outer direction on t.
#pragma once

#include "shoal/ad/dual.hpp"
#include "shoal/ad/param_reads.hpp"
#include "shoal/config.hpp"
#include "shoal/ode/rosenbrock.hpp"
#include "shoal/ode/sensitivity.hpp"

namespace shoal {
namespace ode {

// Matrix<Base> is the iteration-matrix policy for the state block M0 (dense or sparse).
template <template <class> class Matrix>
struct JointSystem {
  // SensModel is a Sensitivity<Base, ...> or a DirectionalSensitivity<Base, M>; T the solve's
  // precision.
  template <class SensModel, class T>
  struct Type {
    using Base = typename SensModel::BaseModel;
    static constexpr int n_base = SensModel::n_base;
    static constexpr int m = SensModel::n_sens;
    static constexpr int np = Base::n_params;  // what the base model reads
    static constexpr int n = SensModel::n_vars;  // n_base (1 + m)
    using Inner = ad::Dual<T, m>;
    using Outer = ad::Dual<Inner, 1>;
    // With a mass matrix, M S' = J S + f_p: every block [y, S_1, …, S_m] carries the same M.
    static constexpr bool has_mass = ode::has_mass<Base>();

    Matrix<Base> M0;

    SHOAL_HD void begin_step(const T* z, const T& t, const T* p, const T& inv_hg, T* F0, T* Ft) {
      T f0[n_base], ft[n_base], scratch[np > 0 ? np : 1];
      M0.assemble(z, t, SensModel::base_params(p, scratch), inv_hg, f0, ft);
      joint_rhs_and_dt(z, t, p, F0, Ft);
      // The state rows exactly as the plain system computes them.
      for (int i = 0; i < n_base; ++i) {
        F0[i] = f0[i];
        Ft[i] = ft[i];
      }
    }

    SHOAL_HD static void rhs(const T* u, const T& t, const T* p, T* out) {
      SensModel::template rhs<T>(u, t, p, out);
    }

    SHOAL_HD static void apply_mass(const T* v, T* out) {
      for (int b = 0; b <= m; ++b) mass_times<Base, T>(v + n_base * b, out + n_base * b);
    }

    // Block forward substitution: r (joint) is overwritten by M⁻¹ r; z0 is the step's start.
    // Out of line on the device (config.hpp): one copy instead of one per unrolled stage.
    SHOAL_HD SHOAL_DEVICE_NOINLINE void solve(const T* z0, const T& t, const T* p, T* r) const {
      M0.solve(r);  // k_y
      T Lk[n_base * m];
      coupling(z0, t, p, r, Lk);
      for (int c = 0; c < m; ++c) {
        T* rc = r + n_base * (1 + c);
        for (int i = 0; i < n_base; ++i) rc[i] += Lk[c * n_base + i];
        M0.solve(rc);
      }
    }

   private:
    // The parameters as the nested sweeps read them: the inner sweep's seeds, outer tangent 0.
    SHOAL_HD static auto nested_params(const T* p) {
      using InnerReader = typename SensModel::template Reader<T>;
      return ad::param_reads<Outer>(ad::NestedReader<Inner, InnerReader>{InnerReader{p}});
    }

    // F (joint) and its t-derivative at (t, z) from one nested sweep with the outer direction on
    // t.
    SHOAL_HD static void joint_rhs_and_dt(const T* z, const T& t, const T* p, T* F, T* Ft) {
      Outer yd[n_base], out[n_base];
      Inner yi[n_base];
      SensModel::template seed<Inner, T>(z, z + n_base, yi);
      for (int j = 0; j < n_base; ++j) yd[j] = Outer(yi[j]);
      Outer td = Outer(Inner(t));
      td.d[0] = Inner(T(1));
      ad::apply_reading<Base, ad::RhsMap>(yd, td, nested_params(p), out);
      for (int i = 0; i < n_base; ++i) {
        F[i] = out[i].v.v;
        Ft[i] = out[i].d[0].v;
        for (int c = 0; c < m; ++c) {
          F[n_base * (1 + c) + i] = out[i].v.d[c];
          Ft[n_base * (1 + c) + i] = out[i].d[0].d[c];
        }
      }
    }

    // Lk[c*n_base + i] = (L_c k_y)_i at the step's start z0.
    SHOAL_HD static void coupling(const T* z0, const T& t, const T* p, const T* ky, T* Lk) {
      Outer yd[n_base], out[n_base];
      Inner yi[n_base];
      SensModel::template seed<Inner, T>(z0, z0 + n_base, yi);
      for (int j = 0; j < n_base; ++j) {
        yd[j] = Outer(yi[j]);
        yd[j].d[0] = Inner(ky[j]);
      }
      ad::apply_reading<Base, ad::RhsMap>(yd, Outer(Inner(t)), nested_params(p), out);
      for (int c = 0; c < m; ++c) {
        for (int i = 0; i < n_base; ++i) Lk[c * n_base + i] = out[i].d[0].d[c];
      }
    }
  };
};

// A Rosenbrock tableau over an iteration-matrix policy Matrix<Model> (DenseIterationMatrix, or a
// generated sparse one), which fixes the factorisation's precision: Stepper solves a model,
// JointStepper a Sensitivity<Model, ...> (the joint system [y, S]). Each method names its own
// (Rodas5PUsing, Rodas4Using).
template <class Tableau, template <class> class Matrix>
struct RosenbrockUsing {
  template <class Model, class T>
  using Stepper =
      typename Rosenbrock<Tableau, StateSystem<Matrix>::template Type>::template Stepper<Model, T>;
  template <class SensModel, class T>
  using JointStepper = typename Rosenbrock<Tableau, JointSystem<Matrix>::template Type>::
      template Stepper<SensModel, T>;
};

}  // namespace ode
}  // namespace shoal
