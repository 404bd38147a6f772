// XLA FFI handlers for the standard and generalized symmetric/Hermitian eigenproblem.
//
//   CPU (LAPACK, eigh_ffi_cpu.cc):
//     shoal_linalg_eigh_cpu(a)         -> (w, v, info)
//     shoal_linalg_eigh_gen_cpu(a, b)  -> (w, v, info)
//   CUDA (cuSOLVER, dlopen'ed at run time; eigh_ffi_cuda.cc):
//     shoal_linalg_eigh_cuda(a)        -> (a_out, w, info)          a_out aliases a
//     shoal_linalg_eigh_gen_cuda(a, b) -> (a_out, b_out, w, info)   a_out aliases a, b_out b
//
// a, b: (..., n, n) row-major, same shape and dtype (f32, f64, c64, c128); only the triangle
// options.triangle names is read. Every handler takes one attribute "options", the dictionary
// that decodes into EighOptions (eigh_options.hpp); the standard CUDA handler also takes
// "algorithm" (its routine). Outputs are described in each file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "eigh_options.hpp"
#include "xla/ffi/api/c_api.h"
#include "xla/ffi/api/ffi.h"

XLA_FFI_REGISTER_ENUM_ATTR_DECODING(shoal::linalg::Triangle);
XLA_FFI_REGISTER_ENUM_ATTR_DECODING(shoal::linalg::Problem);
XLA_FFI_REGISTER_ENUM_ATTR_DECODING(shoal::linalg::Subset);
XLA_FFI_REGISTER_STRUCT_ATTR_DECODING(shoal::linalg::EighOptions,
                                      StructMember<shoal::linalg::Problem>("problem"),
                                      StructMember<shoal::linalg::Triangle>("triangle"),
                                      StructMember<bool>("vectors"),
                                      StructMember<shoal::linalg::Subset>("subset"),
                                      StructMember<int64_t>("il"), StructMember<int64_t>("iu"),
                                      StructMember<double>("vl"), StructMember<double>("vu"),
                                      StructMember<bool>("shared_b"));

namespace shoal::linalg {

// The part of the binding that every eigh handler, CPU and CUDA, shares: applied to the
// platform's Bind().Ctx<...>() chain, it adds the input matrices (a, and b when kMatrices is 2)
// and the options; the platform's results follow. Handler parameters come in the same order:
// contexts, a[, b], options, results.
template <size_t kMatrices, class Binding>
auto bind_problem(Binding binding) {
  static_assert(kMatrices == 1 || kMatrices == 2, "a, or a and b");
  if constexpr (kMatrices == 1) {
    return std::move(binding).template Arg<xla::ffi::AnyBuffer>().template Attr<EighOptions>(
        "options");
  } else {
    return bind_problem<1>(std::move(binding).template Arg<xla::ffi::AnyBuffer>());
  }
}

// Batch size, order and number of eigenpairs returned (m) of one call.
struct ProblemShape {
  int64_t batch = 1;
  int64_t n = 0;
  int64_t m = 0;
};

// The checks every handler makes on its inputs (messages start with `who`): a is (..., n, n);
// b, when given, matches a in shape and dtype; the options' enums are in range and agree with
// the number of matrices; the subset fits n.
inline xla::ffi::Error check_problem(std::string_view who, const xla::ffi::AnyBuffer& a,
                                     const xla::ffi::AnyBuffer* b, const EighOptions& o,
                                     ProblemShape* shape) {
  const auto invalid = [&](std::string_view what) {
    return xla::ffi::Error::InvalidArgument(std::string(who) + ": " + std::string(what));
  };
  const auto dims = a.dimensions();
  if (dims.size() < 2 || dims[dims.size() - 1] != dims[dims.size() - 2]) {
    return invalid("a must have shape (..., n, n)");
  }
  if (const char* bad = invalid_enum(o); *bad != '\0') return invalid(bad);
  if (o.generalized() != (b != nullptr)) {
    return invalid(b != nullptr ? "the generalized handler needs problem 1, 2 or 3"
                                : "the standard handler needs problem 0 (standard)");
  }
  if (b != nullptr &&
      (b->element_type() != a.element_type() || b->element_count() != a.element_count())) {
    return invalid("b must match a in shape and dtype");
  }
  const int64_t n = dims[dims.size() - 1];
  if (o.subset == Subset::kByIndex && (o.il < 0 || o.iu < o.il || o.iu >= n)) {
    return invalid("need 0 <= il <= iu < n");
  }
  if (o.subset == Subset::kByValue && !(o.vl < o.vu)) return invalid("need vl < vu");
  shape->n = n;
  shape->m = o.subset == Subset::kByIndex ? o.iu - o.il + 1 : n;
  shape->batch = 1;
  for (size_t i = 0; i + 2 < dims.size(); ++i) shape->batch *= dims[i];
  return xla::ffi::Error::Success();
}

}  // namespace shoal::linalg

extern "C" {
XLA_FFI_Error* ShoalLinalgEighCpu(XLA_FFI_CallFrame* call_frame);
XLA_FFI_Error* ShoalLinalgEighGenCpu(XLA_FFI_CallFrame* call_frame);
XLA_FFI_Error* ShoalLinalgEighCuda(XLA_FFI_CallFrame* call_frame);
XLA_FFI_Error* ShoalLinalgEighGenCuda(XLA_FFI_CallFrame* call_frame);
}
