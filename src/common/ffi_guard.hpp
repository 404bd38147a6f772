// The exception guard of every XLA FFI handler in shoal's host runtime.
//
// No C++ exception may cross into XLA (std::string, std::vector and thread pools can throw
// bad_alloc anywhere), so a handler's body runs inside without_exceptions: whatever it throws
// becomes an INTERNAL ffi::Error whose message starts with `who` (e.g. "shoal.linalg eigh").
#pragma once

#include <exception>
#include <string>
#include <string_view>
#include <utility>

#include "xla/ffi/api/ffi.h"

namespace shoal {

// body() -> xla::ffi::Error, returned as is; a thrown std::exception becomes "<who>: <what()>",
// anything else "<who>: unknown C++ exception".
template <class Body>
xla::ffi::Error without_exceptions(std::string_view who, Body&& body) {
  try {
    return std::forward<Body>(body)();
  } catch (const std::exception& e) {
    return xla::ffi::Error::Internal(std::string(who) + ": " + e.what());
  } catch (...) {
    return xla::ffi::Error::Internal(std::string(who) + ": unknown C++ exception");
  }
}

}  // namespace shoal
