// The shoal.ode._ode_ext module: FFI handler capsules, the model loaders and driver diagnostics.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <cstring>
#include <stdexcept>

#include "../cuda/driver_api.hpp"
#include "cuda_kernels.hpp"
#include "model_registry.hpp"
#include "ode_ffi.hpp"
#include "progress.hpp"

namespace nb = nanobind;

NB_MODULE(_ode_ext, m) {
  m.def("registrations", [] {
    nb::dict d;
    d["shoal_ode_solve_cpu"] = nb::capsule(reinterpret_cast<void*>(&ShoalOdeSolveCpu));
    d["shoal_ode_solve_cuda"] = nb::capsule(reinterpret_cast<void*>(&ShoalOdeSolveCuda));
    d["shoal_ode_adjoint_cpu"] = nb::capsule(reinterpret_cast<void*>(&ShoalOdeAdjointCpu));
    d["shoal_ode_record_cpu"] = nb::capsule(reinterpret_cast<void*>(&ShoalOdeRecordCpu));
    return d;
  });
  m.def(
      "load_model",
      [](const std::string& path, const std::string& entry) {
        shoal::LoadedModel model;
        std::string error;
        if (!shoal::load_model(path, entry, &model, &error)) throw std::runtime_error(error);
        return nb::make_tuple(model.n_vars, model.n_params, model.n_shared, model.dtype_bits);
      },
      nb::arg("path"), nb::arg("entry"),
      "Load a compiled model library (once per process) and return (n_vars, n_params, n_shared, bits).");
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
  // The CUDA handler's path from driver to launch, minus XLA: float64 host arrays stand in for
  // device buffers. Only meaningful with a stand-in driver (tests/cuda/fake_cuda), which treats
  // device pointers as host pointers and runs kernels on the CPU.
  using F64 = nb::ndarray<double, nb::c_contig, nb::device::cpu>;
  using I32 = nb::ndarray<int32_t, nb::c_contig, nb::device::cpu>;
  m.def(
      "_solve_on_cuda_stream_for_testing",
      [](const std::string& cubins, const std::string& entry, F64 y0, F64 params, F64 shared,
         F64 t_span, F64 weights, F64 first_step, F64 ys, I32 accepted, I32 rejected, I32 status,
         nb::dict kernel_options) {
        ShoalSolveOptions options;  // the fields given override the defaults
#define SHOAL_OPTION_FROM_DICT(type, name, value, meaning) \
  if (kernel_options.contains(#name)) options.name = nb::cast<type>(kernel_options[#name]);
        SHOAL_SOLVE_OPTION_FIELDS(SHOAL_OPTION_FROM_DICT)
#undef SHOAL_OPTION_FROM_DICT
        auto fill = [&](const shoal::ModelShape& shape, ShoalEnsembleArgs* a) {
          std::memset(a, 0, sizeof(*a));
          a->n_traj = static_cast<int64_t>(y0.shape(0));
          a->t_span_group = a->n_traj;
          a->shared_group = a->n_traj;
          a->n_vars = shape.n_vars;
          a->n_params = shape.n_params;
          a->n_shared = shape.n_shared;
          a->n_save = static_cast<int32_t>(t_span.shape(0));
          a->n_saved = shape.n_saved;
          a->tstops_group = a->n_traj;  // no stops, no event
          a->first_step = first_step.data();
          a->y0 = y0.data();
          a->params = params.data();
          a->shared = shared.data();
          a->t_span = t_span.data();
          a->weights = weights.data();
          a->ys = ys.data();
          a->accepted = accepted.data();
          a->rejected = rejected.data();
          a->status = status.data();
          a->options = options;
          return xla::ffi::Error::Success();
        };
        auto* fake_stream = reinterpret_cast<shoal::cuda::CUstream>(uintptr_t{0x5700});
        xla::ffi::Error e = shoal::solve_on_stream(fake_stream, cubins, entry, fill);
        return e.failure() ? e.message() : std::string();
      },
      "Test hook: run the CUDA launch path on host arrays through a stand-in driver, with the "
      "kernel options of a dict (SolveOptions.kernel_attributes()); returns '' or the error "
      "message.");
  // Live progress (progress.hpp): shoal/ode/_progress.py claims a slot per solve and polls it.
  m.def("progress_open", &shoal::progress::open,
        "Claim a progress slot with its counters at zero (-1 when all are in use).");
  m.def(
      "progress_done",
      [](int slot) {
        const auto* c = shoal::progress::counter(slot);
        return c ? __atomic_load_n(&c->done, __ATOMIC_RELAXED) : int64_t{0};
      },
      nb::arg("slot"), "Trajectories a CPU solve has finished so far on an open slot.");
  m.def(
      "progress_total",
      [](int slot) {
        const auto* c = shoal::progress::counter(slot);
        return c ? __atomic_load_n(&c->total, __ATOMIC_RELAXED) : int64_t{0};
      },
      nb::arg("slot"), "Trajectories of the CPU solves that have started on an open slot.");
  m.def("progress_close", &shoal::progress::close, nb::arg("slot"), "Free a progress slot.");
  m.def("num_threads", &shoal::max_solve_threads,
        "The most threads an ensemble solve uses ($SHOAL_NUM_THREADS, else the cores).");
  m.attr("abi_version") = SHOAL_ODE_ABI_VERSION;
}
