"""solve(..., progress=...): live counts from the CPU handler's worker threads, polled by Python.

The live tests solve an ensemble long enough (some 0.3 s on two threads) for the poller, made
fast here, to see counts strictly between 0 and N while the solve is still running.
"""

import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shoal
from shoal.ode import _progress

from ode_problems import decay, lorenz

N = 512
RNG = np.random.default_rng(0)
Y0 = RNG.uniform(-10.0, 10.0, (N, 3))
P = np.tile([10.0, 28.0, 8.0 / 3.0], (N, 1)) * RNG.uniform(0.9, 1.1, (N, 1))
T = jnp.linspace(0.0, 20.0, 3)
OPTS = {"rtol": 1e-8, "atol": 1e-8}


def _on_cpu() -> bool:
    return next(iter(jnp.zeros(()).devices())).platform == "cpu"


@pytest.fixture
def fast_poll(monkeypatch):
    monkeypatch.setattr(_progress, "POLL_INTERVAL", 0.002)
    monkeypatch.setenv("SHOAL_NUM_THREADS", "2")  # the solve lasts on many-core machines too


class Recorder:
    def __init__(self):
        self.calls = []
        self.lock = threading.Lock()

    def __call__(self, done, total):
        assert type(done) is int and type(total) is int
        with self.lock:
            self.calls.append((time.perf_counter(), done, total))

    def sequences(self, total):
        """The recorded (done, total) pairs split after each final (total, total)."""
        out, current = [], []
        for _, done, n in self.calls:
            current.append((done, n))
            if (done, n) == (total, total):
                out.append(current)
                current = []
        assert not current, f"calls after the last (total, total): {current}"
        return out


def _check_sequence(seq, total):
    dones = [d for d, _ in seq]
    assert all(n == total for _, n in seq)
    assert dones == sorted(dones), dones
    assert seq[-1] == (total, total) and dones.count(total) == 1


def _no_sessions_left():
    assert not _progress._sessions
    assert not [t for t in threading.enumerate() if t.name.startswith("shoal-progress")]


def test_callable_reports_live_while_solving_eagerly(fast_poll):
    rec = Recorder()
    start = time.perf_counter()
    ys, stats = shoal.ode.solve(lorenz, Y0, T, P, return_stats=True, progress=rec, **OPTS)
    returned = time.perf_counter()
    (seq,) = rec.sequences(N)
    _check_sequence(seq, N)
    if _on_cpu():
        live = [d for t, d, _ in rec.calls if start < t < returned and 0 < d < N]
        assert live, f"no count strictly between 0 and {N} while running: {rec.calls}"
    assert rec.calls[-1][0] <= returned  # an eager solve returns after its final report
    _no_sessions_left()

    ref, ref_stats = shoal.ode.solve(lorenz, Y0, T, P, return_stats=True, **OPTS)
    np.testing.assert_array_equal(np.asarray(ys), np.asarray(ref))
    for key in ref_stats:
        np.testing.assert_array_equal(np.asarray(stats[key]), np.asarray(ref_stats[key]))


def test_jit_gives_every_execution_its_own_sequence(fast_poll):
    rec = Recorder()
    run = jax.jit(lambda y0, p: shoal.ode.solve(lorenz, y0, T, p, progress=rec, **OPTS))
    first = run(Y0, P).block_until_ready()
    second = run(Y0, P).block_until_ready()
    seqs = rec.sequences(N)
    assert len(seqs) == 2
    for seq in seqs:
        _check_sequence(seq, N)
        if _on_cpu():
            assert any(0 < d < N for d, _ in seq), seq
    np.testing.assert_array_equal(np.asarray(first), np.asarray(second))
    np.testing.assert_array_equal(
        np.asarray(first), np.asarray(shoal.ode.solve(lorenz, Y0, T, P, **OPTS)))
    _no_sessions_left()


def test_callbacks_run_when_outputs_are_unused():
    rec = Recorder()

    @jax.jit
    def ignore(y0):
        shoal.ode.solve(decay, y0, jnp.linspace(0.0, 1.0, 3), jnp.ones((8, 1)), progress=rec)
        return jnp.zeros(())

    ignore(jnp.ones((8, 1))).block_until_ready()
    assert rec.sequences(8) and rec.calls[-1][1:] == (8, 8)
    _no_sessions_left()


def test_bar_on_stderr_ends_at_total(capfd):
    y0 = jnp.linspace(1.0, 2.0, 40)[:, None]
    ys = shoal.ode.solve(decay, y0, jnp.linspace(0.0, 1.0, 3), jnp.ones((40, 1)),
                         progress=True)
    ref = shoal.ode.solve(decay, y0, jnp.linspace(0.0, 1.0, 3), jnp.ones((40, 1)))
    np.testing.assert_array_equal(np.asarray(ys), np.asarray(ref))
    err = capfd.readouterr().err
    final = err.rstrip().split("\r")[-1]  # tqdm redraws the line after a carriage return
    assert final.startswith("shoal.ode.solve: 100%") and "40/40" in final, err
    _no_sessions_left()


def test_vmap_is_one_bar_for_the_folded_ensemble():
    rec = Recorder()
    y0 = jnp.linspace(1.0, 2.0, 3 * 8).reshape(3, 8, 1)

    def one(y0):
        return shoal.ode.solve(decay, y0, jnp.linspace(0.0, 1.0, 3), jnp.ones((8, 1)),
                               progress=rec)

    ys = jax.vmap(one)(y0)
    (seq,) = rec.sequences(24)
    _check_sequence(seq, 24)
    np.testing.assert_array_equal(np.asarray(ys), np.asarray(jax.vmap(
        lambda y: shoal.ode.solve(decay, y, jnp.linspace(0.0, 1.0, 3), jnp.ones((8, 1))))(y0)))
    _no_sessions_left()


def test_gradient_with_progress():
    rec = Recorder()

    def loss(p):
        ys = shoal.ode.solve(decay, jnp.ones((8, 1)), jnp.linspace(0.0, 1.0, 3), p,
                             progress=rec)
        return jnp.sum(ys[:, -1])

    p = jnp.linspace(0.5, 1.5, 8)[:, None]
    g = jax.grad(loss)(p)
    np.testing.assert_allclose(np.asarray(g)[:, 0], -np.exp(-np.asarray(p)[:, 0]), rtol=1e-5)
    (seq,) = rec.sequences(8)
    _check_sequence(seq, 8)
    _no_sessions_left()


def test_off_adds_no_callback():
    def run(progress):
        return str(jax.make_jaxpr(lambda y0: shoal.ode.solve(
            decay, y0, jnp.linspace(0.0, 1.0, 3), jnp.ones((4, 1)), progress=progress))(
                jnp.ones((4, 1))))

    assert "callback" not in run(False)
    assert "io_callback" in run(True)


@pytest.mark.parametrize("bad", ["yes", 1, None, 0.5])
def test_bad_progress_is_a_type_error(bad):
    with pytest.raises(TypeError, match="progress"):
        shoal.ode.solve(decay, jnp.ones((2, 1)), jnp.linspace(0.0, 1.0, 3), jnp.ones((2, 1)),
                        progress=bad)


def test_progress_in_signature_and_docs():
    import inspect

    param = inspect.signature(shoal.ode.solve).parameters["progress"]
    assert param.default is False and param.kind is inspect.Parameter.KEYWORD_ONLY
    assert "progress : bool or callable" in shoal.ode.solve.__doc__


def test_failed_eager_solve_releases_its_slot(monkeypatch):
    from shoal.ode import _solve

    def broken(*args, **kwargs):
        raise RuntimeError("solve failed")

    monkeypatch.setattr(_solve, "_run", broken)
    rec = Recorder()
    with pytest.raises(RuntimeError, match="solve failed"):
        shoal.ode.solve(decay, jnp.ones((4, 1)), jnp.linspace(0.0, 1.0, 3), jnp.ones((4, 1)),
                        progress=rec)
    assert rec.calls == [] or rec.calls[-1][1] < 4  # no final report for a failed solve
    _no_sessions_left()


def test_full_slot_table_solves_without_progress():
    from shoal.ode import _ode_ext

    taken = []
    while (slot := _ode_ext.progress_open()) >= 0:
        taken.append(slot)
    try:
        rec = Recorder()
        with pytest.warns(RuntimeWarning, match="progress slot"):
            ys = shoal.ode.solve(decay, jnp.ones((4, 1)), jnp.linspace(0.0, 1.0, 3),
                                 jnp.ones((4, 1)), progress=rec)
        np.testing.assert_allclose(np.asarray(ys)[:, -1, 0], np.exp(-1.0), rtol=1e-6)
        assert rec.calls == []
    finally:
        for slot in taken:
            _ode_ext.progress_close(slot)
    assert len(taken) == 256
