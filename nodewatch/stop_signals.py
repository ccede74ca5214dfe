"""Waiting for SIGTERM / SIGINT / SIGHUP in a long-running command, without a lock in the handler.

The obvious shape, ``signal.signal(SIGTERM, lambda *_: stop.set())`` with the main thread in
``while not stop.wait(1.0)``, can hang for good: Python runs a signal handler in the main thread
between two bytecodes, and ``Event.wait`` holds the event's own (non-reentrant) lock for a few
bytecodes on its way in and out. A signal that lands there runs ``stop.set()``, which waits for
that same lock in the same thread. It is rare per signal but not rare in a test suite under load:
a ``nodewatch hub`` restarted under CI once never exited its SIGTERM (a reproduction with a busy
waiter hangs in most of 20 tries).

``StopSignals`` takes the signals with a handler that only records the number and writes one byte
to a non-blocking pipe (no lock anywhere), and ``wait(timeout)`` selects on that pipe::

    with StopSignals() as signals:        # installed before anything can ask the process to stop
        while not signals.wait(1.0):
            ...                            # once a second: the command's own housekeeping
    # the previous handlers are back here (or: signals = StopSignals().install() ... .restore())

``dump_stacks_on_sigusr1()``: ``kill -USR1 PID`` writes every thread's stack to stderr (the
journal, for a hub under systemd) and the process goes on: how to see where a hub that seems stuck
is waiting, without a debugger on the machine.

Like ``loop_thread`` it is not domain logic and imports nothing of nodewatch: any command may use it.
"""

from __future__ import annotations

import contextlib
import faulthandler
import io
import os
import select
import signal
import sys
from types import FrameType
from typing import Any

DEFAULT_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class StopSignals:
    """Records the first of ``signals`` to arrive; ``wait`` returns True from then on."""

    def __init__(self, signals: tuple[signal.Signals, ...] = DEFAULT_SIGNALS) -> None:
        self.signals = signals
        self.received: int | None = None
        """The number of the first signal that arrived (None: none yet)."""
        self._previous: dict[int, Any] = {}
        self._r = self._w = -1

    def __enter__(self) -> StopSignals:
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.restore()

    def install(self) -> StopSignals:
        """Take the signals (from the main thread, as ``signal.signal`` requires); returns self."""
        self._r, self._w = os.pipe()
        os.set_blocking(self._w, False)
        for sig in self.signals:
            self._previous[sig] = signal.signal(sig, self._on_signal)
        return self

    def restore(self) -> None:
        """Give the signals back to their previous handlers; idempotent."""
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()
        for fd in (self._r, self._w):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._r = self._w = -1

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        # No lock may be taken here (see the module docstring): an attribute and a pipe write.
        if self.received is None:
            self.received = signum
        with contextlib.suppress(OSError):  # a full pipe already says it
            os.write(self._w, b"\0")

    def wait(self, timeout: float | None = None) -> bool:
        """Whether a stop signal has arrived, waiting up to ``timeout`` seconds (None: for one)."""
        if self.received is not None:
            return True
        try:
            select.select([self._r], [], [], timeout)
        except InterruptedError:  # (PEP 475 retries; a handler that raised would land here)
            pass
        return self.received is not None


def dump_stacks_on_sigusr1() -> None:
    """``kill -USR1`` this process: every thread's Python stack to stderr, then on as before
    (``faulthandler``: written from the C handler, so it works while every thread is stuck)."""
    try:
        faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True, chain=False)
    except (AttributeError, ValueError, io.UnsupportedOperation):
        pass  # stderr is no file (a command run inside a test that captures it): nothing to write to
