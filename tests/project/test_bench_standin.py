"""The stand-in server's renewals (``bench/live_path.FastRenewer``): each change is its object's JSON
with the resourceVersion and times filled into a template, so what a client reads must be exactly
the object a full serialization of the same values gives (otherwise the steady-state benchmark
would measure nodewatch on bytes no API server sends)."""

from __future__ import annotations

import orjson

from bench.live_path import _lease_slots, _node_slots, _Template
from bench.objects import raw_lease, raw_node
from nodewatch.sim.store import ObjectStore


def test_a_templated_renewal_is_the_serialized_object():
    lease = raw_lease("ip-10-0-0-7.ec2.internal", 1_790_000_000.0)
    tpl = _Template(lease, _lease_slots)
    got = orjson.loads(tpl.build((b"4711", b"2026-12-04T10:00:00.123456Z", b"2026-12-04T10:00:00Z")))
    want = orjson.loads(orjson.dumps(lease))
    want["metadata"]["resourceVersion"] = "4711"
    want["spec"]["renewTime"] = "2026-12-04T10:00:00.123456Z"
    want["metadata"]["managedFields"][0]["time"] = "2026-12-04T10:00:00Z"
    assert got == want and list(got) == list(want)


def test_a_templated_node_status_report_moves_every_heartbeat_and_stores_as_emit_would():
    node = raw_node(3)
    tpl = _Template(node, _node_slots)
    store = ObjectStore()
    store.emit("nodes", "ADDED", node, 0)
    key = ("", node["metadata"]["name"])
    stored = store.emit_built("nodes", [(key, lambda rv: tpl.build((str(rv).encode(), b"", b"2026-12-04T10:00:00Z")))])
    got = store.get("nodes", *key).obj
    assert stored == 1 and got["metadata"]["resourceVersion"] == str(store.resource_version)
    beats = {c["lastHeartbeatTime"] for c in got["status"]["conditions"]}
    assert beats == {"2026-12-04T10:00:00Z"}
    got["metadata"]["resourceVersion"] = node["metadata"].get("resourceVersion")
    for c, was in zip(got["status"]["conditions"], node["status"]["conditions"]):
        c["lastHeartbeatTime"] = was["lastHeartbeatTime"]
    assert got == orjson.loads(orjson.dumps(node)) | {"metadata": got["metadata"]}
