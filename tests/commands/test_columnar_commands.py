"""``recording export``, ``record --format``, the hub's ``--record-format`` and its word on how long
the size cap holds."""

from __future__ import annotations

import gzip
import os

import orjson

from nodewatch.cli import main
from nodewatch.core.clock import ManualClock
from nodewatch.core.settings import Settings
from nodewatch.hub.codec import view_to_wire
from nodewatch.hub.flight_recorder import SegmentedRecorder
from nodewatch.sources.columnar import ColumnarRecorder
from nodewatch.sources.demo import DemoSource
from nodewatch.sources.recording import Recorder
from nodewatch.sources.replay import ReplaySource
from nodewatch.sources.segments import list_segments

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data")


def _hub_dir(directory, fmt="columnar", seconds=300):
    src = DemoSource(nodes=30, scenario="incident", seed=1)
    rec = SegmentedRecorder(directory, {"kind": "demo"}, src.state.settings, segment_seconds=60.0, clock=src.clock,
                            records=src.state.node_records, keep_seconds=None, keep_bytes=None, record_format=fmt)
    src.recorder = rec
    t0 = src.clock.now()
    for i in range(1, int(seconds / 5)):
        src.advance_to(t0 + i * 5.0)
        src.clock.seek(t0 + i * 5.0)
    rec.close()
    return t0


def _views(path, times):
    r = ReplaySource(str(path))
    try:
        out = {}
        for t in times:
            r.replay.seek(t)
            out[t] = {v.name: view_to_wire(v) for v in r.state.evaluate(t).nodes}
        return out, r.problems
    finally:
        r.stop()


def test_export_of_a_columnar_directory_replays_as_the_directory(tmp_path, capsys):
    t0 = _hub_dir(tmp_path / "rec")
    out = tmp_path / "all.jsonl.gz"
    assert main(["recording", "export", str(tmp_path / "rec"), "-o", str(out)]) == 0
    assert "lines written" in capsys.readouterr().err
    with gzip.open(out) as f:
        first = orjson.loads(f.readline())
    assert first["nodewatch_recording"] == 1
    times = [t0 + 20, t0 + 130, t0 + 250]
    want, _ = _views(tmp_path / "rec", times)
    got, problems = _views(out, times)
    assert got == want and not problems


def test_export_of_a_span_starts_at_a_keyframe_and_stops_at_its_end(tmp_path):
    _hub_dir(tmp_path / "rec")
    segs = list_segments(tmp_path / "rec")
    out = tmp_path / "span.jsonl"
    frm, to = segs[0].start + 150, segs[0].start + 200
    rc = main(["recording", "export", str(tmp_path / "rec"), "--from", f"+{frm - segs[0].start:.0f}",
               "--to", f"+{to - segs[0].start:.0f}", "-o", str(out)])
    assert rc == 0
    lines = [orjson.loads(x) for x in out.read_bytes().splitlines()]
    ts = [x["t"] for x in lines[1:]]
    assert max(ts) <= to
    holding = max(s.start for s in segs if s.start <= frm)
    assert min(ts) >= holding - 900  # the keyframe of the segment holding --from (its recent objects keep their time)
    assert any(x.get("list") for x in lines[1:])  # the keyframe: the fleet as it was
    # ... and the span replays on its own
    got, problems = _views(out, [frm + 10])
    want, _ = _views(tmp_path / "rec", [frm + 10])
    assert got == want


def test_export_to_columnar_and_back_keeps_every_line(tmp_path):
    src = os.path.join(DATA, "incident-30.jsonl.gz")
    col, back = tmp_path / "x.nwcol", tmp_path / "back.jsonl"
    assert main(["recording", "export", src, "-o", str(col)]) == 0
    assert main(["recording", "export", str(col), "-o", str(back)]) == 0
    with gzip.open(src) as f:
        want = [line for line in f.read().splitlines() if line.strip()]
    assert back.read_bytes().splitlines() == want
    assert col.stat().st_size < os.path.getsize(src)


def test_a_torn_recording_is_named_once_by_status_and_export(tmp_path, capsys):
    """A columnar file whose writer was killed mid-block: the reader's message names the file, and
    ``status --replay`` and ``recording export`` must not name it again before it."""
    col = tmp_path / "x.nwcol"
    assert main(["recording", "export", os.path.join(DATA, "incident-30.jsonl.gz"), "-o", str(col)]) == 0
    torn = tmp_path / "torn.nwcol"
    torn.write_bytes(col.read_bytes()[: col.stat().st_size * 2 // 3])
    capsys.readouterr()
    for args in (["status", "--replay", str(torn)], ["recording", "export", str(torn), "-o", str(tmp_path / "t.jsonl")]):
        main(args)  # (0 whole blocks of this small file: nothing usable; the naming is the point)
        err = [line for line in capsys.readouterr().err.splitlines() if "ends abruptly" in line]
        assert len(err) == 1 and err[0].count(str(torn)) == 1, err


def test_export_from_on_a_file_is_refused_in_one_line(tmp_path, capsys):
    rc = main(["recording", "export", os.path.join(DATA, "incident-30.jsonl.gz"), "--from", "+10",
               "-o", str(tmp_path / "x.jsonl")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "--from needs a hub's directory" in err
    rc = main(["recording", "export", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "x.jsonl")])
    assert rc == 2 and "no such file" in capsys.readouterr().err


def test_record_writes_the_format_asked_for(tmp_path):
    from nodewatch.commands.common import open_recorder

    for name, fmt, want in (("a.nwcol", None, ColumnarRecorder), ("a.jsonl.gz", None, Recorder),
                            ("b.jsonl.gz", "columnar", ColumnarRecorder), ("b.nwcol", "jsonl", Recorder)):
        rec = open_recorder(str(tmp_path / name), {"name": "t"}, Settings(), record_format=fmt)
        try:
            assert type(rec.recorder) is want  # inside the StoppingRecorder (a full disk stops only it)
        finally:
            rec.close()
    args = __import__("nodewatch.cli", fromlist=["build_parser"]).build_parser(only="record").parse_args(
        ["record", "x.nwcol", "--format", "jsonl"])
    assert args.record_format == "jsonl"


def test_the_hub_records_columnar_by_default():
    from nodewatch.cli import build_parser

    args = build_parser(only="hub").parse_args(["hub"])
    assert args.record_format == "columnar"


def test_the_hub_says_how_long_its_cap_holds_at_the_rate_written(tmp_path):
    clock = ManualClock(1_764_410_000.0)
    rec = SegmentedRecorder(tmp_path / "r", {"kind": "t"}, Settings(), clock=clock, keep_bytes=10 * 1024 ** 2,
                            keep_seconds=24 * 3600, segment_seconds=600, record_format="jsonl")
    lease = {"metadata": {"name": "n", "namespace": "kube-node-lease"}, "spec": {"holderIdentity": "n"}}
    i = 0
    while clock.now() < 1_764_410_000.0 + 30:
        rec.write("leases", "MODIFIED", {**lease, "spec": {"holderIdentity": "n", "renewTime": f"x{i}"}}, clock.now())
        clock.advance(0.01)
        i += 1
    assert rec.capacity_notice() is None  # not yet: the rate of the first minute says little
    while clock.now() < 1_764_410_000.0 + 120:
        rec.write("leases", "MODIFIED", {**lease, "spec": {"holderIdentity": "n", "renewTime": f"{i}" * 40}}, clock.now())
        clock.advance(0.01)
        i += 1
    rec.flush()
    rate = rec.bytes_per_second()
    notice = rec.capacity_notice()
    assert rate and notice
    hours = 10 * 1024 ** 2 / rate / 3600
    assert f"holds {hours:.1f}h" in notice or f"holds {hours * 60:.0f}m" in notice
    assert ("less than --keep 24.0h" in notice) == (hours < 24)
    assert rec.capacity_notice() is None  # said once per segment
    rec.close()


def test_a_cap_that_holds_years_says_so_in_days_and_that_keep_comes_first(tmp_path):
    """A 3-node cluster's 8 GiB cap held "55285.3h"; the age limit, not the cap, is what removes segments."""
    clock = ManualClock(1_764_410_000.0)
    rec = SegmentedRecorder(tmp_path / "r", {"kind": "t"}, Settings(), clock=clock, keep_bytes=8 * 1024 ** 3,
                            keep_seconds=24 * 3600, segment_seconds=600, record_format="jsonl")
    lease = {"metadata": {"name": "n", "namespace": "kube-node-lease"}, "spec": {"holderIdentity": "n"}}
    for i in range(130):
        rec.write("leases", "MODIFIED", {**lease, "spec": {"holderIdentity": "n", "renewTime": f"x{i}"}}, clock.now())
        clock.advance(1.0)
    rec.flush()
    rate = rec.bytes_per_second()
    notice = rec.capacity_notice()
    assert rate and notice
    assert f"holds {8 * 1024 ** 3 / rate / 86400:,.0f}d at this rate; --keep 24.0h removes them first" in notice
    assert "less than" not in notice
    rec.close()


def test_the_hubs_default_cap_is_the_recorders():
    from nodewatch.cli import build_parser
    from nodewatch.hub.flight_recorder import KEEP_BYTES

    args = build_parser(only="hub").parse_args(["hub"])
    assert args.keep_bytes == KEEP_BYTES == 8 * 1024 ** 3


def test_a_columnar_recording_is_read_from_stdin(tmp_path):
    import subprocess
    import sys

    col = tmp_path / "x.nwcol"
    assert main(["recording", "export", os.path.join(DATA, "incident-30.jsonl.gz"), "-o", str(col)]) == 0
    with open(col, "rb") as f:
        out = subprocess.run([sys.executable, "-m", "nodewatch", "recording", "export", "-", "-o", "-"], stdin=f,
                             capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr
    with gzip.open(os.path.join(DATA, "incident-30.jsonl.gz")) as f:
        assert out.stdout.splitlines() == [x for x in f.read().splitlines() if x.strip()]


def test_report_of_a_hub_directory_reads_only_its_window_and_says_the_same(tmp_path, capsys):
    """``report DIR --from 10:02`` (a time of day, as ``replay`` and ``status`` take it) reads the
    segments of the window only, from the keyframe of the one that holds its start, and says what
    the whole recording says of that window; its size is the bytes of those segments (it was the
    directory's inode)."""
    import humanize

    from nodewatch.core.timeutil import format_time
    from nodewatch.sources.segments import LATE_LINES, NAMED_TO

    d = tmp_path / "rec"
    t0 = _hub_dir(d, seconds=300)
    segs = list_segments(d)
    assert len(segs) >= 4
    start, end = int(t0 + 150), int(t0 + 230)
    clock = lambda t: f"{int(t % 86400 // 3600):02d}:{int(t % 3600 // 60):02d}:{int(t % 60):02d}"  # noqa: E731

    def report(*args):
        assert main(["report", *args]) == 0
        return capsys.readouterr().out

    whole = tmp_path / "whole.jsonl.gz"  # every line of every segment, one file
    assert main(["recording", "export", str(d), "-o", str(whole)]) == 0
    everything = report(str(whole), "--from", format_time(start), "--to", format_time(end))
    windowed = report(str(d), "--from", clock(start), "--to", clock(end))
    first = max(i for i, s in enumerate(segs) if s.start + NAMED_TO <= start)
    last = max(i for i, s in enumerate(segs) if s.start <= end + LATE_LINES)  # (lines received by the end, written late)
    assert first > 0
    head, _, body = windowed.partition("\n## ")
    assert f"{humanize.naturalsize(sum(s.size for s in segs[first:last + 1]))})" in head
    assert body == everything.partition("\n## ")[2]  # the same report of the window
    assert f"{humanize.naturalsize(sum(s.size for s in segs))})" in report(str(d)).partition("\n## ")[0]
