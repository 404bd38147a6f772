// The shoal.linalg._linalg_ext module: FFI handler capsules and the LAPACK pointer hand-off.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cusolver_api.hpp"
#include "eigh_ffi.hpp"
#include "idle_cores.hpp"
#include "lapack.hpp"

namespace nb = nanobind;

NB_MODULE(_linalg_ext, m) {
  m.def("registrations", [] {
    nb::dict d;
    d["shoal_linalg_eigh_cpu"] = nb::capsule(reinterpret_cast<void*>(&ShoalLinalgEighCpu));
    d["shoal_linalg_eigh_gen_cpu"] = nb::capsule(reinterpret_cast<void*>(&ShoalLinalgEighGenCpu));
    return d;
  });
  m.def(
      "cuda_registrations",
      [] {
        nb::dict d;
        d["shoal_linalg_eigh_cuda"] = nb::capsule(reinterpret_cast<void*>(&ShoalLinalgEighCuda));
        d["shoal_linalg_eigh_gen_cuda"] =
            nb::capsule(reinterpret_cast<void*>(&ShoalLinalgEighGenCuda));
        return d;
      },
      "FFI handlers for platform CUDA (cuSOLVER must be loaded before they run).");
  m.def(
      "load_cusolver",
      [](const std::string& path, bool noload) {
        return shoal::linalg::cusolver::load(path, noload);
      },
      nb::arg("path"), nb::arg("noload") = false,
      "dlopen cuSOLVER (a soname or path); with noload only if already loaded. Returns '' on "
      "success (the first success sticks), else why it failed.");
  m.def("cusolver_loaded_path", &shoal::linalg::cusolver::loaded_path,
        "The soname/path cuSOLVER was loaded from ('' if not loaded).");
  m.def("cusolver_version", &shoal::linalg::cusolver::version,
        "cusolverGetVersion() of the loaded library (0 if not loaded).");
  m.def("cusolver_probe", &shoal::linalg::cusolver::probe,
        "Create and destroy a cuSOLVER handle: '' if a usable device exists, else why not.");
  m.def("cusolver_status_message", &shoal::linalg::cusolver::status_message, nb::arg("status"));
  m.def(
      "lapack_names",
      [] {
        int count = 0;
        const char* const* names = shoal::linalg::lapack_function_names(&count);
        return std::vector<std::string>(names, names + count);
      },
      "SciPy cython_lapack routines the kernels call.");
  m.def(
      "set_lapack",
      [](const std::string& name, nb::capsule fn) {
        if (!shoal::linalg::set_lapack_function(name, fn.data())) {
          throw nb::value_error(("not a LAPACK routine shoal.linalg uses: " + name).c_str());
        }
      },
      nb::arg("name"), nb::arg("capsule"),
      "Store the function pointer of a scipy.linalg.cython_lapack capsule.");
  m.def("lapack_ready", &shoal::linalg::lapack_ready);
  m.def(
      "set_blas_local_threads_function",
      [](uintptr_t address) {
        shoal::linalg::set_blas_local_threads_function(reinterpret_cast<void*>(address));
      },
      nb::arg("address"), "Address of OpenBLAS's openblas_set_num_threads_local (0 to disable).");
  m.def("set_max_batch_workers", &shoal::linalg::set_max_batch_workers, nb::arg("n"),
        "Most threads a batch is spread over (0: XLA's CPU pool size + the caller).");
  m.def("set_threaded_blas_min_order", &shoal::linalg::set_threaded_blas_min_order, nb::arg("n"),
        "Lone matrices of at least this order use the BLAS's own threads.");
  m.def("idle_cores", &shoal::linalg::idle_cores,
        "Usable CPUs minus the machine's other runnable threads now (-1: unknown).");
  m.def("lone_matrix_blas_threads", &shoal::linalg::lone_matrix_blas_threads,
        "BLAS threads a lone large matrix would get now: idle cores + 1, capped (0: unknown).");
}
