// Rodas5P on the joint system [y, S] without ever factorising it.
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
#include "shoal/config.hpp"
#include "shoal/ode/iteration_matrix.hpp"
#include "shoal/ode/rodas5p.hpp"
#include "shoal/ode/sensitivity.hpp"

namespace shoal {
namespace ode {

// Matrix<Base> is the iteration-matrix policy for the state block M0 (dense or sparse).
template <template <class> class Matrix>
struct Rodas5PSensitivityUsing {
  // SensModel is a Sensitivity<Base, ...>; T the solve's precision.
  template <class SensModel, class T>
  struct Stepper {
    using Tab = Rodas5PTableau;
    using Base = typename SensModel::BaseModel;
    static constexpr int n = SensModel::n_base;
    static constexpr int m = SensModel::n_sens;
    static constexpr int np = SensModel::n_params;
    static constexpr int nz = SensModel::n_vars;  // n (1 + m)
    static constexpr int error_order = 5;
    using Inner = ad::Dual<T, m>;
    using Outer = ad::Dual<Inner, 1>;

    Matrix<Base> M0;
    T k[Tab::stages][nz];
    T dense[3][nz];
    T z_end[nz];

    SHOAL_HD void init(const T*, T, const T*) {}

    // F (joint) and its t-derivative at (t, z) from one nested sweep with the outer direction on t.
    SHOAL_HD static void joint_rhs_and_dt(const T* z, const T& t, const T* p, T* F, T* Ft) {
      Outer yd[n], out[n];
      Outer pd[np > 0 ? np : 1];
      Inner yi[n], pi[np > 0 ? np : 1];
      SensModel::template seed<Inner, T>(z, z + n, p, yi, pi);
      for (int j = 0; j < n; ++j) yd[j] = Outer(yi[j]);
      for (int j = 0; j < np; ++j) pd[j] = Outer(pi[j]);
      Outer td = Outer(Inner(t));
      td.d[0] = Inner(T(1));
      Base::template rhs<Outer>(yd, td, pd, out);
      for (int i = 0; i < n; ++i) {
        F[i] = out[i].v.v;
        Ft[i] = out[i].d[0].v;
        for (int c = 0; c < m; ++c) {
          F[n * (1 + c) + i] = out[i].v.d[c];
          Ft[n * (1 + c) + i] = out[i].d[0].d[c];
        }
      }
    }

    // Lk[c*n + i] = (L_c k_y)_i at the step's start z0.
    SHOAL_HD static void coupling(const T* z0, const T& t, const T* p, const T* ky, T* Lk) {
      Outer yd[n], out[n];
      Outer pd[np > 0 ? np : 1];
      Inner yi[n], pi[np > 0 ? np : 1];
      SensModel::template seed<Inner, T>(z0, z0 + n, p, yi, pi);
      for (int j = 0; j < n; ++j) {
        yd[j] = Outer(yi[j]);
        yd[j].d[0] = Inner(ky[j]);
      }
      for (int j = 0; j < np; ++j) pd[j] = Outer(pi[j]);
      Base::template rhs<Outer>(yd, Outer(Inner(t)), pd, out);
      for (int c = 0; c < m; ++c) {
        for (int i = 0; i < n; ++i) Lk[c * n + i] = out[i].d[0].d[c];
      }
    }

    // Block forward substitution: r (joint) is overwritten by M⁻¹ r.
    SHOAL_HD void joint_solve(const T* z0, const T& t, const T* p, T* r) const {
      M0.solve(r);  // k_y
      T Lk[n * m];
      coupling(z0, t, p, r, Lk);
      for (int c = 0; c < m; ++c) {
        T* rc = r + n * (1 + c);
        for (int i = 0; i < n; ++i) rc[i] += Lk[c * n + i];
        M0.solve(rc);
      }
    }

    SHOAL_HD void step(const T* z, T t, T h, const T* p, T* z_new, T* err) {
      T f0[n], ft[n], F0[nz], Ft[nz], u[nz], rhs[nz];
      M0.assemble(z, t, p, T(1) / (h * T(Tab::gamma)), f0, ft);
      joint_rhs_and_dt(z, t, p, F0, Ft);
      // The state rows exactly as the plain Rodas5P computes them, so that without sensitivity
      // error control the joint solve steps, and its y values are, bit for bit the plain solve's.
      for (int i = 0; i < n; ++i) {
        F0[i] = f0[i];
        Ft[i] = ft[i];
      }

      for (int i = 0; i < nz; ++i) rhs[i] = F0[i] + h * T(Tab::d(0)) * Ft[i];
      joint_solve(z, t, p, rhs);
      for (int i = 0; i < nz; ++i) k[0][i] = rhs[i];

      const T inv_h = T(1) / h;
      for (int s = 1; s < Tab::stages; ++s) {
        for (int i = 0; i < nz; ++i) {
          T acc = z[i];
          for (int j = 0; j < s; ++j) acc += T(Tab::a(s, j)) * k[j][i];
          u[i] = acc;
        }
        SensModel::template rhs<T>(u, t + T(Tab::c(s)) * h, p, rhs);
        for (int i = 0; i < nz; ++i) {
          T acc = T(0);
          for (int j = 0; j < s; ++j) acc += T(Tab::C(s, j)) * k[j][i];
          rhs[i] += h * T(Tab::d(s)) * Ft[i] + inv_h * acc;
        }
        joint_solve(z, t, p, rhs);
        for (int i = 0; i < nz; ++i) k[s][i] = rhs[i];
      }
      for (int i = 0; i < nz; ++i) {
        z_new[i] = u[i] + k[Tab::stages - 1][i];
        z_end[i] = z_new[i];
        err[i] = k[Tab::stages - 1][i];
      }
      for (int r = 0; r < 3; ++r) {
        for (int i = 0; i < nz; ++i) {
          T acc = T(0);
          for (int s = 0; s < Tab::stages; ++s) acc += T(Tab::h(r, s)) * k[s][i];
          dense[r][i] = acc;
        }
      }
    }

    SHOAL_HD void accept() {}

    SHOAL_HD void interpolate(const T* z, T, T theta, T* out) const {
      const T one_minus = T(1) - theta;
      for (int i = 0; i < nz; ++i) {
        out[i] = one_minus * z[i] +
                 theta * (z_end[i] +
                          one_minus * (dense[0][i] + theta * (dense[1][i] + theta * dense[2][i])));
      }
    }
  };
};

template <class SensModel, class T>
using Rodas5PSensitivityLu64 =
    typename Rodas5PSensitivityUsing<DenseMatrixLu64>::template Stepper<SensModel, T>;
template <class SensModel, class T>
using Rodas5PSensitivityLu32 =
    typename Rodas5PSensitivityUsing<DenseMatrixLu32>::template Stepper<SensModel, T>;

}  // namespace ode
}  // namespace shoal
