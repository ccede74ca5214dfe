"""The flight recorder: rotating segments that each open with a keyframe, retention, and reading
across segments (replay and status on the directory)."""

from __future__ import annotations

import gzip
import os

import orjson
import pytest

from nodewatch.core.clock import ManualClock
from nodewatch.core.objects import node_from_dict
from nodewatch.core.rules import NodeState
from nodewatch.core.settings import Settings
from nodewatch.core.timeutil import format_time
from nodewatch.hub.codec import view_to_wire
from nodewatch.hub.flight_recorder import SegmentedRecorder
from nodewatch.hub.keyframe_lines import node_to_dict
from nodewatch.sources import columnar
from nodewatch.sources.columnar import iter_file_lines as columnar_lines
from nodewatch.sources.demo import DemoSource
from nodewatch.sources.recording import RecordingError
from nodewatch.sources.replay import ReplaySource
from nodewatch.sources.segments import list_segments, resolve_when, window


def _record_demo(directory, nodes=60, seconds=400, step=5.0, segment=60.0, every=7, record_format="jsonl",
                 scenario="incident"):
    """A demo fleet recorded in segments; returns {t: every node's view at t} along the way."""
    src = DemoSource(nodes=nodes, scenario=scenario, seed=1)
    rec = SegmentedRecorder(directory, {"kind": "demo"}, src.state.settings, segment_seconds=segment,
                            clock=src.clock, records=src.state.node_records, keep_seconds=None, keep_bytes=None,
                            record_format=record_format)
    src.recorder = rec
    t0 = src.clock.now()
    refs = {}
    for i in range(1, int(seconds / step)):
        t = t0 + i * step
        src.advance_to(t)
        src.clock.seek(t)
        if i % every == 0:
            refs[t] = {v.name: view_to_wire(v) for v in src.state.evaluate(t).nodes}
    rec.close()
    return refs


def _wire_at(source, t):
    source.replay.seek(t)
    return {v.name: view_to_wire(v) for v in source.state.evaluate(t).nodes}


def test_the_keyframe_rebuilds_each_node_exactly():
    src = DemoSource(nodes=40, seed=2)
    src.advance_to(src.clock.now() + 600)  # taints, NotReady conditions, cordons of the incident
    records = src.state.node_records()
    assert any(r.taints for r in records.values()) and any(r.ready != "True" for r in records.values())
    for rec in records.values():
        assert node_from_dict(orjson.loads(orjson.dumps(node_to_dict(rec)))) == rec


def test_replay_across_segments_is_the_fleet_as_it_was(tmp_path, open_replay):
    refs = _record_demo(tmp_path / "rec")
    segs = list_segments(tmp_path / "rec")
    assert len(segs) >= 6
    src = open_replay(tmp_path / "rec")
    assert not src.problems
    for t, want in refs.items():
        assert _wire_at(src, t) == want


def _patches(path) -> list:
    """(kind, patch or values) of a columnar segment's Node rows written against the Node's previous
    version (``columnar``'s kinds 2, a patch, and 3, a splice), in order."""
    import struct

    import zstandard

    with open(path, "rb") as f:
        f.read(len(columnar.MAGIC))
        data = zstandard.ZstdDecompressor().decompressobj().decompress(f.read())
    out, pos, first = [], 0, True
    while pos < len(data):
        (n,) = struct.unpack_from("<I", data, pos)
        body = data[pos + 8:pos + 8 + n]
        pos += 8 + n
        if first:
            first = False
            continue
        _, kinds, _, _, _, _, blobs = columnar._split(body)
        whole = (orjson.loads(memoryview(b)) for b in blobs)  # (the block's elements, as bytes)
        out += [(k, b[1]) for k, b in ((k, next(whole)) for k in kinds if k)
                if k in (columnar._ROW_PATCHED, columnar._ROW_SPLICED) and b[0].get("resource") == "nodes"]
    return out


def test_a_columnar_keyframe_holds_each_node_as_last_written(tmp_path, open_replay):
    """After a rotation, a columnar segment's keyframe holds each Node as the segment before last
    wrote it (not rebuilt from its record, which keeps only what is read): its next status update is
    a patch of the values that changed, not the whole object again; replayed, the fleet is as it was."""
    refs = _record_demo(tmp_path / "rec", record_format="columnar")
    segs = list_segments(tmp_path / "rec")
    assert len(segs) >= 6 and all(s.path.name.endswith(".nwcol") for s in segs)
    last: dict[str, dict] = {}  # each Node as the segment before last wrote it
    for n, seg in enumerate(segs):
        problems: list[str] = []
        with open(seg.path, "rb") as f:
            lines = [orjson.loads(x) for x in columnar_lines(f, seg.path.name, problems)]
        assert not problems
        nodes = [x for x in lines[1:] if x.get("resource") == "nodes" and isinstance(x.get("object"), dict)]
        if n:
            kf = [x for x in nodes if x["type"] == "ADDED" and x["t"] == nodes[0]["t"]]
            assert len(kf) == 60
            assert all(orjson.dumps(x["object"]) == orjson.dumps(last[x["object"]["metadata"]["name"]]) for x in kf)
        last.update((x["object"]["metadata"]["name"], x["object"]) for x in nodes)
        if not n:
            continue
        patches = _patches(seg.path)
        assert patches and all(p[0] == "d" and p[1].get("metadata", ["d"])[0] == "d"
                               for k, p in patches if k == columnar._ROW_PATCHED)
        # a status report (heartbeat times, resourceVersion, the kubelet's managedFields time) is the new values alone
        assert any(k == columnar._ROW_SPLICED for k, _ in patches)
        assert all(len(v) <= 12 and all(x is None or len(x) <= 30 for x in v)
                   for k, v in patches if k == columnar._ROW_SPLICED)
    src = open_replay(tmp_path / "rec")
    assert not src.problems
    for t, want in refs.items():
        assert _wire_at(src, t) == want


def test_one_segment_replays_on_its_own_from_its_keyframe(tmp_path):
    refs = _record_demo(tmp_path / "rec")
    segs = list_segments(tmp_path / "rec")
    whole = ReplaySource(str(tmp_path / "rec"))
    everything = whole.replay.events
    whole.stop()
    checked = 0
    for t, want in refs.items():
        later = [s for s in segs if s.start <= t]
        if len(later) < 2:
            continue
        w, start, _ = window(str(tmp_path / "rec"), f"+{t - segs[0].start}", None)
        src = ReplaySource(w, start_at=start)  # (not open_replay: it would make a plain str of the window)
        try:
            assert src.replay.events < everything  # the segments before were not read
            assert _wire_at(src, t) == want  # lease ages too: recent renewals keep their receive times
        finally:
            src.stop()
        checked += 1
    assert checked >= 3


def test_a_window_reads_only_its_segments_and_stops_at_its_end(tmp_path):
    refs = _record_demo(tmp_path / "rec")
    segs = list_segments(tmp_path / "rec")
    a, b = segs[2].start + 10, segs[3].start + 20
    w, start, end = window(str(tmp_path / "rec"), f"+{a - segs[0].start}", f"+{b - segs[0].start}")
    src = ReplaySource(w, start_at=start)
    try:
        assert segs[2].start - 900 <= src.replay.start and src.replay.end <= b
        assert src.replay.position() == pytest.approx(a, abs=1e-3)
        t = max(t for t in refs if t <= b)
        assert t >= a
        assert _wire_at(src, t) == refs[t]
    finally:
        src.stop()


def test_keyframes_are_skipped_when_reading_on_from_the_segment_before(tmp_path):
    _record_demo(tmp_path / "rec")
    segs = list_segments(tmp_path / "rec")
    header = orjson.loads(gzip.open(segs[1].path).readline())
    k = header["source"]["segment"]["keyframe_lines"]
    assert k > 60  # the nodes, the leases, the pods...
    whole = ReplaySource(str(tmp_path / "rec"))
    try:
        lines = sum(1 for s in segs for _ in gzip.open(s.path)) - len(segs)
        keyframes = sum(orjson.loads(gzip.open(s.path).readline())["source"]["segment"]["keyframe_lines"]
                        for s in segs[1:])
        assert whole.replay.events == lines - keyframes
    finally:
        whole.stop()


@pytest.mark.parametrize("record_format", ["jsonl", "columnar"])
def test_a_one_instant_read_reports_the_segments_opening_by_its_lines(tmp_path, monkeypatch, record_format):
    """While the keyframe a read starts from is read, ``opening(read, of)`` says how many of its lines
    are in (a keyframe spans little recorded time: at 65,000 nodes, half of an early read showed as
    0-3 %); then ``progress`` goes on by recorded time. The answer is the same with or without it."""
    from nodewatch.sources.replay import instant, state_at

    monkeypatch.setattr(instant, "PROGRESS_EVERY", 16)
    refs = _record_demo(tmp_path / "rec", seconds=200, record_format=record_format)
    segs = list_segments(tmp_path / "rec")
    t = max(x for x in refs if x < segs[2].start + 30)
    path, _, at = window(str(tmp_path / "rec"), None, format_time(t, micro=True), "--at")
    calls: list[tuple] = []
    state, seen, problems = state_at(path, at, compact=True, progress=lambda r, tt: calls.append(("time", r, tt)),
                                     opening=lambda read, of: calls.append(("opening", read, of)))
    kinds = [c[0] for c in calls]
    first = next(i for i, k in enumerate(kinds) if k == "time")
    assert first >= 3 and set(kinds[:first]) == {"opening"} and "opening" not in kinds[first:]
    with open(segs[2].path, "rb") as f:
        head = columnar.iter_file_lines(f, "s", []) if record_format == "columnar" else gzip.open(f)
        k = orjson.loads(next(iter(head)))["source"]["segment"]["keyframe_lines"]
    assert all(of == k for _, _, of in calls[:first]) and [r for _, r, _ in calls[:first]] == \
        [16 * (i + 1) for i in range(first)] and 16 * first < k
    plain = state_at(path, at, compact=True)
    assert {v.name: view_to_wire(v) for v in state.evaluate(t).nodes} == \
        {v.name: view_to_wire(v) for v in plain[0].evaluate(t).nodes} == refs[t]


def test_retention_by_age_and_by_size(tmp_path):
    clock = ManualClock(1_800_000_000.0)
    rec = SegmentedRecorder(tmp_path, {"kind": "test"}, Settings(), segment_seconds=60, keep_seconds=300,
                            keep_bytes=None, clock=clock)
    obj = {"metadata": {"name": "n1", "namespace": "kube-node-lease"}, "spec": {"renewTime": None}}
    for _ in range(20):
        for _ in range(10):
            rec.write("leases", "MODIFIED", obj, clock.now())
            clock.advance(6)
    segs = list_segments(tmp_path)
    assert 5 <= len(segs) <= 7
    assert segs[1].start >= clock.now() - 300 - 60
    rec.keep_bytes = 2 * segs[-2].size
    rec.rotate()
    assert len(list_segments(tmp_path)) <= 3
    rec.close()


def test_status_answers_at_a_time_of_day_from_a_directory(tmp_path, capsys):
    from nodewatch.cli import main

    refs = _record_demo(tmp_path / "rec", seconds=200)
    t = sorted(refs)[-1]
    os.utime(list_segments(tmp_path / "rec")[-1].path, (t + 5, t + 5))  # the last flush
    hhmmss = f"{int(t % 86400 // 3600):02d}:{int(t % 3600 // 60):02d}:{int(t % 60):02d}"
    assert resolve_when(hhmmss, str(tmp_path / "rec")) == pytest.approx(int(t), abs=0)
    code = main(["status", "--replay", str(tmp_path / "rec"), "--at", hhmmss, "--format", "json"])
    out = orjson.loads(capsys.readouterr().out)
    assert code in (0, 1)
    states = {n["name"]: n["state"] for n in out["nodes"]}
    want = {name: NodeState[w[2]].word for name, w in refs[t].items()}
    assert states == want  # (status evaluates at the whole second, a fraction of a ms before t)


@pytest.mark.parametrize("record_format", ["jsonl", "columnar"])
def test_a_directory_copied_without_its_times_is_dated_by_its_lines(tmp_path, capsys, record_format):
    """``scp -r`` or a restore dates the files by the copy: a time of day still means the
    recording's day, and nothing after its last line is claimed as recorded."""
    from nodewatch.cli import main
    from nodewatch.sources.segments import recorded_until

    d = tmp_path / "rec"
    refs = _record_demo(d, seconds=200, record_format=record_format)
    t = sorted(refs)[-1]
    last = recorded_until(str(d))
    assert t <= last < t + 30
    copied = last + 3 * 86400 + 7200  # three days and two hours later
    for seg in list_segments(d):
        os.utime(seg.path, (copied, copied))
    assert recorded_until(str(d)) == last
    hhmmss = f"{int(t % 86400 // 3600):02d}:{int(t % 3600 // 60):02d}:{int(t % 60):02d}"
    assert resolve_when(hhmmss, str(d)) == int(t)
    code = main(["status", "--replay", str(d), "--at", format_time(last + 60), "--format", "json"])
    assert code == 2 and "after the recording" in capsys.readouterr().err


@pytest.mark.parametrize("record_format", ["jsonl", "columnar"])
def test_status_inside_the_newest_segment_does_not_read_it_again_for_its_end(tmp_path, capsys, monkeypatch,
                                                                             record_format):
    """``status --at`` an instant between two lines of the newest segment: the window's read stopped at
    the later line, so the recording goes on after it; reading the whole segment again to learn
    where it ends (``recorded_until``, ~1 s at 65,000 nodes) is not needed, and the answer is the
    same. After the last line it is still read, and the instant is still after the recording."""
    from nodewatch.cli import main
    from nodewatch.sources import segments
    from nodewatch.sources.recording_input import open_binary, went_on
    from nodewatch.sources.replay.instant import state_at
    from nodewatch.sources.segments import SegmentWindow, recorded_until

    d = tmp_path / "rec"
    refs = _record_demo(d, seconds=200, record_format=record_format)
    last = recorded_until(str(d))
    t = sorted(refs)[-2] + 0.5  # between two lines (the demo's lines are 5 s apart)
    answers = []
    for read_end in (True, False):
        if not read_end:
            monkeypatch.setattr(segments, "recorded_until", _never)
        code = main(["status", "--replay", str(d), "--at", format_time(t), "--format", "json"])
        assert code in (0, 1)
        answers.append(orjson.loads(capsys.readouterr().out))
    assert answers[0] == answers[1] and answers[0]["nodes"]
    _, seen, _ = state_at(str(d), format_time(t), compact=True)
    assert not seen.read_to_end  # (a window that stopped at a later line: the recording goes on)
    stream = open_binary(SegmentWindow(str(d), None, last + 1))
    try:
        stream.read()
        assert not went_on(stream)  # read to the end: nothing after the window
    finally:
        stream.close()
    monkeypatch.undo()
    code = main(["status", "--replay", str(d), "--at", format_time(last + 2), "--format", "json"])
    assert code == 2 and "after the recording" in capsys.readouterr().err


def _never(directory):
    raise AssertionError(f"{directory} read again to find its end")


def _of_day(t):
    return f"{int(t % 86400 // 3600):02d}:{int(t % 3600 // 60):02d}:{int(t % 60):02d}"


def test_a_time_of_day_outside_the_recording_is_named_so_on_the_day_nearest_it(tmp_path, capsys):
    """A time of day on no day of the recording is the instant nearest it: an hour after the end is
    "after the recording" that day (it read as the day before, and then "no usable events"); a
    window before the recording is refused in one line by every command that takes one (``export``
    wrote a file of its header alone)."""
    from nodewatch.cli import main
    from nodewatch.sources.segments import recorded_until

    d = tmp_path / "rec"
    _record_demo(d, seconds=200)
    first, last = list_segments(d)[0].start, recorded_until(str(d))
    if int(first) // 86400 != int(last + 3600) // 86400:
        pytest.skip("the demo's virtual day ends within the hour")
    assert resolve_when(_of_day(last + 3600), str(d)) == int(last + 3600)
    assert resolve_when(_of_day(first - 3600), str(d)) == int(first - 3600)
    assert resolve_when(_of_day(first + 30), str(d)) == int(first + 30)
    for argv, says in [
        (["status", "--replay", str(d), "--at", _of_day(last + 3600)], f"--at {_of_day(last + 3600)}: "),
        (["status", "--replay", str(d), "--at", _of_day(first - 60)], "is before the recording"),
        (["report", str(d), "--from", _of_day(first - 600), "--to", _of_day(first - 60)], "--to "),
        (["report", str(d), "--from", _of_day(last + 60)], "is after the recording"),
        (["recording", "export", str(d), "--from", _of_day(last + 60), "-o", str(tmp_path / "x.jsonl.gz")],
         "is after the recording"),
        (["replay", str(d), "--to", _of_day(first - 60)], "is before the recording"),
    ]:
        assert main(argv) != 0, argv
        err = capsys.readouterr().err
        assert says in err and format_time(first) in err and format_time(last) in err, (argv, err)
        assert len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "x.jsonl.gz").exists()


def _record_with_a_pause(directory, down: bool, record_format: str = "jsonl"):
    """A demo fleet recorded 200 s, then 300 s not recorded (the hub stopped, and started again: a
    new recorder on the directory, which lists the fleet anew; ``down``: the hub ran on and recorded
    that its lease stream went down, then came back), then 100 s more. Returns (the last line's time
    before the pause, the first segment's start after it)."""
    src = DemoSource(nodes=30, scenario="incident", seed=1)

    def hub() -> SegmentedRecorder:
        return SegmentedRecorder(directory, {"kind": "demo"}, src.state.settings, segment_seconds=60.0,
                                 clock=src.clock, records=src.state.node_records, keep_seconds=None,
                                 keep_bytes=None, record_format=record_format)

    rec = src.recorder = hub()
    t0 = src.clock.now()
    for phase, (a, b) in enumerate(((0, 200), (200, 500), (500, 600))):
        if phase == 1:
            if down:
                rec.write_health("leases", t0 + a, connected=False, down_since=t0 + a, last_error="connection refused")
            else:
                rec.close()
                src.recorder = None
        if phase == 2:
            if down:
                rec.write_health("leases", t0 + a, connected=True, down_since=None, last_error="")
            else:  # started again: its reflectors list the fleet
                src.clock.seek(t0 + a)
                rec = src.recorder = hub()
                for resource in ("nodes", "leases", "pods", "events", "certificatesigningrequests"):
                    for obj in src.fleet.objects(resource):
                        rec.write(resource, "ADDED", obj, t0 + a, listing=True)
                    rec.write(resource, "SYNCED", None, t0 + a, listing=True)
        for t in range(a + 5, b + 1, 5):
            if down and phase == 1:
                src.clock.seek(t0 + t)  # the fleet's events never reach the hub: the stream is down
                continue
            src.advance_to(t0 + t)
    rec.close()
    return t0 + 200, min(s.start for s in list_segments(directory) if s.start > t0 + 250)


def test_an_instant_the_recorder_missed_is_named_so_not_judged(tmp_path, capsys):
    """A hub stopped for five minutes: the instants in between are refused, each end named (judged,
    every node would be five minutes Overdue: a false alarm made of nodewatch's own outage); an
    instant within a minute of the last line, or after the hub came back, is answered."""
    from nodewatch.cli import main

    d = tmp_path / "rec"
    last, back = _record_with_a_pause(d, down=False)
    gap = last + 150
    assert main(["status", "--replay", str(d), "--at", format_time(gap)]) == 2
    err = capsys.readouterr().err
    assert "was not recorded" in err and format_time(back) in err and "the recorder was not running" in err
    assert format_time(last)[:16] in err  # the last line is a fraction of a step before the pause
    for t in (last + 30, back + 30):
        assert main(["status", "--replay", str(d), "--at", format_time(t), "-o", "name"]) in (0, 1), t
        assert "not recorded" not in capsys.readouterr().err
    with pytest.raises(RecordingError, match="was not recorded"):
        ReplaySource(str(d), start_at=format_time(gap))
    path, start, _ = window(str(d), format_time(gap), format_time(gap + 60))
    with pytest.raises(RecordingError, match="was not recorded"):
        ReplaySource(path, start_at=start)
    ReplaySource(str(d), start_at=format_time(back + 30)).stop()


def test_a_stretch_the_recording_says_was_blind_is_answered_as_blind(tmp_path, capsys):
    """The hub ran on while its lease stream was down (recorded): no line for five minutes is then
    what the recording says, blindness, and is answered so."""
    from nodewatch.cli import main

    d = tmp_path / "rec"
    last, _back = _record_with_a_pause(d, down=True)
    assert main(["status", "--replay", str(d), "--at", format_time(last + 150)]) in (0, 1)
    out, err = capsys.readouterr()
    assert "not recorded" not in err and "lease stream down" in out


def test_a_report_of_a_stretch_the_recorder_missed_is_refused(tmp_path, capsys):
    """``report DIR --from T`` with T where the hub was stopped: the same words as ``status --at``
    (it wrote an incident report of every node five minutes Overdue); from a recorded instant it
    reports."""
    from nodewatch.cli import main

    d = tmp_path / "rec"
    last, back = _record_with_a_pause(d, down=False)
    out = tmp_path / "r.md"
    assert main(["report", str(d), "--from", _of_day(last + 150), "--to", _of_day(last + 250), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"--from {_of_day(last + 150)}: " in err and "was not recorded" in err and not out.exists()
    assert main(["report", str(d), "--from", _of_day(back + 10), "-o", str(out)]) == 0 and out.exists()


@pytest.mark.parametrize("record_format", ["jsonl", "columnar"])
def test_replaying_through_a_stretch_the_recorder_missed_is_blind_there(tmp_path, record_format):
    """Played through the stretch, the fleet is not judged by its leases there (it was every node
    Overdue after a minute): the lease stream reads as down, "not recorded", until the segment after
    it opens; then the fleet is judged again."""
    d = tmp_path / "rec"
    last, back = _record_with_a_pause(d, down=False, record_format=record_format)
    src = ReplaySource(str(d))
    try:
        src.replay.seek(last + 150)
        view = src.state.evaluate(last + 150)
        assert view.leases_blind and "not recorded" in view.blind_reason and format_time(back) in view.blind_reason
        assert not view.counts.get(NodeState.OVERDUE) and not view.counts.get(NodeState.LATE)
        src.replay.seek(back + 60)
        assert not src.state.evaluate(back + 60).leases_blind
    finally:
        src.stop()


def test_a_stretch_recorded_as_blind_keeps_its_own_words(tmp_path):
    d = tmp_path / "rec"
    last, _back = _record_with_a_pause(d, down=True)
    src = ReplaySource(str(d))
    try:
        src.replay.seek(last + 150)
        view = src.state.evaluate(last + 150)
        assert view.leases_blind and "connection refused" in view.blind_reason and "not recorded" not in view.blind_reason
    finally:
        src.stop()


def _record_a_restart(directory, record_format: str, stopped: int):
    """A steady demo fleet recorded 200 s by one hub, which stops; a node is deleted while it is
    stopped; ``stopped`` seconds later a new hub starts on the same directory, lists the fleet anew
    (as its reflector does: every object, then SYNCED; it knows of no deletion) and records 100 s.
    Returns (the deleted node, when the new hub started)."""
    src = DemoSource(nodes=30, scenario="steady", seed=1)

    def hub() -> SegmentedRecorder:
        return SegmentedRecorder(directory, {"kind": "demo"}, src.state.settings, segment_seconds=60.0,
                                 clock=src.clock, records=src.state.node_records, keep_seconds=None,
                                 keep_bytes=None, record_format=record_format)

    rec = src.recorder = hub()
    t0 = src.clock.now()
    for t in range(5, 201, 5):
        src.advance_to(t0 + t)
    rec.close()
    src.recorder = None
    gone = src.fleet.node_order[3]
    src.fleet.delete_node(src.fleet.node(gone))
    back = t0 + 200 + stopped
    for t in range(205, 200 + stopped + 1, 5):
        src.advance_to(t0 + t)
    rec = src.recorder = hub()
    for resource in ("nodes", "leases", "pods", "events", "certificatesigningrequests"):
        for obj in src.fleet.objects(resource):
            rec.write(resource, "ADDED", obj, back, listing=True)
        rec.write(resource, "SYNCED", None, back, listing=True)
    for t in range(205 + stopped, 300 + stopped + 1, 5):
        src.advance_to(t0 + t)
    rec.close()
    assert gone not in {o["metadata"]["name"] for o in src.fleet.objects("nodes")}
    return gone, back


@pytest.mark.parametrize("record_format", ["jsonl", "columnar"])
@pytest.mark.parametrize("stopped", [30, 300])
def test_a_node_deleted_while_the_hub_was_stopped_leaves_the_replay(tmp_path, capsys, record_format, stopped):
    """The restarted hub's list does not give the node deleted while it was stopped: read across the
    restart, the list replaces what came before (an informer's Replace), so that node is gone, not
    judged by its last Lease (it read Overdue from a minute on, a false alarm about a node that no
    longer exists). Both readers: a replay's seek, and ``status --at``'s one-pass read."""
    from nodewatch.cli import main

    d = tmp_path / "rec"
    gone, back = _record_a_restart(d, record_format, stopped)
    src = ReplaySource(str(d))
    try:
        src.replay.seek(back - stopped - 10)
        assert gone in {v.name for v in src.state.evaluate(back - stopped - 10).nodes}  # it was there
        src.replay.seek(back + 60)
        view = src.state.evaluate(back + 60)
        assert gone not in {v.name for v in view.nodes}
        assert len(view.nodes) == 29 and view.counts.get(NodeState.READY) == 29, view.counts
    finally:
        src.stop()
    assert main(["status", "--replay", str(d), "--at", format_time(back + 60), "-o", "json"]) == 0
    answer = orjson.loads(capsys.readouterr().out)
    names = [n["name"] for n in answer["nodes"]]
    assert len(names) == 29 and gone not in names


class _HubByHand:
    """A hub's flight recorder fed by hand on a manual clock from T0 (``support.factories``), 60 s
    segments: ``write`` moves the clock to a line's receive time (or to ``at``: a line received
    before or after the clock reads) and numbers its resourceVersion; ``lists`` lists the Nodes and
    Leases of ``names`` (the state keeps the Nodes for the keyframes)."""

    def __init__(self, directory, record_format: str, clock: ManualClock | None = None, rv: list | None = None):
        from nodewatch.core.fleet import FleetState
        from support import factories as f

        self.f = f
        self.clock = clock or ManualClock(f.T0)
        self.rv = rv if rv is not None else [100]
        self.state = FleetState(Settings())
        self.rec = SegmentedRecorder(directory, {"kind": "test"}, Settings(), segment_seconds=60.0, clock=self.clock,
                                     records=self.state.node_records, keep_seconds=None, keep_bytes=None,
                                     record_format=record_format)

    def write(self, resource, etype, obj, t, at=None):
        self.clock.set(t if at is None else at)
        if obj is not None:
            self.rv[0] += 1
            obj["metadata"]["resourceVersion"] = str(self.rv[0])
        self.rec.write(resource, etype, obj, t, etype == "ADDED")

    def lists(self, names, at: float) -> None:
        f = self.f
        for name in names:
            self.state.apply("nodes", "ADDED", f.node(name, heartbeat=at), at, listing=True)
            self.write("nodes", "ADDED", f.node(name, heartbeat=at), at)
        self.write("nodes", "SYNCED", None, at)
        for name in names:
            self.write("leases", "ADDED", f.lease(name, at - 0.4), at)
        self.write("leases", "SYNCED", None, at)

    def first_minute(self) -> None:
        """Nodes a and b listed at T0 + 0.9 (the first segment opens then), their Leases renewed
        every 10 s up to a minute on (a at x0.6, b at x0.95)."""
        f = self.f
        self.lists(("a", "b"), f.T0 + 0.9)
        for k in range(1, 6):
            self.renew("a", f.T0 + 10 * k + 0.6)
            self.renew("b", f.T0 + 10 * k + 0.95)

    def renew(self, name: str, t: float, at=None) -> None:
        """A renewal received at ``t`` (renewed 0.1 s before)."""
        self.write("leases", "MODIFIED", self.f.lease(name, t - 0.1), t, at)


def _record_by_hand(directory, record_format: str, runs) -> float:
    """Three nodes (a, b, c) recorded by one hub per run in ``runs``, each ``(opens, until)`` seconds
    after T0: it lists the fleet at ``opens`` (its first segment opens then), and each Lease is renewed
    every 10 s after it (a at x0.6, b at x0.95, c at x1.3) up to ``until``. Returns T0."""
    from support import factories as f

    clock, rv = ManualClock(f.T0), [100]
    for opens, until in runs:
        hub = _HubByHand(directory, record_format, clock, rv)
        hub.lists(("a", "b", "c"), f.T0 + opens)
        k = int(opens // 10) + 1
        while 10 * k + 0.6 <= until:
            for name, off in zip(("a", "b", "c"), (0.6, 0.95, 1.3)):
                if 10 * k + off <= until:
                    hub.renew(name, f.T0 + 10 * k + off)
            k += 1
        hub.rec.close()
    return f.T0


@pytest.mark.parametrize("record_format", ["jsonl", "columnar"])
def test_an_instant_in_the_second_a_segment_opened_is_read_from_the_segment_before(tmp_path, capsys, record_format):
    """A segment's name says the second it was opened in: the second one here is named T0 + 60 and
    opened at T0 + 60.95. Read from its keyframe, the instant T0 + 60.5 had no line of node a's Lease
    at or before it (the keyframe keeps each Lease's last line, received at T0 + 60.6): node a was
    judged without its Lease, Overdue, a false alarm (what made the restart test above fail now and
    then: the demo's clock moves with real time between its steps, so its rotation fell in the
    instant's second in some runs only). Such an instant is read from the segment before."""
    from nodewatch.cli import main

    d = tmp_path / "rec"
    t0 = _record_by_hand(d, record_format, [(0.9, 61.3)])  # the renewal at T0 + 60.95 opens the second segment
    segs = list_segments(d)
    assert [s.start for s in segs] == [t0, t0 + 60]  # the second named in the instant's own second
    at = format_time(t0 + 60.5, micro=True)
    assert main(["status", "--replay", str(d), "--at", at, "-o", "json"]) == 0
    nodes = {n["name"]: n for n in orjson.loads(capsys.readouterr().out)["nodes"]}
    assert {n: v["state"] for n, v in nodes.items()} == {"a": "Ready", "b": "Ready", "c": "Ready"}
    assert nodes["a"]["lease_age_seconds"] == pytest.approx(9.9, abs=0.01)  # its renewal at T0 + 50.6
    src = ReplaySource(str(d))
    try:
        src.replay.seek(t0 + 60.5)
        view = {v.name: v for v in src.state.evaluate(t0 + 60.5).nodes}
        assert view["a"].state == NodeState.READY
    finally:
        src.stop()


@pytest.mark.parametrize("record_format", ["jsonl", "columnar"])
def test_an_instant_the_recorder_missed_in_the_second_it_came_back_is_named_so(tmp_path, capsys, record_format):
    """The hub stopped at T0 + 100 and came back at T0 + 200.7, its segment named T0 + 200: the
    instant T0 + 200.3 was not recorded, though the name of the segment after it is not later
    than it (judged, every node would be Overdue by its renewal 100 s before)."""
    from nodewatch.cli import main

    d = tmp_path / "rec"
    t0 = _record_by_hand(d, record_format, [(0.9, 100), (200.7, 230)])
    assert list_segments(d)[-1].start == t0 + 200
    assert main(["status", "--replay", str(d), "--at", format_time(t0 + 200.3, micro=True)]) == 2
    err = capsys.readouterr().err
    assert "was not recorded" in err and "the recorder was not running" in err, err
    assert main(["status", "--replay", str(d), "--at", format_time(t0 + 215, micro=True), "-o", "name"]) == 0


@pytest.mark.parametrize("record_format", ["jsonl", "columnar"])
def test_a_line_received_before_a_rotation_and_written_after_it_is_read_at_its_time(tmp_path, capsys, record_format):
    """Node a's renewal is received at T0 + 59.5 but written after the renewal that opened the
    second segment at T0 + 60.95 (another stream's line went first), so it lies in the segment named
    T0 + 60, after its keyframe. An instant between the two (T0 + 59.8) read the first segment only
    and found node a's renewal of T0 + 50.6: 9.2 s old instead of 0.3 (what the replay's seek, which
    reads every segment, says). A window's read now takes the segments opened up to ``LATE_LINES``
    after its end, and the lines of it up to that far past the end, keeping those at or before it."""
    from nodewatch.cli import main

    d = tmp_path / "rec"
    hub = _HubByHand(d, record_format)
    f = hub.f
    hub.first_minute()
    hub.renew("b", f.T0 + 60.95)  # opens the second segment
    hub.renew("a", f.T0 + 59.5, at=f.T0 + 60.96)  # received before it
    for k in range(7, 10):
        hub.renew("a", f.T0 + 10 * k - 0.4)
        hub.renew("b", f.T0 + 10 * k + 0.95)
    hub.rec.close()
    assert [s.start for s in list_segments(d)] == [f.T0, f.T0 + 60]
    at = f.T0 + 59.8
    assert main(["status", "--replay", str(d), "--at", format_time(at, micro=True), "-o", "json"]) == 0
    nodes = {n["name"]: n for n in orjson.loads(capsys.readouterr().out)["nodes"]}
    assert nodes["a"]["lease_age_seconds"] == pytest.approx(0.3, abs=0.01)
    src = ReplaySource(str(d))
    try:
        src.replay.seek(at)
        assert src.state.node_view("a", at).lease_age(at) == pytest.approx(0.3, abs=0.01)
    finally:
        src.stop()


@pytest.mark.parametrize("record_format", ["jsonl", "columnar"])
def test_a_one_instant_answer_is_the_replays_at_every_instant_around_every_rotation(record_format, tmp_path):
    """``status --at``'s read (from the segment that holds the instant, the renewals a later one
    supersedes left out) against the replay's seek through every segment, at random instants and at
    instants within two seconds after each segment's named start: the same view of every node. The
    hub's clock moves first and the fleet's lines follow, as a live hub's lines are received before
    they are written: at a rotation, the lines received before it are written after it, into the
    next segment. A window that stopped at the segments named by its end missed those (they
    differed here at instants before a rotation); ``LATE_LINES`` reads on for them."""
    import random

    from nodewatch.sources.replay.instant import state_at

    d = tmp_path / "rec"
    src = DemoSource(nodes=20, scenario="incident", seed=3)
    rec = SegmentedRecorder(d, {"kind": "demo"}, src.state.settings, segment_seconds=20.0, clock=src.clock,
                            records=src.state.node_records, keep_seconds=None, keep_bytes=None,
                            record_format=record_format)
    src.recorder = rec
    t0 = src.clock.now()
    for i in range(1, 81):
        src.clock.seek(t0 + 3 * i)  # the hub's clock first, then what it received by then
        src.advance_to(t0 + 3 * i)
    rec.close()
    segs = list_segments(d)
    assert len(segs) >= 10
    rng = random.Random(7)
    instants = sorted([t0 + rng.uniform(5, 235) for _ in range(10)]
                      + [s.start + f for s in segs[1:] for f in (0.0, 0.5, 0.999, 1.0, 1.2, 2.0, 2.9)])
    whole = ReplaySource(str(d))
    try:
        for t in instants:
            whole.replay.seek(t)
            want = {v.name: view_to_wire(v) for v in whole.state.evaluate(t).nodes}
            one, _, _ = state_at(str(d), format_time(t, micro=True), compact=True, pods=False)
            assert {v.name: view_to_wire(v) for v in one.evaluate(t).nodes} == want, t - t0
    finally:
        whole.stop()


@pytest.mark.parametrize("record_format", ["jsonl", "columnar"])
def test_a_segment_is_named_no_earlier_than_the_lines_before_it(tmp_path, capsys, record_format):
    """Node a's renewal is received at T0 + 61.4, ahead of the hub's clock (T0 + 60.0: a source whose
    times run ahead, a wall clock stepped back), and written before the renewal that opens the second
    segment at T0 + 60.95. Named by its opening (T0 + 60), the segment was read for the instant
    T0 + 61.2 from its keyframe, which holds node a's Lease only as received at T0 + 61.4, after the
    instant: node a was judged without its Lease. It is named by the latest line before it (T0 + 61),
    and the instant is read from the segment before, as the replay's seek reads it."""
    from nodewatch.cli import main

    d = tmp_path / "rec"
    hub = _HubByHand(d, record_format)
    f = hub.f
    hub.first_minute()
    hub.renew("a", f.T0 + 61.4, at=f.T0 + 60.0)  # ahead of the clock
    hub.renew("b", f.T0 + 60.95)  # opens the second segment
    for k in range(7, 10):
        hub.renew("a", f.T0 + 10 * k + 1.4)
        hub.renew("b", f.T0 + 10 * k + 0.95)
    hub.rec.close()
    assert [s.start for s in list_segments(d)] == [f.T0, f.T0 + 61]
    at = f.T0 + 61.2
    src = ReplaySource(str(d))
    try:
        src.replay.seek(at)
        want = src.state.node_view("a", at).lease_age(at)
    finally:
        src.stop()
    assert want == pytest.approx(10.6, abs=0.01)  # its renewal of T0 + 50.6
    assert main(["status", "--replay", str(d), "--at", format_time(at, micro=True), "-o", "json"]) == 0
    nodes = {n["name"]: n for n in orjson.loads(capsys.readouterr().out)["nodes"]}
    assert nodes["a"]["lease_age_seconds"] == pytest.approx(want, abs=0.01)


@pytest.mark.parametrize("record_format", ["jsonl", "columnar"])
def test_a_fleet_that_sends_nothing_is_recorded_not_a_stretch_the_recorder_missed(tmp_path, capsys, record_format):
    """``control-plane-cutoff``: every kubelet cut off from the API server at +10 s, back at +240 s.
    After the node controller's updates the fleet sends nothing for minutes (no renewal, no status)
    while the recorder runs on. Read as a stretch the recorder missed, ``status --at`` refused those
    instants ("was not recorded") and a replay went blind there, in the very incident to look back
    on. The segment after the silence is the recorder's own rotation (its keyframe carried over), so
    the silence is recorded: the replay and ``status --at`` answer as the live hub judged."""
    from nodewatch.cli import main

    d = tmp_path / "rec"
    refs = _record_demo(d, nodes=20, seconds=300, step=5.0, segment=30.0, every=4, record_format=record_format,
                        scenario="control-plane-cutoff")
    t0 = list_segments(d)[0].start
    silent = [t for t in refs if t0 + 120 < t < t0 + 235]
    assert len(silent) >= 4
    for t in silent:
        src = ReplaySource(str(d))
        try:
            assert _wire_at(src, t) == refs[t], t - t0
        finally:
            src.stop()
        assert main(["status", "--replay", str(d), "--at", format_time(t, micro=True), "-o", "json"]) == 1
        answer = orjson.loads(capsys.readouterr().out)
        live = {name: view[2] for name, view in refs[t].items()}  # (the wire view's state)
        assert {n["name"]: n["state"].upper() for n in answer["nodes"]} == live, t - t0
