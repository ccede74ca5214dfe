"""A one-shot answer leaves out, unbuilt, the Node status reports that a later report of the same
Node supersedes (``columnar_reports``): the same states, records, renewal counts, problems and
instants as the read that builds every report, and as JSON Lines."""

from __future__ import annotations

import copy
import random

import pytest

from nodewatch.core.clock import ManualClock
from nodewatch.core.timeutil import format_time
from nodewatch.sources import columnar
from nodewatch.sources.recording import Recorder
from nodewatch.sources.recording_input import open_binary
from nodewatch.sources.replay import instant, state_at

from .test_columnar import _api_shaped
from .test_columnar_range import _views


def _micro(t: float) -> str:
    return str(format_time(t, micro=True))


def _second(t: float) -> str:
    return str(format_time(t))


class _Reports:
    """Nodes renewing their Leases every 10 s and reporting their status every 40 s (a heartbeat
    time and a resourceVersion: spliced rows), received in order, and what must keep a report:
    node 0 tainted unreachable (NoExecute) at 150 s, node 2 relabelled at 170 s (a whole row), node
    3 deleted at 230 s and added again at 260 s, node 4 silent from 120 s, node 5 reporting twice at
    the same instant at ~300 s; and node 1's report at ~460-500 s received a minute before the one it
    follows (the answers after it are read again in full: ``Supersession.unsure``)."""

    def __init__(self, tmp_path, nodes: int = 10, seconds: float = 500.0) -> None:
        from nodewatch.sim.fleet import SimFleet

        sim = SimFleet(nodes=nodes, scenario="steady", seed=4)
        self.t0 = t0 = sim.now
        clock = ManualClock(t0)
        self.paths = (str(tmp_path / "r.jsonl.gz"), str(tmp_path / "r.nwcol"))
        recs = [Recorder(self.paths[0], {"name": "t"}, sim.settings, clock=clock),
                columnar.ColumnarRecorder(self.paths[1], {"name": "t"}, sim.settings, clock=clock)]
        rng = random.Random(7)
        rv = [100]

        def write(resource, etype, obj, t, listing=False):
            rv[0] += 1
            shaped = _api_shaped(resource, obj, rv[0], rng) if obj is not None else None
            clock.set(t)
            for r in recs:
                r.write(resource, etype, shaped, t, listing)

        nodes_by = {n["metadata"]["name"]: copy.deepcopy(n) for n in sim.objects("nodes")}
        self.names = names = sorted(nodes_by)
        for n in names:
            write("nodes", "ADDED", nodes_by[n], t0, True)
        write("nodes", "SYNCED", None, t0)
        leases = {le["metadata"]["name"]: le for le in sim.objects("leases")}
        for n in sorted(leases):
            write("leases", "ADDED", leases[n], t0, True)
        write("leases", "SYNCED", None, t0)
        events = []
        for i, n in enumerate(names):
            phase = rng.uniform(0, 10)
            t = t0 + phase
            while t < t0 + seconds:
                events.append((t, "lease", n))
                t += 10 + rng.uniform(0, 0.4)
            t = t0 + phase + rng.uniform(0, 40)
            while t < t0 + seconds:
                if not (i == 4 and t - t0 > 120):
                    events.append((t, "report", n))
                t += 40 + rng.uniform(0, 0.5)
        events += [(t0 + 150, "taint", names[0]), (t0 + 170, "relabel", names[2]), (t0 + 230, "delete", names[3]),
                   (t0 + 260, "add", names[3]), (t0 + 300.25, "twice", names[5])]
        events.sort()
        stepped = False
        for at, what, n in events:
            node = nodes_by[n]
            if what == "lease":
                if n == names[4] and at - t0 > 120:
                    continue
                obj = dict(leases[n], spec=dict(leases[n]["spec"], renewTime=_micro(at - 0.003)))
                write("leases", "MODIFIED", obj, at + 0.002)
                continue
            if what == "taint":
                node["spec"]["taints"] = [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute",
                                           "timeAdded": _second(at)}]
            elif what == "relabel":
                node["metadata"]["labels"]["team"] = "storage"
            elif what == "delete":
                write("nodes", "DELETED", node, at)
                continue
            elif what in ("report", "twice"):
                for c in node["status"]["conditions"]:
                    c["lastHeartbeatTime"] = _second(at)
            rx = at + 0.004
            if what == "report" and n == names[1] and 455 < at - t0 and not stepped:
                stepped = True
                rx -= 60  # received before the report it follows
            write("nodes", "ADDED" if what == "add" else "MODIFIED", node, rx)
            if what == "twice":
                for c in node["status"]["conditions"]:
                    c["lastHeartbeatTime"] = _second(at + 1)
                write("nodes", "MODIFIED", node, rx)  # the same instant
        assert stepped
        for r in recs:
            r.close()


def _answers(path: str, at: str) -> tuple:
    state, seen, problems = state_at(path, at, compact=True, pods=False)
    return (_views(state, seen.at), dict(state.nodes), {k: v.renewals for k, v in state.leases.items()},
            (seen.at, seen.start, seen.last, seen.read_to_end, seen.events > 0), problems)


def _without_reports(monkeypatch) -> None:
    monkeypatch.setattr(instant, "clean_node_update", None)  # (``Supersession`` then builds every report)


def _blocks_read(monkeypatch) -> dict[str, int]:
    """Blocks an answer's read decodes (``Supersession.block``), by the instant asked (the last read
    of each instant)."""
    counts: dict[str, int] = {}
    real = instant._read_at

    def read_at(path, when, settings, compact, pods, supersede, *reports):
        if supersede is not None:
            block = supersede.block
            counts[when] = 0

            def counted(body, c):
                counts[when] += 1
                return block(body, c)

            supersede.block = counted
        return real(path, when, settings, compact, pods, supersede, *reports)

    monkeypatch.setattr(instant, "_read_at", read_at)
    return counts


def _left_out(path: str, at: str) -> tuple[int, int]:
    """(lines read, lines left out) of a one-shot read at ``at``."""
    p, supersede = instant._one_instant(path, at)
    assert supersede is not None
    return sum(1 for _ in open_binary(p, supersede)), supersede.dropped


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    return _Reports(tmp_path_factory.mktemp("reports"))


def test_reports_left_out_give_the_answers_of_reading_every_report_and_of_json_lines(recording, monkeypatch):
    jsonl, col = recording.paths
    instants = [_micro(recording.t0 + s) for s in (3, 45.5, 99, 140, 151, 172, 199.9, 215, 231, 262, 301, 340, 358,
                                                    498)]
    blocks = _blocks_read(monkeypatch)
    read = {at: _left_out(col, at) for at in instants}
    got = {at: _answers(col, at) for at in instants}
    ahead = dict(blocks)
    want = {at: _answers(jsonl, at) for at in instants}
    _without_reports(monkeypatch)
    blocks.clear()
    every = {at: _answers(col, at) for at in instants}
    built = {at: _left_out(col, at) for at in instants}
    for at in instants:
        assert got[at] == every[at], at
        # a report waiting for the next of its node does not make the read go on past its end
        assert ahead[at] <= blocks[at] + 2, (at, ahead[at], blocks[at])
        assert got[at][:4] == want[at][:4], at  # (problems: as in test_columnar_range)
        assert read[at][0] + read[at][1] == built[at][0] + built[at][1], at  # every line accounted for
    late = instants[-2]
    # most reports were left out unbuilt: ~10 nodes x 8 reports, a few kept for each node
    assert read[late][1] - built[late][1] > 50, (read[late], built[late])
    assert len(got[late][0]) == 10 and got[late][1]
    assert got[late][4] == want[late][4] == []


def test_a_report_that_steps_back_has_the_answer_read_again_in_full(recording, monkeypatch):
    jsonl, col = recording.paths
    reads = []
    real = instant._read_at

    def read_at(path, when, settings, compact, pods, supersede, *reports):
        reads.append(supersede is not None)
        return real(path, when, settings, compact, pods, supersede, *reports)

    monkeypatch.setattr(instant, "_read_at", read_at)
    for s, again in ((358, False), (498, True)):
        reads.clear()
        at = _micro(recording.t0 + s)
        got = _answers(col, at)
        assert reads == ([True, False] if again else [True]), s
    assert got == _answers(jsonl, at)  # (the problems too: every line read)


def test_what_keeps_a_report_keeps_it(recording):
    """The exceptions, one by one: the reports of the tainted node after its taint, node 2's before
    its relabelling, the twice-reported node's pair; of an ordinary node, the last report alone
    (of the lines up to the instant: those after it are kept, as the answer never reads them)."""
    jsonl, col = recording.paths
    target = recording.t0 + 358
    p, supersede = instant._one_instant(col, _micro(target))
    kept: dict[str, int] = {}
    for line in open_binary(p, supersede):
        d = columnar.orjson.loads(line)
        if d.get("resource") == "nodes" and d.get("type") == "MODIFIED" and d["t"] <= target:
            name = d["object"]["metadata"]["name"]
            kept[name] = kept.get(name, 0) + 1
    names = recording.names
    assert kept[names[0]] >= 5  # tainted from 150 s: none of its reports after it left out
    assert kept[names[2]] >= 2 and kept[names[5]] >= 2
    assert kept[names[7]] == kept[names[8]] == 1


def test_plain_values_are_those_a_json_decoder_reads_back_as_they_are():
    from nodewatch.sources.columnar_reports import _PLAIN_VALUE

    for v in ("2026-11-29T10:00:00Z", "12345", "", "é ü 東京"):
        assert _PLAIN_VALUE.fullmatch(v)
    for v in ('a"b', "a\\b", "a\nb", "\x00", "\x1f", "\ud800"):
        assert _PLAIN_VALUE.fullmatch(v) is None
