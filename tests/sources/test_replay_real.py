"""Real objects from real clusters (``tests/data/real/``, sources in its ``SOURCES.md``) replayed
as a user would give them: each file alone, one resource per file concatenated (``cat``), mixed
in one List, each object alone, as plain objects and as ``kubectl get -w`` watch events. None
may raise; each gives a clear one-line error or a sensible state, dated by its own objects."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from nodewatch.cli import main
from nodewatch.core.timeutil import parse_time
from nodewatch.sources.replay import state_at

REAL = Path(__file__).parents[1] / "data" / "real"
EVENTS = REAL / "openshift-4.8-kube-system-events.json"
POD = REAL / "openshift-4.8-pod-etcd-quorum-guard.json"
POD_KEY = ("openshift-etcd", "etcd-quorum-guard-85b4c88c96-nmk5g")
NODES = REAL / "troubleshoot-nodes.json"  # 7 Nodes of support bundles: 2019 (v1.16), 2020 (v1.19), 2024 (v1.29)
MK_PODS = REAL / "troubleshoot-minikube-pods.json"
MK_EVENTS = REAL / "troubleshoot-minikube-events.json"
NEWEST = "ip-172-31-21-92"  # its heartbeat, 2024-12-19T02:59:48Z, is the NodeList's newest time


def items(path: Path) -> list[dict]:
    doc = json.loads(path.read_text())
    if doc.get("kind", "").endswith("List"):
        kind = doc["kind"][: -len("List")] or None
        return [{**item, "kind": item.get("kind", kind)} for item in doc["items"]]
    return [doc]


def objects() -> list[dict]:
    """Every real object, kind set."""
    return [o for f in (POD, EVENTS) for o in items(f)]


def every_object() -> list[dict]:
    return [o for f in (POD, EVENTS, NODES, MK_PODS, MK_EVENTS) for o in items(f)]


def as_watch(objs: list[dict]) -> bytes:
    """What ``kubectl get -w --output-watch-events -o json`` writes for them (pretty, one each)."""
    return b"".join(orjson.dumps({"type": "ADDED", "object": o}, option=orjson.OPT_INDENT_2) + b"\n" for o in objs)


def test_every_source_is_named():
    sources = (REAL / "SOURCES.md").read_text()
    for f in REAL.glob("*.json"):
        assert f"`{f.name}`" in sources, f.name


@pytest.mark.parametrize("layout", ["pod-then-events", "events-then-pod"])
def test_one_resource_per_file_concatenated(tmp_path, open_replay, layout):
    parts = [POD.read_bytes(), EVENTS.read_bytes()]
    path = tmp_path / "cat.json"
    path.write_bytes(b"".join(parts if layout == "pod-then-events" else parts[::-1]))
    state, instant, problems = state_at(str(path), None)
    assert problems == []
    assert POD_KEY in state.pods and state.pods[POD_KEY].node_name == "ip-10-0-189-142.ec2.internal"
    assert len(state.events) == 6
    # the pod by its newest time (its Ready transition), the EventList by its newest Event
    assert instant.start == parse_time("2021-08-03T09:28:20Z")
    assert instant.at == parse_time("2021-08-03T09:28:32Z")
    src = open_replay(path)
    assert src.replay.start == instant.start and src.replay.end == instant.at


def test_watch_logs_concatenated_are_placed_by_their_own_times(tmp_path, open_replay):
    """As two ``kubectl get -w`` logs, the Pod's first: the Events (from 09:22:38) are not pushed
    after the Pod (09:28:20), and at 09:25 the Events seen so far are there, the Pod not yet."""
    objs = objects()
    path = tmp_path / "watch.json"
    path.write_bytes(as_watch(objs[:1]) + as_watch(objs[1:]))
    at = parse_time("2021-08-03T09:25:00Z")
    src = open_replay(path)
    src.replay.seek(at)
    early = set(src.state.events)
    assert POD_KEY not in src.state.pods and early
    state, _, problems = state_at(str(path), "2021-08-03T09:25:00Z")
    assert set(state.events) == early and POD_KEY not in state.pods and problems == []
    src.replay.seek(src.replay.end)
    assert POD_KEY in src.state.pods and len(src.state.events) == 6


def test_mixed_in_one_list(tmp_path):
    path = tmp_path / "mixed.json"
    path.write_bytes(orjson.dumps({"apiVersion": "v1", "kind": "List", "items": objects()}))
    state, instant, problems = state_at(str(path), None)
    assert problems == [] and POD_KEY in state.pods and len(state.events) == 6
    assert instant.start == instant.at == parse_time("2021-08-03T09:28:32Z")  # one snapshot, one time


@pytest.mark.parametrize("i", range(len(every_object())))
@pytest.mark.parametrize("form", ["plain", "watch"])
def test_each_object_alone(tmp_path, i, form):
    obj = every_object()[i]
    path = tmp_path / "one.json"
    path.write_bytes(as_watch([obj]) if form == "watch" else orjson.dumps(obj, option=orjson.OPT_INDENT_2) + b"\n")
    state, instant, problems = state_at(str(path), None)
    node = obj["kind"] == "Node"  # and the lease stream's health: a log of Nodes and no Lease (kubectl_format)
    assert problems == [] and instant.events == 1 + node
    assert len(state.pods) + len(state.events) + len(state.node_records()) == 1


def test_the_support_bundle_node_list_is_dated_by_its_newest_node(capsys):
    """Seven Nodes of support bundles taken years apart: the list is one instant, its newest
    heartbeat's (the 2024 node), said in one line; that node is Ready at 0 s. (What the six whose
    heartbeat is years old are, with no Lease, is the rules' question: issue 22, class 1.)"""
    rc = main(["status", "--replay", str(NODES), "--format", "json"])
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["at"] == "2024-12-19T02:59:48Z"
    assert len(doc["nodes"]) == 7
    newest = next(n for n in doc["nodes"] if n["name"] == NEWEST)
    assert newest["state"] == "Ready"
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"dated by its newest object (Node '{NEWEST}'" in lines[0]
    assert rc in (0, 1)


@pytest.mark.parametrize("form", ["lists", "watch"])
def test_a_support_bundles_files_concatenated(tmp_path, open_replay, form):
    """Nodes, then Pods, then Events of real clusters, one resource per file, as lists and as
    watch logs: everything is there at the end, nothing is lost, no traceback."""
    files = (NODES, MK_PODS, MK_EVENTS)
    path = tmp_path / "bundle.json"
    path.write_bytes(b"".join(f.read_bytes() if form == "lists" else as_watch(items(f)) for f in files))
    state, instant, problems = state_at(str(path), None)
    assert len(state.node_records()) == 7 and len(state.pods) == 1 and len(state.events) == 17
    assert all("Traceback" not in p for p in problems)
    src = open_replay(path)
    src.replay.seek(src.replay.end)
    assert len(src.state.node_records()) == 7 and len(src.state.events) == 17
    # the minikube pod and its events (2023) are placed by their own times, before the 2024 node
    assert src.replay.start <= parse_time("2023-07-11T05:36:25Z") < src.replay.end


def test_a_support_bundles_pod_events_at_their_own_time(tmp_path):
    """At 2023-07-11T05:35:00Z, between the minikube pod's scheduling and its image pull failing,
    the concatenated bundle shows the events up to then and none after."""
    path = tmp_path / "bundle.json"
    path.write_bytes(b"".join(as_watch(items(f)) for f in (NODES, MK_PODS, MK_EVENTS)))
    state, _, _ = state_at(str(path), "2023-07-11T05:35:00Z")
    reasons = sorted(e.reason for e in state.events.values())
    assert "Scheduled" in reasons and "Failed" not in reasons and "BackOff" not in reasons


def test_status_on_objects_without_nodes_is_one_clear_line(tmp_path, capsys):
    path = tmp_path / "cat.json"
    path.write_bytes(POD.read_bytes() + EVENTS.read_bytes())
    rc = main(["status", "--replay", str(path)])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "no nodes" in lines[0] and "Traceback" not in err
