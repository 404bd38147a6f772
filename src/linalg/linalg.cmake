# The linalg extension: XLA FFI handlers for (generalized) symmetric/Hermitian eigenproblems.
# CPU: LAPACK is not linked; its function pointers come from SciPy's cython_lapack capsules at
# import. CUDA: cuSOLVER is not linked either and no CUDA header is needed; it is dlopen'ed at run
# time (cusolver.cc), so the same module works on machines with and without a GPU; so is the CUDA
# driver (src/cuda/driver_api.cc, shared with the ODE extension).
shoal_python_extension(_linalg_ext shoal/linalg
  ${CMAKE_CURRENT_LIST_DIR}/module.cc
  ${CMAKE_CURRENT_LIST_DIR}/lapack.cc
  ${CMAKE_CURRENT_LIST_DIR}/idle_cores.cc
  ${CMAKE_CURRENT_LIST_DIR}/eigh_kernel.cc
  ${CMAKE_CURRENT_LIST_DIR}/eigh_ffi_cpu.cc
  ${CMAKE_CURRENT_LIST_DIR}/cusolver.cc
  ${CMAKE_CURRENT_LIST_DIR}/eigh_ffi_cuda.cc
  ${CMAKE_CURRENT_LIST_DIR}/../cuda/driver_api.cc)
find_package(Threads REQUIRED)
target_link_libraries(_linalg_ext PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
