"""``sources/chunked.BodyReader``: a streamed body's chunk framing, decoded over real HTTP.

A local socket server writes the exact bytes of each case (sizes in upper and lower case hex,
chunk extensions, trailers, a chunk cut short, a broken size line, a body that is not chunked),
and urllib3 makes the request, as the reflector does."""

from __future__ import annotations

import random
import socket
import threading
import time
from contextlib import contextmanager
from typing import Iterator

import pytest
import urllib3

from nodewatch.sources.chunked import BodyReader

HEAD_CHUNKED = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"


@contextmanager
def serving(*responses: bytes, linger: float = 0.0) -> Iterator[str]:
    """A server answering each connection's request with the next of ``responses``, verbatim,
    then closing it (after ``linger`` seconds of silence if given)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    stop = threading.Event()

    def serve() -> None:
        for raw in responses:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                conn.sendall(raw)
                if linger:
                    stop.wait(linger)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}/"
    finally:
        stop.set()
        srv.close()
        t.join(5)


def _get(url: str, read: float = 5.0) -> urllib3.BaseHTTPResponse:
    return urllib3.PoolManager().request("GET", url, preload_content=False, retries=False,
                                         timeout=urllib3.Timeout(connect=5, read=read))


def _read_all(reader: BodyReader) -> list[bytes]:
    pieces = []
    while True:
        piece = reader.read()
        if not piece:
            return pieces
        pieces.append(piece)


def _chunk(data: bytes, ext: bytes = b"", upper: bool = False) -> bytes:
    size = f"{len(data):X}" if upper else f"{len(data):x}"
    return size.encode() + ext + b"\r\n" + data + b"\r\n"


def test_chunks_of_every_size_come_out_as_the_payload_in_order():
    lines = [b'{"type":"ADDED","object":{"n":%d}}\n' % i for i in range(300)]
    payload = b"".join(lines)
    body = b"".join(_chunk(line) for line in lines[:100])  # one line a chunk, as a real API server sends
    body += _chunk(b"".join(lines[100:250]), ext=b";name=value", upper=True)  # extensions are ignored
    body += _chunk(b"".join(lines[250:]))
    with serving(HEAD_CHUNKED + body + b"0\r\n\r\n") as url:
        resp = _get(url)
        reader = BodyReader(resp, 1000)  # pieces of at most 1000 bytes: a big chunk comes in several
        assert reader.direct
        pieces = _read_all(reader)
        assert b"".join(pieces) == payload
        assert max(map(len, pieces)) <= 1000
        assert reader.read() == b""  # and stays ended


def test_the_chunks_that_have_arrived_come_in_one_read():
    """A busy watch comes as a chunk an event (the API server flushes whenever its queue runs
    empty): those already received are one read, not a read each; the body is then the same."""
    lines = [b'{"type":"MODIFIED","object":{"n":%d}}\n' % i for i in range(200)]
    body = b"".join(_chunk(line) for line in lines) + b"0\r\n\r\n"
    with serving(HEAD_CHUNKED + body, linger=1.0) as url:
        resp = _get(url)
        time.sleep(0.2)  # all of it has arrived
        reader = BodyReader(resp, 1 << 20)
        pieces = _read_all(reader)
        assert b"".join(pieces) == b"".join(lines)
        assert len(pieces) <= 5, len(pieces)  # (a read takes what the buffered file hands over at once)


def test_trailer_lines_after_the_last_chunk_are_skipped():
    with serving(HEAD_CHUNKED + _chunk(b"abc\n") + b"0\r\nX-Trailer: 1\r\nY: 2\r\n\r\n") as url:
        reader = BodyReader(_get(url), 1 << 16)
        assert _read_all(reader) == [b"abc\n"]


def test_a_chunk_cut_short_by_the_server_is_a_protocol_error():
    with serving(HEAD_CHUNKED + b"100\r\n" + b"x" * 10) as url:  # announces 256 bytes, sends 10, closes
        reader = BodyReader(_get(url), 1 << 16)
        with pytest.raises(urllib3.exceptions.ProtocolError, match="middle of a chunk"):
            _read_all(reader)


def test_a_body_that_ends_without_the_last_chunk_is_a_protocol_error():
    with serving(HEAD_CHUNKED + _chunk(b"abc\n")) as url:
        reader = BodyReader(_get(url), 1 << 16)
        assert reader.read() == b"abc\n"
        with pytest.raises(urllib3.exceptions.ProtocolError, match="before the end of the chunked body"):
            reader.read()


@pytest.mark.parametrize("size_line", [b"zz\r\n", b"-5\r\n", b"5" * 5000 + b"\r\n"])
def test_a_broken_size_line_is_a_protocol_error(size_line):
    with serving(HEAD_CHUNKED + size_line + b"hello\r\n0\r\n\r\n") as url:
        reader = BodyReader(_get(url), 1 << 16)
        with pytest.raises(urllib3.exceptions.ProtocolError):
            _read_all(reader)


def test_a_chunk_without_its_crlf_is_a_protocol_error():
    with serving(HEAD_CHUNKED + b"3\r\nabcXY0\r\n\r\n") as url:
        reader = BodyReader(_get(url), 1 << 16)
        with pytest.raises(urllib3.exceptions.ProtocolError, match="CRLF"):
            _read_all(reader)


def test_silence_past_the_read_timeout_is_urllib3s_read_timeout():
    with serving(HEAD_CHUNKED + _chunk(b"abc\n"), linger=5.0) as url:
        reader = BodyReader(_get(url, read=0.3), 1 << 16)
        assert reader.read() == b"abc\n"
        with pytest.raises(urllib3.exceptions.ReadTimeoutError):
            reader.read()


def test_a_body_that_is_not_chunked_is_read_through_urllib3():
    payload = b"line one\nline two\n"
    raw = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(payload) + payload
    with serving(raw) as url:
        reader = BodyReader(_get(url), 1 << 16)
        assert not reader.direct
        assert b"".join(_read_all(reader)) == payload


def test_a_body_someone_started_to_read_is_left_to_urllib3():
    with serving(HEAD_CHUNKED + _chunk(b"first\n") + _chunk(b"second\n") + b"0\r\n\r\n") as url:
        resp = _get(url)
        assert resp.read1(64) == b"first\n"  # http.client is in the middle of the framing now
        reader = BodyReader(resp, 1 << 16)
        assert not reader.direct
        assert b"".join(_read_all(reader)) == b"second\n"


class _NoPrivateFile:
    """A urllib3 response as a release without ``HTTPResponse._fp`` would hand it over."""

    def __init__(self, resp: urllib3.BaseHTTPResponse) -> None:
        self._resp = resp
        self.headers = resp.headers

    def read1(self, n: int) -> bytes:
        return self._resp.read1(n)


def test_without_urllib3s_private_file_the_body_is_read_through_urllib3():
    with serving(HEAD_CHUNKED + _chunk(b"first\n") + _chunk(b"second\n") + b"0\r\n\r\n") as url:
        reader = BodyReader(_NoPrivateFile(_get(url)), 1 << 16)
        assert not reader.direct
        assert b"".join(_read_all(reader)) == b"first\nsecond\n"


def test_drained_says_whether_anything_is_left_to_read_and_never_waits():
    """The lease stream's frontier (``core/evidence.py``): after a block was applied, is the stream
    read to its end? Each step waits for the server's own signal, never for time."""
    sent_second = threading.Event()
    go_on = threading.Event()
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def serve() -> None:
        conn, _ = srv.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(HEAD_CHUNKED + _chunk(b"one\n") + _chunk(b"two\n"))
            go_on.wait(10)
            conn.sendall(_chunk(b"three\n"))
            sent_second.set()
            go_on.wait(10)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        resp = _get(f"http://127.0.0.1:{srv.getsockname()[1]}/", read=7.0)
        reader = BodyReader(resp, 2)  # pieces of 2 bytes: "one\n" is left half read
        assert reader.read() == b"on"
        assert reader.drained() is False  # the rest of the chunk
        assert reader.read() == b"e\n"
        assert reader.drained() is False  # "two\n" arrived with it (buffered)
        assert reader.read() + reader.read() == b"two\n"
        assert reader.drained() is True  # nothing more sent yet
        from nodewatch.sources.chunked import stream_socket

        assert stream_socket(resp).gettimeout() == 7.0  # the read timeout is as it was
        go_on.set()
        assert sent_second.wait(10)
        # loopback: sendall returned, so the bytes are in our socket's receive buffer
        assert reader.drained() is False
        assert b"".join(reader.read() for _ in range(3)) == b"three\n"
        assert reader.drained() is True
    finally:
        go_on.set()
        srv.close()
        t.join(5)


def test_drained_cannot_tell_for_a_body_urllib3_reads():
    payload = b"line one\n"
    raw = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(payload) + payload
    with serving(raw) as url:
        reader = BodyReader(_get(url), 1 << 16)
        assert reader.drained() is None


class _Pieces:
    """A received body handed over in pieces of random sizes, as a socket file hands it over."""

    def __init__(self, data: bytes, rng: random.Random) -> None:
        self.data, self.rng, self.pos = data, rng, 0

    def read1(self, n: int) -> bytes:
        piece = self.data[self.pos:self.pos + self.rng.randint(1, 9000)]
        self.pos += len(piece)
        return piece

    def read(self, n: int) -> bytes:
        piece = self.data[self.pos:self.pos + n]
        self.pos += len(piece)
        return piece


@pytest.mark.parametrize("seed", range(6))
def test_every_framing_gives_the_payload_whether_the_whole_chunks_are_scanned_at_once_or_not(seed, monkeypatch):
    """``_whole_chunks`` (a gathered read's chunks split at once) against the step-by-step decoding
    of the same bytes: payloads that hold CRLFs of their own, sizes in upper case or with a leading
    zero, extensions, chunks of 1 to 700 bytes, reads of every size: the same payload."""
    from nodewatch.sources import chunked

    rng = random.Random(seed)
    for _ in range(40):
        payload = bytes(rng.choice(b"ab\r\n{}") for _ in range(rng.randint(0, 20000)))
        body, p = b"", 0
        while p < len(payload):
            piece = payload[p:p + rng.randint(1, 700)]
            p += len(piece)
            size = f"{len(piece):x}"
            size = size.upper() if rng.random() < 0.1 else "0" + size if rng.random() < 0.05 else size
            body += (size + (";x=y" if rng.random() < 0.05 else "")).encode() + b"\r\n" + piece + b"\r\n"
        body += b"0\r\n\r\n"
        size = rng.choice([7, 1000, 1 << 18])
        for scan_from in (0, 4096, 1 << 40):  # (1 << 40: never scanned at once)
            monkeypatch.setattr(chunked, "FAST_SCAN_BYTES", scan_from)
            reader = BodyReader(object(), size)
            reader._file = _Pieces(body, rng)
            pieces = _read_all(reader)
            assert b"".join(pieces) == payload and max(map(len, pieces), default=0) <= size
