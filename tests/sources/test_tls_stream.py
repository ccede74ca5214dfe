"""``sources/tls_stream``: a watch over TLS read straight off its socket, against a real TLS server.

A local server (the simulated API server's identity: its CA, its certificate for 127.0.0.1)
answers each connection with the exact bytes of the case, each chunk written as its own TLS
record as an API server flushes a busy watch. ``Connection.get(stream=True)`` (what the reflector
asks for a watch) is compared with ``Connection.get`` (urllib3's way) on the same answers."""

from __future__ import annotations

import random
import socket
import ssl
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest
import urllib3
import yaml

from nodewatch.sim.kubeconfig import kubeconfig_dict, load_or_create_identity
from nodewatch.sources.chunked import BodyReader
from nodewatch.sources.kubeconfig import ApiError, Connection
from nodewatch.sources.tls_stream import TlsResponse

HEAD_CHUNKED = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}".encode() + b"\r\n" + data + b"\r\n"


@contextmanager
def tls_serving(tmp_path: Path, *answers: list[bytes], gap: float = 0.0, linger: float = 0.0,
                ready: threading.Event | None = None, stamps: list[float] | None = None,
                pause: bytes | None = None) -> Iterator[tuple[Path, list[bytes]]]:
    """A TLS server answering the n-th connection's request with the pieces of ``answers[n]``,
    each piece its own TLS record (``gap`` seconds apart; those after the first once ``ready`` is
    set, when given; ``pause`` is not sent, the server waits 0.3 s instead; ``stamps`` gets the time
    each piece is sent), then closing it (after ``linger`` seconds). Yields a kubeconfig for it and
    the requests received."""
    identity = load_or_create_identity(None)
    ctx = identity.ssl_context()
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    port = srv.getsockname()[1]
    requests: list[bytes] = []
    stop = threading.Event()

    def answer(raw: socket.socket, pieces: list[bytes]) -> None:
        try:
            with ctx.wrap_socket(raw, server_side=True) as conn:
                req = b""
                while b"\r\n\r\n" not in req:
                    req += conn.recv(65536)
                requests.append(req)
                for i, piece in enumerate(pieces):
                    if piece is pause:
                        time.sleep(0.3)
                        continue
                    if stamps is not None:
                        stamps.append(time.monotonic())
                    conn.sendall(piece)  # one write, one TLS record
                    if i == 0 and ready is not None:
                        ready.wait(10)  # (after the head: the client's request returns with it)
                    if gap:
                        time.sleep(gap)
                if linger:
                    stop.wait(linger)
        except (OSError, ssl.SSLError):
            pass

    def serve() -> None:
        srv.settimeout(0.1)
        todo = list(answers)
        while todo and not stop.is_set():
            try:
                raw, _ = srv.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            raw.settimeout(None)
            threading.Thread(target=answer, args=(raw, todo.pop(0)), daemon=True).start()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(kubeconfig_dict(f"https://127.0.0.1:{port}", identity.ca_cert_pem,
                                                         identity.token)))
    try:
        yield kubeconfig, requests
    finally:
        stop.set()
        t.join(5)
        srv.close()


def _payload(reader: BodyReader) -> bytes:
    out = b""
    while True:
        piece = reader.read()
        if not piece:
            return out
        out += piece


LINES = [b'{"type":"MODIFIED","object":{"kind":"Lease","n":%d}}\n' % i for i in range(300)]
WATCH = [HEAD_CHUNKED] + [_chunk(line) for line in LINES] + [b"0\r\n\r\n"]


def test_a_watch_over_tls_is_read_off_its_socket_with_the_same_payload_and_request(tmp_path):
    with tls_serving(tmp_path, WATCH, WATCH) as (kubeconfig, requests):
        conn = Connection(str(kubeconfig))
        direct = conn.get("/apis/coordination.k8s.io/v1/leases", {"watch": "true"}, stream=True)
        assert isinstance(direct, TlsResponse) and direct.status == 200
        got = _payload(BodyReader(direct, 1 << 16))
        direct.close()
        pooled = conn.get("/apis/coordination.k8s.io/v1/leases", {"watch": "true"})
        assert not isinstance(pooled, TlsResponse)
        assert _payload(BodyReader(pooled, 1 << 16)) == got == b"".join(LINES)
        pooled.close()
    mine, theirs = ({k.lower(): v for k, v in (line.split(b": ", 1) for line in r.split(b"\r\n")[1:] if b": " in line)}
                    for r in requests)
    assert requests[0].split(b"\r\n")[0] == requests[1].split(b"\r\n")[0]  # the same GET line
    assert mine == theirs and mine[b"authorization"].startswith(b"Bearer ")  # the same headers


def test_records_that_have_arrived_are_read_in_one_system_call(tmp_path):
    """300 events, each its own TLS record, all sent before the reader reads: a few socket reads,
    not one (or two) a record."""
    ready = threading.Event()
    with tls_serving(tmp_path, WATCH, ready=ready, linger=1.0) as (kubeconfig, _):
        resp = Connection(str(kubeconfig)).get("/api/v1/nodes", {"watch": "true"}, stream=True)
        ready.set()
        time.sleep(0.5)  # every record on its way (300 small writes on loopback)
        body = BodyReader(resp, 1 << 20)
        assert _payload(body) == b"".join(LINES)
        assert resp.file.socket_reads <= 10
        resp.close()


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 410 Gone\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
    b"HTTP/1.1 410 Gone\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n",
])
def test_an_answer_that_is_not_2xx_is_the_same_error_as_urllib3s(tmp_path, answer):
    status = b'{"kind":"Status","status":"Failure","message":"too old resource version: 1 (5)","code":410}'
    raw = answer % (len(status), status)
    with tls_serving(tmp_path, [raw], [raw]) as (kubeconfig, _):
        conn = Connection(str(kubeconfig))
        with pytest.raises(ApiError) as direct:
            conn.get("/api/v1/nodes", {"watch": "true"}, stream=True)
        with pytest.raises(ApiError) as pooled:
            conn.get("/api/v1/nodes", {"watch": "true"})
    assert (direct.value.status, str(direct.value), direct.value.permanent) == (
        pooled.value.status, str(pooled.value), pooled.value.permanent) == (
        410, "HTTP 410: too old resource version: 1 (5)", False)


def test_a_server_the_kubeconfigs_ca_did_not_sign_is_refused_as_urllib3_refuses_it(tmp_path):
    other = load_or_create_identity(None)
    with tls_serving(tmp_path, WATCH, WATCH) as (kubeconfig, requests):
        cfg = yaml.safe_load(kubeconfig.read_text())
        cfg["clusters"][0]["cluster"]["certificate-authority-data"] = kubeconfig_dict(
            "https://x", other.ca_cert_pem, "t")["clusters"][0]["cluster"]["certificate-authority-data"]
        kubeconfig.write_text(yaml.safe_dump(cfg))
        conn = Connection(str(kubeconfig))
        with pytest.raises(ApiError) as direct:
            conn.get("/api/v1/nodes", stream=True)
        with pytest.raises(ApiError) as pooled:
            conn.get("/api/v1/nodes")
    assert direct.value.permanent and pooled.value.permanent
    assert str(direct.value).startswith("TLS verification of https://127.0.0.1:")
    assert str(direct.value).split(" (certificate verify failed")[0] == str(pooled.value).split(" (certificate")[0]
    assert not requests  # no request was sent to a server not verified


def test_tls_server_name_is_the_name_checked(tmp_path):
    """``tls-server-name`` names the certificate's name to check: one the certificate has
    (``kubernetes``) is accepted on an address, one it has not is refused."""
    with tls_serving(tmp_path, WATCH, WATCH) as (kubeconfig, _):
        cfg = yaml.safe_load(kubeconfig.read_text())
        for name, ok in (("kubernetes", True), ("not-the-server.example", False)):
            cfg["clusters"][0]["cluster"]["tls-server-name"] = name
            kubeconfig.write_text(yaml.safe_dump(cfg))
            conn = Connection(str(kubeconfig))
            if ok:
                resp = conn.get("/api/v1/nodes", stream=True)
                assert isinstance(resp, TlsResponse)
                resp.close()
            else:
                with pytest.raises(ApiError, match="TLS verification"):
                    conn.get("/api/v1/nodes", stream=True)


def test_a_proxy_or_plain_http_goes_through_urllib3(tmp_path):
    with tls_serving(tmp_path, WATCH) as (kubeconfig, _):
        cfg = yaml.safe_load(kubeconfig.read_text())
        cfg["clusters"][0]["cluster"]["proxy-url"] = "http://127.0.0.1:9"
        kubeconfig.write_text(yaml.safe_dump(cfg))
        conn = Connection(str(kubeconfig))
        assert type(conn._client.rest_client.pool_manager) is urllib3.ProxyManager
        with pytest.raises(ApiError):  # the proxy's port is closed: urllib3's attempt, not ours
            conn.get("/api/v1/nodes", stream=True, timeout=(2.0, 2.0))


def test_a_silent_stream_times_out_and_a_stop_wakes_a_blocked_read(tmp_path):
    head_only = [HEAD_CHUNKED, _chunk(LINES[0])]
    with tls_serving(tmp_path, head_only, head_only, linger=5.0) as (kubeconfig, _):
        conn = Connection(str(kubeconfig))
        resp = conn.get("/api/v1/nodes", {"watch": "true"}, timeout=(5.0, 0.3), stream=True)
        body = BodyReader(resp, 1 << 16)
        assert body.read() == LINES[0]
        assert body.drained() is True  # read to the end so far, nothing arrived
        with pytest.raises(urllib3.exceptions.ReadTimeoutError):
            body.read()
        resp.close()
        resp = conn.get("/api/v1/nodes", {"watch": "true"}, timeout=(5.0, 30.0), stream=True)
        body = BodyReader(resp, 1 << 16)
        assert body.read() == LINES[0]
        threading.Timer(0.2, resp.shutdown).start()
        began = time.monotonic()
        with pytest.raises(urllib3.exceptions.ProtocolError):
            body.read()  # the socket shut down: the body ends before its last chunk
        assert time.monotonic() - began < 5
        resp.close()


def test_drained_says_whether_data_has_arrived(tmp_path):
    with tls_serving(tmp_path, [HEAD_CHUNKED, _chunk(LINES[0]), _chunk(LINES[1])], gap=0.3, linger=2.0) as (kubeconfig, _):
        resp = Connection(str(kubeconfig)).get("/api/v1/nodes", {"watch": "true"}, stream=True)
        body = BodyReader(resp, 1 << 16)
        assert body.read() == LINES[0]
        assert body.drained() is True  # the second chunk comes 0.3 s later
        time.sleep(0.6)
        assert body.drained() is False  # it has arrived, unread
        assert body.read() == LINES[1]
        resp.close()


def test_a_busy_stream_is_read_in_gathered_reads_and_a_quiet_one_at_once(tmp_path):
    """Records 1 ms apart (a busy watch, an event a record): read at most every ``GATHER_SECONDS``,
    a few dozen reads for 200 records, not one each. A record after a pause is read when it comes:
    the wait counts from the read before."""
    from nodewatch.sources import tls_stream

    pause = b"pause"  # (not sent: the server waits 0.3 s there)
    answer = [HEAD_CHUNKED] + [_chunk(line) for line in LINES[:200]] + [pause, _chunk(b"after the pause\n")]
    ready = threading.Event()
    stamps: list[float] = []
    with tls_serving(tmp_path, answer, gap=0.001, ready=ready, stamps=stamps, pause=pause) as (kubeconfig, _):
        resp = Connection(str(kubeconfig)).get("/api/v1/nodes", {"watch": "true"}, stream=True)
        body = BodyReader(resp, 1 << 20)
        began = time.monotonic()
        ready.set()
        got = b""
        while got.count(b"\n") < 200:
            got += body.read()
        took = time.monotonic() - began
        assert got == b"".join(LINES[:200])
        reads = resp.file.socket_reads
        assert reads <= took / tls_stream.GATHER_SECONDS + 10 and reads < 100, (reads, took)
        assert body.read() == b"after the pause\n"
        assert time.monotonic() - stamps[-1] < 0.1  # read as it came, not held back
        resp.close()


@pytest.mark.parametrize("size", [1 << 12, 1 << 16, 1 << 18])
def test_big_chunks_cut_into_records_anywhere_give_the_same_payload(tmp_path, size):
    """A list's chunks are big (each read of the rest of a chunk is ``TlsFile.read(n)``): arriving in
    pieces shorter and longer than a read, cut anywhere, they give the payload byte for byte."""
    rng = random.Random(size)
    lines = [b'{"n":%d,"pad":"%s"}\n' % (i, b"x" * rng.randrange(0, 3000)) for i in range(600)]
    chunks, at = [], 0
    while at < len(lines):
        take = rng.choice((1, 7, 60, 250))
        chunks.append(_chunk(b"".join(lines[at:at + take])))
        at += take
    wire = b"".join(chunks) + b"0\r\n\r\n"
    pieces, pos = [HEAD_CHUNKED], 0
    while pos < len(wire):
        step = rng.choice((1, 5, 900, 16_000, 70_000, 400_000))
        pieces.append(wire[pos:pos + step])
        pos += step
    with tls_serving(tmp_path, pieces) as (kubeconfig, _):
        resp = Connection(str(kubeconfig)).get("/api/v1/nodes", {"watch": "true"}, stream=True)
        assert isinstance(resp, TlsResponse)
        assert _payload(BodyReader(resp, size)) == b"".join(lines)
        resp.close()
