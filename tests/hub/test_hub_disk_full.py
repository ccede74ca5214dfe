"""A full disk under the flight recorder: the hub judges and serves every viewer exactly as a hub
that records nothing, says "recording stopped: disk full" on every screen and in its log, drops
its oldest segments to make room, resumes by itself when there is room, and what it had written
stays readable.

Before, the recorder's write raised OSError (Errno 28) into the source that fed the state (the
demo's advance here; a watch stream in a live hub, which then broke, and the whole fleet went
Late within 25 s), and its flush thread died with a traceback."""

from __future__ import annotations

import contextlib
import logging
import subprocess
import uuid
from pathlib import Path

import pytest

from nodewatch.hub.codec import view_to_wire
from nodewatch.hub.flight_recorder import DISK_FULL, KEEP_WHEN_FULL, MAX_RETRY_SECONDS, SegmentedRecorder
from nodewatch.hub.server import Hub
from nodewatch.sources.demo import DemoSource
from nodewatch.sources.recording_input import read_recording
from nodewatch.sources.segments import list_segments
from support.hub_support import step_demo, viewer
from support.simserver import wait_until


@contextlib.contextmanager
def small_disk(tmp_path: Path, size: str = "1m"):
    """A tmpfs of ``size`` (root only); skipped where mounts are not allowed."""
    mnt = tmp_path / f"disk-{uuid.uuid4().hex[:6]}"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(mnt)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def fill(directory: Path) -> Path:
    """Fill the file system ``directory`` is on to the last byte."""
    path = directory / "filler"
    with open(path, "wb", buffering=0) as f:
        for size in (64 * 1024, 512, 1):
            with contextlib.suppress(OSError):
                while True:
                    f.write(b"x" * size)
    return path


class RetryClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _wire(src: DemoSource, t: float) -> dict:
    return {v.name: view_to_wire(v) for v in src.state.evaluate(t).nodes}


def test_a_full_disk_stops_the_recording_and_nothing_else(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    with small_disk(tmp_path, "4m") as disk:
        recorded = DemoSource(nodes=120, scenario="incident", seed=3, speed=0.0)
        twin = DemoSource(nodes=120, scenario="incident", seed=3, speed=0.0)  # records nothing
        retry = RetryClock()
        rec = SegmentedRecorder(disk / "recordings", {"kind": "demo"}, recorded.state.settings, segment_seconds=60,
                                clock=recorded.clock, records=recorded.state.node_records, keep_seconds=None,
                                keep_bytes=None, retry_clock=retry)
        recorded.recorder = rec
        hub = Hub(recorded, str(tmp_path / "hub.sock"), tick_seconds=None)
        hub.start()
        try:
            with viewer(hub) as v:
                t0 = recorded.clock.now()

                def step(seconds: float) -> float:
                    t = step_demo(recorded, twin, seconds=seconds)
                    hub.tick()
                    return t

                for _ in range(40):  # 200 s: a few segments on the disk
                    step(5)
                assert len(list_segments(rec.directory)) >= 3 and not rec.stopped
                before = {s.path.name: s.path.read_bytes() for s in list_segments(rec.directory)}
                newest = max(before)
                filler = fill(disk)

                shown = False
                for _ in range(60):  # 300 s on a full disk: every write fails
                    t = step(5)
                    retry.t += 1  # and it tries again, backing off, in wall time
                    assert _wire(recorded, t) == _wire(twin, t)  # judged exactly as without a recorder
                    assert len(list_segments(rec.directory)) >= KEEP_WHEN_FULL
                    if rec.stopped and not shown:
                        assert rec.stopped == DISK_FULL
                        seq = hub.tick()
                        fv = wait_until(lambda: v.state.seq == seq and v.state.evaluate(v.clock.now()))
                        assert {n.name: view_to_wire(n) for n in fv.nodes} == _wire(twin, t)  # served as before
                        assert DISK_FULL in v.name  # on every screen: the header
                        problems = v.state.recent_problems(50)
                        assert problems[-1].where == "recording" and DISK_FULL in problems[-1].message
                        shown = True
                assert shown and rec.failures >= 1
                assert any(DISK_FULL in r.getMessage() and r.levelno >= logging.ERROR for r in caplog.records)
                assert rec.dropped_for_space >= 1  # the oldest segments went to make room
                # what was written is as it was, but for the segment the disk filled under (cut at a line)
                for s in list_segments(rec.directory):
                    if s.path.name in before and s.path.name != newest:
                        assert s.path.read_bytes() == before[s.path.name]

                filler.unlink()  # room again
                retry.t += MAX_RETRY_SECONDS
                for _ in range(10):
                    t = step(5)
                    retry.t += 1
                    assert rec.stopped == ""
                seq = hub.tick()
                wait_until(lambda: v.state.seq == seq)
                assert DISK_FULL not in v.name and not hub.recording_stopped
                assert len({s.path.name for s in list_segments(rec.directory)} - set(before)) >= 1
                assert _wire(recorded, t) == _wire(twin, t)
        finally:
            hub.stop()
            rec.close()
        # every segment reads; the one cut short by the full disk ends at a whole line
        header, entries, problems = read_recording(str(rec.directory))
        assert entries and not [p for p in problems if "malformed" in p or "not JSON" in p], problems
        assert t0 < max(e.t for e in entries if e.t is not None)


def test_the_flusher_keeps_a_failed_flush_for_the_writers_instead_of_dying(tmp_path):
    from nodewatch.core.clock import ManualClock
    from nodewatch.core.settings import Settings
    from nodewatch.sources.recording import Recorder

    with small_disk(tmp_path, "256k") as disk:
        clock = ManualClock(1000.0)
        rec = Recorder(str(disk / "r.jsonl"), {"kind": "test"}, Settings(), started_at=1000.0, clock=clock)
        filler = fill(disk)
        with pytest.raises(OSError):
            for i in range(10000):
                rec.write("leases", "MODIFIED", {"metadata": {"name": f"n{i}"}, "spec": {"x": "y" * 200}}, 1000.0)
                clock.advance(1)
        assert rec.error is not None and rec.error.errno == 28
        with pytest.raises(OSError):
            rec.write("leases", "MODIFIED", {"metadata": {"name": "again"}}, 1000.0)
        rec.close()
        filler.unlink()
        _, entries, problems = read_recording(str(disk / "r.jsonl"))
        assert entries and all(e.obj["metadata"]["name"].startswith("n") for e in entries)


class _Full:
    """A file whose every write fails as on a full disk (where no tmpfs can be mounted)."""

    def write(self, data) -> int:
        raise OSError(28, "No space left on device")

    def flush(self) -> None:
        raise OSError(28, "No space left on device")

    def close(self) -> None:
        pass

    raw = property(lambda self: self)


def _fill_jsonl(cur) -> None:
    assert cur._gz is not None
    cur._raw = cur._gz.fileobj = _Full()


def _fill_columnar(cur) -> None:
    from nodewatch.sources.columnar import ColumnarRecorder

    assert isinstance(cur, ColumnarRecorder) and cur._w is not None
    cur._w._out = _Full()


@pytest.mark.parametrize("record_format, fill", [("jsonl", _fill_jsonl), ("columnar", _fill_columnar)])
def test_an_injected_full_disk_stops_and_resumes_the_recording_without_a_mount(tmp_path, record_format, fill):
    """Both segment formats (the hub records columnar by default): the source never sees the
    error, and recording resumes with a keyframe once there is room."""
    src = DemoSource(nodes=40, scenario="incident", seed=3, speed=0.0)
    twin = DemoSource(nodes=40, scenario="incident", seed=3, speed=0.0)
    retry = RetryClock()
    rec = SegmentedRecorder(tmp_path / "recordings", {"kind": "demo"}, src.state.settings, segment_seconds=60,
                            clock=src.clock, records=src.state.node_records, keep_seconds=None, keep_bytes=None,
                            retry_clock=retry, record_format=record_format)
    src.recorder = rec

    def step(seconds: float) -> float:
        return step_demo(src, twin, seconds=seconds)

    for _ in range(10):
        step(5)
    cur = rec._current
    assert cur is not None
    fill(cur)
    for _ in range(10):
        t = step(5)  # the source never sees the error
        assert _wire(src, t) == _wire(twin, t)
    assert rec.stopped == DISK_FULL
    cur._flusher.join(5)
    assert not cur._flusher.is_alive()  # stopped, not left spinning or dead mid-write
    retry.t += MAX_RETRY_SECONDS
    t = step(5)
    assert rec.stopped == "" and _wire(src, t) == _wire(twin, t)
    rec.close()
    _, entries, problems = read_recording(str(rec.directory))
    assert entries and max(e.t for e in entries if e.t is not None) >= t - 5
    from nodewatch.sources.segments import list_segments, opens_run

    segs = list_segments(rec.directory)  # the one opened on resuming says so (a stretch before it was not written)
    assert len(segs) >= 2 and opens_run(segs[-1]) and not any(opens_run(s) for s in segs[1:-1])


def test_a_full_disk_is_said_in_readyz_and_metrics_and_pages(tmp_path):
    """The hub's /readyz stays 200 (it still judges and serves: a failed probe would take it out of
    its Service) but says why recording stopped; ``nodewatch_flight_recorder_up`` goes 0 and the
    NodewatchRecordingStopped alert fires from the same sample; all back when space is."""
    import urllib.request

    from nodewatch.metrics.alerts import RULES
    from nodewatch.metrics.sample import take_sample
    from nodewatch.metrics.server import MetricsServer

    src = DemoSource(nodes=20, scenario="incident", seed=3, speed=0.0)
    retry = RetryClock()
    rec = SegmentedRecorder(tmp_path / "recordings", {"kind": "demo"}, src.state.settings, segment_seconds=60,
                            clock=src.clock, records=src.state.node_records, keep_seconds=None, keep_bytes=None,
                            retry_clock=retry)
    src.recorder = rec
    rule = next(r for r in RULES if r.name == "NodewatchRecordingStopped")

    def step(seconds: float) -> None:
        step_demo(src, seconds=seconds)

    srv = MetricsServer(src, ("127.0.0.1", 0))
    srv.start()
    try:
        def scrape() -> tuple[str, str]:
            ready = urllib.request.urlopen(srv.url + "/readyz", timeout=10).read().decode()
            body = urllib.request.urlopen(srv.url + "/metrics", timeout=10).read().decode()
            return ready, next(line for line in body.splitlines() if line.startswith("nodewatch_flight_recorder_up"))

        for _ in range(4):
            step(5)
        assert scrape() == ("ok\n", "nodewatch_flight_recorder_up 1.0")
        assert list(rule.fire(take_sample(src))) == []
        cur = rec._current
        assert cur is not None and cur._gz is not None
        cur._raw = cur._gz.fileobj = _Full()
        for _ in range(4):
            step(5)
        assert rec.stopped == DISK_FULL
        assert scrape() == (f"ok; {DISK_FULL}\n", "nodewatch_flight_recorder_up 0.0")
        ((labels, notes),) = list(rule.fire(take_sample(src)))
        assert DISK_FULL in notes["summary"]
        retry.t += MAX_RETRY_SECONDS
        step(5)
        assert scrape() == ("ok\n", "nodewatch_flight_recorder_up 1.0")
    finally:
        srv.stop()
        rec.close()
