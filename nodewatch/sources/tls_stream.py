"""A watch over TLS read straight off its socket, in reads that gather what has arrived.

Why: the API server flushes a busy watch event by event (``serveWatch`` flushes whenever its queue
of events runs empty), so at 130,000 nodes 13,000 renewals a second come as 13,000 TLS records,
spread over the second. Through urllib3, an ``ssl.SSLSocket`` read returns one record (two system
calls: OpenSSL reads its 5-byte header, then its body), so the reading thread woke for each event
and ran the watch loop over it alone. Here the socket is read into the incoming ``MemoryBIO`` of
an ``ssl.SSLObject``, up to ``READ_BYTES`` at a time (every record that has arrived, in one system
call), the plaintext of all of them is taken at once, and a read that found only what trickled in
is followed by the next no sooner than ``GATHER_SECONDS`` later: the events come a few hundred a
read, each costing a sixth of what it did (``GATHER_SECONDS`` has the figures).

What is the same as urllib3's way (``Connection.get``): the request (URL and headers, credentials
included, from the same client), the TLS verification (a context made as urllib3 makes it: the
kubeconfig's CA or the system's, its client certificate, the server's name or ``tls-server-name``
checked by OpenSSL, ALPN ``http/1.1``), the errors (an answer that is not 2xx is the same
``ApiError``; a read timeout, a broken framing or a body cut short come out of ``BodyReader`` as the
urllib3 exceptions the watch loop tells apart). Where something stands between nodewatch and the
server (a proxy), the kubeconfig asks urllib3 to check the host name itself (``assert_hostname``),
or the server is not ``https``, ``possible`` says no and the request goes through urllib3.

The response (``TlsResponse``) has what ``Reflector._watch`` uses of a urllib3 response:
``status``, ``headers``, ``shutdown``, ``close``, ``release_conn``, and its socket where
``chunked.stream_socket`` looks (``connection.sock``: keepalive and read timeouts work on it
unchanged). ``chunked.BodyReader`` reads its chunk framing from ``TlsFile`` (``chunked_file``).

Who owns what: one thread (the reflector's) reads and writes the ``SSLObject``; ``shutdown`` may
come from another thread (``Reflector.stop``) and only shuts the socket down, which wakes the read.
"""

from __future__ import annotations

import select
import socket
import ssl
import time
from typing import Any
from urllib.parse import urlsplit

import urllib3

READ_BYTES = 256 * 1024
"""Bytes asked of the socket at a time: every TLS record that has arrived, in one system call."""
PLAIN_BYTES = 64 * 1024
"""Plaintext asked of the ``SSLObject`` at a time (it gives at most a record's, 16 KB)."""
GATHER_SECONDS = 0.02
"""After a read of the socket that took all that had arrived (less than ``READ_BYTES``), the next
one comes this long after it at the earliest. Why: the API server flushes a busy watch event by
event, so the events come a TLS record each, spread over the second; read as they come, each one
costs a wake-up of the reading thread (a poll, a read, the GIL taken back) and a pass of the watch
loop: ~30 us of CPU an event, 39-43 % of a core at 13,000 renewals a second (a probe of the reader
alone, records sent one by one; bench/README.md, session 46), where reads at most 50 times a second
take ~260 events each: ~5 us an event. A quiet stream is not held back (the wait counts from the
read before), nor is a list in full flow (its reads fill the buffer). An event is read at most this
much later: a fiftieth of the dashboard's second; the lease stream's frontier (``core/evidence.py``)
counts the wait as waiting on the stream, so up to this much of what arrived may be unread when a
frame judges, less than the way over the network the frontier never sees."""
DRAIN_ROUNDS = 4
"""Reads of what has arrived that ``TlsFile.drained`` makes, at most, before it answers."""
MAX_HEAD = 64 * 1024
"""A response's status line and headers longer than this are not an API server's."""


def possible(client: Any, url: str) -> bool:
    """Whether a GET of ``url`` through the kubernetes ``client`` can be read here: ``https``, no
    proxy (a plain ``urllib3.PoolManager``), no host name urllib3 checks itself."""
    pm = client.rest_client.pool_manager
    if type(pm) is not urllib3.PoolManager:
        return False
    kw = pm.connection_pool_kw
    if kw.get("assert_hostname") is not None or kw.get("assert_fingerprint") or kw.get("ssl_context") is not None:
        return False
    return urlsplit(url).scheme == "https"


def tls_context(kw: dict[str, Any]) -> ssl.SSLContext:
    """The client context urllib3 makes of a pool's settings (``_ssl_wrap_socket_and_match_hostname``):
    its verification mode, the CA given or the system's, the client certificate, ALPN http/1.1;
    host names checked by OpenSSL (urllib3 does the same where no ``assert_hostname`` is given)."""
    from urllib3.util.ssl_ import create_urllib3_context, resolve_cert_reqs

    reqs = resolve_cert_reqs(kw.get("cert_reqs"))
    ctx = create_urllib3_context(cert_reqs=reqs)
    ctx.verify_mode = reqs
    ca_certs, ca_data = kw.get("ca_certs"), kw.get("ca_cert_data")
    if ca_certs or ca_data:
        ctx.load_verify_locations(cafile=ca_certs or None, cadata=ca_data or None)
    else:
        ctx.load_default_certs()
    if kw.get("cert_file"):
        ctx.load_cert_chain(kw["cert_file"], kw.get("key_file"), kw.get("key_password"))
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def open_stream(client: Any, url: str, headers: dict[str, str], timeout: tuple[float, float]) -> TlsResponse:
    """Connect, shake hands, send the GET of ``url`` and read the response's head. The body is not
    read (``BodyReader`` streams it). Raises what a connection raises (``OSError``, ``ssl.SSLError``:
    ``Connection._connect_error`` words them), and ``urllib3.exceptions.ProtocolError`` for an
    answer that is not HTTP."""
    kw = client.rest_client.pool_manager.connection_pool_kw
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or 443
    name = kw.get("server_hostname") or host
    sock = socket.create_connection((host, port), timeout=timeout[0])
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        tls = TlsFile(sock, tls_context(kw).wrap_bio(incoming, outgoing, server_hostname=name), incoming, outgoing)
        tls.handshake()
        sock.settimeout(timeout[1])  # (connected: the read timeout from here, as urllib3's)
        target = parts.path + ("?" + parts.query if parts.query else "")
        authority = f"[{host}]" if ":" in host else host
        if parts.port and parts.port != 443:
            authority += f":{parts.port}"
        lines = [f"GET {target} HTTP/1.1", f"Host: {authority}", "Accept-Encoding: identity"]  # (as urllib3 asks)
        lines += [f"{k}: {v}" for k, v in headers.items() if k.lower() not in ("host", "accept-encoding")]
        tls.send(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        resp = TlsResponse(sock, tls, *tls.read_head())
        encoding = (resp.headers.get("content-encoding") or "identity").lower()
        if 200 <= resp.status <= 299 and encoding != "identity":  # (urllib3 would have decompressed it)
            raise urllib3.exceptions.ProtocolError(f"the server answered in {encoding} although identity was asked")
        return resp
    except BaseException:
        sock.close()
        raise


class TlsFile:
    """The plaintext of one TLS connection over a socket, read as ``BodyReader`` reads a buffered
    socket file: ``read1`` (what has arrived, waiting only when nothing has) and ``read(n)``."""

    def __init__(self, sock: socket.socket, tls: ssl.SSLObject, incoming: ssl.MemoryBIO,
                 outgoing: ssl.MemoryBIO) -> None:
        self._sock = sock
        self._tls = tls
        self._in = incoming
        self._out = outgoing
        self._buf = bytearray()
        """Plaintext taken from the ``SSLObject`` and not handed over yet."""
        self._raw = bytearray(READ_BYTES)
        self._view = memoryview(self._raw)
        self._eof = False
        self._read_at = 0.0
        self._trickle = False
        """The last read of the socket took all that had arrived: the next one waits to gather."""
        self._poll = select.poll()
        self._poll.register(sock, select.POLLIN)
        self.socket_reads = 0
        """System calls that read the socket (what this module saves; the tests count them)."""

    def handshake(self) -> None:
        while True:
            try:
                self._tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush_out()
                if not self._receive():
                    raise ConnectionResetError("the server closed the connection during the TLS handshake") from None
        self._flush_out()

    def send(self, data: bytes) -> None:
        """A request: its answer is read as it comes (nothing to gather for)."""
        self._tls.write(data)
        self._flush_out()
        self._trickle = False

    def read_head(self) -> tuple[int, str, urllib3.HTTPHeaderDict]:
        """The response's status, reason and headers; what follows them stays for ``read1``."""
        while True:
            end = self._buf.find(b"\r\n\r\n")
            if end >= 0:
                break
            if len(self._buf) > MAX_HEAD:
                raise urllib3.exceptions.ProtocolError("the response's head is too long")
            data = self._arrived()
            if not data:
                raise urllib3.exceptions.ProtocolError("connection closed before the response's head")
            self._buf += data
        head = bytes(self._buf[:end]).decode("latin-1")
        del self._buf[:end + 4]
        status_line, *fields = head.split("\r\n")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
            raise urllib3.exceptions.ProtocolError(f"not an HTTP response: {status_line[:60]!r}")
        headers = urllib3.HTTPHeaderDict()
        for field in fields:
            name, sep, value = field.partition(":")
            if sep:
                headers.add(name.strip(), value.strip())
        return int(parts[1]), parts[2] if len(parts) > 2 else "", headers

    def read1(self, size: int = -1) -> bytes:
        """Every byte of plaintext that has arrived (``size`` is a hint: all of it is given, the
        caller keeps the rest); waits only when nothing has; b"" at the end of the connection."""
        if self._buf:
            out = bytes(self._buf)
            self._buf.clear()
            return out
        return self._arrived()

    def read(self, n: int) -> bytes:
        """``n`` bytes, fewer only at the end of the connection. (The rest of a big chunk, a list's:
        when what arrived holds all of it, it is given without going through the buffer, and the
        buffer's bytes are copied out once, not twice: 102 MB of 1.1 MB chunks took the reading
        thread 69-73 ms of CPU against 75-84 ms.)"""
        buf = self._buf
        if not buf:
            data = self._arrived()
            if len(data) == n or not data:
                return data
            if len(data) > n:
                buf += memoryview(data)[n:]
                return data[:n]
            buf += data
        while len(buf) < n:
            data = self._arrived()
            if not data:
                break
            buf += data
        with memoryview(buf) as view:
            out = bytes(view[:n])
        del buf[:n]
        return out

    def drained(self) -> bool | None:
        """Nothing of the plaintext is left to read right now: none kept here or in TLS, and what
        has arrived on the socket (taken without waiting) makes none (records that are not data,
        a TLS 1.3 session ticket, are read and say nothing)."""
        if self._buf or self._tls.pending():
            return False
        for _ in range(DRAIN_ROUNDS):
            data = self._decrypt()
            if data:
                self._buf += data
                return False
            try:
                if self._eof or not self._poll.poll(0):
                    return True
                if not self._receive():
                    self._eof = True  # (the next read says so)
            except OSError:
                return None
        return False  # records that say nothing, still coming: not known to be drained

    def _arrived(self) -> bytes:
        """The plaintext that has arrived, waiting for some when none has; b"" at the end. After a
        read that took all that had arrived, the next read of the socket comes ``GATHER_SECONDS``
        after it at the earliest."""
        while True:
            data = self._decrypt()
            if data or self._eof:
                return data
            if self._trickle:
                wait = self._read_at + GATHER_SECONDS - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
            if not self._receive():
                self._eof = True
                return b""

    def _decrypt(self) -> bytes:
        """The plaintext of every whole record received so far."""
        if not self._in.pending and not self._tls.pending():
            return b""
        pieces = []
        while True:
            try:
                data = self._tls.read(PLAIN_BYTES)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:  # the server's close_notify
                self._eof = True
                break
            if not data:
                self._eof = True
                break
            pieces.append(data)
        if self._out.pending:  # what reading made TLS say back (a TLS 1.3 key update)
            self._flush_out()
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def _receive(self) -> bool:
        """One read of the socket into TLS (it waits, up to the socket's timeout); False at its end."""
        n = self._sock.recv_into(self._raw, READ_BYTES)
        self.socket_reads += 1
        self._read_at = time.monotonic()
        self._trickle = n < READ_BYTES
        if not n:
            return False
        self._in.write(self._view[:n])
        return True

    def _flush_out(self) -> None:
        data = self._out.read()
        if data:
            self._sock.sendall(data)


class _Conn:
    """Where ``chunked.stream_socket`` finds a response's socket (as on urllib3's)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock


class TlsResponse:
    """A response read by ``TlsFile``: what ``Reflector._watch`` uses of a urllib3 response."""

    def __init__(self, sock: socket.socket, tls: TlsFile, status: int, reason: str,
                 headers: urllib3.HTTPHeaderDict) -> None:
        self.status = status
        self.reason = reason
        self.headers = headers
        self.connection: _Conn | None = _Conn(sock)
        self.file = tls
        self.chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        length = headers.get("content-length", "")
        self._left: int | None = int(length) if length.isdigit() and not self.chunked else None
        """Bytes of a body that is not chunked still to read (None: up to the connection's end)."""

    def chunked_file(self) -> TlsFile | None:
        """What ``chunked.BodyReader`` decodes the chunk framing from (None: the body is not chunked)."""
        return self.file if self.chunked else None

    def read1(self, size: int = -1) -> bytes:
        """A body that is not chunked (``BodyReader`` decodes the chunked framing itself)."""
        if self._left == 0:
            return b""
        data = self.file.read1(size)
        if self._left is not None:
            if len(data) > self._left:
                data = data[:self._left]
            self._left -= len(data)
        return data

    def read(self, amt: int) -> bytes:
        """Up to ``amt`` bytes of the body's payload (an error's Status object)."""
        if self.chunked:
            from .chunked import BodyReader

            body = BodyReader(self, amt)
            read = body.read
        else:
            read = self.read1
        out = bytearray()
        while len(out) < amt:
            data = read()
            if not data:
                break
            out += data
        return bytes(out[:amt])

    def shutdown(self) -> None:
        """Wake a read blocked on the socket (from another thread: ``Reflector.stop``)."""
        conn = self.connection
        if conn is not None:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        conn, self.connection = self.connection, None
        if conn is not None:
            conn.sock.close()

    def release_conn(self) -> None:
        """The connection is this response's alone, never handed back to a pool: closed."""
        self.close()
