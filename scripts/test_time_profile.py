"""Where `make test`'s pytest time goes, file by file: model compiles against everything else.

Reads a pytest log run with ``--durations=0`` (setup, call and teardown of every test) and,
optionally, the compile log that ``SHOAL_TEST_COMPILE_LOG`` makes tests/conftest.py write (one
line per model library, precompiled header or cubin built: seconds, kind, source length, test).
Prints, per test file, the seconds its tests took, the seconds of that spent building models
(host libraries and cubins through the cache; NVRTC and nvcc checks that bypass it count as
"other"), how many it built, and the rest (JAX tracing and XLA compiles, the solves, references);
then the totals by artifact kind. Worker seconds: with ``-n 2`` the wall time is about half.

    SHOAL_TEST_COMPILE_LOG=/tmp/compiles.tsv .venv/bin/python -m pytest -q -n 2 \\
        --durations=0 tests > /tmp/pytest.log
    .venv/bin/python scripts/test_time_profile.py /tmp/pytest.log /tmp/compiles.tsv [--top 30]
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from pathlib import Path

DURATION = re.compile(r"^([0-9.]+)s (setup|call|teardown)\s+(\S+?\.py)::")


def test_seconds(pytest_log: Path) -> dict[str, float]:
    """file -> seconds of its tests' setup, call and teardown."""
    seconds: dict[str, float] = defaultdict(float)
    for line in pytest_log.read_text(errors="replace").splitlines():
        match = DURATION.match(line)
        if match:
            seconds[match.group(3)] += float(match.group(1))
    return seconds


def compile_seconds(compile_log: Path) -> tuple[dict[str, float], dict[str, int], dict[str, float]]:
    """(file -> seconds building, file -> builds, artifact kind -> seconds)."""
    seconds: dict[str, float] = defaultdict(float)
    builds: dict[str, int] = defaultdict(int)
    kinds: dict[str, float] = defaultdict(float)
    for line in compile_log.read_text(errors="replace").splitlines():
        fields = line.split("\t")
        if len(fields) < 4:
            continue
        file = fields[3].split("::")[0]
        seconds[file] += float(fields[0])
        builds[file] += 1
        kinds[fields[1]] += float(fields[0])
    return seconds, builds, kinds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pytest_log", type=Path, help="output of pytest --durations=0")
    parser.add_argument("compile_log", type=Path, nargs="?", help="SHOAL_TEST_COMPILE_LOG file")
    parser.add_argument("--top", type=int, default=30, help="files to list (slowest first)")
    args = parser.parse_args()

    tests = test_seconds(args.pytest_log)
    if not tests:
        raise SystemExit(f"no durations in {args.pytest_log}: run pytest with --durations=0")
    building, builds, kinds = (compile_seconds(args.compile_log) if args.compile_log
                               else ({}, {}, {}))
    print(f"{'tests s':>8} {'models s':>9} {'builds':>6} {'other s':>8}  file")
    for file in sorted(tests, key=tests.get, reverse=True)[:args.top]:
        built = building.get(file, 0.0)
        # A file's builds can exceed its tests' time when its tests' subprocesses build too.
        print(f"{tests[file]:8.1f} {built:9.1f} {builds.get(file, 0):6d} "
              f"{tests[file] - built:8.1f}  {file}")
    total, built = sum(tests.values()), sum(building.values())
    print(f"{total:8.1f} {built:9.1f} {sum(builds.values()):6d} {total - built:8.1f}  "
          f"all {len(tests)} files (worker seconds)")
    for kind, seconds in sorted(kinds.items(), key=lambda item: -item[1]):
        print(f"  building {kind or '?'}: {seconds:.1f} s")


if __name__ == "__main__":
    main()
