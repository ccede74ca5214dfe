"""The flight recorder's reads of the Lease watch (``SegmentedRecorder.write_lease_watch``: the
read's lines and the lane's structs, plain renewals matched on their own bytes) against ``write`` of
each event's object, the way before: the same recording, line for line, whatever the events are
(renewals, holders and durations that change, Leases deleted and added, other namespaces, objects
without a name or renewTime, resourceVersions that grow a digit), across segment rotations, in both
formats and for a cluster of several."""

from __future__ import annotations

import random
import struct

import orjson
import pytest

from nodewatch.core.clock import ManualClock
from nodewatch.core.settings import Settings
from nodewatch.core.wire import DECODERS, WireError
from nodewatch.hub.flight_recorder import SegmentedRecorder
from nodewatch.sources import columnar
from nodewatch.sources.columnar_blocks import BlockReader, check_magic
from nodewatch.sources.recording import write_lease_watch
from nodewatch.sources.segments import iter_segment_lines, list_segments
from tests.core.test_lease_watch import _event, _line
from tests.support.factories import T0, lease

N = 30


def _recorder(directory, clock: ManualClock, record_format: str, clusters: list | None) -> SegmentedRecorder:
    return SegmentedRecorder(directory, {"kind": "test"}, Settings(), segment_seconds=20.0, keep_seconds=None,
                             keep_bytes=None, clock=clock, record_format=record_format, clusters=clusters)


def _lines(directory) -> list[bytes]:
    problems: list[str] = []
    lines = list(iter_segment_lines(list_segments(directory), problems))
    assert not problems
    return lines


@pytest.mark.parametrize("record_format", ["columnar", "jsonl"])
@pytest.mark.parametrize("seed", range(4))
def test_a_watch_read_is_recorded_as_its_objects_are(tmp_path, record_format, seed):
    _compare_reads_with_objects(tmp_path, record_format, seed)


@pytest.mark.parametrize("seed", range(3))
def test_a_read_longer_than_a_block_goes_on_in_the_next_block(tmp_path, monkeypatch, seed):
    """The renewals of one read are written as runs of rows (``ColumnarWriter.add_renewals``): a
    run stops where the block is full and the next block takes the rest, as a row at a time does."""
    monkeypatch.setattr(columnar, "MAX_BLOCK_ROWS", 4)
    by_read = _compare_reads_with_objects(tmp_path, "columnar", seed)
    assert by_read.fast_lines > 200
    rows = []
    for seg in list_segments(tmp_path / "reads"):
        with open(seg.path, "rb") as f:
            check_magic(f, seg.path.name)
            bodies = list(BlockReader(f))[1:]  # (block 0: the header)
        rows += [struct.unpack_from("<I", body)[0] for body in bodies]
    assert max(rows) == 4 and rows.count(4) > 20  # full blocks, none fuller


def _compare_reads_with_objects(tmp_path, record_format: str, seed: int) -> SegmentedRecorder:
    """A recording of random reads of the Lease watch written by ``write_lease_watch`` against the
    same events written by ``write``: the same lines (returns the first recorder)."""
    rng = random.Random(seed)
    several = seed % 2 == 1
    clusters = [{"name": "eu", "context": "eu"}] if several else None
    cluster = "eu" if several else None
    clock = ManualClock(T0)
    by_object, by_read = (_recorder(tmp_path / d, clock, record_format, clusters) for d in ("objects", "reads"))
    target = by_read.for_cluster("eu") if several else by_read
    names = [f"n{i:03d}" for i in range(N)]
    rv = rng.choice((9_990, 99_990))  # a resourceVersion that grows a digit on the way, or not
    for rec in (by_object, by_read):
        for name in names:
            rec.write("leases", "ADDED", _versioned(lease(name, T0 - 5, written=T0 - 5), rv), T0 - 1, True, cluster=cluster)
        rec.write("leases", "SYNCED", None, T0 - 1, cluster=cluster)
    renew: dict[str, float] = {}
    decoder = DECODERS["leases"]
    reads = 0
    for second in range(70):
        t = T0 + second + 0.25
        clock.set(t)
        events = []
        for _ in range(rng.randrange(1, 25)):
            rv += 1
            etype, obj = _event(rng, names, renew, t)
            events.append((etype, _versioned(obj, rv)))
        block = b"".join(_line(etype, obj) for etype, obj in events)
        if rng.random() < 0.1:
            block = block.replace(b"\n", b"\r\n", 1) + b"\n"  # a CR and a blank line: still whole lines
        for line in block.splitlines():
            if line.strip():
                d = orjson.loads(line)
                by_object.write("leases", d["type"], d["object"], t, cluster=cluster)
        try:
            structs = decoder.decode_watch(block)
        except WireError:  # (the reflector reads such a block the general way)
            for line in block.splitlines():
                if line.strip():
                    d = orjson.loads(line)
                    target.write("leases", d["type"], d["object"], t)
            continue
        write_lease_watch(target, block, structs, t)
        reads += 1
    for rec in (by_object, by_read):
        rec.close()
    assert reads > 40
    assert len(list_segments(tmp_path / "reads")) >= 3  # rotations on the way
    assert _lines(tmp_path / "reads") == _lines(tmp_path / "objects")
    if record_format == "columnar":
        assert by_read.fast_lines > 200 and by_read.fast_lines >= by_object.fast_lines, (by_read.fast_lines, by_object.fast_lines)
    else:
        assert by_read.fast_lines == 0
    return by_read


def _versioned(obj: dict, rv: int) -> dict:
    meta = obj.setdefault("metadata", {})
    meta["resourceVersion"] = str(rv)
    return obj


def test_a_read_whose_lines_do_not_match_its_events_is_written_line_by_line(tmp_path):
    """Lines and structs that do not pair up (never from the reflector): each line decoded and
    written the general way, nothing lost."""
    clock = ManualClock(T0)
    rec = _recorder(tmp_path / "r", clock, "columnar", None)
    rec.write("leases", "ADDED", _versioned(lease("a", T0 - 5, written=T0 - 5), 10), T0 - 1, True)
    rec.write("leases", "SYNCED", None, T0 - 1)
    block = _line("MODIFIED", _versioned(lease("a", T0, written=T0), 11))
    rec.write_lease_watch(block + block, DECODERS["leases"].decode_watch(block), T0 + 0.5)
    rec.close()
    renewals = [line for line in _lines(tmp_path / "r") if b'"MODIFIED"' in line]
    assert len(renewals) == 2
