"""``status --replay`` leaves out the lease renewals a later one supersedes (``replay/superseded.py``):
its answer must be the one a full replay gives, on recordings that try every path a renewal takes."""

from __future__ import annotations

import io

import orjson
import pytest

from nodewatch.core.multi import MultiFleet
from nodewatch.core.report import fleet_table_lines, write_fleet_json
from nodewatch.core.rules import TAINT_NOT_READY, TAINT_UNREACHABLE, NodeState
from nodewatch.core.settings import Settings
from nodewatch.core.timeutil import parse_when
from nodewatch.sim.fleet import SimFleet
from nodewatch.sources.recording import Recorder, settings_payload
from nodewatch.sources.replay import state_at
from nodewatch.sources.replay.superseded import Superseded
from support.factories import T0, lease, node, pod, taint


def _sim(path: str, nodes: int, minutes: float, clusters: tuple[str, ...] = ()) -> None:
    """A simulated fleet with churn (nodes replaced: their Node and Lease deleted, new ones added),
    failing nodes, evictions, pods and events, recorded as a live run records it (list, SYNCED,
    watch). ``clusters``: the same fleet recorded once per cluster, each line saying its cluster."""
    fleet = SimFleet(nodes=nodes, scenario="incident+churn", seed=3)
    header = [{"name": c, "context": c, "settings": settings_payload(fleet.settings)} for c in clusters] or None
    rec = Recorder(path, {"name": "sim"}, fleet.settings, clusters=header)
    writers = [rec.for_cluster(c) for c in clusters] or [rec]
    t = fleet.now
    for w in writers:
        for resource in ("nodes", "leases", "pods", "events", "certificatesigningrequests"):
            for obj in fleet.objects(resource):
                w.write(resource, "ADDED", obj, t, listing=True)
            w.write(resource, "SYNCED", None, t)
    fleet.subscribe(lambda resource, etype, obj, at: [w.write(resource, etype, obj, at + 0.02) for w in writers])
    end = fleet.now + minutes * 60
    while t < end:
        t = min(end, t + 30)
        fleet.step_to(t)
    rec.close()


def _hostile(path: str) -> None:
    """Every way a lease line can go (and a few node and pod lines): renewals, a relist after the watch (listed renewals again), a
    renewTime that steps back, a lease deleted and created again, a lease the typed decoder refuses
    (read by the dict reader), one without renewTime, one outside the node-lease namespace, lines
    written late, twice, garbled, cut; a lease stream that goes down and comes back."""
    rec = Recorder(path, {"kind": "test"}, Settings(server_version="v1.31.0"))
    names = [f"n{i}" for i in range(6)]
    for n in names:
        rec.write("nodes", "ADDED", node(n), T0, listing=True)
        rec.write("leases", "ADDED", lease(n, T0 - 3, written=T0 - 2), T0, listing=True)
        rec.write("pods", "ADDED", pod(f"p-{n}", n), T0, listing=True)
    for r in ("nodes", "leases", "pods"):
        rec.write(r, "SYNCED", None, T0)
    rec.write_health("leases", T0, connected=True, synced=True, last_activity=T0)
    odd = lease("n3", T0 + 40)
    odd["metadata"]["labels"] = {"x": 1}  # not a string: the typed decoder refuses, the dict reader reads it
    other = lease("n4", T0 + 95)
    other["metadata"]["namespace"] = "kube-system"
    for k in range(1, 13):
        t = T0 + 10 * k
        for i, n in enumerate(names):
            if n == "n5" and k > 6:
                continue  # stops renewing
            rec.write("leases", "MODIFIED", lease(n, t - 0.3 + i / 10), t + i / 10)
        if k == 2:
            rec.write("leases", "MODIFIED", lease("n1", T0 + 5), t + 1)  # renewTime steps back
        if k == 3:
            rec.write("leases", "MODIFIED", odd, t + 1)
        if k == 4:
            rec.write("leases", "DELETED", lease("n2", t - 5), t + 1)
            rec.write("leases", "ADDED", lease("n2", t - 20), t + 1.5)  # created again, renewTime older
            rec.write("leases", "MODIFIED", lease("n0", None), t + 2)  # renewTime gone
        if k == 6:
            for n in names:  # a relist: the leases listed again, one renewed since the last event
                renew, written = (t + 1, t - 0.5) if n == "n4" else (t - 4, t - 3)
                rec.write("leases", "ADDED", lease(n, renew, written=written), t + 3, listing=True)
            rec.write_health("leases", t + 3, connected=True, synced=True, relists=1)
        if k == 7:
            rec.write("leases", "MODIFIED", lease("n1", t - 0.2), t - 6)  # written 6 s late
            rec.write_health("leases", t + 2, connected=False, down_since=t + 2, last_error="reset")
        if k == 8:
            rec.write_health("leases", t + 2, connected=True, synced=True, down_since=None, last_error="")
            rec.write("leases", "MODIFIED", other, t + 2)
            rec.write("nodes", "MODIFIED", node("n5", "Unknown", transition=t,
                                                taints=[taint("node.kubernetes.io/unreachable", added=t)]), t + 2)
        if k == 9:  # listed, read by the dict reader, renewTime ahead of the next renewal's
            ahead = lease("n3", t + 15, written=t - 5)
            ahead["metadata"]["labels"] = {"x": 1}
            rec.write("leases", "ADDED", ahead, t + 1, listing=True)
            # the controller writes the taint again with a later timeAdded: the eviction does not move
            rec.write("nodes", "MODIFIED", node("n5", "Unknown", transition=t - 10,
                                                taints=[taint("node.kubernetes.io/unreachable", added=t)]), t + 2)
            odd_node = node("n1")
            odd_node["metadata"]["labels"]["x"] = 1  # read by the dict reader
            rec.write("nodes", "MODIFIED", odd_node, t + 2)
        if k == 10:  # a relist that ends in SYNCED and does not give n2 (deleted unseen): it goes;
            for n in names:  # its kubelet renews after, so its Lease comes back as a new one
                if n != "n2":
                    rec.write("nodes", "ADDED", node(n), t + 3, listing=True)
                    rec.write("leases", "ADDED", lease(n, t - 4, written=t - 3), t + 3, listing=True)
            rec.write("nodes", "SYNCED", None, t + 3)
            rec.write("leases", "SYNCED", None, t + 3)
        # x: renewed on the watch, not given by the relist at k == 10 (deleted there), then listed
        # twice without SYNCED, its kubelet's write time older than the watch renewal and moving back:
        # a read that did not follow the deletion would time the second by the first wrongly
        if k == 2:
            rec.write("leases", "MODIFIED", lease("x", t - 0.3), t)
        if k == 11:
            rec.write("leases", "ADDED", lease("x", t - 5, written=T0 + 15), t + 4, listing=True)
        if k == 12:
            rec.write("leases", "ADDED", lease("x", t - 5, written=T0 + 10), t + 4, listing=True)
        if k == 11:
            rec.write("nodes", "MODIFIED", node("n5", transition=t), t + 2)  # back, untainted
            rec.write("pods", "DELETED", pod("p-n5", "n5"), t + 3)
    rec.close()
    with open(path, "rb") as f:
        lines = f.read().splitlines(keepends=True)
    renewal = next(i for i, line in enumerate(lines) if b'"MODIFIED"' in line and b'"leases"' in line)
    lines.insert(renewal + 1, lines[renewal])  # written twice
    lines.insert(renewal + 5, b'{"t": ' + str(T0 + 12).encode() + b', "resource": "leases", "type": "MODI\n')
    lines.insert(renewal + 9, b"garbage\n")
    for bad in (b'', b', "object": [1]', b', "object": null'):  # an object event without an object
        lines.insert(renewal + 11, b'{"t": ' + str(T0 + 13).encode() + b', "resource": "leases", "type": "MODIFIED"'
                     + bad + b'}\n')
    with open(path, "wb") as f:
        f.writelines(lines)


def _answers(state, at: float, nodes: bool = True) -> list[bytes]:
    """What ``status`` prints of ``state`` at ``at``: the JSON and the table, for the fleet and
    (``nodes``) for each node (its pods and events), per cluster for a recording of several."""
    members = [(m.name, m.state) for m in state.members] if isinstance(state, MultiFleet) else [("", state)]
    out = []
    for name, one in members:
        view = one.evaluate(at)
        for node_name in [None, *(sorted(one.nodes) if nodes else ())]:
            buf = io.BytesIO()
            write_fleet_json(buf.write, one, view, node_name)
            out.append(name.encode() + buf.getvalue())
            out.append("\n".join(fleet_table_lines(one, view, node_name)).encode())
    return out


def _tracks(state) -> list:
    """Every lease field a view reads (not the renewal count or the heartbeat history)."""
    members = [m.state for m in state.members] if isinstance(state, MultiFleet) else [state]
    return [{n: (t.renew_time, t.observed_at, t.age_from, t.skew, t.duration, t.holder) for n, t in s.leases.items()}
            for s in members]


def _same_answer(path: str, at: str | None, open_replay) -> int:
    """The one-shot answers (with and without Pods) against a full one-pass replay and against the
    indexed replay's seek."""
    fast, seen, problems = state_at(path, at, compact=True)
    no_pods, seen_np, problems_np = state_at(path, at, compact=True, pods=False)
    full, seen_full, problems_full = state_at(path, at)
    assert seen == seen_full == seen_np and problems == problems_full == problems_np
    assert _answers(fast, seen.at) == _answers(full, seen.at)
    assert _answers(no_pods, seen.at, nodes=False) == _answers(full, seen.at, nodes=False)
    assert _tracks(fast) == _tracks(full) == _tracks(no_pods)
    src = open_replay(path)
    src.replay.seek(seen.at)
    assert _answers(fast, seen.at) == _answers(src.state, seen.at)
    return seen.events


@pytest.fixture(scope="module")
def churn(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("sup") / "churn.jsonl")
    _sim(path, nodes=120, minutes=6)
    return path


@pytest.mark.parametrize("at", [None, "+0", "+45", "+181.5", "+300", "+359"])
def test_a_churning_fleet_gets_the_answer_of_a_full_replay(churn, open_replay, at):
    assert _same_answer(churn, at, open_replay) > 0


def test_most_renewals_are_left_out(churn, monkeypatch):
    """Not a timing: the lever itself. Without it this test fails (nothing is dropped)."""
    counts = []
    original = Superseded.__init__

    def spy(self, *args, **kw):
        original(self, *args, **kw)
        counts.append(self)

    monkeypatch.setattr(Superseded, "__init__", spy)
    state_at(churn, None, compact=True)
    events = counts[0].events
    assert counts[0].dropped > 0.8 * sum(1 for e in events if e is None or e.resource == "leases")
    assert any(e is not None and e.resource == "pods" for e in events)
    no_pods, _, _ = state_at(churn, None, compact=True, pods=False)
    assert not any(e is not None and e.resource == "pods" and e.etype != "SYNCED" for e in counts[1].events)
    # what the Pods left out show of the default toleration is kept all the same (core/pod_tolerations)
    assert counts[1].tallies[None].learned and not no_pods.store.pods
    assert no_pods.settings.learned_tolerations == counts[1].tallies[None].learned


@pytest.mark.parametrize("at", [None, "+5", "+25", "+45", "+65", "+75", "+85", "+100", "+105", "+108", "+125"])
def test_hostile_lease_lines_get_the_answer_of_a_full_replay(tmp_path, open_replay, at):
    path = str(tmp_path / "hostile.jsonl")
    _hostile(path)
    _same_answer(path, at, open_replay)
    _, _, problems = state_at(path, at, compact=True)
    assert any("duplicate" in p for p in problems) and any("truncated" in p for p in problems)
    assert sum("without an object" in p for p in problems) == 3


@pytest.mark.parametrize("at", [None, "+100", "+200"])
def test_several_clusters_get_the_answer_of_a_full_replay(tmp_path, open_replay, at):
    path = str(tmp_path / "two.jsonl")
    _sim(path, nodes=30, minutes=4, clusters=("eu", "us"))
    _same_answer(path, at, open_replay)
    fast, seen, _ = state_at(path, at, compact=True)
    assert isinstance(fast, MultiFleet) and all(m.state.leases for m in fast.members)


@pytest.mark.parametrize("at", [None, "+10", "+20", "+30"])
def test_renewals_before_the_lease_list_is_in_are_all_applied(tmp_path, open_replay, at):
    """Without the lease list's SYNCED line every renewal is timed as a listed one, from the
    renewals before it (here a kubelet write time that does not move)."""
    path = str(tmp_path / "unsynced.jsonl")
    rec = Recorder(path, {"kind": "test"}, Settings(server_version="v1.31.0"))
    rec.write("nodes", "ADDED", node("a"), T0, listing=True)
    rec.write("nodes", "SYNCED", None, T0)
    rec.write_health("leases", T0, connected=True, synced=True)
    for k in range(5):
        rec.write("leases", "MODIFIED", lease("a", T0 + 10 * k - 0.5, written=T0 - 30), T0 + 10 * k)
    rec.close()
    _same_answer(path, at, open_replay)


def test_one_cluster_recording_ignores_the_cluster_of_its_lines(tmp_path, open_replay):
    """A lease's lines that say different clusters in a one-cluster recording are one lease."""
    path = str(tmp_path / "one.jsonl")
    rec = Recorder(path, {"kind": "test"}, Settings(server_version="v1.31.0"))
    rec.write("nodes", "ADDED", node("a"), T0, listing=True)
    rec.write("nodes", "SYNCED", None, T0)
    rec.write("leases", "ADDED", lease("a", T0 - 1), T0, listing=True)
    rec.write("leases", "SYNCED", None, T0)
    rec.write("leases", "MODIFIED", lease("a", T0 + 30), T0 + 30, cluster="x")
    rec.write("leases", "MODIFIED", lease("a", T0 + 20), T0 + 40, cluster="y")  # steps back: not advanced
    rec.close()
    _same_answer(path, None, open_replay)
    state, seen, _ = state_at(path, None, compact=True)
    assert state.leases["a"].observed_at == T0 + 30 and seen.at == T0 + 40
    assert parse_when("+0", T0) == T0


def test_status_command_prints_what_a_full_replay_gives(churn, capsys):
    from nodewatch.cli import main

    main(["status", "--replay", churn, "--at", "+200", "--format", "json"])
    printed = orjson.loads(capsys.readouterr().out)
    full, seen, _ = state_at(churn, "+200")
    buf = io.BytesIO()
    write_fleet_json(buf.write, full, full.evaluate(seen.at))
    assert printed == orjson.loads(buf.getvalue()) and printed["nodes"]


def test_a_line_is_a_duplicate_whatever_its_line_end():
    from nodewatch.sources.line_guards import DuplicateFilter

    dup = DuplicateFilter(4)
    assert dup.seen(b'{"a": 1}\n', 1) is None
    assert [dup.seen(line, 2) for line in (b'{"a": 1}', b'{"a": 1}\r\n', b'{"a": 1}\r')] == [1, 1, 1]
    assert dup.seen(b'{"a": 2}\r\n', 3) is None and dup.seen(b'{"a": 2}\n', 4) == 3


@pytest.mark.parametrize("at", ["+30", "+70", "+100"])
def test_pods_force_deleted_off_their_node_leave_the_default_they_showed(tmp_path, open_replay, at):
    """A node tainted unreachable whose pods carry the API server's 60 s defaults; at +50 the pod
    garbage collector force-deletes them all (the node tainted out-of-service, seen on the v1.37.2
    testbed). The answer without Pods counts with 60 s at every instant, as the full replay does:
    Evicting at +30, Evicted at +70 and +100, not "evict in" 300 s again once the pods are gone."""
    path = str(tmp_path / "oos.jsonl")
    rec = Recorder(path, {"kind": "test"}, Settings(server_version="v1.31.0"))
    tainted = node("a", "Unknown", taints=[taint(TAINT_UNREACHABLE, "NoSchedule", T0),
                                           taint(TAINT_UNREACHABLE, "NoExecute", T0)])
    sixty = [{"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}
             for key in (TAINT_NOT_READY, TAINT_UNREACHABLE)]
    rec.write("nodes", "ADDED", tainted, T0, listing=True)
    rec.write("nodes", "ADDED", node("up", zone="z2"), T0, listing=True)
    rec.write("leases", "ADDED", lease("a", T0 - 60), T0, listing=True)
    rec.write("leases", "ADDED", lease("up", T0 - 1), T0, listing=True)
    pods = [pod(f"web-{i}", "a", tolerations=sixty) for i in range(3)]
    for p in pods:
        rec.write("pods", "ADDED", p, T0, listing=True)
    for r in ("nodes", "leases", "pods"):
        rec.write(r, "SYNCED", None, T0)
    for k in range(1, 11):
        rec.write("leases", "MODIFIED", lease("up", T0 + 10 * k - 1), T0 + 10 * k)
    for p in pods:
        rec.write("pods", "DELETED", p, T0 + 50)
    rec.close()
    _same_answer(path, at, open_replay)
    no_pods, seen, _ = state_at(path, at, compact=True, pods=False)
    expected = NodeState.EVICTING if at == "+30" else NodeState.EVICTED
    assert no_pods.evaluate(seen.at).node("a").state is expected
    assert no_pods.settings.toleration == 60.0
