"""One command on its own pseudo-terminal, driven from the event loop (an SSH session's viewer).

The child gets a new session and the pty's slave end as stdin, stdout and stderr. It gets no
controlling terminal (that would need code between fork and exec, unsafe in a threaded hub), so
what the kernel would do for a controlling terminal is done here by hand: a resize sends SIGWINCH
to the child's process group, and closing sends SIGHUP, then SIGKILL to one that lingers.

Output flows only as fast as the reader takes it: ``pause()`` stops reading the pty, the child's
writes then block, and a viewer's own backpressure (the hub drops a slow viewer's queue) does the
rest. Nothing here buffers without bound except the client's keystrokes, which are small.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import os
import pty
import signal
import struct
import termios
from collections.abc import Callable, Mapping, Sequence

READ_SIZE = 65536
HANGUP_GRACE_SECONDS = 3.0
"""How long a child has between SIGHUP and SIGKILL."""


def set_winsize(fd: int, cols: int, rows: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", max(rows, 1), max(cols, 1), 0, 0))


class PtyChild:
    """A running command on a pty. Build it with ``await PtyChild.spawn(...)``."""

    def __init__(self, proc: asyncio.subprocess.Process, master: int,
                 on_output: Callable[[bytes], None]) -> None:
        self.proc = proc
        self._master = master
        self._on_output = on_output
        self._loop = asyncio.get_running_loop()
        self._pending = bytearray()
        self._reading = False
        self._eof = asyncio.Event()
        self._closed = False

    @classmethod
    async def spawn(cls, argv: Sequence[str], *, cols: int, rows: int, env: Mapping[str, str],
                    cwd: str | None, on_output: Callable[[bytes], None]) -> PtyChild:
        master, slave = pty.openpty()
        try:
            set_winsize(slave, cols, rows)
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=slave, stdout=slave, stderr=slave, env=dict(env), cwd=cwd,
                start_new_session=True, close_fds=True)
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)
        os.set_blocking(master, False)
        child = cls(proc, master, on_output)
        child.resume()
        return child

    # --- output -------------------------------------------------------------------------------

    def _readable(self) -> None:
        try:
            data = os.read(self._master, READ_SIZE)
        except BlockingIOError:
            return
        except OSError as exc:  # EIO: every slave end is closed, the child is gone
            if exc.errno != errno.EIO:
                raise
            data = b""
        if not data:
            self.pause()
            self._eof.set()
            return
        self._on_output(data)

    def pause(self) -> None:
        """Stop reading the child's output (the client cannot take more yet)."""
        if self._reading:
            self._loop.remove_reader(self._master)
            self._reading = False

    def resume(self) -> None:
        if not self._reading and not self._eof.is_set() and not self._closed:
            self._loop.add_reader(self._master, self._readable)
            self._reading = True

    # --- input and size -----------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        """Keystrokes from the client to the child's terminal."""
        if self._closed:
            return
        self._pending += data
        self._flush()

    def _flush(self) -> None:
        try:
            while self._pending:
                n = os.write(self._master, self._pending)
                del self._pending[:n]
        except BlockingIOError:
            self._loop.add_writer(self._master, self._flush)
            return
        except OSError:
            self._pending.clear()
        self._loop.remove_writer(self._master)

    def resize(self, cols: int, rows: int) -> None:
        if self._closed:
            return
        set_winsize(self._master, cols, rows)
        self._signal(signal.SIGWINCH)

    def _signal(self, sig: int) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)

    # --- ending -------------------------------------------------------------------------------

    async def wait(self) -> int:
        """The child's exit code (negative: the signal that ended it), once its output has been
        read to the end; the pty is closed after."""
        code = await self.proc.wait()
        # What the child wrote just before it exited is still in the pty: read it, but do not wait
        # for a grandchild that may hold the terminal open.
        if self._reading:  # paused by the client: the rest is not wanted in a hurry
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._eof.wait(), 1.0)
        self.close()
        return code

    async def terminate(self) -> None:
        """SIGHUP, as a closing terminal would; SIGKILL after a grace period; then close."""
        self._signal(signal.SIGHUP)
        try:
            await asyncio.wait_for(self.proc.wait(), HANGUP_GRACE_SECONDS)
        except asyncio.TimeoutError:
            self._signal(signal.SIGKILL)
            await self.proc.wait()
        self.close()

    def close(self) -> None:
        if self._closed:
            return
        self.pause()
        self._loop.remove_writer(self._master)
        self._closed = True
        os.close(self._master)
