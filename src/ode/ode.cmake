# The ODE extension: XLA FFI handlers that run JIT-compiled models over a thread pool.
shoal_python_extension(_ode_ext shoal/ode
  ${CMAKE_CURRENT_LIST_DIR}/module.cc
  ${CMAKE_CURRENT_LIST_DIR}/ode_ffi_cpu.cc
  ${CMAKE_CURRENT_LIST_DIR}/model_registry.cc
  ${CMAKE_CURRENT_LIST_DIR}/thread_pool.cc)
target_link_libraries(_ode_ext PRIVATE ${CMAKE_DL_LIBS})
