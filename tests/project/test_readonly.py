"""Least privilege and credentials: GET only, TLS verified, kubeconfig like kubectl, nothing leaked."""

from __future__ import annotations

import logging
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from nodewatch.core.settings import Settings
from nodewatch.sources.kubeconfig import KubeconfigError
from nodewatch.sources.live import LiveSource
from nodewatch.sources.reflector import CSRS, LEASES, NODES, events_of, pods_on
from support.simserver import TinyFleet, running_server, wait_until

ROOT = Path(__file__).parents[2]


def test_the_live_source_only_sends_get(tmp_path, start_live):
    fleet = TinyFleet(nodes=4, start=time.time())
    with running_server(tmp_path, fleet=fleet, bookmark_interval=0.2) as srv:
        src = start_live(srv, kubelet_metrics=True, stall_timeout=2)
        src.focus_node("node-000")
        fleet.stop_kubelet("node-001")
        wait_until(lambda: len(src.scoped_nodes()) == 2)
        wait_until(lambda: len(src.state.pods) == 4)
        srv.faults.gone_next_watches(1)
        srv.faults.reset_now()
        wait_until(lambda: srv.faults.fired["gone"] == 1, timeout=15)  # someone relisted
        wait_until(lambda: all(src.state.health[r].connected for r in ("nodes", "leases", "pods")), timeout=15)
        src.stop()  # every request it will ever send is in the log
        methods = {r.method for r in srv.request_log}
        paths = {r.target.split("?")[0] for r in srv.request_log}
    assert methods == {"GET"}
    assert len(srv.request_log) > 10
    assert "/api/v1/nodes" in paths and "/api/v1/pods" in paths and "/version" in paths
    assert not any("secret" in p for p in paths)


def test_rbac_grants_exactly_what_the_live_source_uses():
    docs = [d for d in yaml.safe_load_all((ROOT / "deploy" / "kubernetes" / "rbac.yaml").read_text()) if d]
    kinds = {d["kind"] for d in docs}
    assert {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} <= kinds
    granted = set()
    for d in docs:
        if d["kind"] in ("ClusterRole", "Role"):
            ns = d["metadata"].get("namespace", "*")
            for rule in d["rules"]:
                assert set(rule["verbs"]) <= {"get", "list", "watch"}, rule
                for group in rule["apiGroups"]:
                    for res in rule["resources"]:
                        assert res != "secrets" and "*" not in res
                        granted.add((group, res, ns))
    used = {("", "nodes", "*"), ("", "pods", "*"), ("", "events", "*"),
            ("certificates.k8s.io", "certificatesigningrequests", "*"),
            ("coordination.k8s.io", "leases", "kube-node-lease")}
    assert granted == used
    assert "nodes/proxy" in (ROOT / "deploy" / "kubernetes" / "rbac.yaml").read_text()  # documented, commented out
    # the permission each reflector names on a 403 matches the rule
    assert "nodes" in NODES.permission and "kube-node-lease" in LEASES.permission
    assert "certificatesigningrequests.certificates.k8s.io" in CSRS.permission
    assert pods_on("n").field_selector == "spec.nodeName=n"
    assert events_of("n").field_selector == "involvedObject.kind=Node,involvedObject.name=n"


def _sim_config(srv) -> dict:
    return yaml.safe_load(Path(srv.kubeconfig_path).read_text())


def test_tls_is_verified_unless_the_kubeconfig_says_otherwise(tmp_path, start_live):
    with running_server(tmp_path / "a", fleet=TinyFleet(nodes=1)) as other:
        other_ca = _sim_config(other)["clusters"][0]["cluster"]["certificate-authority-data"]
    fleet = TinyFleet(nodes=2, start=time.time())
    with running_server(tmp_path, fleet=fleet) as srv:
        cfg = _sim_config(srv)
        cfg["clusters"][0]["cluster"]["certificate-authority-data"] = other_ca  # a CA that did not sign it
        wrong = tmp_path / "wrong-ca.kubeconfig"
        wrong.write_text(yaml.safe_dump(cfg))
        src = start_live(wrong, synced=None)
        assert src.conn.verify_tls
        wait_until(lambda: "nodes" in src.state.health and "CERTIFICATE_VERIFY_FAILED"
                   in src.state.health["nodes"].last_error.upper().replace(" ", "_"), timeout=15)
        assert src.state.nodes == {}
        del cfg["clusters"][0]["cluster"]["certificate-authority-data"]
        cfg["clusters"][0]["cluster"]["insecure-skip-tls-verify"] = True
        insecure = tmp_path / "insecure.kubeconfig"
        insecure.write_text(yaml.safe_dump(cfg))
        src = start_live(insecure)
        assert not src.conn.verify_tls
        assert any("TLS verification is off" in p.message for p in src.state.problems)


def test_kubeconfig_merged_from_several_files_and_contexts(tmp_path, monkeypatch):
    fleet = TinyFleet(nodes=2, start=time.time())
    with running_server(tmp_path, fleet=fleet) as srv:
        cfg = _sim_config(srv)
        a = tmp_path / "clusters.yaml"
        a.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "clusters": cfg["clusters"],
                                     "users": cfg["users"]}))
        ctx = dict(cfg["contexts"][0])
        ctx["name"] = "prod"
        b = tmp_path / "contexts.yaml"
        b.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "contexts": [cfg["contexts"][0], ctx],
                                     "current-context": "prod"}))
        monkeypatch.setenv("KUBECONFIG", f"{a}:{tmp_path / 'missing.yaml'}:{b}")
        src = LiveSource(Settings(), cert_cache_dir=str(tmp_path / "c"))
        assert src.name == f"context prod @ {srv.url}"
        src.start()
        assert src.wait_synced(15)
        src.stop()
        with pytest.raises(KubeconfigError, match="context 'staging' not found.*prod"):
            LiveSource(Settings(), context="staging")


def test_no_kubeconfig_names_the_demo(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(KubeconfigError, match="nodewatch demo"):
        LiveSource(Settings())
    with pytest.raises(KubeconfigError, match="no such file"):
        LiveSource(Settings(), kubeconfig=str(tmp_path / "absent"))


@pytest.mark.parametrize("text, says", [
    ("apiVersion: v1\nclusters: [\n  - {name: a\n", r"not valid YAML \(line 3, column 3: expected the node content"),
    ("users:\n- name: u\n  user: {token: s3cr3t\n", r"not valid YAML \(line 4, column 1: "),
    ("\x00\x01binary", r"not valid YAML \(byte 0: special characters are not allowed\)"),
    ("- a list\n", r"not a kubeconfig \(YAML, but not the clusters"),
    ("just a string\n", r"not a kubeconfig"),
    ("clusters: 5\ncontexts: 7\n", r"not a kubeconfig"),
])
def test_a_kubeconfig_that_is_not_one_says_why_and_shows_none_of_it(tmp_path, text, says):
    """A broken file names where its YAML breaks, or that it is YAML but no kubeconfig; before, the
    user read "cannot read it (ParserError)". The file's own text is never quoted (a token may be
    next to the break)."""
    bad = tmp_path / "config"
    bad.write_bytes(text.encode())
    with pytest.raises(KubeconfigError, match=f"^kubeconfig {bad}: {says}") as err:
        LiveSource(Settings(), kubeconfig=str(bad))
    assert "s3cr3t" not in str(err.value) and "\x00" not in str(err.value)


EXEC_PLUGIN = textwrap.dedent("""
    import datetime, json, sys
    token = open(sys.argv[1]).read().strip()
    expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=float(sys.argv[2]))
    with open(sys.argv[3], "a") as log:
        log.write("ran\\n")
    print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
                      "status": {"token": token, "expirationTimestamp": expiry.strftime("%Y-%m-%dT%H:%M:%SZ")}}))
""")


def test_exec_plugin_token_is_refreshed_when_it_expires(tmp_path, start_live):
    fleet = TinyFleet(nodes=2, start=time.time())
    with running_server(tmp_path, fleet=fleet, bookmark_interval=0.2) as srv:
        plugin = tmp_path / "plugin.py"
        plugin.write_text(EXEC_PLUGIN)
        token_file = tmp_path / "token"
        token_file.write_text(srv.token)
        runs = tmp_path / "runs.log"
        cfg = _sim_config(srv)
        cfg["users"][0]["user"] = {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1", "command": sys.executable,
            "args": [str(plugin), str(token_file), "1", str(runs)], "interactiveMode": "Never"}}
        kc = tmp_path / "exec.kubeconfig"
        kc.write_text(yaml.safe_dump(cfg))
        src = start_live(kc)
        new = srv.rotate_token(old_valid_for=0)  # the old token is refused from now on
        token_file.write_text(new)  # ...and the plugin hands out the new one
        # no waiting for the 1s credential to expire: the client counts it stale 5 minutes early already
        srv.faults.reset_now()
        wait_until(lambda: src.state.health["leases"].connected and src.state.health["nodes"].connected
                   and runs.read_text().count("ran") >= 2, timeout=20)
        fleet.step_to(fleet.now + 10)
        wait_until(lambda: all(t.renewals >= 2 for t in src.state.leases.values()), timeout=15)


def test_no_credential_in_recordings_logs_or_errors(tmp_path, caplog, start_live):
    from nodewatch.sources.recording import Recorder

    fleet = TinyFleet(nodes=3, start=time.time())
    caplog.set_level(logging.DEBUG)
    rec_path = tmp_path / "rec.jsonl"
    with running_server(tmp_path, fleet=fleet, bookmark_interval=0.2) as srv:
        token = srv.token
        cfg_text = Path(srv.kubeconfig_path).read_text()
        ca_data = _sim_config(srv)["clusters"][0]["cluster"]["certificate-authority-data"]
        rec = Recorder(str(rec_path), {"kind": "live"}, Settings())
        src = start_live(srv, recorder=rec)
        srv.rotate_token(old_valid_for=0)
        srv.faults.fail_next(1, 500)
        srv.faults.reset_now()
        wait_until(lambda: src.conn.reloads >= 1, timeout=20)
        wait_until(lambda: src.state.health["leases"].connected, timeout=20)
        texts = [str(p.message) for p in src.state.problems]
        texts += [h.last_error for h in src.state.health.values()]
        src.stop()
        rec.close()
        # errors a user sees about a bad kubeconfig do not quote it
        broken = tmp_path / "broken.kubeconfig"
        broken.write_text(cfg_text.replace("current-context", "currnt-context"))
        with pytest.raises(KubeconfigError) as err:
            LiveSource(Settings(), kubeconfig=str(broken))
        texts.append(str(err.value))
    haystack = rec_path.read_text() + "\n".join(texts) + caplog.text
    assert token not in haystack
    assert srv.token not in haystack
    assert ca_data[:40] not in haystack
    assert "Bearer" not in haystack
