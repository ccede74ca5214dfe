"""CPU cost of the Node list worker's steps, one core: ``python -m bench.decode_build``.

Why: at 65,000 production Nodes the complete frame waits for a worker process that reads the
streaming list, decodes it (``wire.TypedDecoder``), builds the records and pickles them in batches
to the dashboard, which unpickles them. This measures each step alone, as CPU seconds
(``time.process_time``, the least of ``--repeat`` runs), on a stream of watch events, one a line,
cut into blocks of whole lines of about 256 KB (what one read of the stream gives): the
production-shaped objects ``bench.start``'s server serves (``bench.objects``), or a recorded
stream (``--nodes FILE --leases FILE``).

- decode_lines: msgspec alone, the Structs of ``wire`` (what the C decoder costs);
- build: ``_node_record`` over those Structs (the Python part);
- decode_events: both, as the worker calls them;
- pickle.dumps / pickle.loads: lists of 1,000 ``(etype, record, resourceVersion)``, protocol 5;
- leases: ``decode_events`` of the Lease stream.

The module's memos (times, condition shapes, profiles, shared maps) are emptied before each run, as
in a fresh worker. The collector is off, as the reflector has it for a list; one more figure shows
pickle.loads with it on (the dashboard's side, which is not the reflector's).
No figure here is a test: the machine is shared, read them as the least disturbed of a few runs.
"""

from __future__ import annotations

import argparse
import gc
import pickle
import time
from typing import Callable

import msgspec

from nodewatch.core import objects, wire

BLOCK = 256 * 1024
BATCH = 1000


def blocks(data: bytes, size: int = BLOCK) -> list[memoryview]:
    """``data`` cut into blocks of whole lines of about ``size`` bytes (one longer line is one block)."""
    view = memoryview(data)
    out = []
    i = 0
    while i < len(data):
        j = data.rfind(b"\n", i, i + size) + 1
        if j <= i:
            j = data.find(b"\n", i) + 1 or len(data)
        out.append(view[i:j])
        i = j
    return out


def forget() -> None:
    """Empty the decoders' memos, as a fresh worker process starts."""
    for memo in (wire._time_cache, wire._durations, wire._address_types, wire._condition_shapes, wire._maps_by_text,
                 wire._common_labels_by_text, objects._shapes, objects._profiles, objects._pool_profiles,
                 objects._shared_maps, objects._label_sets):
        memo.clear()


def cpu(fn: Callable[[], object], repeat: int, collector: bool = False) -> tuple[float, object]:
    """(least CPU seconds of ``repeat`` runs, the last result); the collector off unless asked."""
    best = float("inf")
    result = None
    for _ in range(repeat):
        result = None
        forget()
        gc.collect()
        if not collector:
            gc.disable()
        try:
            t = time.process_time()
            result = fn()
            best = min(best, time.process_time() - t)
        finally:
            gc.enable()
    return best, result


def make_streams(count: int) -> tuple[bytes, bytes]:
    """(Node events, Lease events) of ``count`` production-shaped nodes, one JSON line each."""
    import orjson

    from .objects import T0, raw_lease, raw_node

    nodes, leases = [], []
    for i in range(count):
        node = raw_node(i)
        nodes.append(orjson.dumps({"type": "ADDED", "object": node}))
        leases.append(orjson.dumps({"type": "ADDED", "object": raw_lease(node["metadata"]["name"], T0 - i % 10)}))
    return b"\n".join(nodes) + b"\n", b"\n".join(leases) + b"\n"


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def run(nodes: str | None = None, leases: str | None = None, repeat: int = 5, count: int = 65_000) -> dict[str, float]:
    """The figures, in CPU seconds, by name: on the recorded streams given, else on ``count``
    production-shaped nodes."""
    figures: dict[str, float] = {}
    if nodes and leases:
        data, ldata = _read(nodes), _read(leases)
    else:
        data, ldata = make_streams(count)
    parts = blocks(data)
    typed = wire.DECODERS["nodes"]
    raw = msgspec.json.Decoder(wire._NodeEvent)
    build = wire._node_record

    figures["decode_lines"], events = cpu(lambda: [e for b in parts for e in raw.decode_lines(b)], repeat)
    figures["build"], _ = cpu(lambda: [build(e.object) for e in events], repeat)
    del events
    figures["decode_events (decode + build)"], decoded = cpu(
        lambda: [e for b in parts for e in typed.decode_events(b)], repeat)
    del parts, data
    batches = [decoded[i:i + BATCH] for i in range(0, len(decoded), BATCH)]  # type: ignore[index]
    figures["pickle.dumps"], blobs = cpu(lambda: [pickle.dumps(b, 5) for b in batches], repeat)
    figures["pickle.loads"], back = cpu(lambda: [pickle.loads(b) for b in blobs], repeat)
    # the dashboard may unpickle with its collector on, 65,000 records already held (as here)
    figures["pickle.loads, collector on"], _ = cpu(lambda: [pickle.loads(b) for b in blobs],
                                                    repeat, collector=True)
    assert [x for b in back for x in b] == decoded
    figures["pickled MB"] = sum(map(len, blobs)) / 1e6
    figures["nodes"] = len(decoded)
    del batches, blobs, back, decoded

    lparts = blocks(ldata)
    ltyped = wire.DECODERS["leases"]
    lraw = msgspec.json.Decoder(wire._LeaseEvent)
    figures["leases decode_lines"], _ = cpu(lambda: [e for b in lparts for e in lraw.decode_lines(b)], repeat)
    figures["leases decode_events (decode + build)"], ldecoded = cpu(
        lambda: [e for b in lparts for e in ltyped.decode_events(b)], repeat)
    figures["leases"] = len(ldecoded)  # type: ignore[arg-type]
    return figures


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.decode_build", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", help="a file of Node watch events, one a line (default: made, see --count)")
    p.add_argument("--leases", help="a file of Lease watch events, one a line")
    p.add_argument("--count", type=int, default=65_000, help="nodes made when no files are given")
    p.add_argument("--repeat", type=int, default=5, help="runs of each step; the least is shown")
    args = p.parse_args(argv)
    figures = run(args.nodes, args.leases, args.repeat, args.count)
    print(f"{figures.pop('nodes'):,.0f} nodes, {figures.pop('leases'):,.0f} leases; "
          f"CPU seconds, least of {args.repeat}; pickled {figures.pop('pickled MB'):.1f} MB")
    for name, seconds in figures.items():
        print(f"  {name:<40} {seconds:7.3f} s")


if __name__ == "__main__":
    main()
