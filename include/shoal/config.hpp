// Build-environment facts shared by every core header.
//
// The core headers compile unchanged under g++/clang (host), nvcc and NVRTC (device). Every
// function a kernel may call is marked SHOAL_HD; nothing here throws, allocates or uses std::
// containers.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define SHOAL_HD __host__ __device__
#define SHOAL_DEVICE_COMPILE 1
#else
#define SHOAL_HD
#endif

#define SHOAL_INLINE SHOAL_HD inline

// Constant tables emitted by the code generator (large constant matrices).
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define SHOAL_TABLE __device__ static const
#else
#define SHOAL_TABLE static const
#endif

#ifndef __CUDACC_RTC__
#include <cstdint>
#endif
