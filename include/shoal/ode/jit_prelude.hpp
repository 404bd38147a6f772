// Every core header a generated host library may include, in one: shoal/_jit.py precompiles it
// once per compiler and flags (g++ only), and each library includes it first, so the parsing of
// the core (about a third of a small model's compile) is paid once, not per model.
#pragma once

#include "shoal/math.hpp"
#include "shoal/ode/directional_sensitivity.hpp"
#include "shoal/ode/ensemble.hpp"
#include "shoal/ode/lanes_ensemble.hpp"
#include "shoal/ode/rodas4.hpp"
#include "shoal/ode/rosenbrock23.hpp"
#include "shoal/ode/rodas5p.hpp"
#include "shoal/ode/sensitivity.hpp"
#include "shoal/ode/sparse_iteration_matrix.hpp"
#include "shoal/ode/tsit5.hpp"
#include "shoal/ode/vern7.hpp"
#include "shoal/ode/vern9.hpp"
