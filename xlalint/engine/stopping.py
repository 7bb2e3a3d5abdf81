"""Stopping means stopping: every write of a run passes one gate, and SIGINT or SIGTERM
close it before anything else happens.

A write (the rename, or an in-place write, of one fixed file) is done under the gate:
in the main process with SIGINT and SIGTERM held back for its few microseconds, in a
pool worker under a lock shared with the main process. Closing the gate (taking that
lock and setting a flag) therefore leaves every file as it was or completely written,
and counts exactly how many were written. Pool workers die with the main process
(``PR_SET_PDEATHSIG`` on Linux, and a thread watching the parent everywhere) and ignore
SIGINT (a terminal sends it to the whole process group: the main process decides).
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# How long closing the gate waits for a write under way (a write takes milliseconds).
CLOSE_TIMEOUT = 5.0
# How often a worker's watch thread looks at its parent, where no death signal exists.
WATCH_SECONDS = 0.5


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived: the run stops (a BaseException, so that no
    ``except Exception`` around a rule swallows it)."""

    def __init__(self, signum: int, written: int = 0):
        super().__init__(signum, written)
        self.signum, self.written = signum, written

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    def message(self) -> str:
        name = signal.Signals(self.signum).name
        files = f"{self.written} file{'s' if self.written != 1 else ''}"
        return f"xlalint: stopped by {name}: {files} written"


class WritesStopped(OSError):
    """A write asked for after the gate closed (an OSError: every writer reports those
    as "not written: <why>")."""

    def __init__(self) -> None:
        super().__init__(errno.ECANCELED, "the run was stopped before this file was written")


class WriteGate:
    """Counts the writes of a run and refuses them once closed. ``share()`` moves its
    state to memory a process pool's workers see (``attach`` in each worker)."""

    def __init__(self) -> None:
        self.closed = False
        self.written = 0
        self._lock: Any = None  # a multiprocessing lock once shared
        self._shared: Any = None  # [closed, written] in shared memory once shared
        self._parent: int | None = None  # in a worker: the main process

    def commit(self, write: Callable[[], None]) -> None:
        """Do ``write`` (one file's final step) unless the gate is closed."""
        if self._parent is not None:
            with self._lock:
                if self._shared[0] or os.getppid() != self._parent:
                    raise WritesStopped()
                write()
                self._shared[1] += 1
            return
        held = _hold_signals()
        try:
            if self.closed or (self._shared is not None and self._shared[0]):
                raise WritesStopped()
            write()
            self.written += 1
        finally:
            _release_signals(held)

    def open(self) -> None:
        """A new run: nothing written yet, writes allowed."""
        self.closed, self.written = False, 0
        if self._shared is not None:
            self._shared[0] = self._shared[1] = 0

    def close(self) -> int:
        """No write after this returns; the number of files written."""
        self.closed = True
        if self._shared is None:
            return self.written
        acquired = self._lock.acquire(timeout=CLOSE_TIMEOUT)  # a worker killed mid-write holds it
        try:
            self._shared[0] = 1
            return self.written + self._shared[1]
        finally:
            if acquired:
                self._lock.release()

    def share(self) -> tuple[Any, Any, int]:
        """What a pool worker's initializer passes to :meth:`attach`."""
        if self._shared is None:
            import multiprocessing

            self._lock = multiprocessing.Lock()
            self._shared = multiprocessing.Array("q", [int(self.closed), 0], lock=False)
        return self._lock, self._shared, os.getpid()

    def attach(self, lock: Any, shared: Any, parent: int) -> None:
        self._lock, self._shared, self._parent = lock, shared, parent


#: The gate of this process's run (one run per process: the CLI, or one pool worker).
GATE = WriteGate()


def _hold_signals() -> set[signal.Signals] | None:
    with contextlib.suppress(AttributeError, ValueError, OSError):  # no pthread_sigmask
        return signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    return None


def _release_signals(held: set[signal.Signals] | None) -> None:
    if held is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """SIGINT and SIGTERM raise :class:`Interrupted` in the main thread while the run
    lasts (elsewhere, a thread cannot take signals: nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        for other in STOP_SIGNALS:  # a second Ctrl-C must not cut the stopping short
            signal.signal(other, signal.SIG_IGN)
        raise Interrupted(signum)

    previous = {signum: signal.signal(signum, interrupt) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def worker_init(lock: Any, shared: Any, parent: int) -> None:
    """A pool worker's initializer: die with the parent, leave SIGINT to it, write
    through its gate."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            pr_set_pdeathsig = 1
            libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    GATE.attach(lock, shared, parent)
    if os.getppid() != parent:  # the parent died before the death signal was set
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True, name="xlalint-parent-watch").start()


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(WATCH_SECONDS)
    os._exit(1)


def stop_workers() -> None:
    """Kill this process's pool workers (the gate is closed: they write nothing more,
    and finishing their file would only delay the exit)."""
    import multiprocessing

    children = multiprocessing.active_children()
    for child in children:
        with contextlib.suppress(OSError, ValueError):
            child.kill()
    for child in children:
        child.join(timeout=CLOSE_TIMEOUT)
