// The further translation units of a generated library split for a parallel compile
// (shoal/_jit.py): unit k (SHOAL_EVALUATIONS_PART = k) defines apply_reading_in_unit<k>, which the
// main unit calls for the model's evaluations on dual numbers (param_reads.hpp's apply_reading:
// 1 Jacobian sweeps, 2 second-order sweeps, 3 sensitivity columns).
//
// Every unit is the same source. In unit k the library's entry points are unused static
// functions: their steppers are instantiated, so every apply_reading_in_unit<k> they call is too,
// and only those, being `used`, are compiled and emitted; the steppers themselves are dropped
// unoptimised. The main unit keeps the steppers and the plain evaluations and finds these at link
// time. A large model's evaluations on duals take most of its compile; now they run beside it.
#pragma once

#include "shoal/ad/param_reads.hpp"

namespace shoal {
namespace ad {

#if SHOAL_EVALUATIONS_PART == 1
template <class Model, class Map, class D, class Reader>
void apply_reading_in_unit1(const D* y, const D& t, const ParamReads<D, Reader>& params, D* out) {
  apply_reading_here<Model, Map>(y, t, params, out);
}
#elif SHOAL_EVALUATIONS_PART == 2
template <class Model, class Map, class D, class Reader>
void apply_reading_in_unit2(const D* y, const D& t, const ParamReads<D, Reader>& params, D* out) {
  apply_reading_here<Model, Map>(y, t, params, out);
}
#elif SHOAL_EVALUATIONS_PART == 3
template <class Model, class Map, class D, class Reader>
void apply_reading_in_unit3(const D* y, const D& t, const ParamReads<D, Reader>& params, D* out) {
  apply_reading_here<Model, Map>(y, t, params, out);
}
#else
#error "SHOAL_EVALUATIONS_PART must be 1, 2 or 3"
#endif

}  // namespace ad
}  // namespace shoal
