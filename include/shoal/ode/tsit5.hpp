// Tsitouras' 5(4) explicit Runge-Kutta pair (Ch. Tsitouras, "Runge-Kutta pairs of order 5(4)
// satisfying only the first column simplifying assumption", Comput. Math. Appl. 62, 2011).
//
// Seven stages, first-same-as-last: the last stage is f at the new point, so an accepted step costs
// six evaluations (explicit_rk.hpp runs it). The error estimate is the difference to the embedded order-4 solution. Its free
// continuous extension b_i(θ) = Σ_j r_ij θ^j is order 4 and reuses the stages, so saving at
// arbitrary times never shortens a step.
//
// The numbers are the published tableau (OrdinaryDiffEq.jl lists them to 80 digits; these are
// their nearest doubles). They are accessor functions over function-local static constexpr
// tables, not static member arrays, because device code (nvcc, NVRTC) cannot read a host static
// member array; `static` keeps the table in read-only data instead of rebuilding it on the stack
// at every call with a run-time index (a 7x slowdown of Rodas5P when it was missing).
#pragma once

#include "shoal/config.hpp"
#include "shoal/ode/explicit_rk.hpp"

namespace shoal {
namespace ode {

struct Tsit5Tableau {
  static constexpr int stages = 7;
  static constexpr int order = 5;
  static constexpr int embedded_order = 4;
  static constexpr bool fsal = true;
  static constexpr int dense_stages = 7;
  static constexpr int dense_degree = 4;
  // Stage times c_i; c_1 = 0, c_7 = 1.
  SHOAL_HD static double c(int i) {
    static constexpr double v[7] = {0.0, 0.161, 0.327, 0.9, 0.9800255409045097, 1.0, 1.0};
    return v[i];
  }
  // a[i][j], i the stage (row 6 is the solution weights: FSAL).
  SHOAL_HD static double a(int i, int j) {
    static constexpr double v[7][6] = {
        {0, 0, 0, 0, 0, 0},
        {0.161, 0, 0, 0, 0, 0},
        {-0.008480655492356989, 0.335480655492357, 0, 0, 0, 0},
        {2.8971530571054935, -6.359448489975075, 4.3622954328695815, 0, 0, 0},
        {5.325864828439257, -11.748883564062828, 7.4955393428898365, -0.09249506636175525, 0, 0},
        {5.86145544294642, -12.92096931784711, 8.159367898576159, -0.071584973281401,
         -0.028269050394068383, 0},
        {0.09646076681806523, 0.01, 0.4798896504144996, 1.379008574103742, -3.290069515436081,
         2.324710524099774},
    };
    return v[i][j];
  }
  // Solution weights b (order 5) = a[6][:], b_7 = 0.
  SHOAL_HD static double b(int i) {
    static constexpr double v[7] = {
        0.09646076681806523, 0.01, 0.4798896504144996, 1.379008574103742, -3.290069515436081,
        2.324710524099774,   0.0};
    return v[i];
  }
  // Embedded weights (order 4).
  SHOAL_HD static double b_hat(int i) {
    static constexpr double v[7] = {0.09468075576583945, 0.009183565540343254, 0.4877705284247616,
                                    1.234297566930479,   -2.7077123499835256,  1.866628418170587,
                                    0.015151515151515152};
    return v[i];
  }
  // Error weights b - b_hat, rounded from the exact difference rather than subtracted in double.
  SHOAL_HD static double e(int i) {
    static constexpr double v[7] = {
        0.00178001105222577714, 0.0008164344596567469, -0.007880878010261995, 0.1447110071732629,
        -0.5823571654525552,    0.45808210592918697,   -0.015151515151515152};
    return v[i];
  }
  // Dense output: b_i(θ) = r[i][0] θ + r[i][1] θ² + r[i][2] θ³ + r[i][3] θ⁴.
  SHOAL_HD static double r(int i, int j) {
    static constexpr double v[7][4] = {
        {1.0, -2.763706197274826, 2.9132554618219126, -1.0530884977290216},
        {0.0, 0.13169999999999998, -0.2234, 0.1017},
        {0.0, 3.9302962368947516, -5.941033872131505, 2.490627285651253},
        {0.0, -12.411077166933676, 30.33818863028232, -16.548102889244902},
        {0.0, 37.50931341651104, -88.1789048947664, 47.37952196281928},
        {0.0, -27.896526289197286, 65.09189467479366, -34.87065786149661},
        {0.0, 1.5, -4.0, 2.5},
    };
    return v[i][j];
  }
};

// One trajectory's Tsit5 working storage and step (explicit_rk.hpp).
template <class Model, class T>
using Tsit5 = ExplicitRungeKutta<Tsit5Tableau>::Stepper<Model, T>;

}  // namespace ode
}  // namespace shoal
