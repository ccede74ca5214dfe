"""The flight recorder's fast path for plain Lease renewals (``hub/lease_renewal.py``): it writes
exactly the lines the general path writes, for a stream that mixes plain renewals with everything
that is not one."""

from __future__ import annotations

import random

import orjson

from nodewatch.core.clock import ManualClock
from nodewatch.core.settings import Settings
from nodewatch.hub.flight_recorder import SegmentedRecorder
from nodewatch.hub.lease_renewal import learn
from nodewatch.sources.columnar import _lease_shape, _Template, iter_file_lines, micro_text
from nodewatch.sources.recording import sanitize
from nodewatch.sources.segments import list_segments

T0 = 1_764_410_000.0


def _time(sec: int) -> str:
    return micro_text(sec * 1_000_000)[:19] + "Z"


def _lease(name: str, renew_us: int, rv: int, holder: str | None = None, uid: str = "u") -> dict:
    """A Lease as the API server sends it (the kubelet's managedFields entry whole)."""
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "kube-node-lease", "uid": f"{uid}-{name}",
                         "resourceVersion": str(rv), "creationTimestamp": "2026-01-01T00:00:00Z",
                         "managedFields": [{"manager": "kubelet", "operation": "Update",
                                            "apiVersion": "coordination.k8s.io/v1",
                                            "time": _time(renew_us // 1_000_000), "fieldsType": "FieldsV1",
                                            "fieldsV1": {"f:spec": {"f:renewTime": {}}}}]},
            "spec": {"holderIdentity": holder or name, "leaseDurationSeconds": 40,
                     "renewTime": micro_text(renew_us)}}


def _node(name: str, t: float) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"a": "b"}},
            "status": {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": _time(int(t))}]}}


def _stream(seed: int = 3) -> list[tuple]:
    """(cluster, resource, type, object, receive time, listing) of two clusters: plain renewals, and
    every kind of event that is not one, some of them the same length as the JSON before."""
    rng = random.Random(seed)
    rv = {"a": 99_900, "b": 5}  # cluster a's resourceVersions gain a digit on the way
    names = [f"node-{i}" for i in range(6)]
    out: list[tuple] = []
    last_t = {"a": T0, "b": T0}

    def at(cluster: str, base: float) -> float:
        last_t[cluster] = t = max(last_t[cluster], base + 0.001 + rng.random() * 0.01)
        return t

    for cluster in ("a", "b"):
        for n in names:
            rv[cluster] += 1
            out.append((cluster, "leases", "ADDED", _lease(n, int(T0 * 1e6) - 3_000_000, rv[cluster]), T0, True))
        out.append((cluster, "leases", "SYNCED", None, T0, False))
    for rnd in range(1, 40):
        base = T0 + rnd * 10
        for cluster in ("a", "b"):
            for i, n in enumerate(names):
                renew = int((base + rng.random() * 0.4) * 1e6)
                rv[cluster] += 1
                obj = _lease(n, renew, rv[cluster], uid="u2" if cluster == "a" and i == 2 and rnd > 11 else "u")
                etype = "MODIFIED"
                t: float = at(cluster, renew / 1e6)
                if i == 0 and rnd >= 5:
                    obj["spec"]["holderIdentity"] = "someone-else"  # a holder change, then renewals of it
                elif i == 1 and rnd >= 8:  # another manager's entry: not kept, but not the raw JSON learned
                    obj["metadata"]["managedFields"].append({"manager": "kube-controller-manager",
                                                             "operation": "Update", "time": _time(int(base))})
                elif i == 2 and rnd == 10:
                    etype = "DELETED"
                elif i == 2 and rnd == 11:
                    etype = "ADDED"
                elif i == 3 and rnd == 15:
                    obj["spec"]["renewTime"] = _time(renew // 1_000_000)  # no microseconds: a whole line
                elif i == 4 and rnd in (16, 17):  # the spec's keys in another order: the same length
                    s = obj["spec"]
                    obj["spec"] = {"renewTime": s["renewTime"], "holderIdentity": s["holderIdentity"],
                                   "leaseDurationSeconds": s["leaseDurationSeconds"]}
                elif i == 5 and rnd == 18:
                    obj["metadata"]["resourceVersion"] = "0" + str(rv[cluster])[1:]  # a leading zero
                elif i == 5 and rnd == 19:
                    obj["spec"]["leaseDurationSeconds"] = 40.0
                elif i == 5 and rnd == 20:
                    t = int(t)  # a receive time without a fraction
                elif i == 4 and rnd == 25:
                    obj["spec"]["renewTime"] = obj["spec"]["renewTime"][:-1] + "x"  # not a time, same length
                out.append((cluster, "leases", etype, obj, t, False))
            if rnd % 7 == 0:
                out.append((cluster, "nodes", "MODIFIED", _node("node-0", base), at(cluster, base), False))
        if rnd == 12:  # a relist of cluster b
            for n in names:
                rv["b"] += 1
                out.append(("b", "leases", "ADDED", _lease(n, int(base * 1e6), rv["b"]), at("b", base), True))
    return sorted(out, key=lambda e: e[4])


def _record(directory, stream, fast: bool) -> SegmentedRecorder:
    clock = ManualClock(T0)
    clusters = [{"name": "a", "context": "a"}, {"name": "b", "context": "b"}]
    rec = SegmentedRecorder(directory, {"kind": "test"}, Settings(), segment_seconds=120.0, keep_seconds=None,
                            keep_bytes=None, clock=clock, clusters=clusters, cluster_records=lambda _: {},
                            record_format="columnar", fast_renewals=fast)
    writers = {c: rec.for_cluster(c) for c in ("a", "b")}
    for cluster, resource, etype, obj, t, listing in stream:
        clock.set(max(clock.now(), t))
        writers[cluster].write(resource, etype, obj, t, listing)
    rec.close()
    return rec


def _lines(directory) -> list[list[bytes]]:
    out = []
    for seg in list_segments(directory):
        problems: list[str] = []
        with open(seg.path, "rb") as f:
            out.append(list(iter_file_lines(f, seg.path.name, problems)))
        assert problems == []
    return out


def test_the_fast_path_writes_the_lines_of_the_general_path(tmp_path):
    stream = _stream()
    fast = _record(tmp_path / "fast", stream, True)
    general = _record(tmp_path / "general", stream, False)
    renewals = sum(1 for e in stream if e[1] == "leases" and e[2] == "MODIFIED")
    assert general.fast_lines == 0
    assert renewals * 0.5 < fast.fast_lines < renewals  # most renewals, not the odd ones
    assert fast.lines == general.lines
    got, want = _lines(tmp_path / "fast"), _lines(tmp_path / "general")
    assert len(want) >= 3  # rotations: keyframes of Leases the fast path wrote last
    assert got == want
    assert any(b'"list":true' in line and b'"leases"' in line for line in want[1])  # a keyframe's Leases


def test_a_plain_renewal_is_told_apart_from_the_raw_json_alone():
    first = _lease("n", 1_764_410_000_123_456, 123_456)
    raw, data = orjson.dumps(first), orjson.dumps(sanitize(first, "leases"))
    fast = learn(raw, data, _Template(_lease_shape(data), None, 0, "n"))
    assert fast is not None
    nxt = _lease("n", 1_764_410_010_654_321, 123_999)
    assert fast.match(orjson.dumps(nxt)) == (1_764_410_010_654_321, 123_999, 1_764_410_010)

    def changed(edit) -> bytes:
        obj = orjson.loads(orjson.dumps(nxt))
        edit(obj)
        return orjson.dumps(obj)

    assert fast.match(changed(lambda o: o["spec"].update(holderIdentity="m"))) is None  # the same length
    assert fast.match(changed(lambda o: o["metadata"].update(resourceVersion="012345"))) is None
    assert fast.match(changed(lambda o: o["metadata"].update(resourceVersion="1234567"))) is None
    assert fast.match(changed(lambda o: o["metadata"].update(resourceVersion="12345a"))) is None
    assert fast.match(changed(lambda o: o["spec"].update(renewTime="2026-11-29T09:59:59.67056ZZ"))) is None
    assert fast.match(changed(lambda o: o["spec"].update(renewTime="2026-13-29T09:59:59.670563Z"))) is None
    assert fast.match(changed(lambda o: o["metadata"]["managedFields"][0].update(time="2026-11-29 09:59:59Z"))) is None
    assert fast.match(changed(lambda o: o["metadata"]["managedFields"][0].update(time='2026-11-29T09:59:5"Z'))) is None


def test_a_lease_of_other_kinds_is_never_learned():
    obj = _lease("n", 1_764_410_000_123_456, 123_456)
    obj["metadata"]["managedFields"].append({"manager": "kubelet", "operation": "Update", "time": _time(1)})
    raw, data = orjson.dumps(obj), orjson.dumps(sanitize(obj, "leases"))
    assert learn(raw, data, _Template(_lease_shape(data), None, 0, "n")) is None  # two kubelet times
    plain = _lease("n", 1_764_410_000_123_456, 123_456)
    other = orjson.dumps(sanitize(_lease("n", 1_764_410_000_123_456, 123_456, holder="h"), "leases"))
    # a template that does not rebuild this Lease's sanitized JSON
    assert learn(orjson.dumps(plain), orjson.dumps(sanitize(plain, "leases")), _Template(_lease_shape(other), None, 0, "n")) is None
