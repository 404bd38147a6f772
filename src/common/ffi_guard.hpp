// The one exception guard of the host runtime: no C++ exception may cross into XLA.
#pragma once

#include <exception>
#include <string>
#include <string_view>

#include "xla/ffi/api/ffi.h"

namespace shoal {

// Runs body() (returning ffi::Error); an exception becomes an Internal error whose message
// starts with `who` (the operation a user called, e.g. "shoal.ode.solve").
template <class Body>
xla::ffi::Error without_exceptions(std::string_view who, Body&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    return xla::ffi::Error::Internal(std::string(who) + ": " + e.what());
  } catch (...) {
    return xla::ffi::Error::Internal(std::string(who) + ": unknown C++ exception");
  }
}

}  // namespace shoal
