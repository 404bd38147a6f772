"""tests/worker_shared.py: each piece of shared fixture work is computed once per run."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from worker_shared import shared_results

HERE = Path(__file__).parent

# A worker: computes what it can of four slow pieces, marking each piece it computed.
WORKER = """
import json, os, sys, time
sys.path.insert(0, {here!r})
from pathlib import Path
from worker_shared import shared_results

directory = Path({directory!r})

def compute(key):
    (directory / f"computed-{{key}}-{{os.getpid()}}").touch()
    time.sleep(0.3)
    return {{"key": key, "square": len(key) ** 2}}

print(json.dumps(shared_results(directory, ["a", "bb", "ccc", "dddd"], compute)))
"""


def test_two_workers_split_the_pieces_and_read_the_same_results(tmp_path):
    script = WORKER.format(here=str(HERE), directory=str(tmp_path))
    workers = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
               for _ in range(2)]
    outputs = [json.loads(w.communicate(timeout=60)[0]) for w in workers]
    assert all(w.returncode == 0 for w in workers)
    want = {k: {"key": k, "square": len(k) ** 2} for k in ("a", "bb", "ccc", "dddd")}
    assert outputs == [want, want]
    for key in want:  # each piece computed by exactly one of them
        assert len(list(tmp_path.glob(f"computed-{key}-*"))) == 1, key


def test_a_failed_piece_leaves_no_result_and_is_computed_again(tmp_path):
    def failing(key):
        raise RuntimeError(f"cannot build {key}")

    with pytest.raises(RuntimeError, match="cannot build x"):
        shared_results(tmp_path, ["x"], failing)
    assert not list(tmp_path.glob("x.pickle*"))
    assert shared_results(tmp_path, ["x"], lambda key: key * 2) == {"x": "xx"}
    # Computed once: later callers read it.
    assert shared_results(tmp_path, ["x"], failing) == {"x": "xx"}


def test_pieces_computed_on_threads_are_each_computed_once(tmp_path):
    calls = []

    def compute(key):
        calls.append(key)
        return key.upper()

    keys = [f"k{i}" for i in range(12)]
    got = shared_results(tmp_path, keys, compute, parallel=4)
    assert got == {k: k.upper() for k in keys}
    assert sorted(calls) == sorted(keys)
