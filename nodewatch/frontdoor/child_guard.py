"""A viewer the hub's front doors start ends when the hub ends, however the hub ends.

Why: a ``kill -9`` of the hub (or an OOM kill, a crash) gives its children no word. An SSH
session's viewer was re-parented to init with its pty gone, and spun at 60-90 % of a core for ever
(Textual's input thread selects on the dead terminal, which reads as end-of-file at once, again
and again). Under systemd the unit's cgroup cleans up; under tmux, nohup or a container without an
init nothing did. Two guards, each enough alone:

- ``die_with_parent``: the kernel sends the child SIGKILL when its parent goes
  (``PR_SET_PDEATHSIG``, set by the child itself at start, so the hub needs no code between fork
  and exec, unsafe in a threaded process). The kernel sends it when the parent *thread* that
  forked ends: the doors fork from their event loop's thread, which lives as long as the doors.
  A parent that died before the child set it has already re-parented the child: the child
  compares ``getppid()`` with the pid the door put in its environment and exits if they differ.
- ``exit_on_hangup``: a thread that waits for the terminal (or the web door's pipe) to hang up
  and exits the process then; the same ending whether the parent died or merely closed it.

The door puts ``NODEWATCH_PARENT_PID`` in its children's environment (``parent_environment``);
``guard_viewer`` applies both guards where it is set, and does nothing for a viewer a person
started in their own terminal.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import signal
import threading
from collections.abc import Mapping

PARENT_VARIABLE = "NODEWATCH_PARENT_PID"
PR_SET_PDEATHSIG = 1
EXIT_PARENT_GONE = 4
"""The exit status of a viewer whose parent (the door) or terminal went away."""


def parent_environment() -> dict[str, str]:
    """What a door adds to a child's environment so that the child can watch for its death."""
    return {PARENT_VARIABLE: str(os.getpid())}


def _prctl_pdeathsig(sig: int) -> bool:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):  # not Linux: the hangup guard and getppid check remain
        return False


def die_with_parent(expected_parent: int, sig: int = signal.SIGKILL) -> bool:
    """Ask the kernel for ``sig`` when our parent ends; exit now if it already has (we were
    re-parented before asking). True when the kernel took the request."""
    took = _prctl_pdeathsig(sig)
    if os.getppid() != expected_parent:
        os._exit(EXIT_PARENT_GONE)
    return took


def _watch_hangup(fd: int, expected_parent: int | None) -> None:
    poller = select.poll()
    # No POLLIN: only a hang-up or an error wakes this thread, never a keystroke.
    poller.register(fd, select.POLLHUP | select.POLLERR | select.POLLNVAL)
    while True:
        try:
            events = poller.poll(1000)
        except InterruptedError:
            continue
        except OSError:
            os._exit(EXIT_PARENT_GONE)
        if any(ev & (select.POLLHUP | select.POLLERR | select.POLLNVAL) for _, ev in events):
            os._exit(EXIT_PARENT_GONE)
        if expected_parent is not None and os.getppid() != expected_parent:
            os._exit(EXIT_PARENT_GONE)  # where PR_SET_PDEATHSIG is not to be had


def exit_on_hangup(fd: int = 0, expected_parent: int | None = None) -> threading.Thread:
    """Start the thread that ends the process when ``fd`` hangs up (or, once a second, when the
    parent ``expected_parent`` is gone)."""
    thread = threading.Thread(target=_watch_hangup, args=(fd, expected_parent),
                              name="nodewatch-hangup", daemon=True)
    thread.start()
    return thread


def guard_viewer(environ: Mapping[str, str] | None = None) -> bool:
    """In a viewer a door started (``NODEWATCH_PARENT_PID`` set): both guards. True if applied.
    The variable is taken out of ``os.environ``: a process this one starts is not the door's."""
    text = (os.environ.pop(PARENT_VARIABLE, "") if environ is None else environ.get(PARENT_VARIABLE, ""))
    if not text.isdigit():
        return False
    parent = int(text)
    die_with_parent(parent)
    exit_on_hangup(0, parent)
    return True
