// Turning one FFI call's buffers and attributes into a ShoalEnsembleArgs, for every platform.
//
// Leading dimensions are flattened into the ensemble axis (a vmapped solve is one call); t_span
// rows are shared by consecutive trajectories. Every size is checked against the compiled model
// before a kernel may touch a buffer.
#pragma once

#include <cstdint>
#include <exception>
#include <string>

#include "shoal/ode/ensemble.hpp"
#include "xla/ffi/api/ffi.h"

namespace shoal {

// What the compiled model says about itself.
struct ModelShape {
  int32_t n_vars = 0;
  int32_t n_params = 0;
  int32_t dtype_bits = 0;  // 32 or 64
};

// The solver options every handler takes as attributes.
struct SolveOptions {
  double rtol, atol, first_step, pcoeff, icoeff, dcoeff;
  int64_t max_steps, n_error;
};

// Fills `a` (pointers are the buffers' own, host or device) or returns an InvalidArgument error
// naming what does not match.
xla::ffi::Error fill_ensemble_args(const ModelShape& model, xla::ffi::AnyBuffer y0,
                                   xla::ffi::AnyBuffer params, xla::ffi::AnyBuffer t_span,
                                   xla::ffi::AnyBuffer weights, const SolveOptions& options,
                                   xla::ffi::Result<xla::ffi::AnyBuffer> ys,
                                   xla::ffi::Result<xla::ffi::AnyBuffer> accepted,
                                   xla::ffi::Result<xla::ffi::AnyBuffer> rejected,
                                   xla::ffi::Result<xla::ffi::AnyBuffer> status,
                                   ShoalEnsembleArgs* a);

// Runs `body` (returning ffi::Error) so that no C++ exception crosses into XLA.
template <class Body>
xla::ffi::Error without_exceptions(Body&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    return xla::ffi::Error(xla::ffi::ErrorCode::kInternal,
                           std::string("shoal.ode.solve: ") + e.what());
  } catch (...) {
    return xla::ffi::Error(xla::ffi::ErrorCode::kInternal,
                           "shoal.ode.solve: unknown C++ exception");
  }
}

}  // namespace shoal
