// Parameters read in place by a dual-number sweep, instead of copied into an array of duals.
//
// A Jacobian sweep runs the model on duals: y seeded, p constants (zero tangents), or p's
// differentiated entries seeded (forward sensitivities). Copying all n_params entries into
// duals before every sweep costs n_params × (1 + directions) stores whether f reads them or
// not: for a 32-variable model mixing its rates by a 32 × 32 parameter matrix under Rodas5P,
// two thirds of the solve; on the GPU the copies are per-thread stack (that model's kernel:
// 218 KB a thread with them, which failed to launch on an H200; 66 KB without). A
// ParamReads is what the model indexes instead: entry k is made as a D when it is read, by a
// Reader that says what parameter j is (ConstantReader: D(p[j]); sensitivity.hpp and
// directional_sensitivity.hpp seed their columns). It supports what generated code does with
// `p`: `p[k]`, `(p + k)`, gather<R>(p + k, i) (here and simd/lanes_math.hpp) and the table
// searches (math.hpp), so the same statements run, with the same values, hence the same bits.
//
// A generated model takes any such `Params` (`template <class T, class Params = const T*>`)
// and says so with `static constexpr bool params_in_place = true`; a hand-written model that
// takes `const T* p` gets the copy, as before (apply_reading).
#pragma once

#include "shoal/config.hpp"

namespace shoal {
namespace ad {

// Parameter j as a constant D (zero tangents).
template <class P>
struct ConstantReader {
  const P* p;
  template <class D>
  SHOAL_HD D read(int64_t j) const {
    return D(p[j]);
  }
};

// Parameter j as a D, read from another reader as an Inner: duals nested over the inner
// sweep's seeds (rosenbrock_joint.hpp's second-order sweeps).
template <class Inner, class Reader>
struct NestedReader {
  Reader inner;
  template <class D>
  SHOAL_HD D read(int64_t j) const {
    return D(inner.template read<Inner>(j));
  }
};

// What a model's `p` is inside a dual sweep: entry k (parameter at + k) made by the reader.
template <class D, class Reader>
struct ParamReads {
  Reader reader;
  int64_t at;
  SHOAL_HD D operator[](int64_t k) const { return reader.template read<D>(at + k); }
  SHOAL_HD ParamReads operator+(int64_t k) const { return {reader, at + k}; }
};

template <class D, class Reader>
SHOAL_HD ParamReads<D, Reader> param_reads(const Reader& reader) {
  return {reader, 0};
}

// A table read at a run-time index (math::gather's form for parameters read in place).
template <class R, class D, class Reader, class I>
SHOAL_INLINE R gather(const ParamReads<D, Reader>& array, const I& i) {
  return R(array[static_cast<int64_t>(i)]);
}

namespace detail {
template <class Model>
SHOAL_HD constexpr auto params_in_place_of(int) -> decltype(Model::params_in_place) {
  return Model::params_in_place;
}
template <class Model>
SHOAL_HD constexpr bool params_in_place_of(long) {
  return false;
}
}  // namespace detail

// Whether Model's rhs, jump and save take a ParamReads as their p (generated models).
template <class Model>
SHOAL_HD constexpr bool reads_params_in_place() {
  return detail::params_in_place_of<Model>(0);
}

// The model's rhs as a Map (the form sensitivity.hpp's jump and save maps have).
struct RhsMap {
  template <class Model, class D, class Params>
  SHOAL_HD static void apply(const D* y, const D& t, const Params& p, D* out) {
    Model::template rhs<D>(y, t, p, out);
  }
};

// Map's function of Model at (y, t) with its parameters as `params` reads them: in place where
// the model takes that, else copied into an array of D first.
template <class Model, class Map, class D, class Reader>
SHOAL_HD void apply_reading_here(const D* y, const D& t, const ParamReads<D, Reader>& params,
                                 D* out) {
  if constexpr (reads_params_in_place<Model>()) {
    Map::template apply<Model, D>(y, t, params, out);
  } else {
    constexpr int np = Model::n_params;
    D pd[np > 0 ? np : 1];
    for (int j = 0; j < np; ++j) pd[j] = params[j];
    Map::template apply<Model, D>(y, t, static_cast<const D*>(pd), out);
  }
}

// Whether a generated library compiles its model's dual-number evaluations in translation units
// of their own (evaluations_apart.hpp): its model's namespace then declares
// `constexpr bool shoal_evaluated_apart(const Model*) { return true; }`, which argument-dependent
// lookup prefers to this fallback (for wrappers derived from the model too, mass.hpp's WithMass).
SHOAL_HD constexpr bool shoal_evaluated_apart(const void*) { return false; }
template <class Model>
SHOAL_HD constexpr bool evaluated_apart() {
  return shoal_evaluated_apart(static_cast<const Model*>(nullptr));
}

// Which of those units compiles an evaluation, by what its parameters are: constants (a
// Jacobian sweep, unit 1), duals nested over another sweep's (the joint Rosenbrock systems'
// second-order sweeps, 2), seeded columns (sensitivities, 3). shoal/ode/_build.py names the units
// a variant needs; a missing one fails the library's link.
template <class Reader>
struct EvaluationUnit {
  static constexpr int value = 3;
};
template <class P>
struct EvaluationUnit<ConstantReader<P>> {
  static constexpr int value = 1;
};
template <class Inner, class Reader>
struct EvaluationUnit<NestedReader<Inner, Reader>> {
  static constexpr int value = 2;
};

// apply_reading_here compiled in unit 1, 2 or 3: declared here, defined there
// (evaluations_apart.hpp). `used` must be on this first declaration (g++ ignores it on a later
// one): it has every instantiation emitted in the unit that defines it, though nothing there
// calls it.
#if defined(SHOAL_DEVICE_COMPILE)
#define SHOAL_EMIT_INSTANCES
#else
#define SHOAL_EMIT_INSTANCES __attribute__((used))
#endif
template <class Model, class Map, class D, class Reader>
SHOAL_EMIT_INSTANCES SHOAL_HD void apply_reading_in_unit1(const D* y, const D& t,
                                                          const ParamReads<D, Reader>& params,
                                                          D* out);
template <class Model, class Map, class D, class Reader>
SHOAL_EMIT_INSTANCES SHOAL_HD void apply_reading_in_unit2(const D* y, const D& t,
                                                          const ParamReads<D, Reader>& params,
                                                          D* out);
template <class Model, class Map, class D, class Reader>
SHOAL_EMIT_INSTANCES SHOAL_HD void apply_reading_in_unit3(const D* y, const D& t,
                                                          const ParamReads<D, Reader>& params,
                                                          D* out);

template <class Model, class Map, class D, class Reader>
SHOAL_HD void apply_reading(const D* y, const D& t, const ParamReads<D, Reader>& params, D* out) {
  if constexpr (!evaluated_apart<Model>()) {
    apply_reading_here<Model, Map>(y, t, params, out);
  } else if constexpr (EvaluationUnit<Reader>::value == 1) {
    apply_reading_in_unit1<Model, Map>(y, t, params, out);
  } else if constexpr (EvaluationUnit<Reader>::value == 2) {
    apply_reading_in_unit2<Model, Map>(y, t, params, out);
  } else {
    apply_reading_in_unit3<Model, Map>(y, t, params, out);
  }
}

}  // namespace ad
}  // namespace shoal
