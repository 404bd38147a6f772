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

// For long straight-line functions (the unrolled sparse triangular solves): g++'s basic-block
// SLP vectoriser is superlinear there (5 of 8 s compiling a 300-variable sparse solve) and finds
// little to vectorise in a chain of dependent multiply-subtracts.
#if defined(__GNUC__) && !defined(__clang__) && !defined(SHOAL_DEVICE_COMPILE)
#define SHOAL_NO_SLP __attribute__((optimize("no-tree-slp-vectorize")))
#else
#define SHOAL_NO_SLP
#endif

// Device code only: keep a function out of line. nvcc and NVRTC inline whatever they can: a
// sensitivity system's per-stage solve (block substitution with a nested-dual sweep) was copied
// into every stage of Rodas5P's step, one kernel function whose optimisation time grows faster
// than its size (NVRTC on a 288-variable sparse joint system: 229 s inlined, 91 s out of line).
// On the host the compilers' own choice stands.
#if defined(__CUDA_ARCH__)
#define SHOAL_DEVICE_NOINLINE __noinline__
#else
#define SHOAL_DEVICE_NOINLINE
#endif

#ifndef __CUDACC_RTC__
#include <cstdint>
#else
// NVRTC has no host standard headers: the fixed-width integers the headers use, spelled out
// (CUDA's data model: LP64 on every supported host).
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
#endif
