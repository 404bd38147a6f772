"""What shoal's own elementary functions cost (include/shoal/elementary/), against glibc's.

For each function: nanoseconds per value over a 4 096-value array (in cache, so this is
throughput), for glibc's scalar function, shoal's scalar routine (which the compiler may
vectorise by itself) and shoal's routine on SIMD lanes of the machine's width, double and
float, compiled with the flags models are built with (shoal._jit.compiler_flags: -O3,
-march=native, -ffp-contract=off, no fast-math). The lanes column is what a generated model pays
per value now that its right-hand side runs in the lanes; before, it paid glibc's scalar column
lane by lane.

The two latency columns time a dependent chain instead, scalar: each call's argument is the next
array value plus 0 × the previous result (x[i] + prev·0, which the compiler may not fold: prev
could be NaN or inf), so one call cannot start before the previous one has finished. That is
what the scalar path (lanes = 1) and the GPU (one thread, scalar double) see; it includes the
multiply and add of the chain (~2 ns), the same for glibc and shoal.

    PYTHONPATH=. .venv/bin/python benchmarks/elementary_cost.py [function ...]
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from _common import ROOT  # noqa: F401  (puts the checkout on sys.path)

from shoal import _jit

# name: (shoal header, arity, argument range); glibc's function has the same name.
FUNCTIONS = {
    "exp": ("exp", 1, (-50.0, 50.0)),
    "exp2": ("exp2", 1, (-50.0, 50.0)),
    "expm1": ("expm1", 1, (-2.0, 2.0)),
    "log": ("log", 1, (1e-3, 1e3)),
    "log1p": ("log", 1, (-0.5, 10.0)),
    "log2": ("log", 1, (1e-3, 1e3)),
    "log10": ("log", 1, (1e-3, 1e3)),
    "pow": ("pow", 2, (0.1, 10.0)),
    "sin": ("trig", 1, (-10.0, 10.0)),
    "cos": ("trig", 1, (-10.0, 10.0)),
    "tan": ("trig", 1, (-1.5, 1.5)),
    "atan": ("inverse_trig", 1, (-10.0, 10.0)),
    "asin": ("inverse_trig", 1, (-1.0, 1.0)),
    "acos": ("inverse_trig", 1, (-1.0, 1.0)),
    "atan2": ("inverse_trig", 2, (-5.0, 5.0)),
    "sinh": ("hyperbolic", 1, (-5.0, 5.0)),
    "cosh": ("hyperbolic", 1, (-5.0, 5.0)),
    "tanh": ("hyperbolic", 1, (-5.0, 5.0)),
    "cbrt": ("cbrt", 1, (-1e3, 1e3)),
    "erf": ("erf", 1, (-4.0, 4.0)),
    "erfc": ("erf", 1, (-4.0, 6.0)),
}

SOURCE = r"""
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>
%(includes)s
#include "shoal/simd/lanes.hpp"
#include "shoal/simd/lanes_math.hpp"

namespace el = shoal::elementary;
constexpr int kN = 4096, kW = shoal::simd::native_lanes<%(T)s>();
using L = shoal::simd::Lanes<%(T)s, kW>;

template <class F>
double ns_per_value(F run) {
  double best = 1e30;
  for (int rep = 0; rep < 7; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < 20; ++k) run();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = best < s ? best : s;
  }
  return best / 20 / kN * 1e9;
}

int main() {
  std::vector<%(T)s> x(kN), y(kN), out(kN);
  for (int i = 0; i < kN; ++i) {
    const double u = i * 0.6180339887498949, v = i * 0.7548776662466927;  // low-discrepancy
    x[i] = %(T)s(%(lo)r + (%(hi)r - %(lo)r) * (u - (long)u));
    y[i] = %(T)s(-3.0 + 6.0 * (v - (long)v));
  }
  volatile %(T)s sink = 0;
  const double glibc = ns_per_value([&] {
    for (int i = 0; i < kN; ++i) out[i] = std::%(name)s(%(args)s);
    sink = out[kN / 2];
  });
  const double scalar = ns_per_value([&] {
    for (int i = 0; i < kN; ++i) out[i] = el::%(name)s(%(args)s);
    sink = out[kN / 2];
  });
  const double lanes = ns_per_value([&] {
    for (int i = 0; i < kN; i += kW) {
      L a, b;
      __builtin_memcpy(&a.v, &x[i], sizeof a.v);
      __builtin_memcpy(&b.v, &y[i], sizeof b.v);
      (void)b;
      const L r = shoal::simd::%(name)s(%(largs)s);
      __builtin_memcpy(&out[i], &r.v, sizeof r.v);
    }
    sink = out[kN / 2];
  });
  // Latency: a dependent chain (the argument waits for the previous result).
  const double glibc_latency = ns_per_value([&] {
    %(T)s prev = 0;
    for (int i = 0; i < kN; ++i) prev = std::%(name)s(%(chained)s);
    sink = prev;
  });
  const double scalar_latency = ns_per_value([&] {
    %(T)s prev = 0;
    for (int i = 0; i < kN; ++i) prev = el::%(name)s(%(chained)s);
    sink = prev;
  });
  std::printf("%%.2f %%.2f %%.2f %%d %%.2f %%.2f\n", glibc, scalar, lanes, kW, glibc_latency,
              scalar_latency);
}
"""


def run(name: str, header: str, arity: int, lo: float, hi: float, ctype: str, workdir: Path):
    args = "x[i], y[i]" if arity == 2 else "x[i]"
    largs = "a, b" if arity == 2 else "a"
    chained = "x[i] + prev * 0, y[i]" if arity == 2 else "x[i] + prev * 0"
    source = SOURCE % dict(includes=f'#include "shoal/elementary/{header}.hpp"', T=ctype,
                           name=name, args=args, largs=largs, chained=chained, lo=lo, hi=hi)
    src = workdir / f"{name}_{ctype}.cc"
    exe = workdir / f"{name}_{ctype}"
    src.write_text(source)
    flags = [f for f in _jit.compiler_flags() if f not in ("-shared", "-fPIC")]
    compiler = _jit.find_compiler()[0]
    subprocess.run([compiler, *flags, f"-I{_jit.include_dir()}", str(src), "-o", str(exe)],
                   check=True, capture_output=True)
    glibc, scalar, lanes, width, glibc_latency, scalar_latency = subprocess.run(
        [str(exe)], check=True, capture_output=True, text=True).stdout.split()
    return (float(glibc), float(scalar), float(lanes), int(width), float(glibc_latency),
            float(scalar_latency))


def main(names=None):
    include = _jit.include_dir() / "shoal" / "elementary"
    print(f"{'':<15} {'throughput':-^24}  {'':11}   {'latency':-^15}")
    print(f"{'function':<8} {'type':<6} {'glibc':>7} {'shoal':>7} {'lanes':>7}  "
          f"{'glibc/lanes':>11}   {'glibc':>7} {'shoal':>7}   (ns per value; lanes of W)")
    with tempfile.TemporaryDirectory() as tmp:
        for name, (header, arity, (lo, hi)) in FUNCTIONS.items():
            if names and name not in names:
                continue
            if not (include / f"{header}.hpp").exists():
                continue
            for ctype in ("double", "float"):
                try:
                    g, s, v, w, gl, sl = run(name, header, arity, lo, hi, ctype, Path(tmp))
                except subprocess.CalledProcessError as e:
                    print(f"{name:<8} {ctype:<6} failed: {(e.stderr or b'')[-300:]!r}")
                    continue
                print(f"{name:<8} {ctype:<6} {g:7.2f} {s:7.2f} {v:7.2f}  {g / v:10.1f}x   "
                      f"{gl:7.2f} {sl:7.2f}   W={w}")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
