// The shoal.linalg._linalg_ext module: FFI handler capsules and the LAPACK pointer hand-off.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <string>
#include <vector>

#include "eigh_ffi.hpp"
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
      nb::arg("address"),
      "Address of OpenBLAS's openblas_set_num_threads_local (0 to disable).");
  m.def("set_max_batch_workers", &shoal::linalg::set_max_batch_workers, nb::arg("n"),
        "Most threads a batch is spread over (0: XLA's CPU pool size + the caller).");
  m.def("set_threaded_blas_min_order", &shoal::linalg::set_threaded_blas_min_order,
        nb::arg("n"), "Lone matrices of at least this order use the BLAS's own threads.");
}
