// FFI handler symbols exported to the nanobind module.
#pragma once

#include "xla/ffi/api/c_api.h"

extern "C" XLA_FFI_Error* ShoalOdeSolveCpu(XLA_FFI_CallFrame* call_frame);
extern "C" XLA_FFI_Error* ShoalOdeSolveCuda(XLA_FFI_CallFrame* call_frame);
