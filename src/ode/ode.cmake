# The ODE extension: XLA FFI handlers that run JIT-compiled models over a thread pool (CPU) or one
# GPU thread per trajectory (CUDA, driver opened at run time: nothing links to libcuda).
shoal_python_extension(_ode_ext shoal/ode
  ${CMAKE_CURRENT_LIST_DIR}/module.cc
  ${CMAKE_CURRENT_LIST_DIR}/ensemble_call.cc
  ${CMAKE_CURRENT_LIST_DIR}/ode_ffi_cpu.cc
  ${CMAKE_CURRENT_LIST_DIR}/ode_ffi_cuda.cc
  ${CMAKE_CURRENT_LIST_DIR}/progress.cc
  ${CMAKE_CURRENT_LIST_DIR}/interrupt.cc
  ${CMAKE_CURRENT_LIST_DIR}/cuda_kernels.cc
  ${CMAKE_CURRENT_LIST_DIR}/../cuda/driver_api.cc
  ${CMAKE_CURRENT_LIST_DIR}/model_registry.cc)
target_link_libraries(_ode_ext PRIVATE ${CMAKE_DL_LIBS})
