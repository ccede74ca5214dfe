"""The simulated API server over real HTTP(S): discovery, get, list, watch, resourceVersion
semantics (410 Gone), bookmarks, paging, selectors, auth, read-only, TLS and kubeconfig reuse."""

from __future__ import annotations

import io
import json
import ssl
import time
import urllib.error
import urllib.request

import pytest

from nodewatch.sim.server import SimServer
from nodewatch.sim.store import Gone, ObjectStore
from support.simserver import ApiClient, TinyFleet, running_server, sim_server_factory, wait_until  # noqa: F401

LEASES = "/apis/coordination.k8s.io/v1/leases"
NODE_LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


@pytest.fixture
def fleet() -> TinyFleet:
    return TinyFleet(nodes=5)


@pytest.fixture
def server(tmp_path, fleet):
    with running_server(tmp_path, fleet=fleet, bookmark_interval=0.2) as srv:
        yield srv


@pytest.fixture
def client(server) -> ApiClient:
    return ApiClient(server)


def names(items: list[dict]) -> list[str]:
    return [i["metadata"]["name"] for i in items]


# ---- discovery ----------------------------------------------------------------------------------


def test_discovery_documents(client, fleet):
    status, version = client.get_json("/version")
    assert status == 200 and version["gitVersion"] == fleet.server_version
    assert (version["major"], version["minor"]) == ("1", "33")
    _, api = client.get_json("/api")
    assert api["kind"] == "APIVersions" and api["versions"] == ["v1"]
    _, core = client.get_json("/api/v1")
    by_name = {r["name"]: r for r in core["resources"]}
    assert {"nodes", "pods", "events", "namespaces"} <= set(by_name)
    assert by_name["nodes"]["namespaced"] is False and by_name["pods"]["namespaced"] is True
    assert by_name["nodes"]["verbs"] == ["get", "list", "watch"]
    _, groups = client.get_json("/apis")
    gvs = {v["groupVersion"] for g in groups["groups"] for v in g["versions"]}
    assert {"coordination.k8s.io/v1", "certificates.k8s.io/v1"} <= gvs
    _, coord = client.get_json("/apis/coordination.k8s.io/v1")
    assert [r["name"] for r in coord["resources"]] == ["leases"]
    status, body = client.get_json("/openapi/v2")
    assert status == 404 and body["kind"] == "Status"


def test_aggregated_discovery_request_gets_legacy_json(client):
    accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
    status, headers, body = client.request("/apis", headers={"Accept": accept})
    assert status == 200
    assert headers["content-type"] == "application/json"
    assert json.loads(body)["kind"] == "APIGroupList"


# ---- get and list -------------------------------------------------------------------------------


def test_list_and_get(client, fleet, server):
    status, body = client.get_json("/api/v1/nodes")
    assert status == 200 and body["kind"] == "NodeList" and body["apiVersion"] == "v1"
    assert names(body["items"]) == sorted(fleet.names)
    assert int(body["metadata"]["resourceVersion"]) == server.store.resource_version
    status, node = client.get_json("/api/v1/nodes/node-002")
    assert status == 200 and node["metadata"]["name"] == "node-002"
    assert node["status"]["nodeInfo"]["kubeletVersion"] == fleet.server_version
    status, lease = client.get_json(f"{NODE_LEASES}/node-001")
    assert status == 200 and lease["spec"]["holderIdentity"] == "node-001"
    status, missing = client.get_json("/api/v1/nodes/nope")
    assert status == 404
    assert missing["kind"] == "Status" and missing["reason"] == "NotFound" and missing["code"] == 404
    assert missing["details"]["name"] == "nope"
    status, _ = client.get_json("/api/v1/widgets")
    assert status == 404


def test_namespaced_lists(client, fleet):
    _, all_pods = client.get_json("/api/v1/pods")
    _, default = client.get_json("/api/v1/namespaces/default/pods")
    _, system = client.get_json("/api/v1/namespaces/kube-system/pods")
    assert len(all_pods["items"]) == len(fleet.names) * fleet.pods_per_node
    assert {p["metadata"]["namespace"] for p in default["items"]} == {"default"}
    assert sorted(names(default["items"]) + names(system["items"])) == sorted(names(all_pods["items"]))
    _, leases = client.get_json(LEASES)
    _, node_leases = client.get_json(NODE_LEASES)
    assert names(leases["items"]) == names(node_leases["items"]) == sorted(fleet.names)
    _, none = client.get_json("/apis/coordination.k8s.io/v1/namespaces/default/leases")
    assert none["items"] == []
    _, nss = client.get_json("/api/v1/namespaces")
    assert {"default", "kube-system", "kube-node-lease"} <= set(names(nss["items"]))
    status, _ = client.get_json("/api/v1/namespaces/default/nodes")
    assert status == 404


# ---- watch --------------------------------------------------------------------------------------


def test_watch_from_list_version_sends_exactly_later_changes(client, server, fleet):
    _, body = client.get_json(LEASES)
    rv = int(body["metadata"]["resourceVersion"])
    fleet.step_to(fleet.now + 10.0)  # every kubelet renews once
    server.store.emit("nodes", "MODIFIED", fleet.node("node-000"), fleet.now)  # another resource: not in a lease watch
    after = server.store.resource_version
    with client.stream(f"{LEASES}?watch=true&resourceVersion={rv}") as w:
        assert w.status == 200
        events = w.events(count=len(fleet.names))
    assert [e["type"] for e in events] == ["MODIFIED"] * len(fleet.names)
    assert sorted(names([e["object"] for e in events])) == sorted(fleet.names)
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
    assert rvs == sorted(rvs) and rvs[0] > rv and rvs[-1] < after
    # the renewTime moved forward by 10s relative to the listed objects
    before = {i["metadata"]["name"]: i["spec"]["renewTime"] for i in body["items"]}
    assert all(e["object"]["spec"]["renewTime"] > before[e["object"]["metadata"]["name"]] for e in events)


def test_watch_without_version_starts_with_synthetic_added_then_live(client, server, fleet):
    with client.stream("/api/v1/nodes?watch=true") as w:
        first = w.events(count=len(fleet.names))
        assert [e["type"] for e in first] == ["ADDED"] * len(fleet.names)
        assert sorted(names([e["object"] for e in first])) == sorted(fleet.names)
        fleet.stop_kubelet("node-003")
        live = w.next_event()
    assert live["type"] == "MODIFIED" and live["object"]["metadata"]["name"] == "node-003"
    ready = next(c for c in live["object"]["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "Unknown"


def test_watch_deleted_and_added(client, server, fleet):
    rv = server.store.resource_version
    node = fleet.node("node-004")
    server.store.emit("nodes", "DELETED", node, fleet.now)
    server.store.emit("nodes", "ADDED", node, fleet.now)
    with client.stream(f"/api/v1/nodes?watch=true&resourceVersion={rv}") as w:
        events = w.events(count=2)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("DELETED", "node-004"), ("ADDED", "node-004")]
    status, _ = client.get_json("/api/v1/nodes/node-004")
    assert status == 200


def test_watch_too_old_version_gets_410_expired(tmp_path):
    fleet = TinyFleet(nodes=3)
    with running_server(tmp_path, fleet=fleet, history_limit=10) as srv:
        client = ApiClient(srv)
        _, body = client.get_json(LEASES)
        old = int(body["metadata"]["resourceVersion"])
        fleet.step_to(fleet.now + 100)  # 30 renewals: more than the 10 (+slack) kept
        assert srv.store.oldest_rv("leases") > old
        with client.stream(f"{LEASES}?watch=true&resourceVersion={old}") as w:
            assert w.status == 200  # as the real API: the error is an event in the stream
            events = w.events(deadline=5)
        assert len(events) == 1 and events[0]["type"] == "ERROR"
        status = events[0]["object"]
        assert status["kind"] == "Status" and status["code"] == 410 and status["reason"] == "Expired"
        assert "too old resource version" in status["message"]
        # a recent version still works
        recent = srv.store.resource_version
        fleet.step_to(fleet.now + 10)
        with client.stream(f"{LEASES}?watch=true&resourceVersion={recent}") as w:
            assert [e["type"] for e in w.events(count=3)] == ["MODIFIED"] * 3


def test_watch_invalid_resource_version_is_400(client):
    status, body = client.get_json(f"{LEASES}?watch=true&resourceVersion=abc")
    assert status == 400 and body["kind"] == "Status"


def test_bookmarks_carry_the_current_version(client, server):
    rv = server.store.resource_version
    with client.stream(f"{LEASES}?watch=true&allowWatchBookmarks=true&resourceVersion={rv}") as w:
        server.store.emit("nodes", "MODIFIED", TinyFleet(nodes=1).node("node-000"), 0)  # moves the global version
        event = w.next_event()
    assert event["type"] == "BOOKMARK"
    assert event["object"]["kind"] == "Lease" and event["object"]["apiVersion"] == "coordination.k8s.io/v1"
    assert int(event["object"]["metadata"]["resourceVersion"]) == server.store.resource_version


def test_no_bookmarks_unless_asked(client, server):
    rv = server.store.resource_version
    with client.stream(f"{LEASES}?watch=true&resourceVersion={rv}&timeoutSeconds=1") as w:
        events = w.events(deadline=5)
    assert events == []


def test_virtual_time_bookmarks_follow_the_store_clock(tmp_path):
    fleet = TinyFleet(nodes=2)
    with running_server(tmp_path, fleet=fleet, bookmark_interval=30.0, bookmark_clock="virtual") as srv:
        client = ApiClient(srv)
        rv = srv.store.resource_version
        with client.stream(f"/api/v1/nodes?watch=true&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds=2") as w:
            time.sleep(0.3)
            srv.store.advance(fleet.now + 10)  # 10 virtual seconds: no bookmark yet
            time.sleep(0.3)
            srv.store.advance(fleet.now + 31)  # past the 30s interval
            events = w.events(deadline=5)
    assert [e["type"] for e in events] == ["BOOKMARK"]


def test_send_initial_events_ends_with_marked_bookmark(client, fleet):
    path = "/api/v1/nodes?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan"
    with client.stream(path) as w:
        events = w.events(count=len(fleet.names) + 1)
    assert [e["type"] for e in events] == ["ADDED"] * len(fleet.names) + ["BOOKMARK"]
    assert events[-1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_timeout_seconds_ends_stream_cleanly_and_connection_is_reused(client, server):
    rv = server.store.resource_version
    conn = client.connection()
    try:
        began = time.monotonic()
        conn.request("GET", f"{LEASES}?watch=true&resourceVersion={rv}&timeoutSeconds=1", headers=client.headers())
        resp = conn.getresponse()
        assert resp.getheader("Transfer-Encoding") == "chunked"
        assert resp.read() == b""  # the terminating chunk arrived: a clean end
        assert 0.9 <= time.monotonic() - began < 5
        conn.request("GET", "/version", headers=client.headers())  # same keep-alive connection
        assert json.loads(conn.getresponse().read())["gitVersion"]
    finally:
        conn.close()


def test_watch_with_field_selector_turns_leaving_into_deleted(client, server, fleet):
    pod = fleet.pod("node-001", 0)
    rv = server.store.resource_version
    moved = json.loads(json.dumps(pod))
    moved["spec"]["nodeName"] = "node-002"
    server.store.emit("pods", "MODIFIED", moved, fleet.now)
    server.store.emit("pods", "MODIFIED", pod, fleet.now)
    with client.stream(f"/api/v1/pods?watch=true&resourceVersion={rv}&fieldSelector=spec.nodeName%3Dnode-001") as w:
        events = w.events(count=2)
    assert [(e["type"], e["object"]["spec"]["nodeName"]) for e in events] == [("DELETED", "node-002"), ("ADDED", "node-001")]


def test_watch_single_object_by_name(client, server, fleet):
    rv = server.store.resource_version
    fleet.step_to(fleet.now + 10)
    with client.stream(f"{NODE_LEASES}?watch=true&resourceVersion={rv}&fieldSelector=metadata.name%3Dnode-002") as w:
        events = w.events(count=1)
        fleet.step_to(fleet.now + 10)
        events += w.events(count=1)
    assert [e["object"]["metadata"]["name"] for e in events] == ["node-002", "node-002"]


# ---- paging -------------------------------------------------------------------------------------


def test_paging_with_limit_and_continue(client, fleet, server):
    seen: list[str] = []
    path = "/api/v1/nodes?limit=2"
    rvs = set()
    pages = 0
    while True:
        _, body = client.get_json(path)
        pages += 1
        seen += names(body["items"])
        rvs.add(body["metadata"]["resourceVersion"])
        token = body["metadata"].get("continue")
        if not token:
            assert "remainingItemCount" not in body["metadata"]
            break
        assert body["metadata"]["remainingItemCount"] == len(fleet.names) - len(seen)
        server.store.emit("nodes", "DELETED", fleet.node("node-004"), 0)  # a consistent snapshot ignores this
        path = f"/api/v1/nodes?limit=2&continue={token}"
    assert seen == sorted(fleet.names) and pages == 3 and len(rvs) == 1


def test_paging_with_selector(client):
    _, body = client.get_json("/api/v1/pods?limit=1&labelSelector=app%3Dweb")
    first = names(body["items"])
    token = body["metadata"]["continue"]
    rest: list[str] = []
    while token:
        _, body = client.get_json(f"/api/v1/pods?limit=1&labelSelector=app%3Dweb&continue={token}")
        rest += names(body["items"])
        token = body["metadata"].get("continue")
    _, full = client.get_json("/api/v1/pods?labelSelector=app%3Dweb")
    assert first + rest == names(full["items"]) and len(full["items"]) == 5


def test_bad_and_expired_continue(tmp_path, client):
    status, body = client.get_json("/api/v1/nodes?limit=1&continue=garbage!!")
    assert status == 400 and body["reason"] == "BadRequest"
    _, body = client.get_json("/api/v1/nodes?limit=1")
    token = body["metadata"]["continue"]
    for _i in range(20):  # push the snapshot out of the server's cache with other lists
        client.server.store.emit("nodes", "MODIFIED", TinyFleet(nodes=1).node("node-000"), 0)
        client.get_json("/api/v1/nodes?limit=1")
    status, body = client.get_json(f"/api/v1/nodes?limit=1&continue={token}")
    assert status == 410 and body["reason"] == "Expired" and body["kind"] == "Status"


# ---- selectors ----------------------------------------------------------------------------------


def test_pod_field_and_label_selectors(client):
    def pod_names(query: str) -> list[str]:
        status, body = client.get_json(f"/api/v1/pods?{query}")
        assert status == 200, body
        return names(body["items"])

    assert pod_names("fieldSelector=spec.nodeName%3Dnode-001") == ["web-node-001-0", "web-node-001-1"]
    assert pod_names("fieldSelector=spec.nodeName%3D%3Dnode-001,metadata.namespace%3Ddefault") == ["web-node-001-0"]
    assert len(pod_names("fieldSelector=spec.nodeName%21%3Dnode-001")) == 8
    assert pod_names("fieldSelector=metadata.name%3Dweb-node-002-1") == ["web-node-002-1"]
    assert len(pod_names("labelSelector=app%3Dweb")) == 5
    assert len(pod_names("labelSelector=app%3D%3Dagent")) == 5
    assert len(pod_names("labelSelector=app%21%3Dweb")) == 5
    assert len(pod_names("labelSelector=tier+in+(t0,t9)")) == 5
    assert len(pod_names("labelSelector=tier+notin+(t0)")) == 5
    assert len(pod_names("labelSelector=tier")) == 10
    assert pod_names("labelSelector=%21tier") == []
    assert len(pod_names("labelSelector=app%3Dweb,tier+in+(t0)")) == 5
    assert pod_names("labelSelector=app%3Dweb,tier+in+(t1)") == []


def test_event_field_selectors(client, fleet, server):
    fleet.stop_kubelet("node-002")

    def event_reasons(query: str) -> list[str]:
        status, body = client.get_json(f"/api/v1/events?{query}")
        assert status == 200, body
        return [e["reason"] for e in body["items"]]

    on_node = event_reasons("fieldSelector=involvedObject.kind%3DNode,involvedObject.name%3Dnode-002")
    assert sorted(on_node) == ["NodeNotReady", "Starting"]
    assert event_reasons("fieldSelector=reason%3DNodeNotReady") == ["NodeNotReady"]
    assert event_reasons("fieldSelector=source%3Dnode-controller") == ["NodeNotReady"]
    assert len(event_reasons("fieldSelector=type%3DNormal")) == len(fleet.names) + 1
    assert event_reasons("fieldSelector=involvedObject.uid%3Duid-node-002,reason%3DStarting") == ["Starting"]
    # kubectl describe asks for involvedObject.namespace= (empty): node events have none
    assert len(event_reasons("fieldSelector=involvedObject.namespace%3D,involvedObject.name%3Dnode-001")) == 1


def test_unknown_field_selector_is_400(client):
    status, body = client.get_json("/api/v1/pods?fieldSelector=spec.bogus%3Dx")
    assert status == 400 and body["kind"] == "Status" and body["reason"] == "BadRequest"
    assert "field label not supported: spec.bogus" in body["message"]
    status, body = client.get_json("/api/v1/nodes?fieldSelector=spec.nodeName%3Dx")
    assert status == 400
    status, body = client.get_json("/api/v1/pods?labelSelector=a+in+(b")
    assert status == 400 and body["kind"] == "Status"
    status, body = client.get_json("/api/v1/pods?watch=true&fieldSelector=bogus%3D1")
    assert status == 400


# ---- auth, read-only, TLS -----------------------------------------------------------------------


def test_missing_or_wrong_token_is_401(server):
    for token in ("", "wrong-token"):
        status, headers, body = ApiClient(server, token=token).request("/api/v1/nodes")
        assert status == 401
        assert json.loads(body)["reason"] == "Unauthorized"
    # /version is public, as on a real cluster, but a wrong token is still refused
    assert ApiClient(server, token="").request("/version")[0] == 200
    assert ApiClient(server, token="wrong").request("/version")[0] == 401


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_writes_are_refused_with_405(client, method):
    status, _, body = client.request("/api/v1/nodes/node-000", method=method, body=b'{"spec":{}}',
                                     headers={"Content-Type": "application/json"})
    doc = json.loads(body)
    assert status == 405 and doc["kind"] == "Status" and doc["reason"] == "MethodNotAllowed"
    assert client.get_json("/api/v1/nodes/node-000")[0] == 200


def test_tls_verifies_with_the_written_ca_only(server):
    ctx = ssl.create_default_context(cadata=server.ca_cert_pem.decode())
    req = urllib.request.Request(f"{server.url}/api/v1/nodes", headers={"Authorization": f"Bearer {server.token}"})
    with urllib.request.urlopen(req, context=ctx, timeout=5) as resp:
        assert resp.status == 200
    # "localhost" is in the certificate too
    req = urllib.request.Request(f"https://localhost:{server.port}/version")
    with urllib.request.urlopen(req, context=ctx, timeout=5) as resp:
        assert resp.status == 200
    with pytest.raises(urllib.error.URLError) as err:
        urllib.request.urlopen(req, context=ssl.create_default_context(), timeout=5)
    assert isinstance(err.value.reason, ssl.SSLCertVerificationError)


def test_kubeconfig_is_written_and_reused_on_restart(tmp_path):
    path = tmp_path / "kc"
    first = SimServer(TinyFleet(nodes=2), port=None, kubeconfig_out=path, run_fleet=False).start()
    try:
        kc = path.read_text()
        assert first.token in kc and "certificate-authority-data" in kc and first.url in kc
        assert (path.stat().st_mode & 0o777) == 0o600
        key_file = tmp_path / "kc.ca-key.pem"
        assert (key_file.stat().st_mode & 0o777) == 0o600
        token, ca, port = first.token, first.ca_cert_pem, first.port
    finally:
        first.stop()
    second = SimServer(TinyFleet(nodes=2), port=None, kubeconfig_out=path, run_fleet=False).start()
    try:
        assert (second.token, second.ca_cert_pem, second.port) == (token, ca, port)
        # a client that trusted the first server's CA trusts the second one
        ctx = ssl.create_default_context(cadata=ca.decode())
        req = urllib.request.Request(f"https://127.0.0.1:{port}/api/v1/nodes", headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(req, context=ctx, timeout=5) as resp:
            assert len(json.loads(resp.read())["items"]) == 2
    finally:
        second.stop()


def test_kubernetes_client_works_with_the_kubeconfig(server, fleet):
    from kubernetes import client as k8s
    from kubernetes import config, watch

    api_client = config.new_client_from_config(config_file=str(server.kubeconfig_path))
    core = k8s.CoreV1Api(api_client)
    nodes = core.list_node()
    assert sorted(n.metadata.name for n in nodes.items) == sorted(fleet.names)
    pods = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=node-000")
    assert {p.spec.node_name for p in pods.items} == {"node-000"}
    coord = k8s.CoordinationV1Api(api_client)
    leases = coord.list_namespaced_lease("kube-node-lease")
    fleet.step_to(fleet.now + 10)
    w = watch.Watch()
    got = []
    for event in w.stream(coord.list_namespaced_lease, "kube-node-lease",
                          resource_version=leases.metadata.resource_version, timeout_seconds=5):
        got.append(event["object"].metadata.name)
        if len(got) == len(fleet.names):
            w.stop()
    assert sorted(got) == sorted(fleet.names)
    api_client.close()


def test_plain_http_mode(tmp_path):
    with running_server(tmp_path, fleet=TinyFleet(nodes=2), tls=False) as srv:
        assert srv.url.startswith("http://")
        assert "certificate-authority-data" not in srv.kubeconfig_path.read_text()
        assert ApiClient(srv).get_json("/api/v1/nodes")[0] == 200
        assert ApiClient(srv, token="").get_json("/api/v1/nodes")[0] == 401


def test_requests_are_logged_without_tokens(tmp_path):
    log = io.StringIO()
    with running_server(tmp_path, fleet=TinyFleet(nodes=2), log=log) as srv:
        client = ApiClient(srv)
        client.get_json("/api/v1/nodes")
        client.get_json("/api/v1/nodes/missing")
        ApiClient(srv, token="bad").get_json("/api/v1/nodes")
        with client.stream(f"{LEASES}?watch=true&timeoutSeconds=1") as w:
            w.events(deadline=3)
        wait_until(lambda: any(r.watch for r in srv.request_log))
        text = log.getvalue()
        assert srv.token not in text and "Bearer" not in text
        lines = text.splitlines()
        assert any(" GET /api/v1/nodes 200 " in line for line in lines)
        assert any(" GET /api/v1/nodes/missing 404 " in line for line in lines)
        assert sum(" 401 " in line for line in lines) == 1
        assert any("(watch)" in line for line in lines)
        statuses = [r.status for r in srv.request_log if r.target == "/api/v1/nodes"]
        assert statuses == [200, 401]


def test_running_fleet_advances_in_wall_time(tmp_path):
    fleet = TinyFleet(nodes=3)
    start = fleet.now
    with running_server(tmp_path, fleet=fleet, run_fleet=True, speed=100.0, step_interval=0.02) as srv:
        client = ApiClient(srv)
        rv = srv.store.resource_version
        with client.stream(f"{LEASES}?watch=true&resourceVersion={rv}") as w:
            events = w.events(count=6, deadline=10)
        assert len(events) == 6
        assert fleet.now > start + 10
        assert srv.store.now >= fleet.now - 5


def test_store_history_is_bounded():
    store = ObjectStore(history_limit=100)
    lease = TinyFleet(nodes=1).lease("node-000")
    for _ in range(1000):
        store.emit("leases", "MODIFIED", lease, 0)
    _, entries, cursor = store.snapshot("leases")
    assert len(entries) == 1
    assert store.resource_version == 1001  # the kube-node-lease namespace was created first
    retained = cursor - store.cursor_after("leases", store.oldest_rv("leases"))
    assert 100 <= retained <= 125
    with pytest.raises(Gone):
        store.cursor_after("leases", 500)
    with pytest.raises(Gone):
        store.read("leases", cursor - 200)


def test_built_renewals_are_stored_as_emit_stores_them():
    """``emit_built`` (the bench's stand-in renewer): a MODIFIED with the next resourceVersion, the
    JSON the caller built around it as the object a list and a watch serve, the selectable fields
    kept; a key the store lacks is skipped; the history stays bounded."""
    import orjson

    store = ObjectStore(history_limit=10)
    lease = TinyFleet(nodes=1).lease("node-000")
    store.emit("leases", "ADDED", lease, 0)
    _, _, cursor = store.snapshot("leases")

    def build(rv: int) -> bytes:
        return orjson.dumps({**lease, "metadata": {**lease["metadata"], "resourceVersion": str(rv)},
                             "spec": {**lease["spec"], "renewTime": "2026-12-04T10:00:00.123456Z"}})

    key = ("kube-node-lease", "node-000")
    assert store.emit_built("leases", [(key, build), (("kube-node-lease", "gone"), build)], t=5.0) == 1
    changes, _, rv = store.read("leases", cursor)
    (change,) = changes
    assert (change.rv, change.type, rv, store.now) == (3, "MODIFIED", 3, 5.0)
    assert change.obj["metadata"]["resourceVersion"] == "3"
    assert change.obj["spec"]["renewTime"] == "2026-12-04T10:00:00.123456Z"
    assert store.get("leases", *key).obj == change.obj
    assert change.slim == change.prev
    for _ in range(100):
        store.emit_built("leases", [(key, build)])
    with pytest.raises(Gone):
        store.read("leases", cursor)


def test_sim_server_command(tmp_path):
    """``nodewatch sim-server`` serves, prints the kubeconfig hint, and a restart is the same cluster."""
    import signal
    import subprocess
    import sys

    kubeconfig = tmp_path / "cli.kubeconfig"
    log = tmp_path / "requests.log"

    def start() -> tuple[subprocess.Popen, list[str]]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "nodewatch.cli", "sim-server", "--nodes", "4", "--scenario", "steady",
             "--kubeconfig-out", str(kubeconfig), "--log", str(log)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        lines = []
        while not any(line.startswith("  export KUBECONFIG=") for line in lines):
            line = proc.stdout.readline()
            assert line, f"sim-server exited: {proc.stderr.read()}"
            lines.append(line)
        return proc, lines

    proc, lines = start()
    try:
        url = next(line.split()[-1] for line in lines if "API server:" in line)
        assert url.startswith("https://127.0.0.1:")
        assert f"export KUBECONFIG={kubeconfig.resolve()}" in "".join(lines)
        from kubernetes import client as k8s
        from kubernetes import config

        api = config.new_client_from_config(config_file=str(kubeconfig))
        assert len(k8s.CoreV1Api(api).list_node().items) == 4
        api.close()
        first_config = kubeconfig.read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    proc, lines = start()
    try:
        assert url in "".join(lines)  # same port
        assert kubeconfig.read_text() == first_config  # same CA, token and server
        api = config.new_client_from_config(config_file=str(kubeconfig))
        assert len(k8s.CoreV1Api(api).list_node().items) == 4
        api.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    text = log.read_text()
    assert "GET /api/v1/nodes 200" in text
    assert "Bearer" not in text and "token" not in text.lower()


def test_a_watcher_reads_a_burst_of_30000_events_to_the_last(tmp_path):
    """One watcher reading lines over TLS on loopback gets every event of a burst, the last one
    with the store's resourceVersion (speed is ``bench/live_path.py``'s figure, not a test's)."""
    fleet = TinyFleet(nodes=500, pods_per_node=0)
    with running_server(tmp_path, fleet=fleet) as srv:
        rv = srv.store.resource_version
        leases = [fleet.lease(n) for n in fleet.names]
        count = 30_000
        srv.store.emit_many(("leases", "MODIFIED", leases[i % len(leases)], 0.0) for i in range(count))
        with ApiClient(srv).stream(f"{LEASES}?watch=true&resourceVersion={rv}") as w:
            for _ in range(count - 1):
                w.resp.readline()
            last = json.loads(w.resp.readline())
        assert int(last["object"]["metadata"]["resourceVersion"]) == srv.store.resource_version


def test_factory_fixture_gives_independent_servers(sim_server_factory):
    a = sim_server_factory(TinyFleet(nodes=1))
    b = sim_server_factory(TinyFleet(nodes=2), tls=False)
    assert a.port != b.port and a.kubeconfig_path != b.kubeconfig_path
    assert len(ApiClient(a).get_json("/api/v1/nodes")[1]["items"]) == 1
    assert len(ApiClient(b).get_json("/api/v1/nodes")[1]["items"]) == 2
