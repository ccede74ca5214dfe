"""bench/decode_build.py runs on a small recorded stream (its figures are not checked: timings)."""

from __future__ import annotations

import orjson

from bench import decode_build
from bench.objects import raw_lease, raw_node
from support.factories import T0


def test_blocks_are_whole_lines_and_cover_the_data():
    data = b"".join(b"x" * n + b"\n" for n in (3, 10, 0, 7, 30, 2))
    parts = decode_build.blocks(data, size=12)
    assert b"".join(parts) == data
    assert all(bytes(p).endswith(b"\n") for p in parts)
    assert any(len(p) > 12 for p in parts)  # a line longer than a block is one block


def test_every_figure_is_produced_on_a_small_stream(tmp_path):
    nodes, leases = tmp_path / "nodes.jsonl", tmp_path / "leases.jsonl"
    nodes.write_bytes(b"".join(orjson.dumps({"type": "ADDED", "object": raw_node(i)}) + b"\n" for i in range(40)))
    names = [raw_node(i)["metadata"]["name"] for i in range(40)]
    leases.write_bytes(b"".join(orjson.dumps({"type": "ADDED", "object": raw_lease(n, T0)}) + b"\n" for n in names))
    figures = decode_build.run(str(nodes), str(leases), repeat=1)
    assert figures["nodes"] == 40 and figures["leases"] == 40
    assert {"decode_lines", "build", "decode_events (decode + build)", "pickle.dumps", "pickle.loads",
            "pickle.loads, collector on", "leases decode_events (decode + build)"} <= set(figures)


def test_without_files_it_makes_its_stream():
    figures = decode_build.run(repeat=1, count=30)
    assert figures["nodes"] == 30 and figures["leases"] == 30


def test_steady_ingest_runs_on_a_small_fleet():
    """bench/steady_ingest.py: the fleet listed, one second of traffic applied, both figures out
    (timings, not checked); every node still in the view."""
    from bench import steady_ingest

    figures = steady_ingest.run(nodes=300, seconds=2)
    assert len(figures) == 2 and "300 nodes in the view" in figures[0].note
