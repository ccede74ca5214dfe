"""The Node list, read and decoded in a child process, so the dashboard's process keeps its core.

Why: a streaming list of 65,000 production Nodes is 670 MB of JSON. Reading it over TLS, decoding
it and building the records took ~1.9 s of one core, all of it holding the dashboard process's
GIL, while the same process paints its first frame and lists the Leases: the complete frame came
at ~4 s. Here a child process (its own interpreter, its own GIL, the machine's other core) does the
GET, the TLS, the chunk framing and the typed decoding, and sends the records back pickled in
batches; the dashboard process only unpickles them (0.08-0.16 s of CPU for 65,000,
bench/decode_build.py) and applies them.

The child does one streaming list (``sendInitialEvents``) and nothing else: the reflector, which
reads the bookmark that ends the initial events (it comes back in a ``lines`` frame), stops the
child there and watches on from that bookmark's resourceVersion in its own process, as after any
list. Everything but the happy path stays in
``Reflector``: a child that cannot start, a request that is not answered with 2xx, a stream that
breaks, make the reflector do what it did before in its own process (which then meets the same
answer and handles it: 401 reloads, 403, 410, a server that does not offer streaming lists).

Protocol, on the child's stdin and stdout:

- parent -> child: one pickled ``Request``, then nothing; when the parent closes stdin (or dies),
  the child exits at once.
- child -> parent: frames of a 4-byte little-endian length and a pickled tuple:
  ``("ok",)`` once the answer's status is 2xx; ``("http", status, reason, body, retry_after)``
  otherwise (and the child ends); ``("events", [(type, record, resourceVersion), ...])`` typed events in stream order;
  ``("lines", bytes)`` a block of whole lines the types refused (a bookmark, an ERROR, an odd
  object), for the reflector to read line by line; ``("silent",)`` when nothing came for the
  request's read timeout (the child ends; the reflector decides what that silence means);
  ``("error", text)`` (the child ends);
  ``("end",)`` when the body ended.

The credentials (the request's headers, the TLS settings of the connection pool) go to the child
over its stdin, never on its command line or in its environment.
"""

from __future__ import annotations

import os
import pickle
import struct
import subprocess
import sys
import threading
from dataclasses import dataclass
from typing import Any, Iterator

ENV_SWITCH = "NODEWATCH_LIST_WORKER"
"""``NODEWATCH_LIST_WORKER=0`` lists in the dashboard's own process (for comparison, or where a
child process cannot be started)."""
BATCH = 1000
"""Records a frame carries: big enough that a frame's fixed cost is small (pickling 25-record
frames cost twice as much), small enough that the records arrive while the list is still going."""
NICE = 10
"""The child's CPU priority below the dashboard's: when the cores are busy (a local API server, a
small machine), the dashboard's own process (its frames, the Lease list) comes first and the list
uses what is left. Measured at 65k on 2 cores with the API server on the same machine: first
useful frame 0.93-0.96 s at nice 10, 1.07-1.95 s at nice 0; complete frame 2.4-2.6 s either way."""
PYTHON = sys.executable
"""The interpreter the child runs on: this one."""
_FRAME = struct.Struct("<I")


MAX_AT_ONCE = max(1, (os.cpu_count() or 2) - 1)
"""Children listing at the same time, in this process (a hub or dashboard over 20 clusters starts
20 lists at once): one core is the dashboard's; a list that finds no free slot is read in the
dashboard's process, as before."""
_slots = threading.BoundedSemaphore(MAX_AT_ONCE)
peaks: list[int] = []
"""Each child's own peak memory (bytes, ``VmHWM``, read as it is stopped; Linux): for the
benchmarks, which count the program's memory with its children's."""


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "1").lower() not in ("0", "false", "no", "off") and bool(PYTHON)


@dataclass(frozen=True)
class Request:
    """What the child needs for the one GET: built by ``Connection.worker_request``."""

    url: str
    headers: dict[str, str]
    pool: dict[str, Any]
    """The keyword arguments of the parent's urllib3 ``PoolManager`` (TLS verification, CA, client
    certificate files): the child's connection is configured exactly like the parent's."""
    resource: str
    connect_timeout: float
    read_timeout: float
    read_chunk: int


class WorkerFailed(Exception):
    """The child process could not be started, or ended without saying why."""


class Busy(Exception):
    """Every slot for a child is taken: list in this process."""


PIPE_BYTES = 1 << 20
"""The size of the pipe the records come back through: Linux's default is 64 KB, and 1 MB is the
most an unprivileged process may ask for by default (``/proc/sys/fs/pipe-max-size``). A frame of
1,000 records is ~190 KB, so a 64 KB pipe stopped the child at every frame until the dashboard's
process read it, and the list waited on every moment that process spent elsewhere (the first
frame's evaluation, a paint). With room for five frames the child reads on: the complete frame
at 65k came ~0.2 s sooner (median of 8 starts 2.71 -> 2.53 s, the slowest 3.03 -> 2.68 s)."""


def _widen(pipe: Any) -> None:
    """``PIPE_BYTES`` for ``pipe`` where the system allows it; as it is elsewhere."""
    try:
        import fcntl

        fcntl.fcntl(pipe.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (ImportError, AttributeError, OSError, ValueError):
        pass  # not Linux, or a lower limit: the list is as fast as before


class ListWorker:
    """The parent's end: starts the child, gives it the request, reads its frames."""

    def __init__(self, request: Request) -> None:
        if not _slots.acquire(blocking=False):
            raise Busy(f"{MAX_AT_ONCE} list workers busy")
        self._slot = True
        try:
            self._start(request)
        except BaseException:
            self._release()
            raise

    def _release(self) -> None:
        if self._slot:
            self._slot = False
            _slots.release()

    def _start(self, request: Request) -> None:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ)
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        try:
            self._proc = subprocess.Popen(  # our own interpreter and module
                [PYTHON, "-m", "nodewatch.sources.list_worker"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                close_fds=True, env=env)
        except OSError as exc:
            raise WorkerFailed(f"cannot start the list worker: {exc}") from None
        self._lock = threading.Lock()
        self._closed = False
        _widen(self._proc.stdout)
        try:
            assert self._proc.stdin is not None
            self._proc.stdin.write(pickle.dumps(request, 5))
            self._proc.stdin.flush()
        except OSError as exc:
            self.shutdown()
            raise WorkerFailed(f"the list worker did not take its request: {exc}") from None

    @property
    def pid(self) -> int:
        return self._proc.pid

    def frames(self) -> Iterator[tuple]:
        """The child's frames, in order, until it ends (or ``shutdown``). Raises WorkerFailed
        when the child ends without an ``end``, ``http`` or ``error`` frame."""
        out = self._proc.stdout
        assert out is not None
        while True:
            head = out.read(4)
            if len(head) < 4:
                if self._closed:
                    return
                code = self._proc.poll()
                raise WorkerFailed(f"the list worker ended without a word (exit status {code})")
            (n,) = _FRAME.unpack(head)
            data = out.read(n)
            if len(data) < n:
                if self._closed:
                    return
                raise WorkerFailed("the list worker ended in the middle of a frame")
            frame = pickle.loads(data)  # from our own child process
            yield frame
            if frame[0] in ("end", "http", "error", "silent"):
                return

    def shutdown(self) -> None:
        """Stop the child now (safe from any thread, more than once): its stdin closes and it
        exits; a read blocked in ``frames`` returns."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        peak = _peak_of(self._proc.pid)
        if peak:
            peaks.append(peak)
            del peaks[:-100]
        try:
            if self._proc.stdin is not None:
                self._proc.stdin.close()
        except OSError:
            pass
        try:
            self._proc.kill()
        except OSError:
            pass

    def close(self) -> None:
        """``shutdown`` and reap the child."""
        self.shutdown()
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._release()


# --- the child ------------------------------------------------------------------------------------


def _send(frame: tuple) -> None:
    data = pickle.dumps(frame, 5)
    view = memoryview(_FRAME.pack(len(data)) + data)
    while view:
        view = view[os.write(1, view):]


def _peak_of(pid: int) -> int:
    """A running process's peak memory (bytes, ``VmHWM``); 0 where /proc cannot tell."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _exit_when_parent_goes() -> None:
    """The parent closed our stdin (it is done with us, or it died): exit at once, even in the
    middle of a read from the API server."""
    try:
        while os.read(0, 65536):
            pass
    except OSError:
        pass
    os._exit(0)


def _blocks(tail: bytes, chunk: bytes, cut: int) -> list[Any]:
    """The whole lines of ``tail + chunk[:cut]`` as at most two blocks, without copying the chunk:
    the line ``tail`` began, completed from the chunk (a few KB), then the rest of the chunk's
    whole lines as a view. Why: a read is 256 KB and a Node ~10 KB, so nearly every read ends in the
    middle of a line; joining each read to the last one's tail and cutting the whole lines out
    copied every byte of the 670 MB list twice more, a fifth of this process's time (py-spy at 65k,
    bench/README.md)."""
    view = memoryview(chunk)
    if not tail:
        return [view[:cut]]
    first = chunk.find(b"\n") + 1
    head = tail + chunk[:first]
    return [head, view[first:cut]] if first < cut else [head]


def _run(req: Request) -> None:
    import urllib3

    from ..core.wire import DECODERS, WireError
    from .chunked import BodyReader

    decoder = DECODERS[req.resource]
    pool = urllib3.PoolManager(**req.pool)
    try:
        resp = pool.request("GET", req.url, headers=req.headers, preload_content=False, retries=False,
                            timeout=urllib3.Timeout(connect=req.connect_timeout, read=req.read_timeout))
    except Exception as exc:  # noqa: BLE001 - the parent asks again itself and reports it
        _send(("error", f"{type(exc).__name__}"))
        return
    if not 200 <= resp.status <= 299:
        try:
            body = resp.read(64 * 1024)
        except Exception:  # noqa: BLE001
            body = b""
        _send(("http", resp.status, resp.reason, body, resp.headers.get("Retry-After")))
        return
    _send(("ok",))
    body = BodyReader(resp, req.read_chunk)
    tail = b""
    """The start of a line the last read cut off."""
    pending: list = []
    try:
        while True:
            chunk = body.read()
            if not chunk:
                if pending:
                    _send(("events", pending))
                _send(("end",))
                return
            cut = chunk.rfind(b"\n") + 1
            if not cut:  # no line ends here (a line longer than a read)
                tail += chunk
                continue
            for block in _blocks(tail, chunk, cut):
                try:
                    pending += decoder.decode_events(block)
                except WireError:
                    if pending:
                        _send(("events", pending))
                        pending = []
                    _send(("lines", bytes(block)))
            tail = chunk[cut:]
            if len(pending) >= BATCH:
                _send(("events", pending))
                pending = []
    except urllib3.exceptions.ReadTimeoutError:  # silent before the list's end: the parent decides
        if pending:
            _send(("events", pending))
        _send(("silent",))
    except Exception as exc:  # noqa: BLE001 - a broken stream: the parent says so and lists again
        if pending:
            _send(("events", pending))
        _send(("error", f"{type(exc).__name__}: {str(exc)[:200]}"))


def main() -> int:
    import gc

    gc.disable()  # short-lived, and what it builds has no cycles
    try:
        os.nice(NICE)
    except OSError:
        pass
    try:
        req = pickle.load(sys.stdin.buffer)  # from our parent
    except Exception:  # noqa: BLE001
        return 2
    threading.Thread(target=_exit_when_parent_goes, daemon=True).start()
    try:
        _run(req)
    except BrokenPipeError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
