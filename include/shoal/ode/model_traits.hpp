// What the ensemble machinery asks of a model beyond n_vars, n_params and rhs.
//
// Optional members, each detected here so a model without it needs nothing:
//   static constexpr int n_shared      the LAST n_shared of its n_params parameters are shared by
//                                      the whole ensemble (tables, constants) and travel once per
//                                      call instead of once per trajectory (default 0);
//   has_jump + jump(y, t, p, out)      the state map applied at each stop (a bolus dose);
//   n_saved + save(y, t, p, out)       what a save records instead of the state (n_saved numbers);
//   has_event + event(y, t, p, out)    out[0] = g(y, t, p), whose zero crossing is an event;
//   has_mass + MassMatrix              M y' = f with a constant mass matrix (mass.hpp);
//   n_base                             a joint system [y, S] (sensitivity.hpp): its leading
//                                      n_base components are the state, the rest its
//                                      sensitivities;
//   vjp_in_lanes, jvp_vjp_in_lanes     its vjp and jvp_vjp (adjoint.hpp) compute in SIMD lanes
//                                      as scalars do (adjoint_backward_lanes.hpp);
//   jump_vjp_adds_p_bar,               false where jump_vjp or save_vjp adds nothing to p̄ (the
//   save_vjp_adds_p_bar                function does not read p; default true).
// jump, save and event have rhs's signature and are instantiated with the same scalars.
#pragma once

#include "shoal/config.hpp"

namespace shoal {
namespace ode {
namespace detail {

template <class Model>
SHOAL_HD constexpr auto shared_params_of(int) -> decltype(Model::n_shared) {
  return Model::n_shared;
}
template <class Model>
SHOAL_HD constexpr int shared_params_of(long) {
  return 0;
}

template <class Model>
SHOAL_HD constexpr auto saved_of(int) -> decltype(Model::n_saved) {
  return Model::n_saved;
}
template <class Model>
SHOAL_HD constexpr int saved_of(long) {
  return -1;
}

template <class Model>
SHOAL_HD constexpr auto jump_of(int) -> decltype(Model::has_jump) {
  return Model::has_jump;
}
template <class Model>
SHOAL_HD constexpr bool jump_of(long) {
  return false;
}

template <class Model>
SHOAL_HD constexpr auto event_of(int) -> decltype(Model::has_event) {
  return Model::has_event;
}
template <class Model>
SHOAL_HD constexpr bool event_of(long) {
  return false;
}

template <class Model>
SHOAL_HD constexpr auto mass_of(int) -> decltype(Model::has_mass) {
  return Model::has_mass;
}
template <class Model>
SHOAL_HD constexpr bool mass_of(long) {
  return false;
}

template <class Model>
SHOAL_HD constexpr auto base_of(int) -> decltype(Model::n_base) {
  return Model::n_base;
}
template <class Model>
SHOAL_HD constexpr int base_of(long) {
  return Model::n_vars;
}

template <class Model>
SHOAL_HD constexpr auto lane_vjp_of(int) -> decltype(Model::vjp_in_lanes) {
  return Model::vjp_in_lanes;
}
template <class Model>
SHOAL_HD constexpr bool lane_vjp_of(long) {
  return false;
}

template <class Model>
SHOAL_HD constexpr auto lane_jvp_vjp_of(int) -> decltype(Model::jvp_vjp_in_lanes) {
  return Model::jvp_vjp_in_lanes;
}
template <class Model>
SHOAL_HD constexpr bool lane_jvp_vjp_of(long) {
  return false;
}

template <class Model>
SHOAL_HD constexpr auto jump_p_bar_of(int) -> decltype(Model::jump_vjp_adds_p_bar) {
  return Model::jump_vjp_adds_p_bar;
}
template <class Model>
SHOAL_HD constexpr bool jump_p_bar_of(long) {
  return true;
}

template <class Model>
SHOAL_HD constexpr auto save_p_bar_of(int) -> decltype(Model::save_vjp_adds_p_bar) {
  return Model::save_vjp_adds_p_bar;
}
template <class Model>
SHOAL_HD constexpr bool save_p_bar_of(long) {
  return true;
}

}  // namespace detail

// The number of trailing parameters of Model that are shared by the ensemble.
template <class Model>
SHOAL_HD constexpr int n_shared_params() {
  return detail::shared_params_of<Model>(0);
}

// Whether a save records Model::save(...) rather than the state itself.
template <class Model>
SHOAL_HD constexpr bool has_save() {
  return detail::saved_of<Model>(0) >= 0;
}

// The numbers one save records.
template <class Model>
SHOAL_HD constexpr int n_saved() {
  return has_save<Model>() ? detail::saved_of<Model>(0) : Model::n_vars;
}

template <class Model>
SHOAL_HD constexpr bool has_jump() {
  return detail::jump_of<Model>(0);
}

template <class Model>
SHOAL_HD constexpr bool has_event() {
  return detail::event_of<Model>(0);
}

// Whether Model is M y' = f with a constant mass matrix M (mass.hpp) rather than y' = f.
template <class Model>
SHOAL_HD constexpr bool has_mass() {
  return detail::mass_of<Model>(0);
}

// The state's components within Model's: all of them, or a joint system's leading n_base.
template <class Model>
SHOAL_HD constexpr int state_vars() {
  return detail::base_of<Model>(0);
}

// Whether Model's vjp may run on SIMD lanes (the generated models whose products are lane
// arithmetic: shoal/ode/_codegen/model_struct.py).
template <class Model>
SHOAL_HD constexpr bool has_lane_vjp() {
  return detail::lane_vjp_of<Model>(0);
}
template <class Model>
SHOAL_HD constexpr bool has_lane_jvp_vjp() {
  return detail::lane_jvp_vjp_of<Model>(0);
}

// Whether the products of Model's jump_fn and save_fn (jump_vjp, save_vjp) add to p̄: unless
// the generated model says the function reads no parameter.
template <class Model>
SHOAL_HD constexpr bool jump_products_add_p_bar() {
  return has_jump<Model>() && detail::jump_p_bar_of<Model>(0);
}
template <class Model>
SHOAL_HD constexpr bool save_products_add_p_bar() {
  return has_save<Model>() && detail::save_p_bar_of<Model>(0);
}

}  // namespace ode
}  // namespace shoal
