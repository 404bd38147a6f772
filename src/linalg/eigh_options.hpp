// What an eigh call solves, as one record: the C++ side of shoal/linalg/_options.py.
//
// Python lowers its EighOptions as ONE dictionary attribute, "options", of every eigh FFI handler
// (CPU and CUDA); XLA decodes it straight into the struct below (eigh_ffi.hpp registers the
// decoding: members in aggregate order, enums as int64 scalars). The values of the enums are
// those of the Python IntEnums. No XLA header here: the LAPACK kernel uses the struct too.
#pragma once

#include <cstdint>

namespace shoal::linalg {

// Which triangle of the row-major a (and b) is read.
enum class Triangle : int64_t { kLower = 0, kUpper = 1 };

// The standard problem A v = λ v, or a generalized one of LAPACK's itype 1: A v = λ B v,
// 2: A B v = λ v, 3: B A v = λ v (the enum values are the itypes).
enum class Problem : int64_t { kStandard = 0, kType1 = 1, kType2 = 2, kType3 = 3 };

// All eigenpairs, those of 0-based inclusive indices [il, iu], or those in (vl, vu].
enum class Subset : int64_t { kAll = 0, kByIndex = 1, kByValue = 2 };

struct EighOptions {
  Problem problem = Problem::kStandard;
  Triangle triangle = Triangle::kLower;
  bool vectors = true;  // eigenvectors too (jobz = 'V'), else eigenvalues only
  Subset subset = Subset::kAll;
  int64_t il = 0, iu = -1;  // kByIndex
  double vl = 0, vu = 0;    // kByValue
  bool shared_b = false;    // every element has the same b: factorise it once (CPU kernels)

  bool lower() const { return triangle == Triangle::kLower; }
  bool generalized() const { return problem != Problem::kStandard; }
  int itype() const { return static_cast<int>(problem); }  // generalized problems only
};

// Names the first out-of-range enum value ("" if all are valid: XLA casts without checking).
inline const char* invalid_enum(const EighOptions& o) {
  if (o.triangle != Triangle::kLower && o.triangle != Triangle::kUpper) {
    return "triangle must be 0 (lower) or 1 (upper)";
  }
  if (o.problem < Problem::kStandard || o.problem > Problem::kType3) {
    return "problem must be 0 (standard), 1, 2 or 3";
  }
  if (o.subset < Subset::kAll || o.subset > Subset::kByValue) return "subset must be 0, 1 or 2";
  return "";
}

}  // namespace shoal::linalg
