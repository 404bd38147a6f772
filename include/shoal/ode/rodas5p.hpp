// Rodas5P (Steinebach 2023): an 8-stage, order-5, stiffly accurate Rosenbrock method with an
// embedded order-4 solution and a 3-vector continuous extension of order 4.
//
// A tableau (data) for the Rosenbrock engine (rosenbrock.hpp), which runs it in the transformed
// form with one Jacobian, one ∂f/∂t and ONE factorisation of M = I/(hγ) − J per step; the d_i
// terms keep full order on non-autonomous problems.
//
// Order 5 needs the exact Jacobian: with an arbitrary approximation only W-order 2 remains
// (tests/cpp/test_rodas5p_tableau.cc checks both). An fp32 factorisation perturbs M at float
// rounding only (~1e-7 relative), which measured runs show as an error floor near 1e-11 and a
// few extra steps, not as a lost order; it is offered for speed and memory, not as exact.
//
// Coefficients: the published tableau (OrdinaryDiffEq.jl lists them); stages 7 and 8 reuse row 6
// of a with unit weights on the increments (a_7j = a_6j, a_76 = 1; a_8j = a_7j, a_87 = 1), c_6..8 =
// 1 and d_6..8 = 0, as for every stiffly accurate Rodas method.
#pragma once

#include "shoal/config.hpp"
#include "shoal/ode/iteration_matrix.hpp"
#include "shoal/ode/rosenbrock.hpp"
#include "shoal/ode/rosenbrock_joint.hpp"

namespace shoal {
namespace ode {

struct Rodas5PTableau {
  static constexpr int stages = 8;
  static constexpr bool stiffly_accurate = true;
  static constexpr int error_order = 5;  // embedded order 4: local error estimate O(h^5)
  static constexpr int dense_rows = 3;
  static constexpr double gamma = 0.21193756319429014;
  // a[i][j], j < i (stage inputs).
  SHOAL_HD static double a(int i, int j) {
    static constexpr double v[8][7] = {
        {0, 0, 0, 0, 0, 0, 0},
        {3.0, 0, 0, 0, 0, 0, 0},
        {2.849394379747939, 0.45842242204463923, 0, 0, 0, 0, 0},
        {-6.954028509809101, 2.489845061869568, -10.358996098473584, 0, 0, 0, 0},
        {2.8029986275628964, 0.5072464736228206, -0.3988312541770524, -0.04721187230404641, 0, 0,
         0},
        {-7.502846399306121, 2.561846144803919, -11.627539656261098, -0.18268767659942256,
         0.030198172008377946, 0, 0},
        {-7.502846399306121, 2.561846144803919, -11.627539656261098, -0.18268767659942256,
         0.030198172008377946, 1.0, 0},
        {-7.502846399306121, 2.561846144803919, -11.627539656261098, -0.18268767659942256,
         0.030198172008377946, 1.0, 1.0},
    };
    return v[i][j];
  }
  // C[i][j], j < i (the transformed Γ⁻¹ couplings, divided by h in use).
  SHOAL_HD static double C(int i, int j) {
    static constexpr double v[8][7] = {
        {0, 0, 0, 0, 0, 0, 0},
        {-14.155112264123755, 0, 0, 0, 0, 0, 0},
        {-17.97296035885952, -2.859693295451294, 0, 0, 0, 0, 0},
        {147.12150275711716, -1.41221402718213, 71.68940251302358, 0, 0, 0, 0},
        {165.43517024871676, -0.4592823456491126, 42.90938336958603, -5.961986721573306, 0, 0, 0},
        {24.854864614690072, -3.0009227002832186, 47.4931110020768, 5.5814197821558125,
         -0.6610691825249471, 0, 0},
        {30.91273214028599, -3.1208243349937974, 77.79954646070892, 34.28646028294783,
         -19.097331116725623, -28.087943162872662, 0},
        {37.80277123390563, -3.2571969029072276, 112.26918849496327, 66.9347231244047,
         -40.06618937091002, -54.66780262877968, -9.48861652309627},
    };
    return v[i][j];
  }
  SHOAL_HD static double c(int i) {
    static constexpr double v[8] = {0.0,
                                    0.6358126895828704,
                                    0.4095798393397535,
                                    0.9769306725060716,
                                    0.4288403609558664,
                                    1.0,
                                    1.0,
                                    1.0};
    return v[i];
  }
  SHOAL_HD static double d(int i) {
    static constexpr double v[8] = {0.21193756319429014,
                                    -0.42387512638858027,
                                    -0.3384627126235924,
                                    1.8046452872882734,
                                    2.325825639765069,
                                    0.0,
                                    0.0,
                                    0.0};
    return v[i];
  }
  // Dense output: K_r = Σ_i h[r][i] k_i, y(θ) = (1−θ) y0 + θ (y1 + (1−θ)(K_0 + θ (K_1 + θ K_2))).
  SHOAL_HD static double h(int i, int j) {
    static constexpr double v[3][8] = {
        {25.948786856663858, -2.5579724845846235, 10.433815404888879, -2.3679251022685204,
         0.524948541321073, 1.1241088310450404, 0.4272876194431874, -0.17202221070155493},
        {-9.91568850695171, -0.9689944594115154, 3.0438037242978453, -24.495224566215796,
         20.176138334709044, 15.98066361424651, -6.789040303419874, -6.710236069923372},
        {11.419903575922262, 2.8879645146136994, 72.92137995996029, 80.12511834622643,
         -52.072871366152654, -59.78993625266729, -0.15582684282751913, 4.883087185713722},
    };
    return v[i][j];
  }
};

// Rodas5P over an iteration-matrix policy (RosenbrockUsing, rosenbrock_joint.hpp).
template <template <class> class Matrix>
using Rodas5PUsing = RosenbrockUsing<Rodas5PTableau, Matrix>;

// Rodas5P factorising in the state's precision, and with the factorisation's precision fixed
// (lu_precision="fp64" / "fp32"; the state and stage vectors keep the solve's precision). Over
// SIMD lanes (T = simd::Lanes<S, W>, lanes_ensemble.hpp) the factorisation has the same lanes.
template <class Model, class T>
using Rodas5P = typename Rodas5PUsing<DenseMatrixOf<T>::template Type>::template Stepper<Model, T>;
template <class Model, class T>
using Rodas5PLu64 = typename Rodas5PUsing<
    DenseMatrixOf<RebindLanes<T, double>>::template Type>::template Stepper<Model, T>;
template <class Model, class T>
using Rodas5PLu32 = typename Rodas5PUsing<
    DenseMatrixOf<RebindLanes<T, float>>::template Type>::template Stepper<Model, T>;
template <class SensModel, class T>
using Rodas5PSensitivityLu64 = typename Rodas5PUsing<
    DenseMatrixOf<RebindLanes<T, double>>::template Type>::template JointStepper<SensModel, T>;
template <class SensModel, class T>
using Rodas5PSensitivityLu32 = typename Rodas5PUsing<
    DenseMatrixOf<RebindLanes<T, float>>::template Type>::template JointStepper<SensModel, T>;

}  // namespace ode
}  // namespace shoal
