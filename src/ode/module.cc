// The shoal.ode._ode_ext module: FFI handler capsules and the model loader, nothing else.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <stdexcept>

#include "../cuda/driver_api.hpp"
#include "model_registry.hpp"
#include "ode_ffi.hpp"
#include "thread_pool.hpp"

namespace nb = nanobind;

NB_MODULE(_ode_ext, m) {
  m.def("registrations", [] {
    nb::dict d;
    d["shoal_ode_solve_cpu"] = nb::capsule(reinterpret_cast<void*>(&ShoalOdeSolveCpu));
    d["shoal_ode_solve_cuda"] = nb::capsule(reinterpret_cast<void*>(&ShoalOdeSolveCuda));
    return d;
  });
  m.def(
      "load_model",
      [](const std::string& path, const std::string& entry) {
        shoal::LoadedModel model;
        std::string error;
        if (!shoal::load_model(path, entry, &model, &error)) throw std::runtime_error(error);
        return nb::make_tuple(model.n_vars, model.n_params, model.dtype_bits);
      },
      nb::arg("path"), nb::arg("entry"),
      "Load a compiled model library (once per process) and return (n_vars, n_params, bits).");
  m.def(
      "cuda_driver_status",
      [] {
        std::string error;
        const bool ok = shoal::cuda::driver(&error) != nullptr;
        return nb::make_tuple(ok, ok ? std::string("CUDA driver and device found") : error);
      },
      "(usable, message): whether the CUDA driver opens and reports a device, and if not why.");
  m.def(
      "cuda_device_architectures",
      [] {
        std::string error;
        return shoal::cuda::device_architectures(&error);
      },
      "Comma-separated sm_XY of the devices the CUDA driver sees ('' without a driver).");
  m.def("num_threads", &shoal::parallel_threads, "Threads an ensemble solve uses.");
  m.attr("abi_version") = SHOAL_ODE_ABI_VERSION;
}
