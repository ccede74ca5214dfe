"""Concatenated kubectl logs (``cat nodes.log leases.log pods.log events.log``) and Lists, replayed
at every ``--at``: each section of the log placed by its own objects' times.

``kubectl get -w`` watches one resource per command, so a log of an incident is several files
concatenated: each file's order is time order, the whole's is not. These tests build such an
incident (node ``b`` stops at T0+10, turns Unknown at T0+50, is deleted at the end; node ``a`` renews
to T0+600), write it as four sections and as one interleaved file, and ask the replay (seek) and
the one-pass answer (``status --replay --at``) the same questions at several instants.
"""

from __future__ import annotations

import copy

import orjson
import pytest

from nodewatch.core.rules import NodeState
from nodewatch.core.timeutil import format_time
from nodewatch.sources.kubectl_format import iter_entries, sort_entries
from nodewatch.sources.replay import state_at
from support.factories import T0, event, lease, node, pod, taint


def watch(etype: str, obj: dict) -> dict:
    return {"type": etype, "object": obj}


def kinded(kind: str, obj: dict) -> dict:
    return {**obj, "kind": kind}


def incident() -> dict[str, list[tuple[float, dict]]]:
    """(true time, watch event) per resource: what four ``kubectl get -w`` wrote."""
    a0 = kinded("Node", node("a", transition=T0))
    b0 = kinded("Node", node("b", transition=T0))
    b_unknown = kinded("Node", node("b", "Unknown", transition=T0 + 50, reason="NodeStatusUnknown",
                                    taints=[taint("node.kubernetes.io/unreachable", added=T0 + 50)]))
    b_unknown["status"]["conditions"][0]["lastHeartbeatTime"] = format_time(T0)
    nodes = [(T0, watch("ADDED", a0)), (T0, watch("ADDED", b0)), (T0 + 50, watch("MODIFIED", b_unknown)),
             (T0 + 590, watch("DELETED", copy.deepcopy(b_unknown)))]
    leases = [(T0, watch("ADDED", kinded("Lease", lease("a", T0)))),
              (T0, watch("ADDED", kinded("Lease", lease("b", T0))))]
    leases.append((T0 + 10, watch("MODIFIED", kinded("Lease", lease("b", T0 + 10)))))
    for k in range(1, 61):
        leases.append((T0 + 10 * k, watch("MODIFIED", kinded("Lease", lease("a", T0 + 10 * k)))))
    leases.sort(key=lambda x: x[0])
    p = kinded("Pod", pod("web-1", "b"))
    p["metadata"]["creationTimestamp"] = format_time(T0 - 3600)
    pods = [(T0, watch("ADDED", p))]
    events = [(T0 + 50, watch("ADDED", kinded("Event", event("b.1", "b", "NodeNotReady",
                                                               "Node b status is now: NodeNotReady", T0 + 50,
                                                               component="node-controller"))))]
    return {"nodes": nodes, "leases": leases, "pods": pods, "events": events}


def concatenated(tmp_path, order=("nodes", "leases", "pods", "events")):
    data = incident()
    path = tmp_path / "incident.json"
    path.write_bytes(b"".join(orjson.dumps(d, option=orjson.OPT_INDENT_2) + b"\n"
                              for r in order for _, d in data[r]))
    return path


def interleaved(tmp_path):
    """The same events as four watches appending to one file (``>>``): in time order across them."""
    data = incident()
    allev = sorted(((t, i, d) for r in data for i, (t, d) in enumerate(data[r])), key=lambda x: x[0])
    path = tmp_path / "interleaved.json"
    path.write_bytes(b"".join(orjson.dumps(d) + b"\n" for _, _, d in allev))
    return path


def rows(state, t):
    return {v.name: v.state for v in state.evaluate(t).nodes}


AT = [T0 + 5, T0 + 30, T0 + 300, T0 + 600]


def expect(state, t):
    """What the incident's state is at ``t``."""
    got = rows(state, t)
    if t < T0 + 590:
        assert set(got) == {"a", "b"}, t
        assert set(state.leases) == {"a", "b"}, t
        assert state.leases["a"].renew_time == T0 + 10 * int((t - T0) // 10), t
        assert ("default", "web-1") in state.pods, t
        assert got["a"] is NodeState.READY
    else:
        assert set(got) == {"a"}, t  # deleted, at the end
    if t >= T0 + 50:
        assert len(state.events) == 1
        if t < T0 + 590:
            assert got["b"] in (NodeState.UNKNOWN, NodeState.EVICTING)  # its pod counts down from T0+50
    else:
        assert not state.events


@pytest.mark.parametrize("t", AT)
@pytest.mark.parametrize("layout", ["concatenated", "reversed", "interleaved"])
def test_a_concatenated_log_replays_right_at_every_instant(tmp_path, open_replay, layout, t):
    path = (interleaved(tmp_path) if layout == "interleaved" else
            concatenated(tmp_path, ("events", "pods", "leases", "nodes") if layout == "reversed" else
                         ("nodes", "leases", "pods", "events")))
    src = open_replay(path)
    assert src.replay.index.format == "kubectl"
    assert src.replay.start == T0 - 3600 and src.replay.end == T0 + 600  # the pod, dated by its creation
    src.replay.seek(t)
    expect(src.state, t)
    state, instant, _problems = state_at(str(path), format_time(t))
    assert instant.at == t
    expect(state, t)


def test_an_undated_deletion_waits_for_its_sections_next_time_and_is_reported(tmp_path):
    problems: list[str] = []
    path = concatenated(tmp_path)
    got = sort_entries(iter_entries(enumerate(path.read_bytes().splitlines(keepends=True), 1), problems))
    deletion = next(e for e in got if e.etype == "DELETED")
    assert deletion.t == T0 + 600  # the log's end: the node section tells no later time
    assert any("deletion carries no time of its own" in p for p in problems)


def test_an_interleaved_log_dates_an_undated_deletion_by_its_place(tmp_path):
    problems: list[str] = []
    path = interleaved(tmp_path)
    got = list(iter_entries(enumerate(path.read_bytes().splitlines(keepends=True), 1), problems))
    deletion = next(e for e in got if e.etype == "DELETED")
    assert deletion.t == T0 + 580  # the lease renewal before it in the file
    assert problems == []


def test_the_sections_keep_their_own_order_and_times():
    """A later section steps back to its own first time, not to the first section's end."""
    docs = [watch("MODIFIED", kinded("Lease", lease("a", T0 + s))) for s in (0, 100, 200)]
    docs += [watch("MODIFIED", kinded("Node", node("a", transition=T0 + s))) for s in (10, 110)]
    problems: list[str] = []
    got = list(iter_entries([(i + 1, orjson.dumps(d)) for i, d in enumerate(docs)], problems))
    health = [e.t for e in got if e.etype == "HEALTH"]  # a watch of Leases without its list: all in 10 s on
    got = [e for e in got if e.etype != "HEALTH"]
    assert health == [T0, T0 + 10]
    assert [(e.resource, e.t) for e in got] == [("leases", T0), ("leases", T0 + 100), ("leases", T0 + 200),
                                              ("nodes", T0 + 10), ("nodes", T0 + 110)]
    assert [e.t for e in sort_entries(got)] == [T0, T0 + 10, T0 + 100, T0 + 110, T0 + 200]
    assert problems == []


# --- a List dated by the right object ------------------------------------------------------------


def node_list(tmp_path):
    """The API server lists by name: ``a-dead`` (two days dead) first, ``b-live`` last."""
    dead = node("a-dead", "Unknown", transition=T0 - 2 * 86400, reason="NodeStatusUnknown")
    live = node("b-live", transition=T0)
    doc = {"apiVersion": "v1", "kind": "NodeList", "metadata": {"resourceVersion": "9"}, "items": [dead, live]}
    path = tmp_path / "nodes.json"
    path.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    return path


def test_a_node_list_is_dated_by_its_newest_node_not_its_first(tmp_path, open_replay):
    path = node_list(tmp_path)
    state, instant, problems = state_at(str(path), None)
    assert instant.at == T0
    assert rows(state, instant.at) == {"a-dead": NodeState.UNKNOWN, "b-live": NodeState.READY}
    assert len(problems) == 1 and "dated by its newest object (Node 'b-live'" in problems[0]
    src = open_replay(path)
    assert src.replay.start == src.replay.end == T0


def test_a_list_of_several_kinds_is_one_instant(tmp_path):
    doc = {"kind": "List", "items": [kinded("Node", node("a", transition=T0 - 30)),
                                     kinded("Lease", lease("a", T0 - 5)), kinded("Lease", lease("b", T0))]}
    problems: list[str] = []
    got = list(iter_entries([(1, orjson.dumps(doc))], problems))
    assert [e.t for e in got] == [T0, T0, T0] and all(e.listing for e in got)
    assert problems == []


def test_status_replay_of_the_node_list_answers_for_its_newest_node(tmp_path, capsys):
    import json

    from nodewatch.cli import main

    rc = main(["status", "--replay", str(node_list(tmp_path)), "--format", "json"])
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["at"] == format_time(T0)  # not two days earlier
    assert {n["name"]: n["state"] for n in doc["nodes"]} == {"a-dead": "Unknown", "b-live": "Ready"}
    assert len(err.strip().splitlines()) == 1 and "dated by its newest object" in err
    assert rc == 1


@pytest.mark.parametrize("t", AT)
def test_status_replay_at_every_instant_of_a_concatenated_log(tmp_path, capsys, t):
    import json

    from nodewatch.cli import main

    path = concatenated(tmp_path)
    rc = main(["status", "--replay", str(path), "--at", format_time(t), "--format", "json"])
    doc = json.loads(capsys.readouterr().out)
    names = {n["name"] for n in doc["nodes"]}
    assert names == ({"a", "b"} if t < T0 + 590 else {"a"})
    a = next(n for n in doc["nodes"] if n["name"] == "a")
    assert a["state"] == "Ready" and a["lease_age_seconds"] < 10  # its lease section is there at t
    assert rc == (1 if T0 + 50 <= t < T0 + 590 else 0)  # b is not Ready from its flip to its deletion


def test_a_watch_opening_is_dated_as_its_list_is():
    """``kubectl get nodes -w`` opens with one ADDED per node in name order: the dead node first,
    the live one last. That opening is the list, dated by its newest node (event by event, the live
    node's time was a lone jump the guard did not take: it stayed two days back)."""
    dead = kinded("Node", node("a-dead", "Unknown", transition=T0 - 2 * 86400, reason="NodeStatusUnknown"))
    live = kinded("Node", node("b-live", transition=T0))
    later = kinded("Node", node("b-live", transition=T0 + 10))
    docs = [watch("ADDED", dead), watch("ADDED", live), watch("MODIFIED", later)]
    problems: list[str] = []
    got = list(iter_entries([(i + 1, orjson.dumps(d)) for i, d in enumerate(docs)], problems))
    assert [(e.etype, e.t) for e in got] == [("ADDED", T0), ("ADDED", T0), ("MODIFIED", T0 + 10), ("HEALTH", T0)]
    assert got[-1].health["last_error"] == "no Leases in this log"  # a nodes-only log: lease ages unknown
    assert len(problems) == 1 and "dated by its newest object (Node 'b-live'" in problems[0]


def test_an_events_log_is_no_list():
    """Every Event is an ADDED of its own: an events section is never dated as one list."""
    docs = [watch("ADDED", kinded("Event", event(f"e{k}", "a", "R", "m", T0 + 60 * k))) for k in range(3)]
    got = list(iter_entries([(i + 1, orjson.dumps(d)) for i, d in enumerate(docs)], []))
    assert [e.t for e in got] == [T0, T0 + 60, T0 + 120]



def _lease_era_log(tmp_path, *, with_leases: bool):
    """``cat nodes.log leases.log`` of a healthy v1.20+ fleet, both watches started at T0 + 149:
    every kubelet renews its Lease every 10 s but posts its Node status only every five minutes, so
    the Node list is dated by heartbeats from T0 (seen on the v1.20.2 testbed: a 30-node log's
    report said "Peak: 30 nodes down ... 27 Overdue" and `status --at +60` called them Overdue).
    Node n0 posts its status again at T0 + 200, the log's end."""
    names = [f"n{i}" for i in range(5)]
    docs = [watch("ADDED", kinded("Node", node(n, transition=T0 - 3600, heartbeat=T0))) for n in names]
    docs.append(watch("MODIFIED", kinded("Node", node("n0", transition=T0 - 3600, heartbeat=T0 + 200))))
    if with_leases:
        docs += [watch("ADDED", kinded("Lease", lease(n, T0 + 145 + i))) for i, n in enumerate(names)]
        docs += [watch("MODIFIED", kinded("Lease", lease(n, T0 + 155 + i))) for i, n in enumerate(names)]
    path = tmp_path / "fleet.json"
    path.write_bytes(b"\n".join(orjson.dumps(d) for d in docs) + b"\n")
    return path


@pytest.mark.parametrize("with_leases", [True, False])
def test_nodes_are_not_judged_by_heartbeats_where_the_log_has_no_lease(tmp_path, capsys, open_replay, with_leases):
    """Where a log holds Nodes but no Lease, lease ages are unknown (the stream was not recorded,
    and a cluster with Leases posts Node status every five minutes): the nodes are what the API
    says, Ready, never Overdue by their heartbeat; once the Leases begin, judged by them."""
    from nodewatch.cli import main

    path = _lease_era_log(tmp_path, with_leases=with_leases)
    blind_to = T0 + (149 if with_leases else 200)
    for t in (T0 + 60, T0 + 140, blind_to):
        assert main(["status", "--replay", str(path), "--at", format_time(t), "--format", "json"]) in (0, 1)
        doc = orjson.loads(capsys.readouterr().out)
        assert {n["state"] for n in doc["nodes"]} == {"Ready"}, t - T0
    src = open_replay(path)
    src.replay.seek(T0 + 100)
    view = src.state.evaluate(T0 + 100)
    assert view.leases_blind and {v.state for v in view.nodes} == {NodeState.READY}
    if with_leases:  # judged by the Leases once they begin: n1-n4 41-44 s without a renewal; n0's
        # Lease is as late, but it posted its status (the controller's probe): Late, not Overdue
        assert main(["status", "--replay", str(path), "--at", format_time(T0 + 200), "--format", "json"]) == 1
        got = {n["name"]: n["state"] for n in orjson.loads(capsys.readouterr().out)["nodes"]}
        assert got == {"n0": "Late", "n1": "Overdue", "n2": "Overdue", "n3": "Overdue", "n4": "Overdue"}


def test_an_export_of_a_concatenated_log_is_in_time_order_and_keeps_every_section(tmp_path):
    """``recording export`` wrote a kubectl log's entries section by section (the Leases stepped
    back minutes after the last Node line), and ``--to`` stopped at the first Node line after it,
    so no Lease of ``cat nodes.log leases.log`` was exported at all."""
    from nodewatch.cli import main

    path = _lease_era_log(tmp_path, with_leases=True)  # its Nodes to T0 + 200, its Leases T0 + 149..159
    out = tmp_path / "x.jsonl"
    assert main(["recording", "export", str(path), "--to", format_time(T0 + 156), "-o", str(out)]) == 0
    lines = [orjson.loads(x) for x in out.read_bytes().splitlines()][1:]
    times = [d["t"] for d in lines]
    assert times == sorted(times) and max(times) <= T0 + 156
    kinds = [d.get("resource") or "health" for d in lines]
    assert kinds.count("nodes") == 5 and kinds.count("leases") == 5 + 2 and kinds.count("health") == 2
    # --to as +SECONDS or a time of day: from the log's first event (it has no start of its own), as status --at
    for to in ("+156", format_time(T0 + 156)[11:19]):
        again = tmp_path / "y.jsonl"
        assert main(["recording", "export", str(path), "--to", to, "-o", str(again)]) == 0
        assert again.read_bytes() == out.read_bytes()


def test_the_report_of_a_log_without_leases_does_not_say_no_node_stopped_renewing(tmp_path, capsys):
    """A nodes-only log holds no renewal: "No node stopped renewing its lease" was a claim it cannot
    make. With Leases, the nodes that stop renewing are named as before."""
    from nodewatch.cli import main

    for with_leases, said in ((False, "stopped renewing its lease cannot be told"),
                              (True, "First node to stop renewing its lease: `n0`")):
        path = _lease_era_log(tmp_path, with_leases=with_leases)
        assert main(["report", str(path)]) == 0
        summary = capsys.readouterr().out.split("## Summary", 1)[1].split("##", 1)[0]
        assert said in summary and "No node stopped renewing" not in summary, with_leases


def test_a_lease_watch_without_its_list_counts_once_every_lease_can_have_come(tmp_path, capsys):
    """``kubectl get leases -w --watch-only``: no opening list, each Lease only when it renews. From
    its first renewal (T0 + 145) the Leases of nodes that renew later (n3 at +151, n4 at +153) were
    not in yet, and those nodes were judged by their five-minute heartbeat: Overdue. The stream
    counts as recorded once a renew interval has passed (``WATCH_ONLY_WAIT``)."""
    from nodewatch.cli import main

    names = [f"n{i}" for i in range(5)]
    docs = [watch("ADDED", kinded("Node", node(n, transition=T0 - 3600, heartbeat=T0))) for n in names]
    docs += [watch("MODIFIED", kinded("Lease", lease(n, T0 + 145 + 2 * i))) for i, n in enumerate(names)]
    docs += [watch("MODIFIED", kinded("Lease", lease(n, T0 + 155 + 2 * i))) for i, n in enumerate(names)]
    path = tmp_path / "watch-only.json"
    path.write_bytes(b"\n".join(orjson.dumps(d) for d in docs) + b"\n")
    for t, blind in ((T0 + 150, True), (T0 + 160, False)):
        assert main(["status", "--replay", str(path), "--at", format_time(t), "--format", "json"]) == 0
        assert {n["state"] for n in orjson.loads(capsys.readouterr().out)["nodes"]} == {"Ready"}, t - T0
        main(["status", "--replay", str(path), "--at", format_time(t)])
        assert ("Leases are all in by" in capsys.readouterr().out) == blind, t - T0
