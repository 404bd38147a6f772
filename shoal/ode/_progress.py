"""Live progress of a solve: ``solve(..., progress=True)`` (a tqdm bar) or ``progress=callable``.

The extension keeps a process-wide table of counters (``src/ode/progress.hpp``). At RUN time,
each execution of a solve with progress on:

1. ``begin``: an ``io_callback`` claims a free slot and starts a polling thread; its result, the
   slot as int32 ``(1,)``, is the solve's ``progress`` operand, so the data dependency orders the
   claim before the solve (eagerly and under ``jit``, each execution gets its own slot and bar);
2. the CPU handler adds every finished chunk of trajectories to the slot's ``done`` counter (and
   its trajectory count to ``total`` when it starts), which the thread polls every
   ``POLL_INTERVAL`` s, updating the bar or calling ``progress(done, total)`` while it runs;
3. ``end``: a second ``io_callback`` takes the solve's status (a data dependency: it runs after
   the solve), stops the thread, reports ``(total, total)`` (the bar ends at total/total) and
   frees the slot. It is a ``custom_vmap`` function: under ``vmap`` the whole folded ensemble
   (one call of the handler) is one bar, closed once.

``io_callback`` is effectful, so neither callback is dead-code-eliminated when the solve's
outputs are unused. Without progress nothing of this exists: the operand is a constant -1.
A GPU solve has no live count (the handler ignores the slot): its bar jumps to done at the end.
"""

from __future__ import annotations

import threading
import warnings

import jax
import numpy as np
from jax.custom_batching import custom_vmap
from jax.experimental import io_callback

from shoal.ode import _ode_ext

POLL_INTERVAL = 0.1  # seconds between polls of a running solve's counter

_TOKEN = jax.ShapeDtypeStruct((1,), np.int32)


def check(progress):
    """``progress`` as the solve keyword takes it: False/True or a callable (else TypeError)."""
    if isinstance(progress, (bool, np.bool_)) or callable(progress):
        return progress
    raise TypeError(f"progress must be a bool or a callable(done, total); got "
                    f"{type(progress).__name__}")


class _Session:
    """One execution's live progress: the slot, the polling thread and the bar or callable."""

    def __init__(self, slot: int, total: int, show):
        self.slot, self.total, self.show = slot, total, show
        self.bar = None
        if show is None:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc="shoal.ode.solve", unit="traj")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name=f"shoal-progress-{slot}",
                                        daemon=True)
        self._thread.start()

    def _report(self, done: int, total: int):
        if self.bar is None:
            self.show(done, total)
            return
        if self.bar.total != total:
            self.bar.total = total
        self.bar.update(done - self.bar.n)

    def _poll(self):
        last = None
        while not self._stop.wait(POLL_INTERVAL):
            total = _ode_ext.progress_total(self.slot)  # 0 until the handler starts
            done = _ode_ext.progress_done(self.slot)
            if total > 0 and done != last and done < total:  # (total, total) comes from finish()
                try:
                    self._report(done, total)
                except Exception as err:  # noqa: BLE001 - a failing reporter ends live updates
                    warnings.warn(f"shoal.ode.solve: progress reporting failed: {err!r}",
                                  RuntimeWarning, stacklevel=1)
                    return
                last = done

    def finish(self, total: int | None):
        """Stops polling, reports (total, total) unless total is None (abandoned), frees the
        slot."""
        self._stop.set()
        self._thread.join()
        try:
            if total is not None:
                self._report(total, total)
        finally:
            if self.bar is not None:
                self.bar.close()
            _ode_ext.progress_close(self.slot)


_sessions: dict[int, _Session] = {}
_lock = threading.Lock()


class _Open:
    """The opening callback (equal for the same reporter and size, so eager solves reuse its
    compiled call)."""

    def __init__(self, show, total: int):
        self.show, self.total = show, total

    def __eq__(self, other):
        return (type(other) is _Open and other.show is self.show
                and other.total == self.total)

    def __hash__(self):
        return hash((id(self.show), self.total))

    def __call__(self):
        slot = _ode_ext.progress_open()
        if slot < 0:
            warnings.warn("shoal.ode.solve: every progress slot is in use; this solve runs "
                          "without progress", RuntimeWarning, stacklevel=1)
        else:
            session = _Session(slot, self.total, self.show)
            with _lock:
                _sessions[slot] = session
        return np.array([slot], np.int32)


def _release(token, total: int | None):
    with _lock:
        session = _sessions.pop(int(np.asarray(token).reshape(-1)[0]), None)
    if session is not None:
        session.finish(total)


def _finish(token, status):
    _release(token, int(np.size(status)))
    return np.zeros((), np.int32)


@custom_vmap
def _close(token, status):
    return io_callback(_finish, jax.ShapeDtypeStruct((), np.int32), token, status)


@_close.def_vmap
def _close_batched(axis_size, in_batched, token, status):
    """One bar for the folded ensemble: the handler solved every batch in one call."""
    if in_batched[0]:  # the same slot in every batch (it is claimed outside the vmap)
        token = token[0]
    if in_batched[1]:
        status = status.reshape(-1)
    return _close(token, status), False


def begin(progress, total: int):
    """The slot operand of a solve of ``total`` trajectories with progress on (``True``: a tqdm
    bar, else a callable(done, total)), claimed at run time."""
    show = None if progress is True or isinstance(progress, np.bool_) else progress
    return io_callback(_Open(show, int(total)), _TOKEN)


def end(token, status):
    """After the solve (``status`` is its output): ends the bar at (total, total)."""
    _close(token, status)


def abandon(token):
    """An eager solve failed after ``begin``: end its session without a final report."""
    try:
        value = np.asarray(token)
    except Exception:  # noqa: BLE001 - a tracer: the execution never started here
        return
    _release(value, None)


def reported(progress, total: int, run):
    """``run(slot)``'s outputs (the solve's: ys, accepted, rejected, status, ...) with live
    progress when ``progress`` is on (else ``run(None)``: no callback at all)."""
    if not progress:
        return run(None)
    slot = begin(progress, total)
    try:
        outputs = run(slot)
        end(slot, outputs[3])
    except BaseException:
        abandon(slot)
        raise
    return outputs
