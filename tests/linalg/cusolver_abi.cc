// Compile-time check that src/linalg/cusolver_api.hpp declares the cuSOLVER functions and
// constants it dlsym's with the ABI of the real header. Compiled (never linked or run) by
// tests/linalg/test_cusolver_abi.py when a CUDA toolkit's cusolverDn.h exists:
//   g++ -std=c++17 -fsyntax-only -I<cuda>/include -Isrc/linalg tests/linalg/cusolver_abi.cc
//
// Our declarations replace enums by int, opaque handles by void*, cuComplex by a struct of two
// floats. A parameter matches when the types are equal, or the real one is a 4-byte enum and ours
// a 4-byte integer, or both are pointers to matching pointees (a pointer to an opaque struct
// matches void*, cuComplex matches a struct of the same size, constness must agree).
#include <cusolverDn.h>

#include <type_traits>

#include "cusolver_api.hpp"

namespace {

namespace cs = shoal::linalg::cusolver;

template <typename Real, typename Ours>
constexpr bool param_matches() {
  if constexpr (std::is_same_v<Real, Ours>) {
    return true;
  } else if constexpr (std::is_enum_v<Real>) {
    return std::is_integral_v<Ours> && sizeof(Real) == sizeof(Ours) && sizeof(Ours) == 4;
  } else if constexpr (std::is_pointer_v<Real> && std::is_pointer_v<Ours>) {
    using R = std::remove_pointer_t<Real>;
    using O = std::remove_pointer_t<Ours>;
    if constexpr (std::is_const_v<R> != std::is_const_v<O>) {
      return false;
    } else if constexpr (std::is_void_v<O>) {
      return std::is_class_v<R>;  // an opaque handle (may be incomplete)
    } else if constexpr (std::is_class_v<R> && std::is_class_v<O>) {
      return sizeof(R) == sizeof(O);  // cuComplex / cuDoubleComplex
    } else {
      return param_matches<std::remove_cv_t<R>, std::remove_cv_t<O>>();
    }
  } else {
    return false;
  }
}

template <typename Real, typename Ours>
struct Matches : std::false_type {};

template <typename... T>
struct TypeList {};

template <typename RR, typename OR, typename... RA, typename... OA>
constexpr bool signature_matches(TypeList<RA...>, TypeList<OA...>) {
  if constexpr (sizeof...(RA) != sizeof...(OA)) {
    return false;
  } else {
    return param_matches<RR, OR>() && (param_matches<RA, OA>() && ...);
  }
}

template <typename RR, typename... RA, typename OR, typename... OA>
struct Matches<RR (*)(RA...), OR (*)(OA...)> {
  static constexpr bool value = signature_matches<RR, OR>(TypeList<RA...>{}, TypeList<OA...>{});
};

// Variadic so that a template-id with a comma passes through as the second argument.
#define SHOAL_CHECK(fn, ...) \
  static_assert(Matches<decltype(&::fn), __VA_ARGS__>::value, #fn " does not match " #__VA_ARGS__)

SHOAL_CHECK(cusolverDnCreate, cs::CreateFn);
SHOAL_CHECK(cusolverDnDestroy, cs::DestroyFn);
SHOAL_CHECK(cusolverDnSetStream, cs::SetStreamFn);
SHOAL_CHECK(cusolverGetVersion, cs::GetVersionFn);
SHOAL_CHECK(cusolverDnCreateSyevjInfo, cs::CreateSyevjInfoFn);
SHOAL_CHECK(cusolverDnDestroySyevjInfo, cs::DestroySyevjInfoFn);
SHOAL_CHECK(cusolverDnXsyevjSetSortEig, cs::SyevjSetSortEigFn);

#define SHOAL_CHECK_TYPE(P, E, T, R)                                                        \
  SHOAL_CHECK(cusolverDn##P##E##evd_bufferSize, cs::SyevdBufferSizeFn<T, R>);               \
  SHOAL_CHECK(cusolverDn##P##E##evd, cs::SyevdFn<T, R>);                                    \
  SHOAL_CHECK(cusolverDn##P##E##gvd_bufferSize, cs::SygvdBufferSizeFn<T, R>);               \
  SHOAL_CHECK(cusolverDn##P##E##gvd, cs::SygvdFn<T, R>);                                    \
  SHOAL_CHECK(cusolverDn##P##E##evjBatched_bufferSize, cs::SyevjBatchedBufferSizeFn<T, R>); \
  SHOAL_CHECK(cusolverDn##P##E##evjBatched, cs::SyevjBatchedFn<T, R>)

SHOAL_CHECK_TYPE(S, sy, float, float);
SHOAL_CHECK_TYPE(D, sy, double, double);
SHOAL_CHECK_TYPE(C, he, cs::Complex, float);
SHOAL_CHECK_TYPE(Z, he, cs::DoubleComplex, double);

static_assert(sizeof(cs::Complex) == sizeof(cuComplex));
static_assert(sizeof(cs::DoubleComplex) == sizeof(cuDoubleComplex));
static_assert(sizeof(cs::Handle) == sizeof(cusolverDnHandle_t));
static_assert(sizeof(cs::Stream) == sizeof(cudaStream_t));
static_assert(sizeof(cs::SyevjInfo) == sizeof(syevjInfo_t));

static_assert(cs::kStatusSuccess == CUSOLVER_STATUS_SUCCESS);
static_assert(cs::kStatusNotInitialized == CUSOLVER_STATUS_NOT_INITIALIZED);
static_assert(cs::kStatusAllocFailed == CUSOLVER_STATUS_ALLOC_FAILED);
static_assert(cs::kStatusInvalidValue == CUSOLVER_STATUS_INVALID_VALUE);
static_assert(cs::kStatusArchMismatch == CUSOLVER_STATUS_ARCH_MISMATCH);
static_assert(cs::kStatusMappingError == CUSOLVER_STATUS_MAPPING_ERROR);
static_assert(cs::kStatusExecutionFailed == CUSOLVER_STATUS_EXECUTION_FAILED);
static_assert(cs::kStatusInternalError == CUSOLVER_STATUS_INTERNAL_ERROR);
static_assert(cs::kStatusMatrixTypeNotSupported == CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED);
static_assert(cs::kStatusNotSupported == CUSOLVER_STATUS_NOT_SUPPORTED);
static_assert(cs::kStatusInvalidWorkspace == CUSOLVER_STATUS_INVALID_WORKSPACE);
static_assert(cs::kFillModeLower == CUBLAS_FILL_MODE_LOWER);
static_assert(cs::kFillModeUpper == CUBLAS_FILL_MODE_UPPER);
static_assert(cs::kEigModeNoVector == CUSOLVER_EIG_MODE_NOVECTOR);
static_assert(cs::kEigModeVector == CUSOLVER_EIG_MODE_VECTOR);
static_assert(cs::kEigType1 == CUSOLVER_EIG_TYPE_1);
static_assert(cs::kEigType2 == CUSOLVER_EIG_TYPE_2);
static_assert(cs::kEigType3 == CUSOLVER_EIG_TYPE_3);

// The checker itself must be able to fail: a wrong signature is rejected.
static_assert(!Matches<decltype(&::cusolverDnSsyevd), cs::SyevdFn<double, double>>::value);
static_assert(
    !Matches<decltype(&::cusolverDnCheevd), cs::SyevdFn<cs::DoubleComplex, double>>::value);
static_assert(!Matches<decltype(&::cusolverDnSsygvd), cs::SyevdFn<float, float>>::value);

}  // namespace
