"""Recording format v1: writer, reader, bad files, crash safety, fuzz."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodewatch.core.clock import ManualClock
from nodewatch.core.rules import NodeState
from nodewatch.core.settings import Settings
from nodewatch.sources.recording import (
    FLUSH_INTERVAL,
    Recorder,
    RecordingError,
    sanitize,
)
from nodewatch.sources.recording_input import read_recording
from nodewatch.sources.replay import ReplaySource
from support.factories import T0, lease, node, pod, taint
from support.simserver import wait_until

HERE = Path(__file__).parents[1]


def _write_small(path: str) -> None:
    with Recorder(path, {"kind": "test", "name": "unit"}, Settings(server_version="v1.33.1")) as rec:
        rec.write("nodes", "ADDED", node("a"), T0, listing=True)
        rec.write("nodes", "SYNCED", None, T0)
        rec.write("leases", "ADDED", lease("a", T0 - 1), T0 + 0.1, listing=True)
        rec.write("leases", "SYNCED", None, T0 + 0.1)
        rec.write_health("leases", T0 + 0.2, connected=True, synced=True, token="must-not-appear")
        rec.write("leases", "MODIFIED", lease("a", T0 + 9), T0 + 9.05)


@pytest.mark.parametrize("name", ["r.jsonl", "r.jsonl.gz"])
def test_round_trip(tmp_path, name):
    path = str(tmp_path / name)
    _write_small(path)
    if name.endswith(".gz"):
        assert open(path, "rb").read(2) == b"\x1f\x8b"
    header, entries, problems = read_recording(path)
    assert problems == []
    assert header["nodewatch_recording"] == 1
    assert header["source"] == {"kind": "test", "name": "unit"}
    assert header["settings"]["server_version"] == "v1.33.1"
    assert header["started_at"].endswith("Z")
    assert [(e.resource, e.etype, e.listing) for e in entries] == [
        ("nodes", "ADDED", True), ("nodes", "SYNCED", False), ("leases", "ADDED", True),
        ("leases", "SYNCED", False), ("leases", "HEALTH", False), ("leases", "MODIFIED", False)]
    assert entries[4].health == {"connected": True, "synced": True}  # unknown keys are not written
    assert entries[-1].t == T0 + 9.05
    assert entries[0].obj["metadata"]["name"] == "a"


def test_lines_are_the_documented_format(tmp_path):
    path = str(tmp_path / "r.jsonl")
    _write_small(path)
    lines = [json.loads(x) for x in open(path)]
    assert set(lines[0]) == {"nodewatch_recording", "started_at", "source", "settings"}
    want = node("a")
    del want["metadata"]["uid"]  # a Node as read (``node_as_read``)
    assert lines[1] == {"t": T0, "resource": "nodes", "type": "ADDED", "object": want, "list": True}
    assert lines[2] == {"t": T0, "resource": "nodes", "type": "SYNCED", "object": None}
    assert lines[5]["health"] == {"resource": "leases", "connected": True, "synced": True}


def _production_node(name: str) -> dict:
    """A Node as a cloud's kubelet reports it: its image list, IDs, annotations and pod CIDRs beside
    what nodewatch reads, a taint with its time, the kubelet's port."""
    obj = node(name, "False", taints=[taint("node.kubernetes.io/not-ready", "NoExecute", T0 - 30)],
               conditions={"MemoryPressure": "False", "DiskPressure": "Unknown"}, unschedulable=True)
    obj["metadata"].update(annotations={"node.alpha.kubernetes.io/ttl": "0", "csi.volume.kubernetes.io/nodeid": "{}"},
                           resourceVersion="4242", creationTimestamp="2026-10-19T16:06:07Z",
                           ownerReferences=[{"kind": "Machine", "name": "m", "uid": "u"}])
    obj["spec"].update(podCIDR="10.0.0.0/24", podCIDRs=["10.0.0.0/24"], providerID="aws:///eu-west-1a/i-0f1")
    obj["status"].update(
        images=[{"names": [f"registry.example/img{i}:v1"], "sizeBytes": 1000 + i} for i in range(40)],
        addresses=[{"type": "InternalIP", "address": "172.16.0.7"}, {"type": "Hostname", "address": name}],
        capacity={"cpu": "8", "memory": "33174432Ki", "pods": "110"},
        allocatable={"cpu": "7910m", "memory": "32174432Ki", "pods": "110"},
        daemonEndpoints={"kubeletEndpoint": {"Port": 10250}},
        nodeInfo={"machineID": "ec2a", "systemUUID": "ec2b", "bootID": "b007", "kernelVersion": "6.1.0",
                  "osImage": "Bottlerocket", "containerRuntimeVersion": "containerd://1.7.2",
                  "kubeletVersion": "v1.33.2", "kubeProxyVersion": "v1.33.2", "architecture": "amd64"})
    return obj


def test_a_recorded_node_keeps_what_nodewatch_reads_and_reads_back_the_same():
    """A Node is recorded as nodewatch reads it (``node_as_read``): its record, by the typed decoder
    and by the dict reader, is the record of the Node as received; what nodewatch never reads (the
    image list, IDs, annotations, CIDRs) is not written."""
    from nodewatch.core.objects import node_from_dict
    from nodewatch.core.wire import DECODERS

    full = _production_node("n-1")
    original = json.dumps(full, sort_keys=True)
    kept = sanitize(full, "nodes")
    assert json.dumps(full, sort_keys=True) == original  # the input is not modified
    text = json.dumps(kept)
    for unread in ("images", "ec2a", "ec2b", "b007", "providerID", "podCIDR", "annotations", "uid", "ownerReferences",
                   "kubeProxyVersion", "architecture"):
        assert unread not in text
    assert list(kept) == list(full) and list(kept["status"]["nodeInfo"]) == ["kernelVersion", "osImage",
                                                                              "containerRuntimeVersion",
                                                                              "kubeletVersion"]
    assert len(orjson.dumps(kept)) < len(orjson.dumps(full)) / 2
    assert node_from_dict(kept) == node_from_dict(full)
    decode = DECODERS["nodes"].decode_object
    assert decode(orjson.dumps(kept)) == decode(orjson.dumps(full)) == node_from_dict(full)
    odd = {"metadata": "not a mapping", "status": {"nodeInfo": ["odd"], "images": []}}
    assert sanitize(odd, "nodes") == {"metadata": "not a mapping", "status": {"nodeInfo": ["odd"]}}


def test_a_recorded_lease_keeps_what_nodewatch_reads_and_reads_back_the_same():
    """A Lease is recorded as nodewatch reads it (``lease_as_read``): not its uid, owner reference or
    creation time; of its managedFields its kubelet's writes; its record, by either reader, is the
    record of the Lease as received."""
    from nodewatch.core.objects import lease_from_dict
    from nodewatch.core.wire import DECODERS

    full = lease("n-1", T0, written=T0 - 1)
    full["metadata"].update(uid="6ea67130", creationTimestamp="2026-08-20T14:40:20Z", labels={"a": "b"},
                            ownerReferences=[{"apiVersion": "v1", "kind": "Node", "name": "n-1", "uid": "f4836b1d"}],
                            resourceVersion="150770")
    full["metadata"]["managedFields"].append({"manager": "kube-controller-manager", "operation": "Update",
                                              "time": "2026-11-29T10:00:01Z"})
    full["spec"].update(acquireTime="2026-08-20T14:40:20.000000Z", leaseTransitions=0)
    original = json.dumps(full, sort_keys=True)
    kept = sanitize(full, "leases")
    assert json.dumps(full, sort_keys=True) == original
    text = json.dumps(kept)
    for unread in ("6ea67130", "f4836b1d", "creationTimestamp", "labels", "kube-controller-manager", "fieldsV1",
                   "acquireTime", "leaseTransitions"):
        assert unread not in text
    assert [m["manager"] for m in kept["metadata"]["managedFields"]] == ["kubelet"]
    assert lease_from_dict(kept) == lease_from_dict(full)
    decode = DECODERS["leases"].decode_object
    assert decode(orjson.dumps(kept)) == decode(orjson.dumps(full)) == lease_from_dict(full)


def test_sanitize_removes_secret_prone_fields():
    p = pod("p", "n1")
    p["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    p["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": '{"secret": 1}', "keep": "me"}
    p["spec"]["containers"] = [{"name": "c", "image": "x", "args": ["--password=hunter2"], "command": ["sh"],
                                "env": [{"name": "DB_PASSWORD", "value": "hunter2"},
                                        {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "s"}}}]}]
    p["spec"]["initContainers"] = [{"name": "i", "args": ["--token=abc"]}]
    original = json.dumps(p, sort_keys=True)
    clean = sanitize(p, "pods")
    text = json.dumps(clean)
    for secret in ("hunter2", "--token=abc", "last-applied", "managedFields", "secretKeyRef", '"sh"'):
        assert secret not in text
    assert clean["metadata"]["annotations"] == {"keep": "me"}
    assert clean["spec"]["containers"][0]["env"] == [{"name": "DB_PASSWORD"}, {"name": "FROM_SECRET"}]
    assert clean["spec"]["nodeName"] == "n1"
    assert json.dumps(p, sort_keys=True) == original  # the input is not modified


def test_writes_from_many_threads_are_whole_lines(tmp_path):
    path = str(tmp_path / "r.jsonl.gz")
    rec = Recorder(path, {"kind": "test"}, Settings())

    def writer(k: int) -> None:
        for i in range(500):
            rec.write("leases", "MODIFIED", lease(f"n{k}", T0 + i), T0 + i)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rec.close()
    _, entries, problems = read_recording(path)
    assert len(entries) == 4000
    assert problems == []


def readable_lines(path: str) -> int:
    """Lines another process could read now (a gzip member without its end: what is there)."""
    lines = 0
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        try:
            for line in f:
                lines += line.endswith(b"\n")
        except EOFError:
            pass
    return lines


def test_flushed_on_time_without_close(tmp_path):
    path = str(tmp_path / "r.jsonl.gz")
    clock = ManualClock(T0)
    rec = Recorder(path, {"kind": "test"}, Settings(), clock=clock)
    rec.write("nodes", "ADDED", node("a"), T0)
    assert readable_lines(path) == 1  # the header is flushed at once; the line waits for its time
    clock.advance(FLUSH_INTERVAL)
    wait_until(lambda: readable_lines(path) == 2)  # no more writes: the flusher thread's next look
    rec.close()


CRASHER = """
import sys, time
sys.path.insert(0, {root!r}); sys.path.insert(0, {tests!r})
from support.factories import lease, node, T0
from nodewatch.core.settings import Settings
from nodewatch.sources.recording import Recorder
rec = Recorder(sys.argv[1], {{"kind": "crash"}}, Settings())
rec.write("nodes", "ADDED", node("a"), T0, listing=True)
rec.write("nodes", "SYNCED", None, T0)
i = 0
while True:
    rec.write("leases", "MODIFIED", lease("a", T0 + i), T0 + i)
    i += 1
    if i % 1000 == 0:
        print(i, flush=True)
    time.sleep(0.0002)
"""


@pytest.mark.parametrize("name", ["crash.jsonl", "crash.jsonl.gz"])
def test_kill_9_leaves_a_replayable_file(tmp_path, name, open_replay):
    path = str(tmp_path / name)
    code = CRASHER.format(root=str(HERE.parent), tests=str(HERE))
    proc = subprocess.Popen([sys.executable, "-c", code, path], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if int(line) >= 3000:
                break
        # the header, two node lines and 3,000 lease lines, flushed by the writer's own timer
        wait_until(lambda: readable_lines(path) >= 3 + 3000, timeout=20)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    src = open_replay(path)
    assert src.replay.events >= 3000
    src.replay.seek(src.replay.end)
    view = src.state.evaluate(src.replay.end)
    assert view.nodes[0].state is NodeState.READY
    # at most the partial last line / the missing gzip trailer is reported
    assert len(src.problems) <= 2


def test_wrong_version_missing_file_and_not_a_recording(tmp_path):
    bad = tmp_path / "v2.jsonl"
    bad.write_text(json.dumps({"nodewatch_recording": 2, "started_at": "x"}) + "\n")
    with pytest.raises(RecordingError, match="version 2 is not supported"):
        ReplaySource(str(bad))
    with pytest.raises(RecordingError, match="no such file"):
        ReplaySource(str(tmp_path / "absent.jsonl"))
    with pytest.raises(RecordingError, match="is a directory"):
        ReplaySource(str(tmp_path))
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(RecordingError, match="empty"):
        ReplaySource(str(empty))
    text = tmp_path / "notes.txt"
    text.write_text("hello\nworld\n")
    with pytest.raises(RecordingError, match="not a nodewatch recording"):
        ReplaySource(str(text))


def test_damaged_lines_are_reported_with_line_numbers_and_the_rest_replays(tmp_path, open_replay):
    path = tmp_path / "damaged.jsonl"
    _write_small(str(path))
    lines = path.read_bytes().splitlines(keepends=True)
    good_late = orjson.dumps({"t": T0 + 19.05, "resource": "leases", "type": "MODIFIED",
                              "object": lease("a", T0 + 19)}) + b"\n"
    damaged = (
        lines[:3]
        + [b'{"t": 1, "resource": "nodes", "type": "ADD\n']  # line 4: truncated
        + [b"\x00\xff garbage\n"]  # line 5: garbled
        + lines[3:5]
        + [lines[4]]  # line 8: duplicate of line 7
        + [b'{"t": "soon", "resource": "nodes", "type": "ADDED", "object": {}}\n']  # line 9: bad time
        + [b'{"t": 5, "resource": "secrets", "type": "ADDED", "object": {}}\n']  # line 10: unknown resource
        + [good_late]  # line 11: newer than the next line (out of order)
        + lines[5:]
        + [b'{"t": 12, "resou']  # truncated last line, no newline
    )
    path.write_bytes(b"".join(damaged))
    src = open_replay(path)
    text = "\n".join(src.problems)
    assert "line 4: truncated JSON" in text
    assert "line 5: malformed JSON" in text
    assert "line 8: duplicate of line 7" in text
    assert "line 9: no valid time" in text
    assert "line 10: unknown resource 'secrets'" in text
    assert "line 14: truncated JSON" in text
    assert "out of time order" in text
    src.replay.seek(src.replay.end)
    assert src.state.leases["a"].renew_time == T0 + 19  # the sound lines replayed, in time order
    assert src.replay.events == 7


def _valid_recording_bytes() -> bytes:
    out = [orjson.dumps({"nodewatch_recording": 1, "started_at": "2027-01-15T08:00:00Z", "source": {},
                         "settings": {"server_version": "v1.33.0"}})]
    out.append(orjson.dumps({"t": T0, "resource": "nodes", "type": "ADDED", "object": node("a"), "list": True}))
    out.append(orjson.dumps({"t": T0, "resource": "leases", "type": "ADDED", "object": lease("a", T0)}))
    out.append(orjson.dumps({"t": T0 + 1, "health": {"resource": "leases", "connected": False}}))
    out.append(orjson.dumps({"t": T0 + 10, "resource": "leases", "type": "MODIFIED", "object": lease("a", T0 + 10)}))
    return b"\n".join(out) + b"\n"


json_values = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=True) | st.integers() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_the_v1_reader(tmp_path_factory, replay_through, data):
    base = _valid_recording_bytes()
    choice = data.draw(st.integers(0, 3))
    if choice == 0:  # flip, cut and insert bytes
        b = bytearray(base)
        for _ in range(data.draw(st.integers(1, 8))):
            i = data.draw(st.integers(0, len(b) - 1))
            b[i] = data.draw(st.integers(0, 255))
        cut = data.draw(st.integers(len(b) // 3, len(b)))
        blob = bytes(b[:cut])
    elif choice == 1:  # arbitrary JSON values as event lines
        lines = [base.splitlines()[0]] + [json.dumps(data.draw(json_values)).encode()
                                          for _ in range(data.draw(st.integers(0, 6)))]
        blob = b"\n".join(lines)
    elif choice == 2:  # plausible event lines with hostile fields
        ev = {"t": data.draw(st.floats(allow_nan=True) | st.integers() | st.text(max_size=5)),
              "resource": data.draw(st.sampled_from(["nodes", "leases", "pods", "events",
                                                     "certificatesigningrequests", "x"])),
              "type": data.draw(st.sampled_from(["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "SYNCED", "?"])),
              "object": data.draw(json_values)}
        if data.draw(st.booleans()):
            ev["health"] = data.draw(json_values)
        blob = base + json.dumps(ev).encode() + b"\n"
    else:
        blob = data.draw(st.binary(max_size=300))
    if data.draw(st.booleans()):
        blob = gzip.compress(blob)[: data.draw(st.integers(10, 400))]
    path = tmp_path_factory.mktemp("fz") / "f.jsonl"
    path.write_bytes(blob)
    replay_through(str(path))


def test_certificates_learned_outside_the_streams_are_recorded_and_replayed(tmp_path, open_replay):
    path = str(tmp_path / "certs.jsonl")
    with Recorder(path, {"kind": "test"}, Settings(), started_at=1000.0) as rec:
        rec.write("nodes", "ADDED", {"metadata": {"name": "a"}}, 1000.0, listing=True)
        rec.write("nodes", "SYNCED", None, 1000.0, listing=True)
        rec.write_cert("a", 5000.0, "local cache", 1000.5)
        rec.write("nodes", "MODIFIED", {"metadata": {"name": "a"}}, 1010.0)
    src = open_replay(path)
    src.replay.seek(1010.0)
    assert src.state.certs["a"].not_after == 5000.0
    assert "recorded" in src.state.certs["a"].source


def test_watch_and_record_write_the_same_source_header(tmp_path, monkeypatch, capsys):
    """``watch --record`` once wrote a header without the source's name and server."""
    from nodewatch.cli import main
    from support.simserver import TinyFleet, running_server

    monkeypatch.delenv("NODEWATCH_FORCE_TTY", raising=False)
    with running_server(tmp_path, fleet=TinyFleet(nodes=2, start=time.time())) as srv:
        live = ["--kubeconfig", str(srv.kubeconfig_path), "--cert-cache-dir", str(tmp_path / "c")]
        assert main(["watch", *live, "--record", str(tmp_path / "watch.jsonl")]) == 2  # no terminal here
        assert "needs a terminal" in capsys.readouterr().err
        assert main(["record", str(tmp_path / "record.jsonl"), "--duration", "1", "--quiet", *live]) == 0
    headers = [read_recording(str(tmp_path / f))[0]["source"] for f in ("watch.jsonl", "record.jsonl")]
    assert headers[0] == headers[1] == {"kind": "live", "name": f"context nodewatch-sim @ {srv.url}",
                                        "context": "nodewatch-sim", "server": srv.url}


def test_a_recorded_lease_keeps_its_kubelets_write_times_only():
    le = lease("a", T0 - 100, written=T0 - 5)
    le["metadata"]["managedFields"].append({"manager": "kubectl-edit", "operation": "Update", "time": "2027-01-15T07:00:00Z",
                                            "fieldsV1": {"f:metadata": {"f:labels": {"f:secret-name": {}}}}})
    clean = sanitize(le, "leases")
    assert clean["metadata"]["managedFields"] == [
        {"manager": "kubelet", "operation": "Update", "time": "2027-01-15T07:59:55Z"}]
    assert "fieldsV1" in json.dumps(le) and "fieldsV1" not in json.dumps(clean)
    assert "managedFields" not in sanitize(lease("b", T0), "leases")["metadata"]


def _real_objects() -> list[tuple[str, dict]]:
    """Nodes and Leases from real clusters: the support bundles' Nodes (tests/data/real), and every
    Node and Lease the v1.20.2 testbed's API server sent in a committed recording (made before
    recordings kept only what is read: whole objects)."""
    data = Path(__file__).parents[1] / "data"
    found = [("nodes", n) for n in json.loads((data / "real" / "troubleshoot-nodes.json").read_text())["items"]]
    with gzip.open(data / "testbed-kubelet-stop.jsonl.gz", "rt") as f:
        for text in f:
            line = json.loads(text)
            if (line.get("resource") in ("nodes", "leases") and line.get("type") in ("ADDED", "MODIFIED", "DELETED")
                    and isinstance(line.get("object"), dict)):
                found.append((line["resource"], line["object"]))
    return found


def test_real_nodes_and_leases_read_the_same_as_recorded():
    """The judge of what is read is a real object: for every Node and Lease of real clusters, what
    a recording now keeps gives the same record as the whole object, by the typed decoder and by the
    dict reader."""
    from nodewatch.core.objects import lease_from_dict, node_from_dict
    from nodewatch.core.wire import DECODERS

    objects = _real_objects()
    assert sum(r == "nodes" for r, _ in objects) >= 10 and sum(r == "leases" for r, _ in objects) >= 10
    shrunk = 0
    for resource, obj in objects:
        kept = sanitize(obj, resource)
        read = node_from_dict if resource == "nodes" else lease_from_dict
        decode = DECODERS[resource].decode_object
        assert read(kept) == read(obj) == decode(orjson.dumps(kept)) == decode(orjson.dumps(obj))
        shrunk += len(orjson.dumps(kept)) < len(orjson.dumps(obj))
    assert shrunk == len(objects)  # each one had something nodewatch never reads
