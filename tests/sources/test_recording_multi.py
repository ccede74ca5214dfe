"""Recordings of several clusters, built line by line: the format, replay (seek, keyframes, next
change), ``status --replay``, ``report``, and what a reader that ignores ``cluster`` makes of one."""

from __future__ import annotations

import json

import orjson
import pytest

from nodewatch.cli import main
from nodewatch.core.fleet import FleetState
from nodewatch.core.multi import MultiFleet
from nodewatch.core.rules import NodeState
from nodewatch.core.settings import Settings
from nodewatch.sources.recording import Recorder, settings_payload
from nodewatch.sources.recording_input import read_recording
from nodewatch.sources.replay import keyframes, state_at
from support.factories import T0, lease, node

STOP = T0 + 100
"""us/node-2 renews its lease for the last time just before this."""
BLIND = (T0 + 200, T0 + 260)
"""eu's lease stream is down in between."""
END = T0 + 300


def write_two_clusters(path: str, *, header_clusters: bool = True) -> None:
    """eu (v1.33: grace 50s) and us (v1.31, learned after the header: grace 40s), each with node-1
    and node-2 in zone z1; us/node-2 stops renewing at ``STOP``; eu's lease stream is down during
    ``BLIND``."""
    clusters = [{"name": n, "context": f"ctx-{n}", "settings": settings_payload(Settings(server_version=v))}
                for n, v in (("eu", "v1.33.1"), ("us", None))]
    rec = Recorder(path, {"kind": "multi", "name": "2 clusters: eu, us"}, Settings(),
                   clusters=clusters if header_clusters else None)
    eu, us = rec.for_cluster("eu"), rec.for_cluster("us")
    us.write_settings(T0, Settings(server_version="v1.31.4"))
    for c in (eu, us):
        for n in ("node-1", "node-2"):
            c.write("nodes", "ADDED", node(n), T0, listing=True)
            c.write("leases", "ADDED", lease(n, T0 - 2), T0, listing=True)
        c.write_health("nodes", T0, connected=True, synced=True)
        c.write_health("leases", T0, connected=True, synced=True)
    t = T0 + 10
    while t <= END:
        if BLIND[0] <= t < BLIND[1] and t - 10 < BLIND[0]:
            eu.write_health("leases", BLIND[0], connected=False, down_since=BLIND[0], last_error="connection reset")
        if t >= BLIND[1] and t - 10 < BLIND[1]:
            eu.write_health("leases", BLIND[1], connected=True, synced=True, down_since=None, last_error="")
        for name, c in (("eu", eu), ("us", us)):
            for n in ("node-1", "node-2"):
                if name == "eu" and BLIND[0] <= t < BLIND[1]:
                    continue
                if name == "us" and n == "node-2" and t >= STOP:
                    continue
                c.write("leases", "MODIFIED", lease(n, t - 0.01), t + (0.01 if name == "us" else 0.02))
        t += 10
    rec.close()


@pytest.fixture
def two(tmp_path) -> str:
    path = str(tmp_path / "two.jsonl")
    write_two_clusters(path)
    return path


def by_key(view) -> dict[str, NodeState]:
    return {v.key: v.state for v in view.nodes}


def test_every_line_says_its_cluster_and_the_header_lists_them(two):
    header, entries, problems = read_recording(two)
    assert problems == []
    assert [(c["name"], c["context"], c["settings"]["server_version"]) for c in header["clusters"]] == [
        ("eu", "ctx-eu", "v1.33.1"), ("us", "ctx-us", None)]
    assert {e.cluster for e in entries} == {"eu", "us"}
    kinds = {(e.cluster, e.etype) for e in entries}
    assert ("us", "SETTINGS") in kinds and ("eu", "HEALTH") in kinds
    with open(two, "rb") as f:
        lines = [orjson.loads(line) for line in f.read().splitlines()[1:]]
    assert all(list(d)[:2] == ["t", "cluster"] for d in lines)  # the time first (segments read it so)


def test_replay_rebuilds_one_state_per_cluster_with_its_own_settings(two, open_replay):
    src = open_replay(two)
    state = src.state
    assert isinstance(state, MultiFleet) and state.cluster_names == ["eu", "us"]
    assert state.state_of("eu").settings.grace == 50 and state.state_of("us").settings.grace == 40
    at = STOP + 45  # us/node-2 is 45s silent: past us's 40s grace, it would not be past eu's 50s
    src.replay.seek(at)
    view = state.evaluate(at)
    assert [c.name for c in view.clusters] == ["eu", "us"]
    states = by_key(view)
    assert len(states) == 4 and states["us/node-2"] is not NodeState.READY
    assert states["eu/node-2"] is NodeState.READY and states["us/node-1"] is NodeState.READY
    assert [(z.name, z.nodes) for z in view.zones] == [("eu/r1/z1", 2), ("us/r1/z1", 2)]
    blind_at = BLIND[0] + 30
    src.replay.seek(blind_at)
    eu = next(c for c in state.evaluate(blind_at).clusters if c.name == "eu")
    assert eu.health_text.startswith("leases down") and eu.blind_reason


def test_seeks_through_keyframes_are_exact_per_cluster(two, monkeypatch, open_replay):
    monkeypatch.setattr(keyframes, "KEYFRAME_EVENTS", 7)
    src = open_replay(two)
    assert src.replay.wait_indexed(30)
    assert len(src.replay.keyframes) > 5
    for offset in (250, 20, 150, 299, 5, 205, 120):
        t = T0 + offset
        src.replay.seek(t)
        once, _, _ = state_at(two, f"+{t - src.replay.start}")
        assert by_key(src.state.evaluate(t)) == by_key(once.evaluate(t)), offset


def test_next_change_finds_the_change_in_its_cluster(two, open_replay):
    src = open_replay(two)
    src.replay.seek(T0 + 60)
    t = src.replay.next_change()
    assert t is not None and STOP < t < STOP + 45
    src.replay.seek(t - 0.5)
    before = by_key(src.state.evaluate(t - 0.5))
    src.replay.seek(t)
    after = by_key(src.state.evaluate(t))
    assert [k for k in after if after[k] is not before[k]] == ["us/node-2"]


def test_status_replay_answers_per_cluster(two, capsys):
    code = main(["status", "--replay", two, "--at", f"+{STOP + 45 - T0}", "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1  # a node anywhere is not Ready
    assert [(c["context"], c["name"], c["settings"]["grace_seconds"]) for c in out["clusters"]] == [
        ("ctx-eu", "eu", 50), ("ctx-us", "us", 40)]
    states = {c["name"]: {n["name"]: n["state"] for n in c["nodes"]} for c in out["clusters"]}
    assert states["eu"] == {"node-1": "Ready", "node-2": "Ready"} and states["us"]["node-2"] != "Ready"
    assert main(["status", "--replay", two, "--at", "+50"]) == 0
    assert "== cluster eu (context ctx-eu) ==" in capsys.readouterr().out
    assert main(["status", "--replay", two, "--node", "us/node-2"]) == 1
    assert main(["status", "--replay", two, "--node", "node-2"]) == 2  # which cluster?


def test_report_groups_per_cluster(two, capsys):
    assert main(["report", two]) == 0
    md = capsys.readouterr().out
    assert "- `eu`: grace 50s (server v1.33.1)" in md and "- `us`: grace 40s (server v1.31.4)" in md
    eu, us = md.index("### Cluster `eu`"), md.index("### Cluster `us`")
    assert "No node stopped renewing its lease in the window." in md[eu:us]
    assert "First node to stop renewing its lease: `us/node-2`" in md[us:]
    assert "### `us/node-2` in `us/r1/z1`" in md
    blind = md[md.index("## nodewatch's own blind periods"):]
    assert "| cluster | from | to | for | why |" in blind
    rows = [line for line in blind.splitlines() if line.startswith("| `")]
    assert len(rows) == 1 and rows[0].startswith("| `eu` |") and "1 minute" in rows[0]


def test_a_reader_that_ignores_cluster_replays_one_cluster(tmp_path, open_replay):
    """Without the header's ``clusters`` (as a reader that does not know the field sees the file),
    the lines are one fleet: node-1 of eu and of us are one node."""
    path = str(tmp_path / "flat.jsonl")
    write_two_clusters(path, header_clusters=False)
    src = open_replay(path)
    assert isinstance(src.state, FleetState)
    src.replay.seek(T0 + 50)
    assert sorted(v.name for v in src.state.evaluate(T0 + 50).nodes) == ["node-1", "node-2"]
    assert src.problems == []


def test_lines_of_no_listed_cluster_are_skipped_and_said(tmp_path, open_replay):
    path = tmp_path / "odd.jsonl"
    write_two_clusters(str(path))
    with open(path, "ab") as f:
        f.write(orjson.dumps({"t": T0 + 5, "cluster": "mars", "resource": "nodes", "type": "ADDED",
                              "object": node("node-9")}) + b"\n")
        f.write(orjson.dumps({"t": T0 + 6, "resource": "nodes", "type": "ADDED", "object": node("node-8")}) + b"\n")
    src = open_replay(str(path))
    src.replay.seek(END)
    assert sorted(by_key(src.state.evaluate(END))) == ["eu/node-1", "eu/node-2", "us/node-1", "us/node-2"]
    assert any("cluster 'mars' is not in the header" in p for p in src.problems)
    assert any("no \"cluster\" in a recording of several clusters" in p for p in src.problems)
