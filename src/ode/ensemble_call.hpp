// What every ODE solve handler shares, whatever the platform: its FFI signature, the decoding of
// the options record, and the checking of one call's buffers into a ShoalEnsembleArgs.
//
// Leading dimensions are flattened into the ensemble axis (a vmapped solve is one call); t_span
// rows are shared by consecutive trajectories. Every size is checked against the compiled model
// before a kernel may touch a buffer.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>

#include "shoal/ode/ensemble.hpp"
#include "xla/ffi/api/ffi.h"

// The "options" attribute (a dictionary, shoal/ode/_options.py) decodes straight into
// ShoalSolveOptions, member by member from the one field list in solve_options.hpp. The
// indirection lets the list's commas separate the macro's arguments.
#define SHOAL_STRUCT_MEMBER(type, name, value, meaning) , ::xla::ffi::StructMember<type>(#name)
#define SHOAL_REGISTER_STRUCT_ATTR(...) XLA_FFI_REGISTER_STRUCT_ATTR_DECODING(__VA_ARGS__)
SHOAL_REGISTER_STRUCT_ATTR(ShoalSolveOptions SHOAL_SOLVE_OPTION_FIELDS(SHOAL_STRUCT_MEMBER));
#undef SHOAL_REGISTER_STRUCT_ATTR
#undef SHOAL_STRUCT_MEMBER

namespace shoal {

// What the compiled model says about itself.
struct ModelShape {
  int32_t n_vars = 0;
  int32_t n_params = 0;
  int32_t n_shared = 0;
  int32_t dtype_bits = 0;  // 32 or 64
  int32_t n_saved = 0;     // numbers per save (model_traits.hpp)
  int32_t has_event = 0;   // whether event_time/event_state are written
};

// One call's operands and results.
struct EnsembleBuffers {
  xla::ffi::AnyBuffer y0, params, shared, t_span, weights, atol, tstops, first_step;
  xla::ffi::Result<xla::ffi::AnyBuffer> ys, accepted, rejected, status, event_time, event_state;
};

// The operands, attributes and results of every solve handler, appended to `binding` (the bare
// Ffi::Bind(), or one that already holds a platform context). A handler's parameters follow:
//   (context..., y0, params, shared, t_span, weights, atol, tstops, first_step, progress, model,
//    entry,
//    options, ys, accepted, rejected, status, event_time, event_state)
// where `model` names the compiled model (a host library's path, or the CUDA cubins as
// "sm_90=/a.cubin;sm_80=/b.cubin") and `entry` its entry point. `progress` is an int32 holding a
// slot of progress.hpp's table (-1: off); only the CPU handler counts into it.
template <class Binding>
auto bind_ensemble_solve(Binding binding) {
  using xla::ffi::AnyBuffer;
  return std::move(binding)
      .template Arg<AnyBuffer>()  // y0
      .template Arg<AnyBuffer>()  // params
      .template Arg<AnyBuffer>()  // shared
      .template Arg<AnyBuffer>()  // t_span
      .template Arg<AnyBuffer>()  // error_weights
      .template Arg<AnyBuffer>()  // atol (per component)
      .template Arg<AnyBuffer>()  // tstops
      .template Arg<AnyBuffer>()  // first_step
      .template Arg<AnyBuffer>()  // progress
      .template Attr<std::string_view>("model")
      .template Attr<std::string_view>("entry")
      .template Attr<ShoalSolveOptions>("options")
      .template Ret<AnyBuffer>()   // ys
      .template Ret<AnyBuffer>()   // accepted
      .template Ret<AnyBuffer>()   // rejected
      .template Ret<AnyBuffer>()   // status
      .template Ret<AnyBuffer>()   // event_time (empty without an event)
      .template Ret<AnyBuffer>();  // event_state (empty without an event)
}

// The adjoint's handler (explicit_rk_adjoint.hpp): a solve's binding (bind_ensemble_solve) and
// two more operands, the saves' cotangents ys_bar (like ys) and the rows of recordings of the
// value's solve (uint8, a row per trajectory, or none: adjoint.hpp's RecordingRows), and three
// more results, the cotangents of y0 (like y0), of each trajectory's own parameters and of each
// row of shared ones.
template <class SolveBinding>
auto bind_ensemble_adjoint(SolveBinding binding) {
  using xla::ffi::AnyBuffer;
  return std::move(binding)
      .template Arg<AnyBuffer>()   // ys_bar
      .template Arg<AnyBuffer>()   // recording
      .template Ret<AnyBuffer>()   // y0_bar
      .template Ret<AnyBuffer>()   // params_bar: each trajectory's own parameters'
      .template Ret<AnyBuffer>();  // shared_bar: each row of shared parameters', summed
}

// Fills `a` (pointers are the buffers' own, host or device) or returns an InvalidArgument error
// naming what does not match.
xla::ffi::Error fill_ensemble_args(const ModelShape& model, EnsembleBuffers buffers,
                                   const ShoalSolveOptions& options, ShoalEnsembleArgs* a);

}  // namespace shoal
