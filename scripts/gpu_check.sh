#!/usr/bin/env bash
# One-shot GPU check for shoal: build without network, print the environment, run the GPU tests,
# an nvcc smoke kernel on the core headers, the GPU benchmark and the device-compile tests, then
# print a summary table (last). Meant for a machine lent for a few minutes: every step has a
# timeout, the whole run has a time budget, and a failing step never stops the next one.
#
#   scripts/gpu_check.sh                 # everything (default budget 560 s: fits one 600 s call)
#   scripts/gpu_check.sh --dry-run       # list the steps and commands; run nothing
#   scripts/gpu_check.sh --only ode_gpu,bench --skip-build
#
# Steps: env, build, ode_gpu, linalg_gpu, smoke, bench, ode_suite (these five only with a GPU
# visible to JAX; ode_suite = CPU ODE suites and the many-parameter models of
# tests/codegen/test_param_contractions.py with the GPU as default device), device_compile
# (tests/cuda/test_device_compile.py, test_nvrtc.py, the CUDA ABI tests: need nvcc / NVRTC / CUDA
# headers, not a GPU, so they run last, and only if their whole timeout is left).
# Measured on an H200 (2026-12-04, 16 cores): env 3 s, build 10, ode_gpu 110, linalg_gpu 119,
# smoke 11, bench 31, ode_suite 168: 452 s before device_compile. On a lent machine, call with
# a device timeout of 600 s; the first start takes about 30 s more.
#
# Options:
#   --dry-run          print the plan and the summary table without running anything
#   --budget SECONDS   total time budget (default 560); a step gets min(its timeout, time left)
#   --only a,b,...     run only these steps (env always runs); names as in the table
#   --skip-build       do not (re)build the extension modules
#   --fake-gpu         plumbing check without a GPU: run the GPU steps anyway, with the CPU
#                      standing in (SHOAL_TEST_GPU_AS_CPU=1, benchmark --device cpu, tiny sizes)
# Environment:
#   PYTHON      interpreter (default .venv/bin/python if present, else python3)
#   OUT         if set, logs and summary.txt go there (at most 8 files); else build/gpu-check/
#   CMAKE_ARGS  extra arguments for the cmake configure step
#   BENCH_ARGS  arguments for benchmarks/gpu_bench.py (default: see BENCH_DEFAULT below)
#   NVCC        nvcc to use for the smoke kernel (default: PATH, $CUDA_HOME, /usr/local/cuda,
#               NVIDIA pip wheels)
# Exit status: 0 when no step failed or timed out, 1 otherwise.
set -u

cd "$(dirname "$0")/.." || exit 2
ROOT=$(pwd)

DRY=0
BUDGET=560
ONLY=""
SKIP_BUILD=0
FAKE_GPU=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY=1 ;;
    --budget) BUDGET=$2; shift ;;
    --only) ONLY=$2; shift ;;
    --skip-build) SKIP_BUILD=1 ;;
    --fake-gpu) FAKE_GPU=1 ;;
    -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
    *) echo "gpu_check.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

if [ -z "${PYTHON:-}" ]; then
  if [ -x "$ROOT/.venv/bin/python" ]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi
PYTHON_PATH=$(command -v "$PYTHON" || echo "$PYTHON")
LOG_DIR=${OUT:-$ROOT/build/gpu-check}
WORK_DIR=$ROOT/build/gpu-check  # build products, CSV: never in $OUT (its file count is limited)
mkdir -p "$LOG_DIR" "$WORK_DIR"
SUMMARY=$LOG_DIR/summary.txt
BENCH_DEFAULT="--sizes 1000,10000,100000 --repeats 3 --budget 25"
if [ $FAKE_GPU -eq 1 ]; then
  BENCH_DEFAULT="--device cpu --sizes 50,100 --repeats 2 --budget 8"
  export SHOAL_TEST_GPU_AS_CPU=1
fi
BENCH_ARGS=${BENCH_ARGS:-$BENCH_DEFAULT}
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export SHOAL_CACHE_DIR=${SHOAL_CACHE_DIR:-$WORK_DIR/shoal-cache}
export PYTHONUNBUFFERED=1

START=$(date +%s)
elapsed() { echo $(( $(date +%s) - START )); }

# Summary rows: name|status|seconds|note
ROWS=()
FAILED=0

want() {  # is step $1 selected? (env always is)
  [ -z "$ONLY" ] || [ "$1" = env ] && return 0
  case ",$ONLY," in *",$1,"*) return 0 ;; esac
  return 1
}

# pytest's last line -> pass / fail / skipped (all skipped) and a short note.
pytest_verdict() {  # $1 log, $2 rc
  local line
  line=$(grep -E "(passed|failed|skipped|error|no tests ran)" "$1" | grep -E " in [0-9.]+s" | tail -1)
  line=$(echo "$line" | sed -e 's/=//g' -e 's/^ *//' -e 's/ *$//')
  if [ "$2" -eq 5 ]; then echo "skipped|no tests collected"; return; fi
  if [ "$2" -eq 0 ]; then
    if echo "$line" | grep -q "passed"; then echo "pass|$line"; else echo "skipped|$line"; fi
    return
  fi
  echo "fail|${line:-pytest exit $2}"
}

# run_step NAME TIMEOUT LOGFILE KIND COMMAND...   (KIND: pytest | smoke | bench | plain)
run_step() {
  local name=$1 limit=$2 log=$3 kind=$4
  shift 4
  if ! want "$name"; then
    ROWS+=("$name|not selected|0|--only $ONLY")
    return
  fi
  if [ $DRY -eq 1 ]; then
    echo "[dry-run] $name (timeout ${limit}s, log $log): ${DESC:-$*}"
    ROWS+=("$name|dry-run|0|timeout ${limit}s")
    return
  fi
  local left=$(( BUDGET - $(elapsed) - 10 ))
  if [ $left -lt 20 ]; then
    ROWS+=("$name|skipped|0|time budget spent (--budget $BUDGET)")
    return
  fi
  [ $left -lt "$limit" ] && limit=$left
  echo
  echo "=== $name (timeout ${limit}s, log $log) ==="
  echo "\$ $*" > "$log"
  local t0 rc status note
  t0=$(date +%s)
  STEP_TIMEOUT=$limit timeout --kill-after=10 "$limit" "$@" >> "$log" 2>&1
  rc=$?
  local secs=$(( $(date +%s) - t0 ))
  if [ "$kind" = bench ]; then tail -n 60 "$log"; else tail -n 25 "$log"; fi
  case "$kind" in
    pytest) IFS='|' read -r status note <<< "$(pytest_verdict "$log" "$rc")" ;;
    smoke)
      case $rc in
        0) status=pass; note=$(grep -E "^(PASSED|FAILED)" "$log" | tail -1) ;;
        77) status=skipped; note=$(grep -E "skipped" "$log" | tail -1) ;;
        *) status=fail; note=$(grep -E "^(FAILED|nvcc|error)|FAIL|error:" "$log" | head -1) ;;
      esac ;;
    *) if [ $rc -eq 0 ]; then status=pass; else status=fail; fi; note="exit $rc" ;;
  esac
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then status=timeout; note="killed after ${limit}s"; fi
  case $status in fail|timeout) FAILED=1 ;; esac
  ROWS+=("$name|$status|$secs|${note:0:90}")
}

skip_step() {  # name reason
  if want "$1"; then ROWS+=("$1|skipped|0|$2"); else ROWS+=("$1|not selected|0|--only $ONLY"); fi
}

# ---------------------------------------------------------------------------------------------
# Step bodies (run as separate processes so `timeout` can kill them)

step_env() {
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "host: $(uname -a)"
  echo "cpus: $(nproc)"; free -g 2>/dev/null | head -2
  echo "git: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null) $(git -C "$ROOT" status --short 2>/dev/null | wc -l) changed path(s)"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi
    nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv
  else
    echo "nvidia-smi: not found"
  fi
  echo "PYTHON=$PYTHON_PATH"
  "$PYTHON" --version
  "$PYTHON" - <<'EOF'
import importlib.metadata as md
import jax
print("jax", jax.__version__, "| default backend:", jax.default_backend())
print("jax.devices():", jax.devices())
for name in ("jaxlib", "jax-cuda13-plugin", "jax-cuda12-plugin", "jax-cuda13-pjrt",
             "jax-cuda12-pjrt", "diffrax", "equinox", "numpy", "scipy", "nanobind",
             "scikit-build-core", "cmake", "ninja", "cvxopt", "pytest", "hypothesis"):
    try:
        print(f"  {name} {md.version(name)}")
    except md.PackageNotFoundError:
        print(f"  {name}: not installed")
nv = sorted(d.metadata["Name"] + " " + d.version for d in md.distributions()
            if (d.metadata["Name"] or "").lower().startswith("nvidia"))
print("  nvidia wheels:", ", ".join(nv) if nv else "none")
EOF
  echo "cmake: $(command -v cmake) $(cmake --version 2>/dev/null | head -1)"
  echo "ninja: $(command -v ninja) $(ninja --version 2>/dev/null)"
  echo "c++: $(command -v c++) $(c++ --version 2>/dev/null | head -1)"
  echo "nvcc: ${NVCC_FOUND:-not found} $([ -n "${NVCC_FOUND:-}" ] && "$NVCC_FOUND" --version | tail -2 | tr '\n' ' ')"
}

step_build() {
  local cmake_bin generator=()
  cmake_bin=$(command -v cmake || echo "$ROOT/.venv/bin/cmake")
  if command -v ninja >/dev/null || [ -x "$ROOT/.venv/bin/ninja" ]; then generator=(-G Ninja); fi
  # shellcheck disable=SC2086
  "$cmake_bin" -S "$ROOT" -B "$ROOT/build/gpu" "${generator[@]}" -DSHOAL_BUILD_PYTHON=ON \
    -DSHOAL_INPLACE=ON -DPython_EXECUTABLE="$PYTHON_PATH" ${CMAKE_ARGS:-} &&
  "$cmake_bin" --build "$ROOT/build/gpu" -j "$(nproc)" &&
  "$PYTHON" - <<'EOF'
import shoal, shoal.ode
from shoal import _nvrtc
from shoal.ode import _ode_ext
print("import ok:", shoal.__file__)
print("CUDA driver:", _ode_ext.cuda_driver_status(), "| archs:", _ode_ext.cuda_device_architectures())
try:
    print("NVRTC:", _nvrtc.library_path(), _nvrtc.version())
except Exception as exc:  # reported, not fatal: the GPU tests will say more
    print("NVRTC: unavailable:", exc)
try:
    from shoal.linalg import _cuda
    print("cuSOLVER:", _cuda.status())
except Exception as exc:
    print("cuSOLVER: status unavailable:", exc)
EOF
}

find_nvcc() {
  local c
  for c in "${NVCC:-}" "$(command -v nvcc 2>/dev/null)" "${CUDA_HOME:-/nonexistent}/bin/nvcc" \
           "${CUDA_PATH:-/nonexistent}/bin/nvcc" /usr/local/cuda/bin/nvcc; do
    [ -n "$c" ] && [ -x "$c" ] && { echo "$c"; return; }
  done
  "$PYTHON" - <<'EOF' 2>/dev/null
import glob, os, site, sys
roots = list(site.getsitepackages()) + [site.getusersitepackages()] + sys.path
for root in dict.fromkeys(roots):
    for c in sorted(glob.glob(os.path.join(root, "nvidia", "**", "bin", "nvcc"), recursive=True)):
        if os.access(c, os.X_OK):
            print(c)
            raise SystemExit
EOF
}

step_smoke() {
  local nvcc=$NVCC_FOUND arch cap
  if [ -z "$nvcc" ]; then echo "nvcc not found: skipped"; return 77; fi
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  if [ -n "$cap" ]; then arch="-arch=sm_$cap"; else arch="-arch=native"; fi
  echo "nvcc: $nvcc ($("$nvcc" --version | tail -1)); $arch"
  local dir=$WORK_DIR/smoke
  mkdir -p "$dir"
  printf '__global__ void k(int* x) { x[threadIdx.x] = 1; }\nint main() { return 0; }\n' > "$dir/empty.cu"
  if ! "$nvcc" $arch "$dir/empty.cu" -o "$dir/empty" > "$dir/empty.log" 2>&1; then
    echo "nvcc cannot build even a trivial CUDA program (toolchain incomplete): skipped"
    head -20 "$dir/empty.log"
    return 77
  fi
  "$nvcc" -std=c++17 -O3 $arch --fmad=false -Xcompiler -ffp-contract=off -I"$ROOT/include" \
    "$ROOT/scripts/gpu_smoke.cu" -o "$dir/gpu_smoke" || { echo "FAILED: nvcc on gpu_smoke.cu"; return 1; }
  "$dir/gpu_smoke"
}

step_bench() {
  # shellcheck disable=SC2086
  "$PYTHON" "$ROOT/benchmarks/gpu_bench.py" $BENCH_ARGS --deadline $(( STEP_TIMEOUT * 2 / 3 )) \
    --out-dir "$WORK_DIR"
}

export -f step_env step_build step_smoke step_bench
export ROOT PYTHON PYTHON_PATH WORK_DIR BENCH_ARGS

# ---------------------------------------------------------------------------------------------
# Plan

NVCC_FOUND=$(find_nvcc)
export NVCC_FOUND

HAVE_GPU=0
GPU_NOTE=""
if [ $DRY -eq 0 ]; then
  if GPU_COUNT=$(timeout 120 "$PYTHON" -c "import jax; print(len(jax.devices('gpu')))" 2>/dev/null); then
    [ "${GPU_COUNT:-0}" -gt 0 ] 2>/dev/null && HAVE_GPU=1
  fi
  [ $HAVE_GPU -eq 0 ] && GPU_NOTE="no GPU visible to JAX"
  if [ $FAKE_GPU -eq 1 ]; then HAVE_GPU=1; GPU_NOTE="FAKE (--fake-gpu: the CPU stands in)"; fi
fi

echo "shoal GPU check: root $ROOT, python $PYTHON_PATH, logs $LOG_DIR, budget ${BUDGET}s, GPU: $([ $HAVE_GPU -eq 1 ] && [ $FAKE_GPU -eq 0 ] && echo yes || echo "${GPU_NOTE:-not probed (dry run)}")"

PYTEST=("$PYTHON" -m pytest -q -rs -p no:cacheprovider --durations=8)
# test_param_contractions.py: models reading hundreds to thousands of parameters (a 32-variable
# Rodas5P model with 1 120 failed to launch on the H200 for its stack before the dual sweeps read
# parameters in place; README, "The GPU path").
ODE_SUITE="tests/ode/test_accuracy.py tests/ode/test_failures.py tests/ode/test_gradients.py \
tests/ode/test_rodas5p.py tests/codegen/test_param_contractions.py"
# NVRTC compile tests and the CUDA ABI checks (whichever exist): they need a toolkit, not a GPU.
NVRTC_TESTS=$(cd "$ROOT" && ls tests/cuda/test_nvrtc.py tests/cuda/test_driver_abi.py \
  tests/linalg/test_cusolver_abi.py 2>/dev/null | tr '\n' ' ')

DESC="nvidia-smi; python/jax versions and devices; package versions; cmake, c++, nvcc"
run_step env 60 "$LOG_DIR/01_env.log" plain bash -c step_env
DESC=""

if [ $SKIP_BUILD -eq 1 ]; then
  skip_step build "--skip-build"
else
  DESC="cmake -S . -B build/gpu -G Ninja -DSHOAL_BUILD_PYTHON=ON -DSHOAL_INPLACE=ON \
-DPython_EXECUTABLE=$PYTHON_PATH ${CMAKE_ARGS:-} && cmake --build build/gpu -j $(nproc) && import shoal"
  run_step build 200 "$LOG_DIR/02_build.log" plain bash -c step_build
  DESC=""
fi

if [ $HAVE_GPU -eq 1 ] || [ $DRY -eq 1 ]; then
  run_step ode_gpu 240 "$LOG_DIR/03_ode_gpu.log" pytest "${PYTEST[@]}" tests/cuda/test_ode_gpu.py
  if [ -f "$ROOT/tests/linalg/test_eigh_gpu.py" ]; then
    run_step linalg_gpu 180 "$LOG_DIR/04_linalg_gpu.log" pytest "${PYTEST[@]}" tests/linalg/test_eigh_gpu.py
  else
    skip_step linalg_gpu "tests/linalg/test_eigh_gpu.py not present"
  fi
  DESC="${NVCC_FOUND:-<no nvcc found>} -std=c++17 -O3 -arch=sm_XX --fmad=false -Iinclude \
scripts/gpu_smoke.cu -o build/gpu-check/smoke/gpu_smoke && build/gpu-check/smoke/gpu_smoke"
  run_step smoke 120 "$LOG_DIR/05_smoke.log" smoke bash -c step_smoke
  DESC="$PYTHON benchmarks/gpu_bench.py $BENCH_ARGS --deadline <2/3 of the step's time> \
--out-dir build/gpu-check"
  run_step bench 200 "$LOG_DIR/06_bench.log" bench bash -c step_bench
  # The CPU suites (against SciPy, closed forms, finite differences) with the GPU as JAX's
  # default device (tests/conftest.py): independent references for the GPU path.
  DESC="SHOAL_TEST_DEVICE=cuda pytest $ODE_SUITE"
  # shellcheck disable=SC2086
  run_step ode_suite 330 "$LOG_DIR/08_ode_suite.log" pytest \
    env SHOAL_TEST_DEVICE="$([ $FAKE_GPU -eq 1 ] && echo cpu || echo cuda)" "${PYTEST[@]}" $ODE_SUITE
  DESC=""
else
  for s in ode_gpu linalg_gpu smoke bench ode_suite; do skip_step "$s" "$GPU_NOTE"; done
fi

# Device compilation (nvcc / NVRTC) needs no GPU: last, and only when its whole timeout is left
# (make test runs it on any machine with the toolkit; cut short it would read as a failure).
# Its log stays out of $OUT, which returns at most 8 files (7 logs and summary.txt).
DEVICE_COMPILE_TIMEOUT=150
if [ $DRY -eq 0 ] && want device_compile &&
   [ $(( BUDGET - $(elapsed) - 10 )) -lt $DEVICE_COMPILE_TIMEOUT ]; then
  skip_step device_compile "$(( BUDGET - $(elapsed) ))s of the budget left; needs no GPU: make test runs it"
else
  # shellcheck disable=SC2086
  run_step device_compile $DEVICE_COMPILE_TIMEOUT "$WORK_DIR/07_device_compile.log" pytest \
    "${PYTEST[@]}" tests/cuda/test_device_compile.py $NVRTC_TESTS
fi

# ---------------------------------------------------------------------------------------------
# Summary (last)

{
  echo
  echo "=== shoal GPU check summary ($(date -u '+%Y-%m-%d %H:%M UTC'), $(elapsed)s of ${BUDGET}s budget, logs in $LOG_DIR) ==="
  printf '%-15s %-12s %6s  %s\n' step status seconds note
  for row in "${ROWS[@]}"; do
    IFS='|' read -r name status secs note <<< "$row"
    printf '%-15s %-12s %6s  %s\n' "$name" "$status" "$secs" "$note"
  done
  if [ -f "$LOG_DIR/06_bench.log" ] && grep -q "^HEADLINE" "$LOG_DIR/06_bench.log"; then
    echo
    echo "benchmark headlines (median of timed calls; diffrax/shoal = time ratio):"
    grep "^HEADLINE" "$LOG_DIR/06_bench.log" | sed 's/^HEADLINE /  /'
  fi
  if [ -f "$LOG_DIR/05_smoke.log" ]; then
    grep -E "max relative|bit-identical" "$LOG_DIR/05_smoke.log" | sed 's/^ */  smoke: /' | head -6
  fi
} | tee "$SUMMARY"

exit $FAILED
