// Robertson ensemble with SUNDIALS CVODE, one trajectory after another on one core.
//
// The comparison harness for benchmarks/robertson_rodas5p.py, which compiles and runs it:
//
//   g++ -O2 -o cvode_robertson benchmarks/cvode_robertson.cc
//       -lsundials_cvode -lsundials_nvecserial -lsundials_sunlinsoldense
//       -lsundials_sunmatrixdense [-lsundials_generic]
//   cvode_robertson K1_FILE TS_FILE OUT_FILE RTOL ATOL H0 REPEATS
//
//   K1_FILE   N float64 values of k1 (raw little-endian doubles), one per trajectory
//   TS_FILE   n_save float64 save times (raw doubles), strictly increasing; ts[0] is the start
//   OUT_FILE  written: N * n_save * 3 doubles (the saves, row-major (N, n_save, 3)), then
//             N int64 accepted-step counts, N int64 failed-step counts (error-test plus
//             nonlinear-solver convergence failures), then N int64 return flags (0 = success)
//   RTOL ATOL scalar tolerances
//   H0        initial step; <= 0 lets CVODE estimate it
//   REPEATS   the whole ensemble is solved this many times, each pass timed, after an untimed
//             warm-up pass over the first min(N, 100) trajectories; the saves and step counts
//             written are those of the last pass
//
// Problem: y1' = -k1 y1 + k3 y2 y3, y2' = k1 y1 - k3 y2 y3 - k2 y2^2, y3' = k2 y2^2,
// k2 = 3e7, k3 = 1e4, y0 = (1, 0, 0). Method: CVODE BDF (variable order, <= 5), Newton with
// the dense direct linear solver and the analytic Jacobian below. One CVODE memory is created
// once and re-initialised (CVodeReInit) per trajectory, as a user solving many problems would.
// Saves use CVODE's interpolation (CV_NORMAL to each save time), no tstop.
//
// Compiled with -DROBERTSON_IDA (and -lsundials_ida instead of -lsundials_cvode) it solves the
// DAE form instead, for benchmarks/dae_robertson.py: the third equation replaced by the
// conservation law 0 = y1 + y2 + y3 − 1, with SUNDIALS IDA (variable-order BDF on the residual
// F(t, y, y') = 0, Newton with the dense solver and the analytic dF/dy + c_j dF/dy'), started
// from the consistent y'(0) = (−k1, k1, 0); the same files and output.
//
// stdout: one line "RESULT {json}" with the SUNDIALS version and the wall time and process CPU
// time of each pass.

#ifdef ROBERTSON_IDA
#include <ida/ida.h>
#else
#include <cvode/cvode.h>
#endif
#include <nvector/nvector_serial.h>
#include <sundials/sundials_types.h>
#include <sundials/sundials_version.h>
#include <sunlinsol/sunlinsol_dense.h>
#include <sunmatrix/sunmatrix_dense.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

#if SUNDIALS_VERSION_MAJOR < 6
#error "this harness needs SUNDIALS >= 6 (SUNContext API)"
#endif

namespace {

constexpr double kK2 = 3e7;
constexpr double kK3 = 1e4;

int rhs(sunrealtype /*t*/, N_Vector y, N_Vector ydot, void* user_data) {
  const double k1 = *static_cast<const double*>(user_data);
  const sunrealtype* v = N_VGetArrayPointer(y);
  sunrealtype* d = N_VGetArrayPointer(ydot);
  const double r1 = k1 * v[0];
  const double r2 = kK2 * v[1] * v[1];
  const double r3 = kK3 * v[1] * v[2];
  d[0] = -r1 + r3;
  d[1] = r1 - r2 - r3;
  d[2] = r2;
  return 0;
}

int jac(sunrealtype /*t*/, N_Vector y, N_Vector /*fy*/, SUNMatrix J, void* user_data,
        N_Vector /*tmp1*/, N_Vector /*tmp2*/, N_Vector /*tmp3*/) {
  const double k1 = *static_cast<const double*>(user_data);
  const sunrealtype* v = N_VGetArrayPointer(y);
  // SM_ELEMENT_D(J, row, col)
  SM_ELEMENT_D(J, 0, 0) = -k1;
  SM_ELEMENT_D(J, 0, 1) = kK3 * v[2];
  SM_ELEMENT_D(J, 0, 2) = kK3 * v[1];
  SM_ELEMENT_D(J, 1, 0) = k1;
  SM_ELEMENT_D(J, 1, 1) = -kK3 * v[2] - 2.0 * kK2 * v[1];
  SM_ELEMENT_D(J, 1, 2) = -kK3 * v[1];
  SM_ELEMENT_D(J, 2, 0) = 0.0;
  SM_ELEMENT_D(J, 2, 1) = 2.0 * kK2 * v[1];
  SM_ELEMENT_D(J, 2, 2) = 0.0;
  return 0;
}

#ifdef ROBERTSON_IDA
// F(t, y, y') of the DAE form and its iteration matrix dF/dy + cj dF/dy'.
int residual(sunrealtype /*t*/, N_Vector y, N_Vector yp, N_Vector res, void* user_data) {
  const double k1 = *static_cast<const double*>(user_data);
  const sunrealtype* v = N_VGetArrayPointer(y);
  const sunrealtype* d = N_VGetArrayPointer(yp);
  sunrealtype* r = N_VGetArrayPointer(res);
  const double r1 = k1 * v[0];
  const double r2 = kK2 * v[1] * v[1];
  const double r3 = kK3 * v[1] * v[2];
  r[0] = d[0] - (-r1 + r3);
  r[1] = d[1] - (r1 - r2 - r3);
  r[2] = v[0] + v[1] + v[2] - 1.0;
  return 0;
}

int residual_jac(sunrealtype /*t*/, sunrealtype cj, N_Vector y, N_Vector /*yp*/, N_Vector /*r*/,
                 SUNMatrix J, void* user_data, N_Vector, N_Vector, N_Vector) {
  const double k1 = *static_cast<const double*>(user_data);
  const sunrealtype* v = N_VGetArrayPointer(y);
  SM_ELEMENT_D(J, 0, 0) = k1 + cj;
  SM_ELEMENT_D(J, 0, 1) = -kK3 * v[2];
  SM_ELEMENT_D(J, 0, 2) = -kK3 * v[1];
  SM_ELEMENT_D(J, 1, 0) = -k1;
  SM_ELEMENT_D(J, 1, 1) = kK3 * v[2] + 2.0 * kK2 * v[1] + cj;
  SM_ELEMENT_D(J, 1, 2) = kK3 * v[1];
  SM_ELEMENT_D(J, 2, 0) = 1.0;
  SM_ELEMENT_D(J, 2, 1) = 1.0;
  SM_ELEMENT_D(J, 2, 2) = 1.0;
  return 0;
}
#endif

std::vector<double> read_doubles(const char* path) {
  std::FILE* fh = std::fopen(path, "rb");
  if (!fh) {
    std::fprintf(stderr, "cannot open %s\n", path);
    std::exit(2);
  }
  std::vector<double> out;
  double x;
  while (std::fread(&x, sizeof x, 1, fh) == 1) out.push_back(x);
  std::fclose(fh);
  return out;
}

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

void check(int flag, const char* what) {
  if (flag < 0) {
    std::fprintf(stderr, "%s failed with flag %d\n", what, flag);
    std::exit(3);
  }
}

void check_ptr(const void* p, const char* what) {
  if (!p) {
    std::fprintf(stderr, "%s returned NULL\n", what);
    std::exit(3);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 8) {
    std::fprintf(stderr, "usage: %s K1_FILE TS_FILE OUT_FILE RTOL ATOL H0 REPEATS\n", argv[0]);
    return 1;
  }
  const std::vector<double> k1s = read_doubles(argv[1]);
  const std::vector<double> ts = read_doubles(argv[2]);
  const char* out_path = argv[3];
  const double rtol = std::atof(argv[4]);
  const double atol = std::atof(argv[5]);
  const double h0 = std::atof(argv[6]);
  const int repeats = std::max(1, std::atoi(argv[7]));
  const std::size_t n_traj = k1s.size();
  const std::size_t n_save = ts.size();
  if (n_traj == 0 || n_save == 0) {
    std::fprintf(stderr, "empty k1 or ts file\n");
    return 1;
  }

  SUNContext ctx;
#if SUNDIALS_VERSION_MAJOR >= 7
  check(SUNContext_Create(SUN_COMM_NULL, &ctx), "SUNContext_Create");
#else
  check(SUNContext_Create(nullptr, &ctx), "SUNContext_Create");
#endif
  N_Vector y = N_VNew_Serial(3, ctx);
  check_ptr(y, "N_VNew_Serial");
  SUNMatrix A = SUNDenseMatrix(3, 3, ctx);
  check_ptr(A, "SUNDenseMatrix");
  SUNLinearSolver LS = SUNLinSol_Dense(y, A, ctx);
  check_ptr(LS, "SUNLinSol_Dense");
  double k1 = k1s[0];
  sunrealtype* yv = N_VGetArrayPointer(y);
  yv[0] = 1.0;
  yv[1] = 0.0;
  yv[2] = 0.0;
#ifdef ROBERTSON_IDA
  N_Vector yp = N_VNew_Serial(3, ctx);
  check_ptr(yp, "N_VNew_Serial");
  sunrealtype* ypv = N_VGetArrayPointer(yp);
  auto consistent_slope = [&] {  // y'(0) of the DAE at y(0) = (1, 0, 0)
    ypv[0] = -k1;
    ypv[1] = k1;
    ypv[2] = 0.0;
  };
  consistent_slope();
  void* mem = IDACreate(ctx);
  check_ptr(mem, "IDACreate");
  check(IDAInit(mem, residual, ts[0], y, yp), "IDAInit");
  check(IDASStolerances(mem, rtol, atol), "IDASStolerances");
  check(IDASetUserData(mem, &k1), "IDASetUserData");
  check(IDASetLinearSolver(mem, LS, A), "IDASetLinearSolver");
  check(IDASetJacFn(mem, residual_jac), "IDASetJacFn");
  check(IDASetMaxNumSteps(mem, 1000000), "IDASetMaxNumSteps");
#else
  void* mem = CVodeCreate(CV_BDF, ctx);
  check_ptr(mem, "CVodeCreate");
  check(CVodeInit(mem, rhs, ts[0], y), "CVodeInit");
  check(CVodeSStolerances(mem, rtol, atol), "CVodeSStolerances");
  check(CVodeSetUserData(mem, &k1), "CVodeSetUserData");
  check(CVodeSetLinearSolver(mem, LS, A), "CVodeSetLinearSolver");
  check(CVodeSetJacFn(mem, jac), "CVodeSetJacFn");
  check(CVodeSetMaxNumSteps(mem, 1000000), "CVodeSetMaxNumSteps");
#endif

  std::vector<double> ys(n_traj * n_save * 3, 0.0);
  std::vector<std::int64_t> steps(n_traj, 0), fails(n_traj, 0), flags(n_traj, 0);
  std::vector<double> pass_s, pass_cpu_s;

  auto one_pass = [&](std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) {
      k1 = k1s[i];
      yv[0] = 1.0;
      yv[1] = 0.0;
      yv[2] = 0.0;
#ifdef ROBERTSON_IDA
      consistent_slope();
      check(IDAReInit(mem, ts[0], y, yp), "IDAReInit");
      if (h0 > 0) check(IDASetInitStep(mem, h0), "IDASetInitStep");
#else
      check(CVodeReInit(mem, ts[0], y), "CVodeReInit");
      if (h0 > 0) check(CVodeSetInitStep(mem, h0), "CVodeSetInitStep");
#endif
      double* out = &ys[i * n_save * 3];
      out[0] = yv[0];
      out[1] = yv[1];
      out[2] = yv[2];
      int flag = 0;
      sunrealtype t = ts[0];
      for (std::size_t s = 1; s < n_save; ++s) {
#ifdef ROBERTSON_IDA
        flag = IDASolve(mem, ts[s], &t, y, yp, IDA_NORMAL);
#else
        flag = CVode(mem, ts[s], y, &t, CV_NORMAL);
#endif
        if (flag < 0) {
          for (std::size_t r = s; r < n_save; ++r)
            for (int c = 0; c < 3; ++c) out[r * 3 + c] = 0.0 / 0.0;
          break;
        }
        out[s * 3 + 0] = yv[0];
        out[s * 3 + 1] = yv[1];
        out[s * 3 + 2] = yv[2];
      }
      long nst = 0, netf = 0, ncfn = 0;
#ifdef ROBERTSON_IDA
      IDAGetNumSteps(mem, &nst);
      IDAGetNumErrTestFails(mem, &netf);
      IDAGetNumNonlinSolvConvFails(mem, &ncfn);
#else
      CVodeGetNumSteps(mem, &nst);
      CVodeGetNumErrTestFails(mem, &netf);
      CVodeGetNumNonlinSolvConvFails(mem, &ncfn);
#endif
      steps[i] = nst;
      fails[i] = netf + ncfn;
      flags[i] = flag < 0 ? flag : 0;
    }
  };

  one_pass(std::min<std::size_t>(n_traj, 100));  // warm-up: page faults, caches, lazy binding
  for (int r = 0; r < repeats; ++r) {
    const double c0 = cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    one_pass(n_traj);
    const auto t1 = std::chrono::steady_clock::now();
    pass_cpu_s.push_back(cpu_seconds() - c0);
    pass_s.push_back(std::chrono::duration<double>(t1 - t0).count());
  }

  std::FILE* fh = std::fopen(out_path, "wb");
  if (!fh) {
    std::fprintf(stderr, "cannot write %s\n", out_path);
    return 2;
  }
  std::fwrite(ys.data(), sizeof(double), ys.size(), fh);
  std::fwrite(steps.data(), sizeof(std::int64_t), steps.size(), fh);
  std::fwrite(fails.data(), sizeof(std::int64_t), fails.size(), fh);
  std::fwrite(flags.data(), sizeof(std::int64_t), flags.size(), fh);
  std::fclose(fh);

  char version[64] = "unknown";
  SUNDIALSGetVersion(version, sizeof version);
  std::printf(
      "RESULT {\"sundials_version\": \"%s\", \"n_traj\": %zu, \"n_save\": %zu, \"pass_s\": [",
      version, n_traj, n_save);
  for (std::size_t r = 0; r < pass_s.size(); ++r) std::printf("%s%.9g", r ? ", " : "", pass_s[r]);
  std::printf("], \"pass_cpu_s\": [");
  for (std::size_t r = 0; r < pass_cpu_s.size(); ++r)
    std::printf("%s%.9g", r ? ", " : "", pass_cpu_s[r]);
  std::printf("]}\n");

#ifdef ROBERTSON_IDA
  IDAFree(&mem);
  N_VDestroy(yp);
#else
  CVodeFree(&mem);
#endif
  SUNLinSolFree(LS);
  SUNMatDestroy(A);
  N_VDestroy(y);
  SUNContext_Free(&ctx);
  return 0;
}
