# The linalg extension: XLA FFI handlers for (generalized) symmetric/Hermitian eigenproblems on CPU.
# LAPACK is not linked: its function pointers come from SciPy's cython_lapack capsules at import.
shoal_python_extension(_linalg_ext shoal/linalg
  ${CMAKE_CURRENT_LIST_DIR}/module.cc
  ${CMAKE_CURRENT_LIST_DIR}/lapack.cc
  ${CMAKE_CURRENT_LIST_DIR}/eigh_kernel.cc
  ${CMAKE_CURRENT_LIST_DIR}/eigh_ffi_cpu.cc)
find_package(Threads REQUIRED)
target_link_libraries(_linalg_ext PRIVATE Threads::Threads)
