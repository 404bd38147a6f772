// Force-included when compiling shoal's CUDA source with a host compiler for fake_libcuda.cc:
// kernels become exported host functions and the thread coordinates become globals the fake
// driver sets before each call.
#pragma once

#define __global__
#define __device__

extern "C" {
struct FakeDim3 {
  unsigned x, y, z;
};
__attribute__((visibility("default"))) FakeDim3 blockIdx = {0, 0, 0};
__attribute__((visibility("default"))) FakeDim3 blockDim = {1, 1, 1};
__attribute__((visibility("default"))) FakeDim3 threadIdx = {0, 0, 0};
}
