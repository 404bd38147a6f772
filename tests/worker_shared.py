"""Expensive fixture work computed once per test run, however many xdist workers need it.

`make test` runs pytest on one worker per core. A module-scoped fixture whose tests land on
both workers is built by both: the NVRTC and nvcc fixtures of tests/cuda/ took about 100 s and
80 s each, twice. (xdist's ``--dist loadgroup`` would pin a module to one worker, but with pytest 9
it no longer groups: it renames ``item._nodeid``, which ``item.nodeid`` no longer reads.)

``shared_results`` splits such work into named pieces, each with a lock and a result file in a
directory that every worker of one run shares: a worker computes the pieces nobody has started,
then waits for the others' pieces and reads them. Two workers arriving together split the work;
one arriving later only reads; alone (no xdist, or the other worker busy elsewhere), a worker may
compute its pieces on several threads. A piece whose computation failed leaves no result, so
whoever waits for it computes it again and sees the same failure.
"""

from __future__ import annotations

import fcntl
import os
import pickle
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any


def run_directory(tmp_path_factory, name: str) -> Path:
    """A directory shared by every worker of this run (a worker's basetemp is
    ``<run>/popen-gwN``), private to the run, named ``name``."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    directory = root / f"shared-{name}"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def _compute_locked(lock_file, result: Path, key: str, compute: Callable[[str], Any]) -> None:
    try:
        if not result.exists():
            value = compute(key)
            partial = result.with_suffix(".partial")
            partial.write_bytes(pickle.dumps(value))
            partial.replace(result)  # readers never see a half-written result
    finally:
        fcntl.flock(lock_file, fcntl.LOCK_UN)


def _take_free_pieces(directory: Path, keys: list[str], compute: Callable[[str], Any]) -> None:
    for key in keys:
        with open(directory / f"{key}.lock", "a") as lock_file:
            try:
                fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # another worker (or thread) is computing it
            _compute_locked(lock_file, directory / f"{key}.pickle", key, compute)


def shared_results(directory: Path, keys: Iterable[str], compute: Callable[[str], Any],
                   parallel: int = 1) -> dict[str, Any]:
    """{key: compute(key)} for every key, each computed by one worker of the run only; this
    worker computes the pieces it takes on ``parallel`` threads (for computations that release
    the GIL: a compiler's subprocess, NVRTC through ctypes)."""
    keys = list(keys)
    if parallel > 1:
        with ThreadPoolExecutor(parallel) as pool:
            for done in [pool.submit(_take_free_pieces, directory, keys, compute)
                         for _ in range(parallel)]:
                done.result()  # a failure is raised here
    else:
        _take_free_pieces(directory, keys, compute)
    for key in keys:  # wait for the others' pieces (or compute one whose worker failed)
        with open(directory / f"{key}.lock", "a") as lock_file:
            fcntl.flock(lock_file, fcntl.LOCK_EX)
            _compute_locked(lock_file, directory / f"{key}.pickle", key, compute)
    return {key: pickle.loads((directory / f"{key}.pickle").read_bytes()) for key in keys}
