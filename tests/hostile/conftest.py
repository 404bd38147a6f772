"""The hostile-input suite's harness: a batch of hypothesis examples runs in ONE child process
per test function, so a segfault or a hang in a kernel fails that test instead of the suite
(starting JAX costs about 2 s, so not one process per example). The child reports, as JSON on
its last line of stdout, how many examples each argument got and whatever the test checks; the
session prints the examples-per-argument table at the end."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

# argument -> examples run, over the whole session (filled from the children's reports)
EXAMPLES: collections.Counter = collections.Counter()


def run_child(case: str, timeout: float = 120.0) -> dict:
    """Run ``module:function`` from tests/hostile in a fresh interpreter and return its report.

    The function returns a dict, printed by the child as JSON; it must hold "examples"
    (argument -> count). A crash (signal), a Python error or a hang past ``timeout`` fails.
    """
    module, function = case.split(":")
    code = (
        "import json, sys, warnings\n"
        "warnings.simplefilter('ignore', RuntimeWarning)  # hypothesis' casts of 1e308\n"
        f"sys.path[:0] = [{str(HERE)!r}, {str(ROOT / 'tests')!r}, {str(ROOT)!r}]\n"
        "import jax\n"
        "jax.config.update('jax_enable_x64', True)\n"
        f"import {module}\n"
        f"report = {module}.{function}()\n"
        "print('\\nREPORT ' + json.dumps(report))\n"
    )
    env = dict(os.environ)
    try:
        done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, timeout=timeout,
                              capture_output=True, text=True)
    except subprocess.TimeoutExpired as err:
        pytest.fail(f"{case} hung: no answer after {timeout} s\n{(err.stdout or '')[-3000:]}")
    tail = (done.stdout[-3000:] + "\n" + done.stderr[-6000:]).strip()
    if done.returncode < 0:
        pytest.fail(f"{case} crashed with signal {-done.returncode}\n{tail}")
    if done.returncode != 0:
        pytest.fail(f"{case} failed (exit {done.returncode})\n{tail}")
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("REPORT ")]
    assert lines, f"{case} printed no report\n{tail}"
    report = json.loads(lines[-1][len("REPORT "):])
    EXAMPLES.update(report["examples"])
    return report


@pytest.fixture
def child():
    return run_child


def pytest_terminal_summary(terminalreporter):
    if not EXAMPLES:
        return
    terminalreporter.section("hostile inputs: hypothesis examples per argument")
    for name, count in sorted(EXAMPLES.items()):
        terminalreporter.write_line(f"{name:32s} {count:6d}")
