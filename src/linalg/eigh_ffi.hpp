// XLA FFI handlers (CPU) for the standard and generalized symmetric/Hermitian eigenproblem.
//
//   shoal_linalg_eigh_cpu(a)        -> (w, v, info)
//   shoal_linalg_eigh_gen_cpu(a, b) -> (w, v, info)
//
// a, b: (..., n, n) row-major, same shape and dtype (f32, f64, c64, c128); only the lower (or
// upper, lower=false) triangle is read.
// w: (..., m) real; v: (..., n, m) same dtype as a, or an empty array when vectors=false;
// info: (...,) int32 per batch element (0 ok, -1000 non-finite input, else LAPACK's info).
// Attributes: lower (bool), vectors (bool), subset (0 all, 1 by index, 2 by value), il/iu (0-based
// inclusive), vl/vu (f64), itype (generalized only).
#pragma once

#include "xla/ffi/api/c_api.h"

extern "C" {
XLA_FFI_Error* ShoalLinalgEighCpu(XLA_FFI_CallFrame* call_frame);
XLA_FFI_Error* ShoalLinalgEighGenCpu(XLA_FFI_CallFrame* call_frame);
// CUDA (cuSOLVER, dlopen'ed at run time); contracts in eigh_ffi_cuda.cc.
XLA_FFI_Error* ShoalLinalgEighCuda(XLA_FFI_CallFrame* call_frame);
XLA_FFI_Error* ShoalLinalgEighGenCuda(XLA_FFI_CallFrame* call_frame);
}
