"""In a pod: the ServiceAccount token the kubelet rotates is read again when its file changes.

The simulated API server plays the cluster (TLS, its CA in ``ca.crt``, ``KUBERNETES_SERVICE_HOST``
and ``_PORT`` set as in a pod); the token directory is written the way the kubelet's atomic writer
writes a projected volume (a new timestamped directory, the ``..data`` symlink swapped, ``token``
a symlink through it). The server refuses the old token the moment it accepts the new one, the
harshest case: a client that kept the first token gets a 401 on its next request.
"""

from __future__ import annotations

import os

import pytest

from nodewatch.sources import kubeconfig
from nodewatch.sources.kubeconfig import Connection, ServiceAccountToken
from support.in_pod import kubelet_rotates, kubelet_writes
from support.simserver import running_server


@pytest.fixture
def pod(tmp_path, monkeypatch):
    """A sim server and this process set up as a pod of its cluster (no kubeconfig anywhere)."""
    with running_server(tmp_path) as srv:
        sa = tmp_path / "serviceaccount"
        sa.mkdir()
        (sa / "ca.crt").write_bytes(srv.ca_cert_pem)
        kubelet_writes(sa, srv.token)
        monkeypatch.setattr(kubeconfig, "SERVICE_ACCOUNT_DIR", str(sa))
        monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(srv.port))
        monkeypatch.delenv("KUBECONFIG", raising=False)
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        yield srv, sa


def refused(srv) -> int:
    return sum(1 for r in srv.request_log if r.status == 401)


def test_a_rotated_token_file_is_used_from_the_next_request(pod):
    srv, sa = pod
    conn = Connection()
    try:
        assert conn.target.in_cluster
        assert conn.get_json("/api/v1/nodes")["kind"] == "NodeList"
        for _ in range(3):  # rotations closer together than a credential reload may come (2 s)
            kubelet_rotates(srv, sa)  # the old token is refused from now on
            assert conn.get_json("/api/v1/nodes")["kind"] == "NodeList"
        assert refused(srv) == 0  # no request went with a token the file no longer held
        assert conn.reloads == 0 and conn.failure is None
    finally:
        conn.close()


def test_the_list_workers_request_carries_the_current_token(pod):
    """A big list is read by a child process with the headers the parent hands it: the token in
    them is the file's current one too."""
    srv, sa = pod
    conn = Connection()
    try:
        new = kubelet_rotates(srv, sa)
        request = conn.worker_request("/api/v1/nodes", {"limit": 10})
        assert request is not None
        _url, headers, _pool = request
        auth = next(v for k, v in headers.items() if k.lower() == "authorization")
        assert auth == f"Bearer {new}"
    finally:
        conn.close()


def test_a_file_rewritten_in_place_is_read_again_within_a_minute(tmp_path):
    """Same inode, size and mtime (a copy tool that keeps them): only the period finds it."""
    path = tmp_path / "token"
    path.write_text("aaaa")
    st = os.stat(path)
    now = [1000.0]
    token = ServiceAccountToken(str(path), clock=lambda: now[0])
    assert token.current() == "aaaa"
    with open(path, "r+") as f:
        f.write("bbbb")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    now[0] += kubeconfig.TOKEN_REREAD_SECONDS - 1
    assert token.current() == "aaaa"  # looks unchanged, read less than a minute ago
    now[0] += 1
    assert token.current() == "bbbb"


def test_a_token_file_caught_empty_keeps_the_token_that_worked(tmp_path):
    path = tmp_path / "token"
    path.write_text("good\n")
    token = ServiceAccountToken(str(path))
    assert token.current() == "good"  # the newline a hand-written file ends with is not sent
    path.write_text("")
    assert token.current() == "good"
    path.unlink()
    assert token.current() == "good"
    path.write_text("newer")
    assert token.current() == "newer"
