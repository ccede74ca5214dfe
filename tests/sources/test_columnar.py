"""The columnar recording format: lossless against JSON Lines (recordings nodewatch wrote, kubectl
logs it did not, a simulated fleet with leases shaped as kubelets write them), the same replayed
states, a torn tail read to its last whole block, the flight recorder writing it."""

from __future__ import annotations

import io
import os
import random
import re
import struct
from collections import Counter

import orjson
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from nodewatch.core.clock import ManualClock
from nodewatch.core.settings import Settings
from nodewatch.hub.codec import view_to_wire
from nodewatch.hub.flight_recorder import SegmentedRecorder
from nodewatch.sources import columnar, segments
from nodewatch.sources.convert import v1_lines
from nodewatch.sources.recording import Recorder, RecordingError, iter_lines
from nodewatch.sources.recording_input import open_binary
from nodewatch.sources.replay import ReplaySource
from nodewatch.sources.replay.lines import parse
from nodewatch.sources.segments import list_segments

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data")


def _lines_of(path) -> list[bytes]:
    problems: list[str] = []
    stream = open_binary(str(path))
    try:
        return [line for _, line in iter_lines(stream, problems) if line.strip()]
    finally:
        stream.close()


def _to_columnar(lines: list[bytes]) -> bytes:
    out = io.BytesIO()
    _to_columnar.writer = columnar.write_lines(lines, out)
    return out.getvalue()


def _back(data: bytes, problems: list[str] | None = None) -> list[bytes]:
    return list(columnar.iter_file_lines(io.BytesIO(data), "x.nwcol", [] if problems is None else problems))


def _kinds(data: bytes) -> Counter:
    """How many rows of each kind a file holds."""
    body = zstandard.ZstdDecompressor().decompressobj().decompress(data[len(columnar.MAGIC):])
    out: Counter = Counter()
    pos, first = 0, True
    while pos < len(body):
        (n,) = struct.unpack_from("<I", body, pos)
        if not first:
            out.update(columnar._split(body[pos + 8:pos + 8 + n])[1])
        first = False
        pos += 8 + n
    return out


def _entries(lines: list[bytes]) -> list:
    return [parse(0, line, []) for line in lines[1:]]


@pytest.mark.parametrize("name", ["incident-30.jsonl.gz", "testbed-kubelet-stop.jsonl.gz"])
def test_committed_recordings_come_back_line_for_line(name):
    lines = _lines_of(os.path.join(DATA, name))
    back = _back(_to_columnar(lines))
    assert [orjson.loads(a) for a in lines] == [orjson.loads(b) for b in back]
    assert [a.rstrip(b"\n") for a in lines] == [b.rstrip(b"\n") for b in back]  # the very same bytes
    assert _entries(lines) == _entries(back)
    renewals = sum(1 for x in lines if b'"resource":"leases","type":"MODIFIED"' in x)
    assert _to_columnar.writer.lease_rows > renewals / 2  # (the first of each Lease sets its shape)


@pytest.mark.parametrize("name", ["kubectl-watch-leases.json", "kubectl-watch-nodes-pretty.json"])
def test_kubectl_logs_come_back_as_the_events_replay_reads(name):
    lines = list(v1_lines(os.path.join(DATA, name), []))
    assert len(lines) > 2
    back = _back(_to_columnar(lines))
    assert _entries(lines) == _entries(back)


# --- a simulated fleet, leases as an API server serves a kubelet's renewals ----------------------------


def _api_shaped(resource: str, obj: dict, rv: int, rng: random.Random) -> dict:
    """What the API server adds to the simulator's objects: a resourceVersion, and on a Lease the
    kubelet's managedFields entry (time: the write's second)."""
    obj = dict(obj)
    meta = dict(obj["metadata"])
    meta["resourceVersion"] = str(rv)
    if resource == "leases" and (obj.get("spec") or {}).get("renewTime"):
        meta["managedFields"] = [{"manager": "kubelet", "operation": "Update", "apiVersion": "coordination.k8s.io/v1",
                                  "time": obj["spec"]["renewTime"][:19] + "Z", "fieldsType": "FieldsV1",
                                  "fieldsV1": {"f:spec": {"f:renewTime": {}}}}]
    obj["metadata"] = meta
    return obj


def _simulate(fleet, clock, write, delay, minutes, step, rng, first=None):
    """The fleet's lists, then its events for ``minutes`` (stepped ``step`` seconds at a time), each
    given what the API server adds and written with ``write`` ``delay(resource)`` seconds after it
    happened (the clock set to then); ``first(t)``: called once the lists are written."""
    rv = [1000]
    t = fleet.now
    for resource in ("nodes", "leases", "pods", "events", "certificatesigningrequests"):
        for obj in fleet.objects(resource):
            rv[0] += 1
            write(resource, "ADDED", _api_shaped(resource, obj, rv[0], rng), t, listing=True)
        write(resource, "SYNCED", None, t)

    def sink(resource, etype, obj, at):
        rv[0] += 1
        shaped = _api_shaped(resource, obj, rv[0], rng)
        rx = at + delay(resource)
        clock.set(rx)
        write(resource, etype, shaped, rx)

    fleet.subscribe(sink)
    if first is not None:
        first(t)
    end = fleet.now + minutes * 60
    while t < end:
        t = min(end, t + step)
        fleet.step_to(t)


def _record_both(tmp_path, nodes=40, minutes=6.0, scenario="incident+churn"):
    """The same events into JSON Lines and columnar (each with its own recorder, as the hub would)."""
    from nodewatch.sim.fleet import SimFleet

    fleet = SimFleet(nodes=nodes, scenario=scenario, seed=3)
    clock = ManualClock(fleet.now)
    paths = (str(tmp_path / "fleet.jsonl.gz"), str(tmp_path / "fleet.nwcol"))
    recs = [Recorder(paths[0], {"name": "sim"}, fleet.settings, clock=clock),
            columnar.ColumnarRecorder(paths[1], {"name": "sim"}, fleet.settings, clock=clock)]
    rng = random.Random(5)

    def write(resource, etype, obj, t, listing=False):
        for r in recs:
            r.write(resource, etype, obj, t, listing)

    def first(t):
        for r in recs:
            r.write_health("leases", t + 1, connected=True, synced=True)
            r.write_cert("node-x", t + 86400 * 30, "probe", t + 2)

    _simulate(fleet, clock, write, lambda resource: rng.uniform(0.002, 0.040), minutes, 20, rng, first)
    for r in recs:
        r.close()
    _record_both.lease_rows = recs[1]._w.lease_rows
    return paths


def test_a_simulated_fleet_reads_back_the_same_events_and_states(tmp_path):
    jsonl, col = _record_both(tmp_path)
    a, b = _lines_of(jsonl), _lines_of(col)
    assert len(a) == len(b) > 2000
    assert [orjson.loads(x) for x in a] == [orjson.loads(y) for y in b]
    assert _entries(a) == _entries(b)
    renewals = sum(1 for x in a if b'"resource":"leases","type":"MODIFIED"' in x)
    assert renewals > 1000
    # the renewals became rows (all but each Lease's first after the list, which set its shape)
    assert _record_both.lease_rows >= renewals - 2 * 40
    assert os.path.getsize(col) < 0.7 * os.path.getsize(jsonl)
    sa, sb = ReplaySource(jsonl), ReplaySource(col)
    try:
        assert sb.problems == sa.problems  # (the jittered receive times step back now and then: both say so)
        start, end = sa.replay.index.start, sa.replay.index.end
        assert (sb.replay.index.start, sb.replay.index.end) == (start, end)
        for f in (0.0, 0.1, 0.33, 0.5, 0.77, 1.0):
            t = start + f * (end - start)
            sa.replay.seek(t)
            sb.replay.seek(t)
            want = {v.name: view_to_wire(v) for v in sa.state.evaluate(t).nodes}
            assert want and {v.name: view_to_wire(v) for v in sb.state.evaluate(t).nodes} == want
    finally:
        sa.stop()
        sb.stop()


def test_status_at_an_instant_is_the_same_from_either_format(tmp_path, capsys):
    from nodewatch.cli import main

    jsonl, col = _record_both(tmp_path, nodes=20, minutes=4.0)
    out = []
    for path in (jsonl, col):
        main(["status", "--replay", path, "--at", "+120", "--format", "json"])
        out.append(orjson.loads(capsys.readouterr().out))
    assert out[0] == out[1] and out[0]


# --- torn files ------------------------------------------------------------------------------------


def test_a_torn_tail_is_read_to_its_last_whole_block_and_named(tmp_path):
    _, col = _record_both(tmp_path, nodes=20, minutes=3.0)
    data = open(col, "rb").read()
    whole = _back(data)
    seen = set()
    for cut in range(len(data) // 20, len(data) - 1, max(1, len(data) // 37)):
        problems: list[str] = []
        got = _back(data[:cut], problems)
        assert got == whole[:len(got)]  # a prefix, never a wrong line
        assert len(problems) == 1 and "read up to its last whole block" in problems[0]
        seen.add(len(got))
    assert len(seen) > 10  # blocks of a second each: cuts land in many different places


def test_when_the_last_row_was_received_is_read_without_making_the_lines(tmp_path):
    """``received_until`` (a directory's "recorded until") sums the receive-time columns: the
    receive time of the last row the lines give, whole file or torn. A row's line may carry a time
    of its own (a keyframe's): the receive time is the writer's."""
    _, col = _record_both(tmp_path, nodes=20, minutes=3.0)
    data = open(col, "rb").read()

    def last_received(lines: list[bytes]) -> float:
        return max(segments.line_time(line) for line in lines[1:])

    assert columnar.received_until(io.BytesIO(data), "x.nwcol") == last_received(_back(data))
    cut = data[:len(data) * 2 // 3]
    assert columnar.received_until(io.BytesIO(cut), "x.nwcol") == last_received(_back(cut))
    with pytest.raises(RecordingError, match="not a columnar recording"):
        columnar.received_until(io.BytesIO(b"{}\n"), "x.nwcol")


def test_a_writer_killed_without_closing_loses_at_most_the_unflushed_second(tmp_path):
    clock = ManualClock(1_764_410_000.0)
    path = str(tmp_path / "k.nwcol")
    rec = columnar.ColumnarRecorder(path, {"name": "t"}, Settings(), clock=clock)
    lease = {"metadata": {"name": "n1", "namespace": "kube-node-lease", "resourceVersion": "5"},
             "spec": {"holderIdentity": "n1", "renewTime": "2025-11-29T10:00:00.000000Z"}}
    for i in range(30):
        clock.set(1_764_410_000.0 + i * 0.25)
        lease = {**lease, "spec": {**lease["spec"], "renewTime": columnar.micro_text(1_764_410_000_000_000 + i * 250_000)}}
        rec.write("leases", "MODIFIED", lease, clock.now())
    # no close(): what a kill -9 leaves on disk is what has been written to the file so far
    problems: list[str] = []
    got = list(columnar.iter_file_lines(io.BytesIO(open(path, "rb").read()), path, problems))
    rec._stop.set()
    assert len(got) - 1 >= 30 - 2  # the last flush was at most FLUSH_INTERVAL (two rows) ago
    assert len(problems) == 1 and "ends abruptly" in problems[0]


def test_a_file_still_being_written_is_read_to_its_present_without_calling_it_torn(tmp_path):
    """``report`` of a running hub's directory said its newest segment "ends abruptly (the writer
    stopped without closing it)": a recorder holds its file locked while it writes (``writer_lock``),
    so only the same bytes without a writer (a copy here; a writer killed) are a torn file."""
    clock = ManualClock(1_764_410_000.0)
    for name, make in (("w.nwcol", columnar.ColumnarRecorder), ("w.jsonl.gz", Recorder)):
        path = str(tmp_path / name)
        rec = make(path, {"name": "t"}, Settings(), clock=clock)
        lease = {"metadata": {"name": "n1", "namespace": "kube-node-lease", "resourceVersion": "5"},
                 "spec": {"holderIdentity": "n1", "renewTime": "2025-11-29T10:00:00.000000Z"}}
        for i in range(12):
            clock.set(1_764_410_000.0 + i * 0.5)
            rec.write("leases", "MODIFIED", lease, clock.now())
        rec.flush()
        copy = str(tmp_path / f"copy-{name}")
        with open(path, "rb") as f, open(copy, "wb") as out:
            out.write(f.read())
        said = {}
        for which in (path, copy):
            problems: list[str] = []
            stream = open_binary(which)
            lines = list(iter_lines(stream, problems))
            stream.close()
            assert len(lines) == 13, which  # the header and every flushed row, both ways
            said[which] = problems
        assert said[path] == [], name
        assert len(said[copy]) == 1 and "abruptly" in said[copy][0], name
        rec.close()
        problems = []
        stream = open_binary(path)
        assert len(list(iter_lines(stream, problems))) == 13 and problems == []
        stream.close()


def test_a_file_of_another_version_is_refused_in_one_line(tmp_path):
    path = tmp_path / "v9.nwcol"
    path.write_bytes(b"NWCOL\x09\r\n" + b"\0" * 20)
    with pytest.raises(RecordingError, match="version 9 is not supported"):
        _lines_of(path)


# --- the flight recorder writing it ---------------------------------------------------------------


class _Both:
    """Two recorders fed the same calls (one demo run into both formats)."""

    def __init__(self, *recs) -> None:
        self.recs = recs

    def __getattr__(self, name):
        def call(*args, **kwargs):
            for r in self.recs:
                getattr(r, name)(*args, **kwargs)
        return call


def _demo_dirs(tmp_path, nodes: int, seed: int, steps: int) -> float:
    """A demo run (5 s steps) into a hub directory of each format, 60 s segments; returns its start."""
    from nodewatch.sources.demo import DemoSource

    src = DemoSource(nodes=nodes, scenario="incident", seed=seed)
    recs = [SegmentedRecorder(tmp_path / fmt, {"kind": "demo"}, src.state.settings, segment_seconds=60.0,
                              clock=src.clock, records=src.state.node_records, keep_seconds=None, keep_bytes=None,
                              record_format=fmt) for fmt in ("jsonl", "columnar")]
    src.recorder = _Both(*recs)
    t0 = src.clock.now()
    for i in range(1, steps):
        src.advance_to(t0 + i * 5.0)
        src.clock.seek(t0 + i * 5.0)
    for r in recs:
        r.close()
    return t0


def test_the_flight_recorder_writes_columnar_segments_that_replay_as_the_jsonl_ones(tmp_path):
    t0 = _demo_dirs(tmp_path, 40, 1, 60)
    views = []
    for fmt in ("jsonl", "columnar"):
        segs = list_segments(tmp_path / fmt)
        assert len(segs) >= 4 and all(s.path.name.endswith(".nwcol" if fmt == "columnar" else ".gz") for s in segs)
        r = ReplaySource(str(tmp_path / fmt))
        try:
            assert not r.problems
            got = {}
            for dt in (30, 100, 170, 250, 290):
                r.replay.seek(t0 + dt)
                got[dt] = {v.name: view_to_wire(v) for v in r.state.evaluate(t0 + dt).nodes}
            views.append(got)
        finally:
            r.stop()
    assert views[0] == views[1] and len(views[0][290]) == 40
    # the directories read as one recording: the same lines after the header (each recorder rotated on
    # its own call of the moving demo clock: their headers and keyframes are a few ms apart)
    a, b = _lines_of(tmp_path / "jsonl"), _lines_of(tmp_path / "columnar")
    assert len(a) > 1000 and [orjson.loads(x) for x in a[1:]] == [orjson.loads(y) for y in b[1:]]


# --- patches ----------------------------------------------------------------------------------------

_json = st.recursive(st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats(allow_nan=False, allow_infinity=False)
                     | st.text(max_size=5),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=4),
                     max_leaves=20)


def test_a_patch_keeps_what_equality_does_not_see():
    for a, b in ((1, 1.0), (1, True), (0.0, -0.0), ({"a": 1, "b": 2}, {"b": 2, "a": 1}), ([{"x": 0}], [{"x": False}])):
        got = columnar.patch(a, columnar.diff(a, b))
        assert orjson.dumps(got) == orjson.dumps(b)


@settings(max_examples=300, deadline=None)
@given(_json, _json)
def test_a_patch_gives_back_exactly_the_new_value(a, b):
    p = columnar.diff(a, b)
    got = a if p is columnar._SAME else columnar.patch(a, p)
    assert orjson.dumps(got) == orjson.dumps(b)  # types (1 is not 1.0 nor True) and key order too
    assert orjson.dumps(orjson.loads(orjson.dumps(p if p is not columnar._SAME else 0))) is not None


_hole_keys = st.sampled_from(["lastHeartbeatTime", "resourceVersion", "time", "lastTransitionTime", "x", "time\"", ""])
_values = st.text(max_size=6) | st.sampled_from(['a"b', "a\\b", '\\"', "2026-01-01T00:00:00Z", "", "\u00e9\u4e2d", "\n"])
_holed = st.recursive(_values | st.integers(-5, 5) | st.none(),
                      lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_hole_keys | st.text(max_size=3), inner,
                                                                                  max_size=5),
                      max_leaves=25)


def _rewrite(obj, new):
    """``obj`` with every string value of a hole key replaced by ``new(old)`` (other values kept)."""
    if type(obj) is dict:
        return {k: (new(v) if type(v) is str and k in ("lastHeartbeatTime", "resourceVersion", "time") else _rewrite(v, new))
                for k, v in obj.items()}
    if type(obj) is list:
        return [_rewrite(v, new) for v in obj]
    return obj


@settings(max_examples=400, deadline=None)
@given(_holed, _holed, _values)
def test_a_splice_gives_back_exactly_the_new_json_or_is_not_made(a, b, suffix):
    """Any two JSON documents: a splice is made only when it gives back the second byte for byte; a
    status report (only heartbeat, resourceVersion and managedFields times changed) is always one."""
    for before, after in ((a, b), (a, _rewrite(a, lambda v: v + suffix)), (a, _rewrite(a, lambda v: suffix))):
        ja, jb = orjson.dumps(before), orjson.dumps(after)
        values = columnar.spliced_values(ja, jb)
        if values is not None:
            assert columnar.splice(ja, orjson.loads(orjson.dumps(values))) == jb
            assert columnar.splice(memoryview(ja), values) == jb
    plain = lambda v: '"' not in v and "\\" not in v and all(c >= " " for c in v)  # noqa: E731
    if plain(suffix) and columnar._HOLES.search(orjson.dumps(a)) and all(
            plain(v) for v in re.findall(r'"(?:lastHeartbeatTime|resourceVersion|time)":"((?:[^"\\]|\\.)*)"',
                                           orjson.dumps(a).decode())):
        assert columnar.spliced_values(orjson.dumps(a), orjson.dumps(_rewrite(a, lambda v: v + suffix))) is not None


def _back_plain(data: bytes) -> list[bytes]:
    """The lines as a one-shot read's codec gives them (``plain``: objects kept as read, a spliced one
    as its split text)."""
    from nodewatch.sources.columnar_blocks import BlockReader

    raw = io.BytesIO(data)
    raw.read(len(columnar.MAGIC))
    codec = columnar._Codec(plain=True)
    reader = BlockReader(raw)
    out = []
    for body in reader:
        if reader.blocks == 0:
            out.append(body + b"\n")
            continue
        out += [line for line, _, _ in columnar._decode_block(body, codec)]
    return out


_beat = st.sampled_from(["2026-01-01T00:00:0%dZ" % i for i in range(10)] + ["2026-01-01T00:00:10.5Z", "", "x"])
_rv = st.sampled_from(["100", "101", "999", "1000", "12", ""])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), _beat, _rv, st.integers(0, 9)), min_size=1, max_size=30))
def test_status_reports_one_after_another_read_back_exactly(steps):
    """A Node's status reports in a row (heartbeats, resourceVersions, its kubelet's managedFields
    time; now and then a condition that changes, a value one character longer): each is written
    as a splice or a patch, and both readers' codecs give every line back byte for byte."""
    node = {"metadata": {"name": "n", "resourceVersion": "100",
                         "managedFields": [{"manager": "kubelet", "time": "2026-01-01T00:00:00Z"},
                                           {"manager": "kube-controller-manager", "time": "2026-01-01T00:00:00Z"}]},
            "status": {"conditions": [{"type": t, "status": "True", "lastHeartbeatTime": "2026-01-01T00:00:00Z"}
                                      for t in ("MemoryPressure", "DiskPressure", "Ready")]}}
    lines = [orjson.dumps({"nodewatch_recording": 1, "started_at": "2026-01-01T00:00:00Z"}) + b"\n",
             orjson.dumps({"t": 1_700_000_000.0, "resource": "nodes", "type": "ADDED", "object": node}) + b"\n"]
    for i, (which, beat, rv, other) in enumerate(steps):
        node = orjson.loads(orjson.dumps(node))
        if which < 3:
            node["status"]["conditions"][which]["lastHeartbeatTime"] = beat
        elif which == 3:
            node["metadata"]["managedFields"][0]["time"] = beat
        node["metadata"]["resourceVersion"] = rv
        ready = node["status"]["conditions"][2]
        if other == 0:  # a change outside the holes, of the same length: a patch
            ready["status"] = "Fals" if ready["status"] == "True" else "True"
        elif other == 1:  # and of another length
            ready["status"] = "Unknown" if ready["status"] == "True" else "True"
        lines.append(orjson.dumps({"t": 1_700_000_001.0 + i, "resource": "nodes", "type": "MODIFIED", "object": node}) + b"\n")
    data = _to_columnar(lines)
    assert _back(data) == lines
    assert _back_plain(data) == lines


def test_a_splice_that_does_not_fit_is_refused():
    before = orjson.dumps({"metadata": {"resourceVersion": "1"}, "status": {"lastHeartbeatTime": "x"}})
    for values in ([None], [None, None, None], "ab", [None, 'a"'], [None, "a\\"], [1, None]):
        with pytest.raises(ValueError):
            columnar.splice(before, values)
    assert columnar.splice(before, ["22", None]) == before.replace(b'"1"', b'"22"')
    # the same text around holes of other keys is not a splice
    assert columnar.spliced_values(b'{"a":{"time":"1"}}', b'{"a":{"resourceVersion":"1"}}') is None
    assert columnar.spliced_values(b'{"a":{"time":"1"}}', b'{"a":{"time":"2"}}') == ["2"]


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**31), st.lists(st.integers(-3, 3), min_size=1, max_size=30))
def test_lease_rows_rebuild_any_renewal_sequence(start, steps):
    """Renewals whose times go back, repeat or jump, and whose other fields change now and then."""
    lines = [orjson.dumps({"nodewatch_recording": 1, "started_at": "2026-01-01T00:00:00Z"})]
    us = 1_700_000_000_000_000 + start
    t = 1_700_000_000.5
    for i, s in enumerate(steps):
        us += s * 3_333_333
        t += abs(s) * 0.37
        obj = {"metadata": {"name": f"n{i % 3}", "namespace": "kube-node-lease", "resourceVersion": str(100 + i * s * s)},
               "spec": {"holderIdentity": f"n{i % 3}", "renewTime": columnar.micro_text(us),
                        **({"leaseDurationSeconds": 40} if s % 2 else {})}}
        lines.append(orjson.dumps({"t": round(t, 6), "resource": "leases", "type": "MODIFIED", "object": obj}))
    back = _back(_to_columnar(lines))
    assert [x.rstrip(b"\n") for x in back] == lines
    assert _to_columnar.writer.lease_rows >= len(steps) - 3 * (1 + sum(1 for s in steps if s % 2))  # rows, mostly


def test_the_incident_report_of_either_format_is_the_same(tmp_path):
    from nodewatch.cli import main

    src = os.path.join(DATA, "incident-30.jsonl.gz")
    col = tmp_path / "incident-30.nwcol"
    col.write_bytes(_to_columnar(_lines_of(src)))
    outs = []
    for path, name in ((src, "a.md"), (str(col), "b.md")):
        assert main(["report", path, "-o", str(tmp_path / name)]) == 0
        outs.append((tmp_path / name).read_text())
    import re

    size = re.compile(r"[0-9.]+ [kMG]?B\)")  # the report names the file's size: the one thing that differs
    a, b = (size.sub("SIZE)", o.replace("incident-30.nwcol", "incident-30.jsonl.gz")) for o in outs)
    assert a == b and "SIZE)" in a and "Incident" in a


# --- one instant: the renewals a later one supersedes are never made lines ------------------------


def _state_views(state, at) -> dict:
    return {v.name: view_to_wire(v) for v in state.evaluate(at).nodes}


def test_one_instant_of_a_columnar_file_leaves_out_only_what_superseded_drops(tmp_path):
    from nodewatch.core.timeutil import format_time
    from nodewatch.sources.replay import state_at

    jsonl, col = _record_both(tmp_path, nodes=30, minutes=5.0)
    start = orjson.loads(_lines_of(jsonl)[1])["t"]
    dropped = []
    for offset in (20.0, 95.5, 200.0, 290.0):
        at = format_time(start + offset, micro=True)
        a, seen_a, pa = state_at(jsonl, at, compact=True)
        b, seen_b, pb = state_at(col, at, compact=True)
        full, _, _ = state_at(col, at)  # every line, nothing left out
        assert seen_b.at == seen_a.at and seen_b.start == seen_a.start
        want = _state_views(a, seen_a.at)
        assert want and _state_views(b, seen_b.at) == want == _state_views(full, seen_a.at)
        # the very same events were applied: the renewal counts are equal too
        assert {k: v.renewals for k, v in b.leases.items()} == {k: v.renewals for k, v in a.leases.items()}
        dropped.append(sum(v.renewals for v in full.leases.values()) - sum(v.renewals for v in b.leases.values()))
    assert max(dropped) > 100
    # and most of the renewals left out were never made lines: the columnar reader left them out
    from nodewatch.sources.replay.instant import _one_instant

    path, supersede = _one_instant(col, format_time(start + 290.0, micro=True))
    read = sum(1 for _ in open_binary(path, supersede))
    assert supersede.dropped > 300 and read + supersede.dropped == len(_lines_of(col))


def _record_dirs(tmp_path, nodes=30, minutes=5.0, segment_seconds=90.0):
    """The same events into a hub directory of each format (``SegmentedRecorder``, as the hub); each
    Lease renewal received 1-500 ms after it was made (the lines of different Leases step back now and
    then), the other events 20 ms after."""
    from nodewatch.core.fleet import FleetState
    from nodewatch.sim.fleet import SimFleet

    fleet = SimFleet(nodes=nodes, scenario="incident+churn", seed=4)
    clock = ManualClock(fleet.now)
    state = FleetState(fleet.settings)
    recs = [SegmentedRecorder(tmp_path / fmt, {"name": "sim"}, fleet.settings, segment_seconds=segment_seconds,
                              clock=clock, records=state.node_records, keep_seconds=None, keep_bytes=None,
                              record_format=fmt) for fmt in ("jsonl", "columnar")]
    rng = random.Random(6)

    def write(resource, etype, obj, t, listing=False):
        if resource == "nodes" and obj is not None:
            state.apply("nodes", etype, obj, t, listing=listing)
        for r in recs:
            r.write(resource, etype, obj, t, listing)

    _simulate(fleet, clock, write, lambda resource: rng.uniform(0.001, 0.5) if resource == "leases" else 0.02,
              minutes, 10, rng)
    for r in recs:
        r.close()
    return tmp_path / "jsonl", tmp_path / "columnar"


def test_status_at_of_a_hub_directory_is_the_answer_of_reading_it_all(tmp_path, capsys, monkeypatch):
    from nodewatch.cli import main

    jsonl, col = _record_dirs(tmp_path, nodes=80)
    assert len(list_segments(col)) >= 3
    at = ("+45", "+100", "+141", "+181.5", "+222", "+290")
    fast = {}
    for d in (jsonl, col):
        for a in at:
            main(["status", "--replay", str(d), "--at", a, "--format", "json"])
            fast[d.name, a] = capsys.readouterr().out
    monkeypatch.setattr("nodewatch.sources.replay.instant._one_instant", lambda path, when: (path, None))
    for a in at:  # every segment from the first, every line
        main(["status", "--replay", str(jsonl), "--at", a, "--format", "json"])
        want = capsys.readouterr().out
        assert orjson.loads(want)
        assert fast["jsonl", a] == want and fast["columnar", a] == want, a


def test_status_at_reads_a_hub_directory_from_the_keyframe_before_the_instant(tmp_path, capsys, monkeypatch):
    from nodewatch.cli import main
    from nodewatch.sources import segments

    _demo_dirs(tmp_path, 30, 2, 50)
    opened = []
    real = segments.iter_segment_lines
    monkeypatch.setattr(segments, "iter_segment_lines", lambda segs, *a: opened.append(len(segs)) or real(segs, *a))
    out = {}
    for fmt in ("jsonl", "columnar"):
        for at in ("+150", "+230"):
            main(["status", "--replay", str(tmp_path / fmt), "--at", at, "--format", "json"])
            out[fmt, at] = orjson.loads(capsys.readouterr().out)
    assert opened and max(opened) == 1  # one segment: the one that holds the instant
    assert out["jsonl", "+150"] == out["columnar", "+150"] and out["jsonl", "+230"] == out["columnar", "+230"]
    # the same answer as reading the directory from its first segment on
    monkeypatch.setattr("nodewatch.sources.replay.instant._one_instant", lambda path, when: (path, None))
    for at in ("+150", "+230"):
        main(["status", "--replay", str(tmp_path / "columnar"), "--at", at, "--format", "json"])
        assert orjson.loads(capsys.readouterr().out) == out["columnar", at]
    assert max(opened) > 1


def test_files_of_earlier_writers_read_back_and_todays_is_written_the_same():
    """``incident-30.v1.nwcol`` was written from ``incident-30.jsonl.gz`` by a version 1 writer
    (before the integer columns were zigzagged on whole columns at once), ``incident-30.v2.nwcol``
    by the first version 2 writer: both read back line for line, and today's writer writes the
    very same bytes as the second (the layout did not change since)."""
    want = _lines_of(os.path.join(DATA, "incident-30.jsonl.gz"))
    old = open(os.path.join(DATA, "incident-30.v1.nwcol"), "rb").read()
    v2 = open(os.path.join(DATA, "incident-30.v2.nwcol"), "rb").read()
    assert old.startswith(b"NWCOL\x01\r\n") and v2.startswith(b"NWCOL\x02\r\n") and columnar.MAGIC == v2[:8]
    assert _back(old) == want
    assert _back(v2) == want
    assert _to_columnar(want) == v2
    assert _kinds(v2)[columnar._ROW_SPLICED] > 0 and _kinds(old)[columnar._ROW_SPLICED] == 0


def _zigzag_one_by_one(values):
    from array import array

    raw = array("Q", [((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF for v in values]).tobytes()
    return b"".join(raw[i::8] for i in range(8))


@given(st.lists(st.one_of(st.integers(-300, 300), st.integers(-2**63, 2**63 - 1),
                          st.sampled_from([-2**63, 2**63 - 1, -1, 0, 1])), max_size=300))
@settings(max_examples=200, deadline=None)
def test_integer_columns_are_zigzagged_as_one_value_at_a_time_would(values):
    packed = columnar._pack(values)
    assert packed == _zigzag_one_by_one(values)
    assert columnar._unpack(packed, len(values)) == values


def test_the_live_clock_reads_whole_microseconds_that_leave_no_residual():
    """``SystemClock`` stamps receive times to the microsecond: each is the float nearest to a whole
    number of microseconds, so a recording keeps it with an all-zero residual column (the raw
    ``time.time()`` left one in nearly every row)."""
    from nodewatch.core.clock import SystemClock

    clock = SystemClock()
    times = [clock.now() for _ in range(2000)]
    assert all(columnar.micros(t) == (round(t * 1_000_000), 0) for t in times)
    assert all(abs(b - a) < 1.0 for a, b in zip(times, times[1:]))  # and still the wall clock


def _whole_line_shapes() -> list[bytes]:
    """Whole lines of every shape the raw way (``columnar_whole``) must give back as they were, or
    leave to the decoded way: plain ones of Nodes, Pods and Events (with and without a cluster, a
    list flag, a namespace), an object without metadata or a name, metadata not an object, a name not
    a string, a deletion, a list's end, a line with its own time, health, certificate and settings
    lines, extra envelope keys, envelope values of other JSON types, a Lease, and later versions of
    each named object (patches of a version kept as its bytes)."""
    t = 1_795_946_400.0
    lines = []

    def add(d: dict) -> None:
        nonlocal t
        t += 0.25
        lines.append(orjson.dumps({"t": t, **d}))

    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"a": "b"}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    pod = {"metadata": {"name": "p1", "namespace": "ns"}, "spec": {"nodeName": "n1"}}
    add({"resource": "nodes", "type": "ADDED", "object": node, "list": True})
    add({"cluster": "c1", "resource": "nodes", "type": "ADDED", "object": {**node, "metadata": {"name": "n2"}}})
    add({"resource": "pods", "type": "ADDED", "object": pod})
    add({"resource": "events", "type": "ADDED", "object": {"metadata": {"name": "e1", "namespace": "ns"},
                                                            "message": "[b]x[/b]\x1b[31m"}})
    add({"resource": "nodes", "type": "SYNCED", "object": None, "list": True})
    add({"resource": "nodes", "type": "ADDED", "object": {"spec": {}}})
    add({"resource": "nodes", "type": "ADDED", "object": {"metadata": "n3"}})
    add({"resource": "nodes", "type": "ADDED", "object": {"metadata": {"name": 7}}})
    add({"resource": "nodes", "type": "ADDED", "object": {"metadata": None}})
    add({"resource": "nodes", "type": "ADDED", "object": [1, 2]})
    add({"resource": "nodes", "type": "ADDED", "object": node, "extra": 1})
    add({"resource": "nodes", "type": 3, "object": node})
    add({"resource": "nodes", "type": "ADDED", "object": node, "list": "yes"})
    add({"cluster": 5, "resource": "nodes", "type": "ADDED", "object": node})
    add({"resource": "leases", "type": "ADDED", "object": {"metadata": {"name": "n1", "namespace": "kube-node-lease"},
                                                           "spec": {"holderIdentity": "n1"}}})
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": "n9", "namespace": "kube-node-lease", "resourceVersion": "100"},
             "spec": {"holderIdentity": "n9", "leaseDurationSeconds": 40,
                      "renewTime": "2026-11-29T10:00:00.000000Z"}}
    add({"cluster": "c1", "resource": "leases", "type": "ADDED", "object": lease, "list": True})
    for k in range(1, 4):  # renewals: rows of the shape the whole line above taught
        meta = {**lease["metadata"], "resourceVersion": str(100 + k)}
        spec = {**lease["spec"], "renewTime": f"2026-11-29T10:00:{10 * k:02d}.{k:06d}Z"}
        add({"cluster": "c1", "resource": "leases", "type": "MODIFIED", "object": {**lease, "metadata": meta,
                                                                                   "spec": spec}})
    add({"resource": "leases", "type": "ADDED", "object": {"metadata": None, "spec": {}}})
    add({"resource": "leases", "type": "ADDED", "object": {"spec": {}}})
    add({"resource": "leases", "type": "ADDED", "object": {"metadata": "x"}})
    add({"cluster": "c1", "resource": "leases", "type": "DELETED", "object": lease})
    add({"health": {"resource": "nodes", "connected": True}})
    add({"cert": {"node": "n1", "not_after": 1.9e9, "source": "csr"}})
    for k in range(3):  # later versions: patches of the versions kept as bytes, then of patched ones
        add({"resource": "nodes", "type": "MODIFIED",
             "object": {**node, "status": {"conditions": [{"type": "Ready", "status": "False" if k % 2 else "True"}]}}})
        add({"cluster": "c1", "resource": "nodes", "type": "MODIFIED",
             "object": {**node, "metadata": {"name": "n2", "labels": {"k": str(k)}}}})
        add({"resource": "pods", "type": "MODIFIED", "object": {**pod, "status": {"phase": "Running" if k else "Pending"}}})
    big = {"apiVersion": "v1", "kind": "Node",
           "metadata": {"name": "big", "labels": {f"label-{i}": "x" * 20 for i in range(20)}},
           "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
           "status": {"conditions": [{"type": c, "status": "False", "reason": "r" * 40, "message": "m" * 80,
                                      "lastHeartbeatTime": "2026-11-29T10:00:00Z"} for c in ("A", "B", "C", "Ready")],
                      "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}] * 4, "capacity": {"cpu": "8"}}}
    add({"resource": "nodes", "type": "ADDED", "object": big, "list": True})
    versions = [
        {**big, "status": {**big["status"], "conditions": [dict(c, lastHeartbeatTime="2026-11-29T10:05:00Z")
                                                            for c in big["status"]["conditions"]]}},  # deep in a list
        {**big, "metadata": {**big["metadata"], "labels": {**big["metadata"]["labels"], "label-3": "y"}}},
        {**big, "status": "replaced whole"},  # a part kept as bytes replaced by a value
        {**big, "spec": {"taints": [{"key": "k", "effect": "NoExecute"}], "unschedulable": True}},
        {**big, "metadata": {**big["metadata"], "name": "big2"}},  # its name changes: a new key
    ]
    for v in versions:
        add({"resource": "nodes", "type": "MODIFIED", "object": v})
    add({"resource": "nodes", "type": "MODIFIED", "object": {**versions[-1], "status": {"phase": "x"}}})
    add({"resource": "nodes", "type": "MODIFIED", "object": big})
    add({"resource": "nodes", "type": "DELETED", "object": big})
    add({"resource": "pods", "type": "DELETED", "object": pod})
    add({"resource": "pods", "type": "ADDED", "object": pod})
    lines.append(orjson.dumps({"t": t + 1, "resource": "nodes", "type": "MODIFIED", "object": node}))
    header = orjson.dumps({"nodewatch_recording": 1, "started_at": "2026-11-29T10:00:00Z",
                           "source": {"kind": "test"}, "settings": {}})
    return [header] + lines


def test_whole_lines_read_as_their_bytes_come_back_as_they_were(tmp_path):
    """The block's whole lines split as bytes (a plain line given back without decoding its object)
    give every line back byte for byte, by the whole reader and by a one-shot answer's; the patches
    of an object kept as its bytes rebuild each later version, and a Lease's shape learned from its
    bytes rebuilds its renewals."""
    from nodewatch.core.timeutil import format_time
    from nodewatch.sources.replay.instant import _one_instant

    lines = _whole_line_shapes()
    data = _to_columnar(lines)
    problems: list[str] = []
    back = _back(data, problems)
    assert not problems
    assert [a.rstrip(b"\n") for a in lines] == [b.rstrip(b"\n") for b in back]
    assert _to_columnar.writer.lease_rows == 3  # (the renewals were rows, not whole lines)
    path = tmp_path / "x.nwcol"
    path.write_bytes(data)
    end = orjson.loads(lines[-1])["t"]
    _, supersede = _one_instant(str(path), format_time(end + 1, micro=True))
    stream = open_binary(str(path), supersede)
    try:
        once = [line for _, line in iter_lines(stream, problems) if line.strip()]
    finally:
        stream.close()
    assert not problems and [a.rstrip(b"\n") for a in lines] == [b.rstrip(b"\n") for b in once]


def test_lines_taken_as_made_are_the_lines_read_as_a_stream(monkeypatch):
    """``iter_lines`` takes a directory's or a columnar file's lines as they are made (no buffer in
    between): the same numbers, lines and problems as reading them with ``readline``, a line longer
    than the limit skipped either way, a torn tail named either way."""
    from nodewatch.sources import recording
    from nodewatch.sources.line_stream import SegmentStream

    monkeypatch.setattr(recording, "MAX_LINE_BYTES", 40)
    made = [b'{"a":1}\n', b"\n", b'{"b":"' + b"x" * 31 + b'"}\n', b'{"c":"' + b"y" * 32 + b'"}\n',
            b'{"d":"' + b"z" * 200 + b'"}\n', b'{"e":2}\n', b'{"f":3}']

    def read(direct: bool) -> tuple[list, list]:
        raw = SegmentStream(iter(made), "x")
        raw.problems = ["x: the tail is torn"]
        stream = io.BufferedReader(raw, 1 << 20)
        if not direct:
            stream.peek(1)  # read as a stream first: its lines are not taken as made any more
        problems: list[str] = []
        out = list(recording.iter_lines(stream, problems)), problems
        assert (raw.lines() is not None) is direct  # (taken as made: never read through the buffer)
        return out

    direct, buffered = read(True), read(False)
    assert direct == buffered
    lines, problems = direct
    assert [n for n, _ in lines] == [1, 2, 3, 4, 6, 7] and [x for _, x in lines] == made[:4] + made[5:]
    assert problems == ["line 5: longer than 40 bytes, skipped", "x: the tail is torn"]  # (41 bytes with its newline: read)
