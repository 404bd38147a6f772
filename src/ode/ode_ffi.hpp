// FFI handler symbols exported to the nanobind module.
#pragma once

#include "xla/ffi/api/c_api.h"

extern "C" XLA_FFI_Error* ShoalOdeSolveCpu(XLA_FFI_CallFrame* call_frame);
extern "C" XLA_FFI_Error* ShoalOdeSolveCuda(XLA_FFI_CallFrame* call_frame);
extern "C" XLA_FFI_Error* ShoalOdeAdjointCpu(XLA_FFI_CallFrame* call_frame);
extern "C" XLA_FFI_Error* ShoalOdeRecordCpu(XLA_FFI_CallFrame* call_frame);

namespace shoal {
// The most threads a CPU solve uses (the caller and XLA's intra-op pool; at most the pool's
// threads + 1): $SHOAL_NUM_THREADS, else the hardware's.
int max_solve_threads();
}  // namespace shoal
