"""The dashboard's terminal driver: one whose terminal goes away without telling it ends as SIGHUP
would end it, and one whose standard error is not a terminal draws on its standard output.

SIGHUP reaches a dashboard whose terminal closes only when it is that terminal's controlling
process or in its foreground group (``NodewatchApp._exit_on_hang_up`` takes it then). Started under a
process that stays (``make demo``, a shell script with more to do, ``sudo``, a supervisor), or on a
terminal it holds without controlling it (a pty handed to a child), the dashboard is told nothing:
what it meets is its terminal failing. Textual's writer thread died on the first failed write
(``EIO``), the next thirty writes filled its queue, and the event loop blocked on the one after
for good, while the input thread read end-of-file in a loop: a process at 94 % of a core until
killed (seen: ``make demo`` in tmux, the tmux server killed), holding all it held (a live source's
watches on the API server, a recording never closed, the credentials it wrote for the session).

``DashboardDriver`` is Textual's ``LinuxDriver`` with three changes: its output (``TerminalOutput``)
drops what a gone terminal cannot take instead of raising into the writer thread, so the loop never
blocks on a write; a failed write, or a hung-up terminal on input (a ``poll`` that wakes on
nothing else: a paused replay may write nothing for minutes), asks the app to exit from the
loop's own thread, which runs the command's usual ending (the sources stop, the recording is closed
whole, the exit handlers remove what the process wrote); and it draws where a terminal is
(``screen_file``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import sys
import threading
from typing import IO, Any, Callable, cast

from textual.drivers.linux_driver import LinuxDriver

GONE_ERRNOS = frozenset({errno.EIO, errno.EPIPE, errno.ENXIO, errno.ENODEV, errno.EBADF})
"""What a write to a terminal that is no longer there fails with (a hung-up pty: EIO; a closed pipe:
EPIPE). Any other error is raised as before."""
CHECK_SECONDS = 0.5
"""How long the watch waits in one ``poll`` for a hang-up before it looks whether the app has stopped."""
_HUNG_UP = select.POLLHUP | select.POLLERR | select.POLLNVAL


class TerminalOutput:
    """The terminal as Textual's writer thread writes to it: a write or flush that fails because the
    terminal is gone calls ``gone`` (once) and everything after is dropped, so the thread lives on
    and keeps emptying its queue."""

    def __init__(self, file: IO[str], gone: Callable[[], None]) -> None:
        self._file = file
        self._gone = gone
        self.lost = False
        """The terminal failed a write: nothing is written to it any more."""

    def write(self, text: str) -> int:
        if not self.lost:
            try:
                self._file.write(text)
            except OSError as exc:
                self._lose(exc)
        return len(text)

    def flush(self) -> None:
        if not self.lost:
            try:
                self._file.flush()
            except OSError as exc:
                self._lose(exc)

    def _lose(self, exc: OSError) -> None:
        if exc.errno not in GONE_ERRNOS:
            raise exc
        self.lost = True
        self._gone()

    def fileno(self) -> int:
        return self._file.fileno()

    def isatty(self) -> bool:
        return self._file.isatty()


def screen_file() -> IO[str]:
    """Where the screen is drawn: Textual's choice, standard error, while it is a terminal; standard
    output when only that one is (``nodewatch demo 2>debug.log`` drew the whole dashboard into the
    log and left the terminal blank; the commands refuse a dashboard whose standard output is not a
    terminal, so one of the two always is)."""
    err, out = sys.__stderr__, sys.__stdout__
    if err is not None and not _is_tty(err) and out is not None and _is_tty(out):
        return out
    return cast(IO[str], err)


def _is_tty(f: IO[str]) -> bool:
    try:
        return f.isatty()
    except (OSError, ValueError):  # (closed)
        return False


def hung_up(fd: int, wait: float = 0.0) -> bool:
    """Whether the terminal on ``fd`` has hung up (its other side closed), waiting up to ``wait``
    seconds for it: a keystroke does not wake the wait (no POLLIN asked; ``frontdoor/child_guard``
    watches a door viewer's terminal the same way, and ends it at once)."""
    poller = select.poll()
    poller.register(fd, select.POLLHUP)  # (POLLHUP, POLLERR and POLLNVAL are reported whatever is asked)
    return any(events & _HUNG_UP for _, events in poller.poll(int(wait * 1000)))


class DashboardDriver(LinuxDriver):
    """``LinuxDriver``, ending the app when its terminal is gone (see the module docstring)."""

    def __init__(self, app: Any, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)  # (``Driver`` keeps the running loop: ``_loop``)
        self.output = TerminalOutput(screen_file(), self._terminal_gone)
        self._file = cast(Any, self.output)  # what ``start_application_mode`` gives the writer thread
        self._gone = False
        self._stopping = threading.Event()

    def start_application_mode(self) -> None:
        super().start_application_mode()
        self._stopping = threading.Event()  # (a new one each time: a suspended app starts again)
        if os.isatty(self.fileno):  # (stdin a pipe at its end is no hang-up: the screen is still there)
            threading.Thread(target=self._watch, args=(self._stopping,), name="nodewatch-terminal-watch",
                             daemon=True).start()

    def stop_application_mode(self) -> None:
        self._stopping.set()
        super().stop_application_mode()

    def _watch(self, stopping: threading.Event) -> None:
        while not stopping.is_set():
            try:
                gone = hung_up(self.fileno, CHECK_SECONDS)
            except (OSError, ValueError):
                return
            if gone and not stopping.is_set():
                self._terminal_gone()
                return

    def _terminal_gone(self) -> None:
        """From any thread: the app exits, on the loop's thread, as ``q`` or SIGHUP ends it."""
        if self._gone:
            return
        self._gone = True
        self.output.lost = True
        with contextlib.suppress(RuntimeError):  # (the loop has closed: the app has ended)
            self._loop.call_soon_threadsafe(self._app.exit)
