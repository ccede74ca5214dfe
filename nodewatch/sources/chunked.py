"""A watch stream's body, read in C: the HTTP chunk framing decoded here.

Why: every watch stream is ``Transfer-Encoding: chunked``. Read through urllib3's ``read1``, each
TLS record (16 KB) goes up through urllib3's and http.client's Python layers; 670 MB of Nodes (a
65,000-node streaming list) took 0.75-0.86 s of CPU that way, where the bare TLS reads took
0.32-0.39 s. Here the bytes that have arrived are taken from the buffered file at once
(``read1``), and the framing of every whole chunk among them is taken off: a busy watch, which the
API server flushes event by event, comes as many small chunks, and a read hands over all that are
here. The rest of a big chunk, whose length the server announced, is read with one ``read(n)``:
the buffered reader loops over the socket in C, so a 1 MB chunk costs a few Python calls, not 64.

A watch over TLS is read off its socket by ``tls_stream`` (its ``TlsResponse`` offers the file to
decode the framing from: ``chunked_file``), in reads that gather many chunks; their framing is then
split at once (``_whole_chunks``). A body that is not chunked, or a response whose body someone
already started to read, is read through urllib3's ``read1`` as before. Errors come out as
urllib3's (``ReadTimeoutError`` when the socket's read timeout passes, ``ProtocolError`` for a
broken framing or a body cut short), the exceptions the watch loop already tells apart.

A response read this way is left in a state urllib3 does not know about: close it, never hand its
connection back to the pool (``Reflector._watch`` closes every stream it read this way).
"""

from __future__ import annotations

import ssl
from typing import Any

import urllib3

READ_BYTES = 1 << 16
"""Bytes taken from the buffered file at a time (at least): the framing and payload of every chunk
that has arrived."""
FAST_SCAN_BYTES = 4096
"""From this many bytes received on, ``_take`` first takes the whole chunks among them at once
(``_whole_chunks``)."""
MAX_LINE = 4096
"""A chunk-size or trailer line longer than this is not HTTP (http.client allows 64 KB; a size line
is a few bytes)."""


class BodyReader:
    """The payload of one streamed response, in pieces of at most ``size`` bytes."""

    def __init__(self, resp: Any, size: int) -> None:
        self._resp = resp
        self._size = size
        self._left = 0
        """Bytes of the current chunk not read yet."""
        self._buf = bytearray()
        """Bytes received and not decoded yet (the framing of the chunks to come, their payload)."""
        self._crlf = False
        """The CRLF after a chunk's payload is the next thing to read."""
        self._trailer = False
        """The last chunk was read: trailer lines up to an empty one come next."""
        self._done = False
        encoding = (resp.headers.get("content-encoding") or "identity").lower() if hasattr(resp, "headers") else "?"
        self._file: Any
        if hasattr(resp, "chunked_file"):  # a response read off its socket (``tls_stream.TlsResponse``)
            self._file = resp.chunked_file() if encoding == "identity" else None
        else:
            fp = getattr(resp, "_fp", None)  # http.client's HTTPResponse under urllib3's
            raw = getattr(fp, "fp", None)  # its buffered socket file
            self._file = raw if (getattr(fp, "chunked", False) and getattr(fp, "chunk_left", 0) is None
                                 and encoding == "identity" and hasattr(raw, "readline")) else None

    @property
    def direct(self) -> bool:
        """The chunk framing is decoded here (else urllib3 reads the body)."""
        return self._file is not None

    def read(self) -> bytes:
        """The next piece of the payload, at most ``size`` bytes: every whole chunk that has
        arrived, and what has arrived of the one after them; b"" at the end of the body. It waits only
        when nothing of the payload has arrived. Why every chunk: the API server flushes a watch
        whenever its queue of events runs empty, so a busy stream comes as a chunk an event, often
        several of them already here; each read costs the reader a pass (a decode, a hold of the
        state's lock, a recorder's write), so one per chunk cost most of a hub's CPU at 65,000
        nodes (``bench.steady_live --event-chunks``)."""
        f = self._file
        if f is None:
            return self._resp.read1(self._size)
        try:
            while True:
                out = self._take()
                if out or self._done:
                    return out
                if self._left:  # the rest of a chunk the server announced: read in C, as one piece
                    n = min(self._left, self._size)
                    data = f.read(n)
                    if len(data) < n:
                        raise urllib3.exceptions.ProtocolError(
                            f"connection closed in the middle of a chunk ({self._left - len(data)} bytes missing)")
                    self._left -= n
                    self._crlf = not self._left
                    return data
                data = f.read1(READ_BYTES)  # what is buffered, else one read of the socket (it waits)
                if not data:
                    if self._left:
                        raise urllib3.exceptions.ProtocolError(
                            f"connection closed in the middle of a chunk ({self._left} bytes missing)")
                    raise urllib3.exceptions.ProtocolError("connection closed before the end of the chunked body")
                self._buf += data
        except TimeoutError:
            raise urllib3.exceptions.ReadTimeoutError(None, "", "read timed out") from None  # type: ignore[arg-type]

    def _take(self) -> bytes:
        """The payload that the bytes received so far hold (at most ``size``), the framing taken off."""
        buf = self._buf
        out: list[bytes] = []
        pos = 0
        room = self._size
        if not (self._left or self._crlf or self._trailer) and len(buf) >= FAST_SCAN_BYTES:
            out, pos, taken = _whole_chunks(buf, room)
            room -= taken
        while room > 0:
            if self._left:
                n = min(self._left, len(buf) - pos, room)
                if n <= 0:
                    break
                out.append(bytes(buf[pos:pos + n]))
                pos += n
                room -= n
                self._left -= n
                if self._left:
                    break
                self._crlf = True
            if self._crlf:
                if len(buf) - pos < 2:
                    break
                if buf[pos:pos + 2] != b"\r\n":
                    raise urllib3.exceptions.ProtocolError("chunk not followed by CRLF")
                pos += 2
                self._crlf = False
            end = buf.find(b"\n", pos, pos + MAX_LINE + 1)
            if end < 0:
                if len(buf) - pos > MAX_LINE:
                    raise urllib3.exceptions.ProtocolError(
                        "trailer line too long" if self._trailer else "chunk size line too long or cut short")
                break
            line = bytes(buf[pos:end + 1])
            pos = end + 1
            if self._trailer:
                if line in (b"\r\n", b"\n"):
                    self._done = True
                    break
                continue
            size = _chunk_size(line)
            if size == 0:
                self._trailer = True  # trailer lines (none in practice) up to an empty line
            else:
                self._left = size
        del buf[:pos]
        return out[0] if len(out) == 1 else b"".join(out)

    def drained(self) -> bool | None:
        """Whether nothing of the body is left to read right now: no rest of a chunk, nothing in
        the buffered file, in TLS or on the socket (the stream is read to its end, so far). None:
        cannot tell (urllib3 reads this body). Why: a frame may call a lease Late only once the
        lease stream has been read up to its late time (``core/evidence.py``); this says when it
        has. A peek with the socket's timeout at 0 reads what has arrived and never waits."""
        f = self._file
        if f is None:
            return None
        if self._left or self._buf:
            return False
        if hasattr(f, "drained"):  # (``tls_stream.TlsFile``: it knows what TLS holds)
            return f.drained()
        sock = stream_socket(self._resp)
        if sock is None:
            return None
        pending = getattr(sock, "pending", None)  # TLS: bytes decrypted and not read yet
        try:
            if pending is not None and pending():
                return False
            timeout = sock.gettimeout()
            sock.settimeout(0.0)
        except OSError:
            return None
        try:
            return not f.peek(1)  # b"": nothing arrived (a plain socket) or the end
        except (BlockingIOError, ssl.SSLWantReadError):
            return True  # nothing arrived (a TLS socket)
        except (OSError, ValueError):
            return None
        finally:
            try:
                sock.settimeout(timeout)
            except OSError:
                pass


def _whole_chunks(buf: bytearray, room: int) -> tuple[list[bytes], int, int]:
    """The payloads of the whole chunks at the start of ``buf`` (at most ``room`` bytes of them)
    framed as an API server frames a watch (a size line without extensions, the payload, CRLF),
    where they end, and their bytes. It stops at anything else, which ``_take`` reads as it reads
    any framing. Why: a busy watch comes a chunk an event, and a read that gathered a few hundred
    of them decoded each one's framing step by step (1.3-1.7 us a chunk); split at every CRLF in
    C, a chunk costs a size parse and a length check (0.9-1.25 us). A payload holding a CRLF of its
    own splits apart, its length is then not its size: the scan stops there."""
    parts = bytes(buf).split(b"\r\n")
    sizes = parts[0::2]
    datas = parts[1::2]
    out: list[bytes] = []
    end = taken = 0
    for line, data in zip(sizes, datas[:(len(parts) - 1) // 2]):  # each data followed by a CRLF
        if len(line) > 16 or b";" in line:
            break
        try:
            size = int(line, 16)
        except ValueError:
            break
        if size <= 0 or len(data) != size or taken + size > room:
            break
        out.append(data)
        taken += size
        end += len(line) + size + 4
    return out, end, taken


def _chunk_size(line: bytes) -> int:
    """The size a chunk's size line announces (its extensions ignored)."""
    try:
        size = int(line.split(b";", 1)[0], 16)
    except ValueError:
        raise urllib3.exceptions.ProtocolError(f"bad chunk size line {line[:40]!r}") from None
    if size < 0:
        raise urllib3.exceptions.ProtocolError(f"bad chunk size line {line[:40]!r}")
    return size


KEEPALIVE = (30, 10, 3)
"""TCP keepalive on a watch's socket: first probe after 30 s idle, then every 10 s, dead after 3
unanswered. A quiet watch is silent for minutes (a 1.20 server sends no bookmark at all on an
unchanged resource), so silence cannot tell a dead peer from a quiet one; an unanswered probe can,
in about a minute, without cutting the quiet stream (client-go gets the same from HTTP/2 pings)."""


def stream_socket(resp: Any) -> Any:
    """The socket under a urllib3 response, or None."""
    conn = getattr(resp, "connection", None)
    sock = getattr(conn, "sock", None)
    if sock is None:
        raw = getattr(getattr(getattr(resp, "_fp", None), "fp", None), "raw", None)
        sock = getattr(raw, "_sock", None)
    return sock


def set_read_timeout(resp: Any, seconds: float) -> bool:
    """Change the read timeout of a response being read (a streaming list's initial events are
    read with a short one, the watch that follows on the same stream with a long one)."""
    sock = stream_socket(resp)
    if sock is None:
        return False
    try:
        sock.settimeout(seconds)
    except OSError:
        return False
    return True


def keep_alive(resp: Any, idle_interval_count: tuple[int, int, int] = KEEPALIVE) -> bool:
    """Switch TCP keepalive on for a response's socket (``KEEPALIVE``); False where it cannot be."""
    import socket

    sock = stream_socket(resp)
    if sock is None:
        return False
    idle, interval, count = idle_interval_count
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for name, value in (("TCP_KEEPIDLE", idle), ("TCP_KEEPINTVL", interval), ("TCP_KEEPCNT", count)):
            opt = getattr(socket, name, None)
            if opt is not None:
                sock.setsockopt(socket.IPPROTO_TCP, opt, value)
    except OSError:
        return False
    return True
