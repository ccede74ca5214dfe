"""Replaying what `kubectl get -w --output-watch-events -o json` writes (real kubectl output)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodewatch.core.rules import NodeState
from nodewatch.core.timeutil import parse_time
from nodewatch.sources.kubectl_format import (
    iter_entries,
    looks_like_kubectl,
    object_time,
)
from support.simserver import wait_until

DATA = Path(__file__).parents[1] / "data"
LEASES = DATA / "kubectl-watch-leases.json"  # compact lines, as kubectl 1.3x writes them
NODES = DATA / "kubectl-watch-nodes-pretty.json"  # pretty-printed documents, as older kubectl writes them


def states(src, t: float) -> dict[str, NodeState]:
    return {v.name: v.state for v in src.state.evaluate(t).nodes}


@pytest.fixture
def concatenated(tmp_path) -> Path:
    path = tmp_path / "both.json"
    path.write_bytes(NODES.read_bytes() + LEASES.read_bytes())
    return path


def test_a_concatenated_kubectl_log_replays(concatenated, open_replay):
    src = open_replay(concatenated)
    assert src.replay.index.format == "kubectl"
    assert src.problems == []
    assert src.replay.events == 4 + 18 + 2  # and the lease stream's health before the Leases begin
    end = src.replay.end
    assert end == parse_time("2026-11-29T10:01:00Z")  # the newest renewTime
    src.replay.seek(end)
    got = states(src, end)
    assert got == {"node-000": NodeState.READY, "node-001": NodeState.UNKNOWN, "node-002": NodeState.READY}
    # no receive times: lease ages are measured from renewTime
    track = src.state.leases["node-002"]
    assert track.observed_at == track.renew_time == parse_time("2026-11-29T10:00:58Z")
    # before node-001's Node turned Unknown, its lease was still being renewed
    src.replay.seek(parse_time("2026-11-29T09:59:45Z"))
    assert states(src, parse_time("2026-11-29T09:59:45Z"))["node-001"] is NodeState.READY


def test_leases_alone_go_late_and_overdue_from_object_times(open_replay):
    src = open_replay(LEASES, settings=None)
    # node-001's last renewal is 10:00:29; at 10:01:00 it is 31s old: Late (grace 40s, unknown version)
    t = parse_time("2026-11-29T10:01:00Z")
    src.replay.seek(t)
    assert src.state.leases["node-001"].renew_time == parse_time("2026-11-29T10:00:29Z")


def test_stdin_is_read(monkeypatch, open_replay):
    class Stdin:
        buffer = io.BufferedReader(io.BytesIO(LEASES.read_bytes()))

    monkeypatch.setattr(sys, "stdin", Stdin)
    src = open_replay("-")
    assert src.replay.events == 18
    assert src.name == "replay stdin"


def test_text_between_documents_is_reported(tmp_path):
    path = tmp_path / "noise.json"
    path.write_text(LEASES.read_text()[:0] + "Error from server: oops\n" + LEASES.read_text())
    problems: list[str] = []
    with open(path, "rb") as f:
        entries = list(iter_entries(enumerate(f, 1), problems))
    assert problems == ["line 1: text outside a JSON document, skipped"]
    assert len(entries) == 18


def test_broken_documents_are_reported_and_skipped(tmp_path, open_replay):
    pretty = NODES.read_text().splitlines(keepends=True)
    cut = pretty[:20]  # a document cut off in the middle
    text = "".join(cut) + "not json at all\n" + LEASES.read_text() + '{"type": "ADDED", "object": {"kind": "Lea'
    path = tmp_path / "broken.json"
    path.write_text(text)
    src = open_replay(path)
    joined = "\n".join(src.problems)
    # the garbage line falls inside the open document, which the next document shows was cut off
    assert "line 1: truncated JSON document (lines 1-21)" in joined
    assert "line 40: truncated JSON document at the end of the input" in joined
    assert len(src.problems) == 2
    assert src.replay.events == 18  # every lease event still replays


def test_lists_plain_objects_error_events_and_unknown_kinds():
    lines = [
        json.dumps({"kind": "NodeList", "apiVersion": "v1", "items": [
            {"metadata": {"name": "a"}, "status": {"conditions": [
                {"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-01-01T00:00:00Z"}]}}]}),
        json.dumps({"kind": "Lease", "metadata": {"name": "a", "namespace": "kube-node-lease"},
                    "spec": {"renewTime": "2026-01-01T00:00:05.000000Z"}}),
        json.dumps({"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old resource version"}}),
        json.dumps({"type": "ADDED", "object": {"kind": "ConfigMap", "metadata": {"name": "x"}}}),
        json.dumps({"type": "ADDED", "object": {"kind": "ConfigMap", "metadata": {"name": "y"}}}),
        json.dumps({"type": "BOOKMARK", "object": {"kind": "Lease", "metadata": {"resourceVersion": "9"}}}),
    ]
    problems: list[str] = []
    entries = list(iter_entries(((i + 1, (x + "\n").encode()) for i, x in enumerate(lines)), problems))
    assert [(e.resource, e.etype, e.listing) for e in entries] == [
        ("nodes", "ADDED", True), ("leases", "ADDED", False), ("leases", "HEALTH", False), ("leases", "HEALTH", False)]
    assert entries[0].obj["kind"] == "Node"
    assert entries[1].t == parse_time("2026-01-01T00:00:05Z")
    # the Nodes came 5 s before the log's first Lease: the lease stream was not recorded until then
    assert [(e.t, e.health["connected"]) for e in entries[2:]] == [
        (parse_time("2026-01-01T00:00:00Z"), False), (parse_time("2026-01-01T00:00:05Z"), True)]
    assert any("too old resource version" in p for p in problems)
    assert sum("ConfigMap" in p for p in problems) == 1  # reported once


def test_object_time_sources():
    node = {"metadata": {"creationTimestamp": "2020-01-01T00:00:00Z"},
            "spec": {"taints": [{"key": "k", "effect": "NoExecute", "timeAdded": "2026-01-01T00:10:00Z"}]},
            "status": {"conditions": [{"type": "Ready", "lastHeartbeatTime": "2026-01-01T00:05:00Z",
                                       "lastTransitionTime": "2026-01-01T00:01:00Z"}]}}
    assert object_time("nodes", "MODIFIED", node) == parse_time("2026-01-01T00:10:00Z")
    deleted = {"metadata": {"deletionTimestamp": "2026-01-01T01:00:00Z"}}
    assert object_time("pods", "DELETED", deleted) == parse_time("2026-01-01T01:00:00Z")
    ev = {"metadata": {}, "eventTime": "2026-01-01T00:00:01.500000Z"}
    assert object_time("events", "ADDED", ev) == parse_time("2026-01-01T00:00:01.5Z")
    assert object_time("leases", "ADDED", {"metadata": {}, "spec": {}}) is None


def test_format_detection():
    assert looks_like_kubectl(b"{\n")
    assert looks_like_kubectl(LEASES.read_bytes().splitlines()[0])
    assert not looks_like_kubectl(b'{"nodewatch_recording": 1, "started_at": "x"}\n')
    assert not looks_like_kubectl(b"hello\n")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_the_kubectl_reader(tmp_path_factory, replay_through, data):
    base = NODES.read_bytes()[:6000] + LEASES.read_bytes()[:3000]
    b = bytearray(base)
    for _ in range(data.draw(st.integers(0, 10))):
        i = data.draw(st.integers(0, len(b) - 1))
        b[i] = data.draw(st.sampled_from(list(b'{}[]":,\n x0\x00\xff')))
    if data.draw(st.booleans()):
        start = data.draw(st.integers(0, len(b) - 1))
        del b[start:start + data.draw(st.integers(1, 400))]
    path = tmp_path_factory.mktemp("kfz") / "k.json"
    path.write_bytes(b"{\n" + bytes(b) if data.draw(st.booleans()) else bytes(b))
    replay_through(str(path))


@pytest.mark.kubectl
def test_real_kubectl_output_replays(tmp_path, open_replay):
    """The real kubectl, watching the simulated API server; its output replays."""
    from support.simserver import START, TinyFleet, kubectl_path, running_server

    kubectl = kubectl_path()
    if kubectl is None:
        pytest.skip("kubectl not installed")
    fleet = TinyFleet(nodes=2, start=START)
    out = tmp_path / "watch.json"
    with running_server(tmp_path, fleet=fleet) as srv:
        env = dict(os.environ, KUBECONFIG=str(srv.kubeconfig_path))
        with open(out, "w") as f:
            proc = subprocess.Popen([kubectl, "get", "leases", "-n", "kube-node-lease", "--watch",
                                     "--output-watch-events", "-o", "json"], stdout=f, env=env)
            try:
                wait_until(lambda: out.stat().st_size > 0, timeout=20)
                fleet.step_to(START + 30)
                wait_until(lambda: out.read_text().count("MODIFIED") >= 6, timeout=20)
            finally:
                proc.terminate()
                proc.wait(10)
    src = open_replay(out)
    assert src.problems == []
    assert src.replay.events >= 8
    src.replay.seek(src.replay.end)
    assert set(states(src, src.replay.end)) == set()  # leases only: no Node objects, so no node rows
    assert set(src.state.leases) == {"node-000", "node-001"}
    assert src.replay.end >= START + 20


def _hostile_log() -> bytes:
    """kubectl documents with every way the reader must notice: cut off, text between, one-line
    documents, ``\\r\\n``, ``{`` with spaces after it, blank lines, a log that ends in a document."""
    pretty, leases = NODES.read_bytes(), LEASES.read_bytes()
    cut = b"".join(pretty.splitlines(keepends=True)[:20])
    crlf = leases.replace(b"\n", b"\r\n")
    one = b'{"type": "ADDED", "object": {"kind": "Lease", "metadata": {"name": "z", "namespace": "kube-node-lease"}}}\n'
    spaced = leases.replace(b"{\n", b"{  \n", 1)
    return (cut + b"not json at all\n" + leases + b"\n\n" + one + b"Error from server: oops\n" + crlf + spaced
            + pretty + b'{"type": "ADDED", "object": {"kind": "Lea')


@pytest.mark.parametrize("block", [1, 7, 64, 1000, 1 << 20])
def test_blocks_read_as_lines_are(tmp_path, monkeypatch, block):
    """``iter_blocks`` + the block reader give the very entries and problems of the line by line
    reader, wherever the blocks cut the documents."""
    from nodewatch.sources import kubectl_format
    from nodewatch.sources.recording import iter_lines

    path = tmp_path / "log.json"
    path.write_bytes(b"\n" + _hostile_log())
    by_line: list[str] = []
    with open(path, "rb") as f:
        want = [(e.line, e.t, e.resource, e.etype, e.obj) for e in iter_entries(iter_lines(f, by_line), by_line)]
    monkeypatch.setattr(kubectl_format, "BLOCK_BYTES", block)
    by_block: list[str] = []
    with open(path, "rb") as f:
        lines = iter_lines(f, by_block)
        first = next(lines)
        got = [(e.line, e.t, e.resource, e.etype, e.obj)
               for e in iter_entries([first, *kubectl_format.iter_blocks(f, by_block, first[0])], by_block)]
    assert got == want and by_block == by_line
    assert len(want) > 30 and len(by_line) == 3


def test_a_truncated_gzip_log_in_blocks_keeps_what_was_read(tmp_path):
    import gzip

    from nodewatch.sources.kubectl_format import iter_blocks

    data = gzip.compress(LEASES.read_bytes() * 50)
    path = tmp_path / "cut.json.gz"
    path.write_bytes(data[: len(data) * 3 // 4])
    problems: list[str] = []
    with gzip.open(path, "rb") as f:
        entries = list(iter_entries(iter_blocks(f, problems), problems))
    assert any("ends abruptly" in p for p in problems) and len(entries) > 18 * 30


def _lease_doc(name: str, etype: str = "MODIFIED", indent: bool = True, **extra) -> bytes:
    meta = {"name": name, "namespace": "kube-node-lease", "uid": f"u-{name}",
            "creationTimestamp": "2026-12-01T10:00:00Z", "resourceVersion": "7"}
    spec = {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": "2026-12-01T10:00:05.123456Z"}
    meta.update(extra.pop("meta", {}))
    spec.update(extra.pop("spec", {}))
    doc = {"type": etype, "object": {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
                                     "spec": spec, **extra}}
    return (json.dumps(doc, indent=4) if indent else json.dumps(doc)).encode() + b"\n"


def _lease_variants() -> bytes:
    """Lease watch events the typed decoder (``kubectl_typed.typed_event``) must read as the dict
    path does, or leave to it: other key orders, extra fields, wrong types, no name, non-ASCII,
    an acquireTime after renewTime, a deletion, a compact line, kubectl's document boundaries."""
    reordered = json.dumps({"object": {"spec": {"renewTime": "2026-12-01T10:00:06.000001Z", "holderIdentity": "b"},
                                       "metadata": {"namespace": "kube-node-lease", "name": "b"}, "kind": "Lease"},
                            "type": "MODIFIED"}, indent=2).encode() + b"\n"
    return b"".join([
        _lease_doc("a", "ADDED"), _lease_doc("a"), reordered,
        _lease_doc("c", extra_field={"nested": [1, 2, {"x": None}]}, spec={"extraSpec": True}),
        _lease_doc("d", spec={"renewTime": 12345}),  # a number where a MicroTime belongs
        _lease_doc("e", spec={"leaseDurationSeconds": "40"}),
        _lease_doc("", meta={"name": ""}),  # no name
        _lease_doc("f", meta={"labels": {"zone": "é-1"}}).replace(b"\\u00e9", "é".encode()),  # not ASCII
        _lease_doc("f2", meta={"labels": {"zone": "X-1"}}).replace(b"X-1", b"\xff-1"),  # not UTF-8: orjson refuses
        _lease_doc("g", spec={"acquireTime": "2026-12-01T10:00:09.000000Z"}),
        _lease_doc("h", "DELETED", meta={"deletionTimestamp": "2026-12-01T10:00:07Z"}),
        _lease_doc("i", indent=False),
        _lease_doc("j", spec={"renewTime": None}),
        b'{"type": "MODIFIED", "object": {"kind": "Lease", "metadata": {"name": "k"}, "spec": [1]}}\n',
        _lease_doc("l", "BOOKMARK"),
        _lease_doc("m").replace(b'"Lease"', b'"Le\\u0061se"').replace(b'"MODIFIED"', b'"MODIFI\\u0045D"'),
        _lease_doc("n\u00e9").replace(b'"kube-node-lease"', b'"kube-node-le\\u0061se"'),  # escapes in ASCII
        _lease_doc("o", spec={"holderIdentity": "someone-else"}, meta={"namespace": "other"}),
        _lease_doc("p", "ADDED").replace(b"\n", b"\r\n"),
    ])


def _node_doc(name: str, etype: str = "MODIFIED", indent: bool = True, **extra) -> bytes:
    meta = {"name": name, "uid": f"u-{name}", "creationTimestamp": "2026-12-01T09:00:00Z", "resourceVersion": "9",
            "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": "z1"}}
    spec = {"providerID": "aws:///z1/i-1", "taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule",
                                                       "timeAdded": "2026-12-01T10:00:02Z"}]}
    status = {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok",
                              "lastHeartbeatTime": "2026-12-01T10:00:04Z",
                              "lastTransitionTime": "2026-12-01T09:00:10Z"}],
              "capacity": {"cpu": "2", "pods": "110"}, "allocatable": {"cpu": "1930m"},
              "addresses": [{"type": "InternalIP", "address": "10.0.0.9"}],
              "nodeInfo": {"kubeletVersion": "v1.33.2"}, "images": [{"names": ["x"], "sizeBytes": 1}]}
    meta.update(extra.pop("meta", {}))
    spec.update(extra.pop("spec", {}))
    status.update(extra.pop("status", {}))
    doc = {"type": etype, "object": {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec,
                                     "status": status, **extra}}
    return (json.dumps(doc, indent=4) if indent else json.dumps(doc)).encode() + b"\n"


def _node_variants() -> bytes:
    """Node watch events the typed decoder (``kubectl_typed.typed_event``) must read and date as
    the dict path does, or leave to it: a later heartbeat, transition or taint deciding the time,
    other key orders, a name spelt with a unicode escape, a Lease named in an annotation, wrong
    types, no name, non-ASCII, a deletion, a compact line, ``\r\n`` line ends, nulls."""
    reordered = json.dumps({"object": {"status": {"conditions": [{"lastHeartbeatTime": "2026-12-01T10:00:08Z",
                                                                   "type": "Ready", "status": "False"}]},
                                       "kind": "Node", "metadata": {"name": "nb", "uid": "u"}},
                            "type": "MODIFIED"}, indent=2).encode() + b"\n"
    return b"".join([
        _node_doc("na", "ADDED"), _node_doc("na"), reordered,
        _node_doc("nc", extra_field={"nested": [1, {"x": None}]}, spec={"unschedulable": True}),
        _node_doc("nd", spec={"taints": [{"key": "k", "effect": "NoExecute", "timeAdded": "2026-12-01T10:09:00Z"}]}),
        _node_doc("ne", status={"conditions": [{"type": "Ready", "status": "True",
                                                "lastTransitionTime": "2026-12-01T10:07:00Z"}]}),
        _node_doc("nf", spec={"taints": [{"key": "k", "timeAdded": 5}]}),  # a number where a time belongs
        _node_doc("ng", status={"conditions": [None]}),
        _node_doc("nh", status={"conditions": ["Ready"]}),
        _node_doc("ni", meta={"labels": {"zone": 7}}),
        _node_doc("", meta={"name": ""}),  # no name
        _node_doc("nj", meta={"annotations": {"note": "é"}}).replace(b"\\u00e9", "é".encode()),  # not ASCII
        _node_doc("nk", meta={"annotations": {"holder": "Lease"}, "name": "n\u006b"}),  # "nk", escaped
        _node_doc("nl", "DELETED", meta={"deletionTimestamp": "2026-12-01T10:20:00Z"}),
        _node_doc("nm", "DELETED"),
        _node_doc("nn", indent=False),
        _node_doc("no").replace(b"\n", b"\r\n"),
        _node_doc("np", status={"conditions": None}),
        b'{"type": "MODIFIED", "object": {"kind": "Node", "metadata": {"name": "nq"}, "status": [1]}}\n',
        b'{"type": "MODIFIED", "object": {"kind": "Node", "metadata": null}}\n',
        _node_doc("nr", "BOOKMARK"),
        _node_doc("ns", "ADDED"),  # back to ADDED: a new watch's opening list
    ])


def _records(entries: list) -> list:
    """``(line, t, resource, type, object)`` with a Node's dict made its record (what applying it
    does first; one that would not make one stays the dict)."""
    from nodewatch.core.objects import node_from_dict

    out = []
    for e in entries:
        obj = e.obj
        if e.resource == "nodes" and isinstance(obj, dict):
            try:
                obj = node_from_dict(obj)
            except Exception:  # noqa: BLE001 - applied as the dict, whose problem is reported then
                pass
        out.append((e.line, e.t, e.resource, e.etype, obj))
    return out


@pytest.mark.parametrize("block", [7, 1 << 20])
def test_typed_lease_events_give_the_records_and_problems_of_the_dict_path(tmp_path, monkeypatch, block):
    """``iter_entries(typed=True)`` + ``sort_entries`` (a one-shot answer's fast path) against the
    dict path on the same bytes, in blocks that cut documents anywhere: the same entries (Lease and
    Node records equal), the same problems."""
    from nodewatch.sources import kubectl_format
    from nodewatch.sources.kubectl_format import sort_entries
    from nodewatch.sources.recording import iter_lines

    path = tmp_path / "log.json"
    path.write_bytes(b"\n" + _lease_variants() + _node_variants() + _hostile_log() + _node_variants())
    monkeypatch.setattr(kubectl_format, "BLOCK_BYTES", block)

    def read(typed: bool) -> tuple[list, list[str]]:
        problems: list[str] = []
        with open(path, "rb") as f:
            lines = iter_lines(f, problems)
            first = next(lines)
            entries = iter_entries([first, *kubectl_format.iter_blocks(f, problems, first[0])], problems, typed=typed)
            return _records(sort_entries(entries)), problems

    want, want_problems = read(False)
    got, got_problems = read(True)
    assert got == want and got_problems == want_problems
    assert sum(1 for e in want if e[2] == "leases") > 20 and sum(1 for e in want if e[2] == "nodes") > 30


def test_what_waits_for_a_one_shot_answer_makes_the_dict_paths_records(tmp_path):
    """``sort_entries`` with ``superseded.deferred_entry`` (what ``status --replay`` reads): a Lease
    or Node that waits as a ``Deferred`` (a Lease slimmed of what only the clock reads, a Node as
    its record) is applied as the record the dict path makes of the same document."""
    from nodewatch.sources.kubectl_format import iter_blocks, sort_entries
    from nodewatch.sources.replay.superseded import Deferred, deferred_entry

    path = tmp_path / "log.json"
    path.write_bytes(_lease_variants() + _node_variants() + _hostile_log())

    def read(typed: bool) -> list:
        problems: list[str] = []
        with open(path, "rb") as f:
            entries = iter_entries(iter_blocks(f, problems), problems, typed=typed)
            out = sort_entries(entries, deferred_entry if typed else None)
        return _records([e.entry([]) if type(e) is Deferred else e for e in out])

    got, want = read(True), read(False)
    assert got == want
    assert sum(1 for e in want if e[2] == "leases") > 20 and sum(1 for e in want if e[2] == "nodes") > 20


@pytest.mark.parametrize("block", [1, 7, 64, 119])
def test_blocks_skip_giant_lines_as_lines_do(tmp_path, monkeypatch, block):
    """``iter_blocks`` reads into one buffer behind the part of a line the last block left: lines
    longer than ``MAX_LINE_BYTES`` (at the start, across blocks, two in a row, at the end) are
    skipped and reported as the line by line reader does, the lines around them kept. (Blocks
    smaller than the limit: a giant line inside one block is the document reader's to report.)"""
    from nodewatch.sources import kubectl_format, recording
    from nodewatch.sources.recording import iter_lines

    monkeypatch.setattr(recording, "MAX_LINE_BYTES", 120)
    monkeypatch.setattr(kubectl_format, "MAX_LINE_BYTES", 120)
    monkeypatch.setattr(kubectl_format, "BLOCK_BYTES", block)
    one = b'{"type": "ADDED", "object": {"kind": "Lease", "metadata": {"name": "z", "namespace": "kube-node-lease"}}}\n'
    giant = b"x" * 300 + b"\n"
    path = tmp_path / "log.json"
    path.write_bytes(b"\n" + giant + one + b"y" * 121 + b"\n" + one * 3 + giant + giant + one + b"z" * 500)
    by_line: list[str] = []
    with open(path, "rb") as f:
        want = [(e.line, e.t, e.obj) for e in iter_entries(iter_lines(f, by_line), by_line)]
    by_block: list[str] = []
    with open(path, "rb") as f:
        lines = iter_lines(f, by_block)
        first = next(lines)
        got = [(e.line, e.t, e.obj) for e in iter_entries([first, *kubectl_format.iter_blocks(f, by_block, first[0])],
                                                         by_block)]
    assert got == want and by_block == by_line
    assert len(want) == 5 and sum("longer than" in p for p in by_line) == 5


def test_renew_time_remembers_only_the_same_string():
    """``kubectl_typed.renew_time`` remembers the last renewTime by identity: the same string gives
    its value again, any other string (equal or not) is parsed."""
    from nodewatch.core.wire import _micro_time
    from nodewatch.sources.kubectl_typed import _KubectlLeaseSpec, renew_time

    a = _KubectlLeaseSpec(renewTime="2026-12-01T10:00:05.123456Z")
    b = _KubectlLeaseSpec(renewTime="2026-12-01T10:00:05.654321Z")
    c = _KubectlLeaseSpec(renewTime="".join(["2026-12-01T10:00:05.", "123456Z"]))  # equal to a's, not a's
    assert [renew_time(s) for s in (a, a, b, a, c, b)] == [_micro_time(s.renewTime) for s in (a, a, b, a, c, b)]
    assert renew_time(_KubectlLeaseSpec()) is None and renew_time(b) == _micro_time(b.renewTime)


def _at(s: int) -> str:
    return f"2026-12-01T10:{s // 60:02d}:{s % 60:02d}.000000Z"


def _renewal(name: str, s: int, etype: str = "MODIFIED", **extra) -> bytes:
    return _lease_doc(name, etype, spec={"renewTime": _at(s), **extra.pop("spec", {})}, **extra)


def _heartbeat(name: str, s: int, evicting: bool = False) -> bytes:
    taint = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute" if evicting else "NoSchedule",
             "timeAdded": "2026-12-01T10:00:02Z"}
    return _node_doc(name, spec={"taints": [taint]}, status={"conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok",
         "lastHeartbeatTime": _at(s), "lastTransitionTime": "2026-12-01T09:00:10Z"}]})


def _shortcut_breakers() -> dict[str, bytes]:
    """kubectl logs that would break a shortcut taken before the sort: a concatenated log whose
    later section is earlier, a Lease whose renewTime steps back (or repeats), a Lease deleted (with
    and without a deletionTimestamp) and made again with an earlier renewTime, watches interleaved
    in one file, Leases only the dict reader reads (a renewTime of the wrong type), one of another
    namespace, Node updates with and without an eviction taint."""
    nodes = b"".join(_heartbeat(n, s, evicting=(s % 40 == 0)) for s in range(100, 200, 10) for n in ("a", "b"))
    leases = b"".join(_renewal(n, s, "ADDED" if s == 0 else "MODIFIED") for s in range(0, 300, 10) for n in ("a", "b"))
    steps = b"".join([_renewal("a", 10), _renewal("a", 20), _renewal("a", 30), _renewal("a", 25), _renewal("a", 40),
                      _renewal("b", 10), _renewal("b", 20), _renewal("b", 20), _renewal("b", 15), _renewal("b", 30),
                      _renewal("a", 50), _renewal("b", 50), _renewal("a", 45), _lease_doc("b", spec={"renewTime": None})])
    again = b"".join([_renewal("a", 10, "ADDED"), _renewal("a", 20), _renewal("a", 30),
                      _renewal("a", 35, "DELETED"), _renewal("a", 15, "ADDED", meta={"uid": "u-a2"}), _renewal("a", 25),
                      _renewal("b", 10), _renewal("b", 20, meta={"uid": "u-b1"}),
                      _renewal("b", 30, "DELETED", meta={"uid": "u-b1", "deletionTimestamp": _at(31)}),
                      _renewal("b", 40, "ADDED", meta={"uid": "u-b2"}), _renewal("b", 50), _renewal("a", 60),
                      _heartbeat("a", 61), _renewal("a", 62), _renewal("b", 63),
                      _lease_doc("b", "DELETED", meta={"uid": "u-b2"}, spec={"renewTime": _at(50)})])
    odd = b"".join([_renewal("a", 10), _renewal("a", 20), _lease_doc("a", spec={"renewTime": 12345}),
                    _renewal("a", 30), _renewal("a", 40), _renewal("c", 10, meta={"namespace": "other"}),
                    _renewal("c", 20, meta={"namespace": "other"}), _renewal("a", 50)])
    mixed = b"".join(_renewal(n, s) + _heartbeat(n, s + 3, evicting=(s == 60)) for s in range(0, 120, 10)
                     for n in ("a", "b"))
    logs = {"sections": nodes + leases, "steps": steps, "again": again, "odd": odd, "mixed": mixed}
    logs["all"] = b"".join(logs.values())
    return logs


@pytest.mark.parametrize("log", list(_shortcut_breakers()))
def test_an_answer_to_the_end_leaves_out_before_the_sort_what_it_left_out_after(tmp_path, monkeypatch, log):
    """``sort_entries`` with ``ahead`` (``status --replay`` to the end) applies the very events, in
    the very order, that the sort then ``Superseded`` applied (as ``ahead`` was None: the code
    before), and gives the same answer, on logs that would break a shortcut; and the order it
    relies on holds: each resource's entries come with times that never go back."""
    from nodewatch.sources.recording import iter_lines
    from nodewatch.sources.replay import instant, state_at
    from nodewatch.sources.replay.superseded import Superseded, deferred_entry
    from tests.sources.test_replay_superseded import _answers, _tracks

    path = tmp_path / "log.json"
    path.write_bytes(_shortcut_breakers()[log])
    problems: list[str] = []
    with open(path, "rb") as f:
        last: dict[str, float] = {}
        for e in iter_entries(iter_lines(f, problems), problems, typed=True):
            if e.etype == "HEALTH":  # the lease stream's, not an object's: placed by the sort alone
                continue
            assert e.t >= last.get(e.resource, e.t)
            last[e.resource] = e.t
    made: list[Superseded] = []
    original_init, original_sort = Superseded.__init__, instant.sort_entries

    def spy(self, *args, **kw):
        original_init(self, *args, **kw)
        made.append(self)

    def answer(ahead: bool):
        made.clear()
        with monkeypatch.context() as m:
            m.setattr(Superseded, "__init__", spy)
            if not ahead:
                m.setattr(instant, "sort_entries", lambda entries, defer, _ahead=None: original_sort(
                    entries, deferred_entry if defer is not None else None))
            state, seen, problems = state_at(str(path), None, compact=True)
        applied = [(e.line, e.t, e.resource, e.etype) for e in made[-1].events if e is not None]
        return applied, _answers(state, seen.at), _tracks(state), problems, made[0].dropped

    new, old = answer(True), answer(False)
    assert new[:4] == old[:4] and new[4] > 0 == old[4]  # made[0]: the one before the sort, unused without ahead
    full, seen, _ = state_at(str(path), None)
    assert _answers(full, seen.at) == new[1]
