"""Errors that say what is wrong, at once: through real HTTP against the simulated API server.

A rejected token (401, naming user and context), no permission (403, naming what is missing), a CA
that did not sign the server (naming server and CA), a closed port and a name that does not
resolve (naming the address). ``status`` and ``record`` exit 2 with one line, well before their
30 s wait; the dashboard's banner says the same thing.
"""

from __future__ import annotations

import time

import pytest
import yaml

from nodewatch.cli import main
from nodewatch.core.views import FleetView
from nodewatch.sources.kubeconfig import ApiError, Connection
from support.simserver import TinyFleet, free_port, running_server, wait_until

FAST = 20.0
"""``--wait 30`` is the default; a permanent error must end well before (a bound, not a timing)."""


def config(srv) -> dict:
    return yaml.safe_load(srv.kubeconfig_path.read_text())


def write(tmp_path, name: str, cfg: dict) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def wrong_token(tmp_path, srv) -> str:
    cfg = config(srv)
    cfg["users"][0]["user"]["token"] = "not-the-token"
    return write(tmp_path, "wrong-token.kubeconfig", cfg)


def wrong_ca(tmp_path, srv) -> tuple[str, str]:
    with running_server(tmp_path / "other", fleet=TinyFleet(nodes=1)) as other:
        other_ca = config(other)["clusters"][0]["cluster"]["certificate-authority-data"]
    cfg = config(srv)
    cfg["clusters"][0]["cluster"]["certificate-authority-data"] = other_ca
    return write(tmp_path, "wrong-ca.kubeconfig", cfg), cfg["clusters"][0]["name"]


def closed_port(tmp_path, srv) -> tuple[str, str]:
    cfg = config(srv)
    url = f"https://127.0.0.1:{free_port()}"
    cfg["clusters"][0]["cluster"]["server"] = url
    return write(tmp_path, "closed.kubeconfig", cfg), url


def unresolvable(tmp_path, srv) -> str:
    cfg = config(srv)
    cfg["clusters"][0]["cluster"]["server"] = "https://no-such-host.invalid:6443"
    return write(tmp_path, "dns.kubeconfig", cfg)


def status_of(capsys, tmp_path, kubeconfig: str) -> tuple[int, str, float]:
    started = time.monotonic()
    rc = main(["status", "--kubeconfig", kubeconfig, "--cert-cache-dir", str(tmp_path / "cache"), "--wait", "30"])
    took = time.monotonic() - started
    out, err = capsys.readouterr()
    assert out == ""
    return rc, err, took


@pytest.fixture
def srv(tmp_path):
    with running_server(tmp_path, fleet=TinyFleet(nodes=2, start=time.time())) as s:
        yield s


def test_a_rejected_token_is_named_with_user_and_context(tmp_path, capsys, srv):
    user = config(srv)["users"][0]["name"]
    context = config(srv)["contexts"][0]["name"]
    rc, err, took = status_of(capsys, tmp_path, wrong_token(tmp_path, srv))
    assert rc == 2 and err.count("\n") == 1 and took < FAST
    assert "credentials rejected" in err and f"user {user}" in err and f"context {context}" in err
    assert "not-the-token" not in err and srv.token not in err


def test_a_forbidden_list_says_which_permission_is_missing(tmp_path, capsys, srv):
    srv.faults.forbid("leases")
    rc, err, took = status_of(capsys, tmp_path, str(srv.kubeconfig_path))
    assert rc == 2 and took < FAST
    assert "forbidden (403)" in err and "leases" in err and "needs" in err and "list" in err


def test_a_ca_that_did_not_sign_the_server_names_server_and_ca(tmp_path, capsys, srv):
    kubeconfig, cluster = wrong_ca(tmp_path, srv)
    rc, err, took = status_of(capsys, tmp_path, kubeconfig)
    assert rc == 2 and took < FAST
    assert f"TLS verification of {srv.url} failed (" in err and "certificate" in err
    assert f"certificate-authority-data of cluster {cluster!r}" in err


def test_a_closed_port_names_the_address(tmp_path, capsys, srv):
    kubeconfig, url = closed_port(tmp_path, srv)
    rc, err, took = status_of(capsys, tmp_path, kubeconfig)
    assert rc == 2 and took < FAST and f"connection refused by {url}" in err


def test_a_name_that_does_not_resolve_names_the_host(tmp_path, capsys, srv):
    rc, err, took = status_of(capsys, tmp_path, unresolvable(tmp_path, srv))
    assert rc == 2 and took < FAST and "no-such-host.invalid" in err and "resolve" in err


def test_record_with_a_rejected_token_fails_loudly(tmp_path, capsys, srv):
    out = tmp_path / "r.jsonl"
    started = time.monotonic()
    rc = main(["record", str(out), "--kubeconfig", wrong_token(tmp_path, srv), "--cert-cache-dir",
               str(tmp_path / "c"), "--quiet", "--duration", "60"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "credentials rejected" in err
    assert time.monotonic() - started < FAST


def test_record_that_works_still_exits_0(tmp_path, capsys, srv):
    rc = main(["record", str(tmp_path / "ok.jsonl"), "--kubeconfig", str(srv.kubeconfig_path), "--cert-cache-dir",
               str(tmp_path / "c"), "--quiet", "--duration", "2"])
    assert rc == 0, capsys.readouterr().err


def test_a_rotated_token_is_not_a_permanent_error(tmp_path, srv):
    """A 401 is "rejected" only after the credentials were read again: a rotated token file works."""
    conn = Connection(str(srv.kubeconfig_path))
    try:
        assert conn.get_json("/api/v1/nodes")["items"]
        srv.rotate_token()  # the kubeconfig is rewritten with the new token; the old one stops working
        assert conn.get_json("/api/v1/nodes")["items"]
        assert conn.failure is None
    finally:
        conn.close()


def test_the_dashboard_banner_says_what_is_wrong(tmp_path, start_live, srv):
    src = start_live(wrong_token(tmp_path, srv), synced=None)
    view: FleetView = wait_until(lambda: (v := src.state.evaluate(time.time())).leases_blind
                                 and "credentials rejected" in v.blind_reason and v, timeout=FAST)
    assert "user " in view.blind_reason and "context " in view.blind_reason


def test_permanent_errors_are_marked_and_slow_ones_are_not(tmp_path, srv):
    kubeconfig, _ = closed_port(tmp_path, srv)
    conn = Connection(kubeconfig)
    try:
        with pytest.raises(ApiError) as e:
            conn.get_json("/api/v1/nodes")
        assert e.value.permanent and conn.failure is e.value
    finally:
        conn.close()
    srv.faults.forbid("nodes")
    conn = Connection(str(srv.kubeconfig_path))
    try:
        with pytest.raises(ApiError) as e:
            conn.get_json("/api/v1/nodes")
        assert e.value.status == 403 and e.value.permanent
        assert conn.get_json("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases") and conn.failure is None
    finally:
        conn.close()
