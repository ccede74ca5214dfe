"""A replay's first frame: the opening of the recording is parsed once (kept by the index) and the
background work gives way while the dashboard draws it; neither changes what any state becomes."""

from __future__ import annotations

import threading

from nodewatch.core.objects import NodeRecord
from nodewatch.core.settings import Settings
from nodewatch.sources.recording import Recorder
from nodewatch.sources.replay import index as index_mod
from nodewatch.sources.replay.index import EventIndex
from nodewatch.sources.replay.lines import parse
from support.factories import T0, lease, node, pod, taint


def _recording(path: str, minutes: float = 3) -> str:
    """A list of nodes, leases and pods at the start (the opening), then renewals and a node that
    goes down and is tainted, in ``minutes``."""
    rec = Recorder(path, {"kind": "test"}, Settings(server_version="v1.31.0"))
    names = [f"n{i}" for i in range(20)]
    for n in names:
        rec.write("nodes", "ADDED", node(n), T0, listing=True)
        rec.write("pods", "ADDED", pod(f"p-{n}", n), T0, listing=True)
    rec.write("nodes", "SYNCED", None, T0)
    rec.write("pods", "SYNCED", None, T0)
    for n in names:
        rec.write("leases", "ADDED", lease(n, T0 - 2), T0, listing=True)
    rec.write("leases", "SYNCED", None, T0)
    t = T0 + 10
    while t <= T0 + minutes * 60:
        for i, n in enumerate(names):
            if n != "n3" or t < T0 + 60:
                rec.write("leases", "MODIFIED", lease(n, t + i / 10 - 0.1), t + i / 10)
        if t == T0 + 110:
            rec.write("nodes", "MODIFIED", node("n3", "Unknown", transition=t,
                                                taints=[taint("node.kubernetes.io/unreachable", added=t)]), t)
        t += 10
    rec.close()
    return path


def test_the_opening_is_kept_parsed_and_read_as_from_the_file(tmp_path, monkeypatch):
    monkeypatch.setattr(index_mod, "PUBLISH_EVERY", 16)
    monkeypatch.setattr(index_mod, "REORDER_WINDOW", 5.0)
    path = _recording(str(tmp_path / "r.jsonl"))
    index = EventIndex(path)
    try:
        kept = index._opening
        assert kept and len(kept) < len(index)  # the opening only
        with open(path, "rb") as f:
            data = f.read()
        for i in range(len(index)):
            off, n = index._offsets[i], index._lengths[i]
            from_file = parse(0, data[off:off + n], [])
            e = index.read(i)
            assert e == from_file, i
            if isinstance(e.obj, NodeRecord) and off in kept:
                assert e.obj is not kept[off].obj  # each state gets its own (applying rewrites taints)
    finally:
        index.close()


def test_the_state_at_the_start_is_the_same_with_the_opening_kept(tmp_path, open_replay, monkeypatch):
    path = _recording(str(tmp_path / "r.jsonl"))
    kept = open_replay(path, background=True)
    monkeypatch.setattr(index_mod, "OPENING_MAX", 0)  # nothing kept: every event read from the file
    plain = open_replay(path, background=True)
    assert plain.replay.index._opening == {}
    for t in (T0, T0 + 5, T0 + 125, T0 + 179):
        for src in (kept, plain):
            src.replay.seek(t)
        assert kept.state.node_records() == plain.state.node_records()
        assert kept.state.evaluate(t).nodes == plain.state.evaluate(t).nodes


def test_background_work_gives_way_until_released(tmp_path, open_replay):
    path = _recording(str(tmp_path / "r.jsonl"))
    src = open_replay(path, background=True)
    index = src.replay.index
    index.wait_complete()
    index.hold_background(3600)  # the first frame, as long as it takes
    scratch = src.replay.empty_state()
    done = threading.Event()

    def background() -> None:
        index.apply_range(scratch, 0, len(index))
        done.set()

    worker = threading.Thread(target=background, daemon=True)
    worker.start()
    src.replay.seek(T0 + 100)  # the dashboard's own state is never held
    assert src.state.nodes and not done.is_set()
    worker.join(0.3)
    assert not done.is_set() and not scratch.nodes  # still giving way
    index.release_background()
    assert done.wait(10) and len(scratch.nodes) == len(src.state.nodes)


def test_a_seek_beyond_the_index_ends_the_hold(tmp_path, open_replay, monkeypatch):
    monkeypatch.setattr(index_mod, "PUBLISH_EVERY", 16)
    monkeypatch.setattr(index_mod, "REORDER_WINDOW", 5.0)
    monkeypatch.setattr(index_mod, "FIRST_FRAME_SECONDS", 3600)  # held once the start is shown
    path = _recording(str(tmp_path / "r.jsonl"), minutes=10)
    src = open_replay(path, background=True)
    src.replay.seek(T0 + 599)  # would wait an hour if the hold went on
    assert src.replay.index.wait_complete(30)
    assert src.state.evaluate(T0 + 599).counts


def test_the_timeline_history_follows_an_index_built_in_the_background(tmp_path, open_replay, monkeypatch):
    """The dashboard's timeline is sampled while the index is still growing: it must cover the whole
    recording, as it does over a complete index (it used to stop where the index was when it began)."""
    from nodewatch.core.history import BackgroundHistory, sample_recording

    monkeypatch.setattr(index_mod, "PUBLISH_EVERY", 16)
    monkeypatch.setattr(index_mod, "REORDER_WINDOW", 5.0)
    path = _recording(str(tmp_path / "r.jsonl"), minutes=6)
    src = open_replay(path, background=True)
    assert not src.replay.index.complete
    job = BackgroundHistory(src.replay.index, None, src.replay.empty_state())
    assert job.wait(60)
    full = open_replay(path)
    expected = sample_recording(full.replay.index, None, state=full.replay.empty_state())
    assert job.recorder.complete and job.recorder.samples == expected.samples
    assert expected.samples[-1].at > full.replay.end - 1 and any(s.not_ready for s in expected.samples)
