"""Every injected fault observably happens at the HTTP / TCP level.

Most tests use plain HTTP and a raw socket, so they can see exactly what the wire carries: a reset,
a stall with the socket open, a trickle, a cut line. One test checks a reset through TLS too.
"""

from __future__ import annotations

import json
import socket
import ssl
import time

import pytest

from support.simserver import ApiClient, TinyFleet, running_server, wait_until

LEASES = "/apis/coordination.k8s.io/v1/leases"


@pytest.fixture
def fleet() -> TinyFleet:
    return TinyFleet(nodes=4)


@pytest.fixture
def server(tmp_path, fleet):
    with running_server(tmp_path, fleet=fleet, tls=False) as srv:
        yield srv


class Raw:
    """One HTTP/1.1 request on a raw socket; reads whatever the server sends."""

    def __init__(self, server, path: str, token: str | None = None, tls: bool = False) -> None:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        if tls:
            ctx = ssl.create_default_context(cadata=server.ca_cert_pem.decode())
            sock = ctx.wrap_socket(sock, server_hostname="127.0.0.1")
        self.sock = sock
        tok = server.token if token is None else token
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {tok}\r\n\r\n".encode())
        self.data = b""

    def recv(self, timeout: float) -> bytes:
        """Bytes received within ``timeout`` (b"" if none); raises on reset, returns None on EOF."""
        self.sock.settimeout(timeout)
        try:
            got = self.sock.recv(1 << 20)
        except (socket.timeout, TimeoutError):
            return b""
        if not got:
            raise EOFError
        self.data += got
        return got

    def read_until(self, needle: bytes, timeout: float = 5.0) -> bytes:
        end = time.monotonic() + timeout
        while needle not in self.data:
            if time.monotonic() > end:
                raise AssertionError(f"{needle!r} not received; got {self.data[-300:]!r}")
            self.recv(0.1)
        return self.data

    def read_to_eof(self, timeout: float = 5.0) -> bytes:
        end = time.monotonic() + timeout
        try:
            while time.monotonic() < end:
                self.recv(0.1)
        except EOFError:
            return self.data
        raise AssertionError("connection still open")

    def close(self) -> None:
        self.sock.close()


def body_lines(data: bytes) -> list[bytes]:
    """Decode a chunked HTTP response body (possibly incomplete) into its lines."""
    _, _, rest = data.partition(b"\r\n\r\n")
    body = b""
    while rest:
        size_line, sep, rest = rest.partition(b"\r\n")
        if not sep:
            break
        size = int(size_line, 16)
        if size == 0:
            break
        body += rest[:size]
        rest = rest[size + 2 :]
    return body.split(b"\n")


def renew(server, fleet, times: int = 1) -> None:
    for _ in range(times):
        for name in fleet.names:
            server.store.emit("leases", "MODIFIED", fleet.lease(name), fleet.now)


def test_reset_open_streams_now(server, fleet):
    raw = Raw(server, f"{LEASES}?watch=true&resourceVersion={server.store.resource_version}")
    renew(server, fleet)
    raw.read_until(b"node-003")
    server.faults.reset_now()
    with pytest.raises(ConnectionResetError):
        for _ in range(50):
            raw.recv(0.1)
    assert server.faults.fired["reset"] == 1
    # new connections are fine
    assert ApiClient(server).get_json("/api/v1/nodes")[0] == 200


def test_reset_through_tls(tmp_path, fleet):
    with running_server(tmp_path, fleet=fleet, tls=True) as srv:
        raw = Raw(srv, f"{LEASES}?watch=true&resourceVersion={srv.store.resource_version}", tls=True)
        renew(srv, fleet)
        raw.read_until(b"node-003")
        srv.faults.reset_now()
        with pytest.raises((ConnectionResetError, ssl.SSLError, EOFError)):
            for _ in range(50):
                raw.recv(0.1)


def test_reset_streams_after_n_events(server, fleet):
    server.faults.reset_streams_after(3)
    raw = Raw(server, f"{LEASES}?watch=true&resourceVersion={server.store.resource_version}")
    renew(server, fleet, times=2)
    with pytest.raises(ConnectionResetError):
        for _ in range(50):
            raw.recv(0.1)
    events = [json.loads(line) for line in body_lines(raw.data) if line.strip()]
    assert len(events) == 3


def test_close_every_stream_after_n_events(server, fleet):
    server.faults.close_streams_after(3)
    client = ApiClient(server)
    with client.stream(f"{LEASES}?watch=true") as w:  # 4 synthetic ADDED, cut after 3
        events = w.events(deadline=5)
        assert w.resp.read() == b""  # clean end of the chunked body
    assert [e["type"] for e in events] == ["ADDED"] * 3
    rv = server.store.resource_version
    renew(server, fleet, times=2)
    with client.stream(f"{LEASES}?watch=true&resourceVersion={rv}") as w:  # every stream, not just the first
        events = w.events(deadline=5)
    assert [e["type"] for e in events] == ["MODIFIED"] * 3
    assert server.faults.fired["closed_after"] == 2
    server.faults.close_streams_after(None)
    with client.stream(f"{LEASES}?watch=true&resourceVersion={rv}&timeoutSeconds=1") as w:
        assert len(w.events(deadline=5)) == 8


def test_close_applies_to_streams_already_open(server, fleet):
    rv = server.store.resource_version
    with ApiClient(server).stream(f"{LEASES}?watch=true&resourceVersion={rv}") as w:
        renew(server, fleet)
        assert len(w.events(count=4)) == 4
        server.faults.close_streams_after(6)
        renew(server, fleet)
        events = w.events(deadline=5)
        assert w.resp.read() == b""
    assert len(events) == 2  # 6 in all on this stream, then a clean end


def test_burst_of_410_gone(server):
    server.faults.gone_next_watches(2)
    client = ApiClient(server)
    rv = server.store.resource_version
    for _ in range(2):
        with client.stream(f"{LEASES}?watch=true&resourceVersion={rv}") as w:
            events = w.events(deadline=5)
        assert [e["type"] for e in events] == ["ERROR"]
        assert events[0]["object"]["code"] == 410 and events[0]["object"]["reason"] == "Expired"
    with client.stream(f"{LEASES}?watch=true&resourceVersion={rv}&timeoutSeconds=1") as w:
        assert w.events(deadline=5) == []
    assert client.get_json(LEASES)[0] == 200  # lists are not affected
    assert server.faults.fired["gone"] == 2


def test_http_500_for_the_next_requests(server):
    server.faults.fail_next(2, 500)
    client = ApiClient(server)
    results = [client.get_json("/api/v1/nodes") for _ in range(3)]
    assert [r[0] for r in results] == [500, 500, 200]
    assert results[0][1]["kind"] == "Status" and results[0][1]["reason"] == "InternalError"


def test_failure_limited_to_one_resource(server):
    server.faults.fail_next(1, 503, resource="pods")
    client = ApiClient(server)
    assert client.get_json("/api/v1/nodes")[0] == 200
    assert client.get_json("/api/v1/pods")[0] == 503
    assert client.get_json("/api/v1/pods")[0] == 200


def test_429_with_retry_after(server):
    server.faults.throttle_next(1, retry_after=7)
    status, headers, body = ApiClient(server).request("/api/v1/nodes")
    assert status == 429 and headers["retry-after"] == "7"
    assert json.loads(body)["reason"] == "TooManyRequests"
    assert ApiClient(server).request("/api/v1/nodes")[0] == 200


def test_tcp_stall_keeps_socket_open_then_resumes(server, fleet):
    raw = Raw(server, f"{LEASES}?watch=true&resourceVersion={server.store.resource_version}")
    raw.read_until(b"\r\n\r\n")
    server.faults.stall(1.0)
    renew(server, fleet)
    began = time.monotonic()
    assert raw.recv(0.5) == b""  # nothing while stalled, and no EOF / reset either
    raw.read_until(b"node-003", timeout=5)
    assert time.monotonic() - began >= 0.8
    assert server.faults.fired["stalled_write"] >= 1


def test_slow_trickle(server):
    server.faults.trickle(seconds=10, chunk=16, delay=0.02)
    raw = Raw(server, "/version")
    began = time.monotonic()
    pieces = []
    while b'"platform"' not in raw.data or not raw.data.endswith(b"}"):
        got = raw.recv(1.0)
        assert got, "the trickle stopped"
        pieces.append(len(got))
    took = time.monotonic() - began
    # 16-byte writes; a reader slowed by a loaded machine may find two in its buffer at once
    assert sorted(pieces)[len(pieces) // 2] <= 16 and len(pieces) >= len(raw.data) // 32
    assert took >= (len(raw.data) / 16 - 1) * 0.02 * 0.8
    json.loads(raw.data.partition(b"\r\n\r\n")[2])  # all bytes arrive, in order
    raw.close()
    server.faults.trickle(0)
    began = time.monotonic()
    assert ApiClient(server).request("/api/v1/nodes")[0] == 200
    assert time.monotonic() - began < 1.0


def test_truncated_json_line_then_close(server, fleet):
    server.faults.truncate_next(1)
    raw = Raw(server, f"{LEASES}?watch=true&resourceVersion={server.store.resource_version}")
    renew(server, fleet)
    data = raw.read_to_eof()
    lines = [line for line in body_lines(data) if line]
    assert len(lines) == 1
    with pytest.raises(json.JSONDecodeError):
        json.loads(lines[0])
    assert lines[0].startswith(b'{"type":"MODIFIED"')
    assert server.faults.fired["truncated"] == 1


def test_oversized_object(server, fleet):
    server.faults.oversize_next(1, size=3 * 1024 * 1024)
    with ApiClient(server).stream(f"{LEASES}?watch=true&resourceVersion={server.store.resource_version}") as w:
        renew(server, fleet)
        big = w.resp.readline()
        small = w.resp.readline()
    assert len(big) > 3 * 1024 * 1024 and len(small) < 2000
    obj = json.loads(big)["object"]
    assert len(obj["metadata"]["annotations"]["nodewatch.sim/padding"]) == 3 * 1024 * 1024


def test_server_down_then_back_on_the_same_port(server, fleet):
    port = server.port
    raw = Raw(server, f"{LEASES}?watch=true")
    raw.read_until(b"node-003")
    server.go_down()
    with pytest.raises((ConnectionResetError, EOFError)):
        for _ in range(50):
            raw.recv(0.1)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2)
    server.go_up()
    assert server.port == port
    status, body = ApiClient(server).get_json("/api/v1/nodes")
    assert status == 200 and len(body["items"]) == 4


def test_server_down_for_a_duration(server):
    server.faults.down(0.5)
    wait_until(lambda: not server._listening.is_set(), timeout=5)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", server.port), timeout=2)
    wait_until(lambda: server._listening.is_set(), timeout=5)
    assert ApiClient(server).get_json("/api/v1/nodes")[0] == 200


def test_token_expiry_and_rotation(server):
    client = ApiClient(server)
    old = server.token
    assert client.get_json("/api/v1/nodes")[0] == 200
    server.auth.expire(old, time.time() + 0.3)
    assert client.get_json("/api/v1/nodes")[0] == 200
    wait_until(lambda: client.get_json("/api/v1/nodes")[0] == 401, timeout=5)
    new = server.rotate_token()
    assert new != old and server.token == new
    assert new in server.kubeconfig_path.read_text() and old not in server.kubeconfig_path.read_text()
    assert ApiClient(server, token=new).get_json("/api/v1/nodes")[0] == 200
    assert ApiClient(server, token=old).get_json("/api/v1/nodes")[0] == 401
    # tokens are settable outright (e.g. to match an exec plugin's output)
    server.auth.set_tokens({"from-exec-plugin": None})
    assert ApiClient(server, token="from-exec-plugin").get_json("/api/v1/nodes")[0] == 200
    assert ApiClient(server, token=new).get_json("/api/v1/nodes")[0] == 401


def test_403_on_one_resource(server):
    server.faults.forbid("certificatesigningrequests")
    client = ApiClient(server)
    status, body = client.get_json("/apis/certificates.k8s.io/v1/certificatesigningrequests")
    assert status == 403 and body["reason"] == "Forbidden" and body["kind"] == "Status"
    assert 'cannot list resource "certificatesigningrequests"' in body["message"]
    status, body = client.get_json("/apis/certificates.k8s.io/v1/certificatesigningrequests?watch=true")
    assert status == 403 and "cannot watch" in body["message"]
    assert client.get_json("/api/v1/nodes")[0] == 200
    server.faults.allow("certificatesigningrequests")
    assert client.get_json("/apis/certificates.k8s.io/v1/certificatesigningrequests")[0] == 200


def test_clear_switches_faults_off(server):
    plan = server.faults
    plan.fail_next(5)
    plan.forbid("nodes")
    plan.close_streams_after(1)
    plan.clear()
    assert ApiClient(server).get_json("/api/v1/nodes")[0] == 200
    assert plan.fired["http_500"] == 0
