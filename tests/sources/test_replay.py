"""ReplaySource: seek (forward, backward, through keyframes) is exact, fast; playback; next_change."""

from __future__ import annotations

import math
import platform
import random
import subprocess
import sys

import pytest

from nodewatch.core.fleet import FleetState
from nodewatch.core.rules import NodeState
from nodewatch.core.settings import Settings
from nodewatch.sources.recording import Recorder, RecordingError
from nodewatch.sources.recording_input import read_recording
from nodewatch.sources.replay import ReplaySource, keyframes
from nodewatch.sources.replay.instant import state_at
from support.factories import T0, lease, node, taint
from support.simserver import wait_until


def generate(path: str, nodes: int, duration: float, dead: set[str] = frozenset(), seed: int = 1,
             version: str = "v1.31.0") -> int:
    """A recording like a live run: a listing, then leases every 10s; ``dead`` nodes stop renewing
    halfway, go Ready=Unknown 45s later and get the unreachable NoExecute taint a second after."""
    rec = Recorder(path, {"kind": "generated", "name": "gen"}, Settings(server_version=version))
    names = [f"node-{i:04d}" for i in range(nodes)]
    for n in names:
        rec.write("nodes", "ADDED", node(n, transition=T0 - 3600), T0, listing=True)
    rec.write("nodes", "SYNCED", None, T0)
    for n in names:
        rec.write("leases", "ADDED", lease(n, T0 - 5), T0, listing=True)
    rec.write("leases", "SYNCED", None, T0)
    stop = T0 + duration / 2
    rng = random.Random(seed)
    events = []
    for n in names:
        off = rng.uniform(0, 10)
        k = 0
        while (tt := T0 + off + 10 * k) <= T0 + duration:
            if not (n in dead and tt > stop):
                events.append((tt, "leases", lease(n, tt - 0.01)))
            k += 1
        if n in dead:
            events.append((stop + 45, "nodes", node(n, "Unknown", transition=stop + 45)))
            events.append((stop + 46, "nodes", node(n, "Unknown", transition=stop + 45,
                                                    taints=[taint("node.kubernetes.io/unreachable", added=stop + 46)])))
    events.sort(key=lambda e: e[0])
    for tt, r, o in events:
        rec.write(r, "MODIFIED", o, tt + 0.05)
    rec.close()
    return len(events)


def states(view) -> dict[str, NodeState]:
    return {v.name: v.state for v in view.nodes}


def brute_force(path: str, t: float) -> dict[str, NodeState]:
    """The state at t computed the slow, obvious way: apply every line with time <= t."""
    header, entries, _ = read_recording(path)
    s = FleetState(Settings(server_version=header["settings"]["server_version"]))
    for e in sorted(entries, key=lambda e: e.t):
        if e.t <= t and e.etype != "HEALTH":
            s.apply(e.resource, e.etype, e.obj, e.t, e.listing)
    return states(s.evaluate(t))


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("rec") / "fleet.jsonl")
    generate(path, nodes=60, duration=600, dead={"node-0003", "node-0017"})
    return path


@pytest.fixture
def small_keyframes(monkeypatch):
    """Keyframes every 500 events so that a small recording has many."""
    monkeypatch.setattr(keyframes, "KEYFRAME_EVENTS", 500)


def test_seek_is_exact_forward_and_backward(recording, small_keyframes, open_replay):
    src = open_replay(recording)
    player = src.replay
    assert player.wait_indexed(10)
    assert len(player.keyframes) >= 5
    assert src.problems == []
    # out of order on purpose: backward seeks restore a keyframe, forward ones continue
    for offset in (550, 30, 320, 301, 599, 0, 400, 346.5, 347.5, 200):
        t = T0 + offset
        player.seek(t)
        assert states(src.state.evaluate(t)) == brute_force(recording, t), offset


def test_keyframes_past_their_budget_thin_out_and_seeks_stay_exact(recording, small_keyframes, open_replay,
                                                                    monkeypatch):
    """Past ``MAX_BYTES`` every other keyframe goes and the next come twice as far apart: memory
    stays bounded (a replay of 65,000 nodes grew by ~7 MB a second of reading), seeks stay exact."""
    whole = open_replay(recording).replay
    assert whole.wait_indexed(10)
    n, total = len(whole.keyframes), whole.keyframes.bytes
    assert n >= 6 and whole.keyframes.every == 500
    monkeypatch.setattr(keyframes, "MAX_BYTES", total // 3)
    src = open_replay(recording)
    player = src.replay
    assert player.wait_indexed(10)
    kept = player.keyframes
    assert kept.bytes <= total // 3 and 1 < len(kept) <= n // 2, (kept.bytes, total, len(kept), n)
    assert kept.every >= 2000  # doubled at each of at least two thinnings
    at, states = kept._frames
    assert len(at) == len(states) and at == sorted(at) and all(b - a >= 500 for a, b in zip(at, at[1:]))
    for offset in (550, 30, 320, 301, 599, 0, 400, 346.5, 200):
        t = T0 + offset
        player.seek(t)
        assert states_now(src, t) == brute_force(recording, t), offset


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the knob is glibc's (sources/heap.py)")
def test_a_replay_gives_back_the_memory_of_the_keyframes_it_lets_go(recording):
    """A keyframe's dictionaries (megabytes each at 65,000 nodes) freed at a thinning went back to
    the heap, not to the system, once glibc's dynamic mmap threshold had risen to their size:
    measured, the replay's memory did not drop when half its keyframes went."""
    probe = ("import sys\n"
             "from nodewatch.sources import heap\n"
             "from nodewatch.sources.replay import ReplaySource\n"
             "before = heap._fixed\n"
             "ReplaySource(sys.argv[1]).stop()\n"
             "print(before, heap._fixed)\n")
    out = subprocess.run([sys.executable, "-c", probe, recording], capture_output=True, text=True, timeout=60,
                         check=True)
    assert out.stdout.split() == ["None", "True"]


@pytest.mark.parametrize("physical, budget", [(16 << 30, 2 << 30), (2 << 30, 768 << 20), (64 << 30, 4 << 30),
                                               (None, 768 << 20)])
def test_the_keyframes_budget_is_an_eighth_of_the_machine_within_bounds(monkeypatch, physical, budget):
    def sysconf(name: str) -> int:
        if physical is None:
            raise ValueError(name)
        return {"SC_PHYS_PAGES": physical // 4096, "SC_PAGE_SIZE": 4096}[name]

    monkeypatch.setattr(keyframes.os, "sysconf", sysconf)
    assert keyframes._budget() == budget


def states_now(src, t: float) -> dict:
    return states(src.state.evaluate(t))


def test_the_dead_nodes_go_late_overdue_unknown_evicting(recording, open_replay):
    src = open_replay(recording)
    stop = T0 + 300
    expect = {stop + 25: NodeState.LATE, stop + 42: NodeState.OVERDUE, stop + 45.5: NodeState.UNKNOWN,
              stop + 47: NodeState.EVICTING}
    for t, want in expect.items():
        src.replay.seek(t)
        got = states(src.state.evaluate(t))
        assert got["node-0003"] is want and got["node-0017"] is want, (t - stop, got["node-0003"])
        assert got["node-0004"] is NodeState.READY
    assert src.state.settings.grace == 40.0  # v1.31 in the header: 40s


def test_next_change_finds_the_first_state_change(recording, open_replay):
    src = open_replay(recording)
    src.replay.seek(T0 + 100)
    t = src.replay.next_change()
    assert t is not None and T0 + 300 < t < T0 + 330
    before = states(src.state.evaluate(T0 + 100))
    # nothing changes before t (checked every second), something has changed at t
    for probe in range(101, math.floor(t - T0)):
        src.replay.seek(T0 + probe)
        assert states(src.state.evaluate(T0 + probe)) == before, probe
    src.replay.seek(t)
    assert states(src.state.evaluate(t)) != before
    # walking on from change to change reaches Overdue, Unknown and Evicting, in order
    seen = []
    prev = states(src.state.evaluate(t))
    for _ in range(20):
        nxt = src.replay.next_change()
        if nxt is None:
            break
        assert nxt > src.replay.position()
        src.replay.seek(nxt)
        now_states = states(src.state.evaluate(nxt))
        assert now_states != prev
        seen.append(now_states["node-0003"])
        prev = now_states
    distinct = [s for i, s in enumerate(seen) if i == 0 or seen[i - 1] is not s]
    if distinct[0] is NodeState.LATE:  # the other dead node changed first
        distinct.pop(0)
    # Evicted would come 300s after the taint, after the end of the recording: next_change says None
    assert distinct == [NodeState.OVERDUE, NodeState.UNKNOWN, NodeState.EVICTING]
    assert nxt is None


def test_next_change_is_none_when_nothing_changes(tmp_path, open_replay):
    path = str(tmp_path / "calm.jsonl")
    generate(path, nodes=5, duration=120)
    src = open_replay(path)
    src.replay.seek(T0 + 30)
    assert src.replay.next_change() is None


def test_playback_in_virtual_time_and_controls(recording, open_replay):
    src = open_replay(recording, speed=2000.0)
    r = src.replay
    assert r.start == T0 and T0 + 590 < r.end <= T0 + 600.05  # the listing .. the last renewal
    assert r.applied < r.events
    assert not r.playing
    src.start()
    wait_until(lambda: r.position() >= r.end and r.applied == r.events)  # the player thread, at x2000
    assert r.position() == pytest.approx(r.end, abs=1e-6)
    assert not r.playing  # paused at the end: virtual time does not run past the recording
    assert states(src.state.evaluate(r.end)) == brute_force(recording, r.end)
    r.seek(T0 + 100)
    r.step(5)
    assert r.position() == pytest.approx(T0 + 105, abs=1e-6)
    assert not r.playing
    r.step(-50)
    assert r.position() == pytest.approx(T0 + 55, abs=1e-6)
    r.set_speed(3.0)
    assert r.speed == 3.0


def test_start_at(recording, open_replay):
    src = open_replay(recording, start_at="+400")
    assert src.replay.position() == pytest.approx(T0 + 400, abs=1e-6)
    assert states(src.state.evaluate(T0 + 400))["node-0003"] is NodeState.EVICTING
    with pytest.raises(RecordingError):
        ReplaySource(recording, start_at="yesterday")


def test_seeks_back_and_forth_in_a_larger_recording_land_where_a_replay_from_the_start_does(tmp_path, open_replay):
    """Seeks through keyframes, in any order, give the state a replay from the start gives at that
    instant (10 min x 1,000 nodes: 60,000 events; how fast a seek is, is ``bench/replay_seek.py``'s
    figure, not a test's)."""
    path = str(tmp_path / "big.jsonl.gz")
    n = generate(path, nodes=1000, duration=600, dead={f"node-{i:04d}" for i in range(0, 1000, 50)})
    assert n > 55_000
    src = open_replay(path)
    assert src.replay.wait_indexed(60)
    for offset in (590, 10, 300, 595, 150, 450, 5):
        src.replay.seek(T0 + offset)
        seen = src.state.evaluate(T0 + offset)
        fresh, _, _ = state_at(path, f"+{offset}")  # one pass from the start: no keyframe, no index
        want = fresh.evaluate(T0 + offset)
        assert seen.counts == want.counts
        assert [(v.name, v.state, v.lease_observed_at) for v in seen.nodes] == \
               [(v.name, v.state, v.lease_observed_at) for v in want.nodes]


def test_settings_from_the_header_and_given_settings(tmp_path, open_replay):
    path = str(tmp_path / "r.jsonl")
    rec = Recorder(path, {"kind": "test"}, Settings(server_version="v1.30.1").override(toleration_seconds=120))
    rec.write("nodes", "ADDED", node("a"), T0)
    rec.close()
    src = open_replay(path)
    assert src.state.settings.grace == 40.0
    assert src.state.settings.toleration_seconds == 120
    given = open_replay(path, settings=Settings().override(grace_seconds=33))
    assert given.state.settings.grace == 33
    assert given.state.settings.server_version == "v1.30.1"


def test_indexed_in_the_background_seeks_wait_for_the_index_and_are_exact(recording, monkeypatch, open_replay):
    from nodewatch.sources.replay import index as index_mod

    monkeypatch.setattr(index_mod, "PUBLISH_EVERY", 64)  # show the growing index often
    monkeypatch.setattr(index_mod, "REORDER_WINDOW", 5.0)
    full = open_replay(recording)
    src = open_replay(recording, background=True)
    player = src.replay
    assert player.start == full.replay.start  # known at once
    for offset in (599, 20, 333.3, 599.9):  # the first one waits for the index to get there
        t = T0 + offset
        player.seek(t)
        assert states(src.state.evaluate(t)) == brute_force(recording, t), offset
    assert player.wait_indexed(10)
    assert (player.end, player.events, src.problems) == (full.replay.end, full.replay.events, full.problems)
