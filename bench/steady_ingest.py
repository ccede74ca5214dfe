"""Steady state at 130,000 nodes: one second of watch traffic decoded and applied, as the reflector
hands it over: the live path's own ``Reflector.take_block`` over blocks of whole lines (the Lease
watch's typed structs applied in one call, ``FleetState.apply_lease_watch``; the Nodes decoded into
a batch of records for its sink, ``FleetState.apply`` under one lock), and the lease stream's
frontier moved by the newest write applied.

The traffic is what the issue gives for GKE's 130k-node cluster: 13,000 Lease renewals and 430 Node
status updates a second, shaped as the API server sends them (``bench/foreign_recording.py``'s
objects: full managedFields, Node images), not as nodewatch writes them. The fleet is listed and
evaluated first (every node has its view, as after the first frame); every renewal is on time.
Then one renewal interval of traffic (10 s: every Lease renewed once) is applied untimed, with a
tick each second: the steady state is a fleet whose every node renewed before, not the seconds
after the list (the first renewal of each node costs more: ``warm_up``).

Reference in the same run, on the same bytes: a bare ``orjson.loads`` of every line, and
``msgspec.json.decode`` of every line (untyped). Targets (issue 29): ingest <= 15 % of a core
(CPU of the decode + apply for one second of traffic), and >= 1.0x the bare ``orjson.loads``
(reference time / ingest time). Not included: TLS, and the tick (evaluate + publish), which is timed
beside it (one a second, as the dashboard's): work moved from the ingest into the tick shows
there. The collector is frozen after the lists, as the live source freezes it
(``reflector.resume_gc``).
"""

from __future__ import annotations

import gc
import json
import os
import time

import msgspec
import orjson

from nodewatch.core.fleet import FleetState
from nodewatch.core.wire import DECODERS
from nodewatch.sources.reflector import LEASES, NODES, Reflector

from . import foreign_recording
from .harness import Figure

BLOCK = 64 * 1024
RENEWALS, NODE_UPDATES = 13_000, 430


def _blocks(lines: list[bytes]) -> list[bytes]:
    """Whole lines in blocks of about ``BLOCK`` bytes, as a read of the stream gives them."""
    out, cur, size = [], [], 0
    for line in lines:
        cur.append(line)
        size += len(line)
        if size >= BLOCK:
            out.append(b"".join(cur))
            cur, size = [], 0
    if cur:
        out.append(b"".join(cur))
    return out


def _line(etype: str, obj: dict) -> bytes:
    return json.dumps({"type": etype, "object": obj}, separators=(",", ":")).encode() + b"\n"


def _reflectors(state: FleetState, received: float, lane: bool = True) -> dict[str, Reflector]:
    """The live path's own readers of the two streams (``sources/reflector.Reflector``, no connection:
    only their block handling is used), each handing its batches to a sink that applies them as the
    live source's does (``LiveSource._sink`` without a recorder), the lease stream's with its frontier
    and, as ``LiveSource`` gives it, its lane (``FleetState.apply_lease_watch``; ``lane=False``: every
    renewal through the sink as a record, the way before the lane, for the note)."""
    def sink(batch) -> None:
        with state.batch():
            for resource, etype, obj, t, listing in batch:
                state.apply(resource, etype, obj, t, listing)

    def none(*_a, **_k) -> None:
        return None

    out = {}
    for spec in (NODES, LEASES):
        r = Reflector(None, spec, sink, none, none, wall=lambda: received,  # type: ignore[arg-type]
                      frontier=state.track_lease_stream() if spec is LEASES else None,
                      lane=(lambda events, t, _block: state.apply_lease_watch(events, t)) if spec is LEASES and lane else None)
        out[spec.resource] = r
    return out


def _ingest(reflectors: dict[str, Reflector], streams) -> None:
    """What the reflector does with each block of whole lines it read (``Reflector.take_block``):
    decoded (typed) and applied, and the lease stream's frontier moved by the newest write applied."""
    for resource, _decoder, blocks in streams:
        r = reflectors[resource]
        for block in blocks:
            r.take_block(memoryview(block))


def _decode(streams) -> None:
    """The decode alone (``decode_events``), to say how the ingest's time divides."""
    for _resource, decoder, blocks in streams:
        for block in blocks:
            decoder.decode_events(memoryview(block))


def _renewal_lines(fleet, nodes: int, s: int, t: float) -> list[bytes]:
    """Second ``s``'s renewals (at ``t`` and through it): the fleet's Leases in turn."""
    return [_line("MODIFIED", fleet.lease((s * RENEWALS + k) % nodes, t + k / RENEWALS)) for k in range(RENEWALS)]


def warm_up(state: FleetState, fleet, nodes: int, t0: float) -> int:
    """One renewal interval of renewals applied (through the lane) with a tick each second, untimed:
    every node renewed once. Returns the seconds applied (the timed ones follow). Why: the first
    renewal of a node after a rebuild of the order finds its view by a search of the order, the
    next ones by where it was last (``evaluation._swap``'s hint): the seconds just after the list are
    not the steady state."""
    leases = DECODERS["leases"]
    n = -(-nodes // RENEWALS)
    for s in range(n):
        t = t0 + 1 + s
        for b in _blocks(_renewal_lines(fleet, nodes, s, t)):
            state.apply_lease_watch(leases.decode_watch(b), t + 0.5)
        state.evaluate(t + 1)
    return n


def _listed(fleet, nodes: int, t0: float) -> FleetState:
    """The fleet listed and evaluated, as after the first frame."""
    state = FleetState()
    with state.batch():
        for resource, make, at in (("nodes", fleet.node, t0 - 60), ("leases", fleet.lease, t0 - 5)):
            for block in _blocks([_line("ADDED", make(i, at)) for i in range(nodes)]):
                for etype, rec, _rv in DECODERS[resource].decode_events(block):
                    state.apply(resource, etype, rec, t0, True)
    state.apply("nodes", "SYNCED", None, t0)
    state.apply("leases", "SYNCED", None, t0)
    state.evaluate(t0)
    return state


def _bare(loads, lines: list[bytes]) -> None:
    for line in lines:
        loads(line)


def _cpu(fn, *args) -> float:
    gc.collect()
    t = time.process_time()
    fn(*args)
    return time.process_time() - t


def _general(cpu: float) -> str:
    return f"{cpu * 100:.1f} %" if cpu < float("inf") else "not run (one second only)"


def run(nodes: int = 130_000, seconds: int = 4) -> list[Figure]:
    """``seconds``: of traffic, the lane's and the general way's in turn (best of each)."""
    fleet = foreign_recording._Fleet(nodes, 29)
    t0 = foreign_recording.START
    state = _listed(fleet, nodes, t0)
    leases, nodes_dec = DECODERS["leases"], DECODERS["nodes"]
    gc.freeze()  # as the live source does once its lists are in (``reflector.resume_gc``)
    warm = warm_up(state, fleet, nodes, t0)
    best = {"ingest": float("inf"), "orjson": float("inf"), "msgspec": float("inf"), "decode": float("inf"),
            "general": float("inf"), "tick": float("inf")}
    nbytes = 0
    for s in range(warm, warm + seconds):
        t = t0 + 1 + s
        lease_lines = _renewal_lines(fleet, nodes, s, t)
        node_lines = [_line("MODIFIED", fleet.node((s * NODE_UPDATES + k) % nodes, t)) for k in range(NODE_UPDATES)]
        lease_blocks, node_blocks = _blocks(lease_lines), _blocks(node_lines)
        nbytes = sum(map(len, lease_lines)) + sum(map(len, node_lines))

        streams = (("leases", leases, lease_blocks), ("nodes", nodes_dec, node_blocks))
        every = lease_lines + node_lines
        best["orjson"] = min(best["orjson"], _cpu(_bare, orjson.loads, every))
        best["msgspec"] = min(best["msgspec"], _cpu(_bare, msgspec.json.decode, every))
        best["decode"] = min(best["decode"], _cpu(_decode, streams))
        way = "general" if s % 2 else "ingest"  # each second's renewals are applied once: the ways take turns
        best[way] = min(best[way], _cpu(_ingest, _reflectors(state, t + 0.5, lane=way == "ingest"), streams))
        best["tick"] = min(best["tick"], _cpu(state.evaluate, t + 1))
    view = state.evaluate(t0 + warm + seconds + 1)
    load = "load %.1f %.1f %.1f" % os.getloadavg()
    ingest_cpu, ref = best["ingest"], best["orjson"]
    return [
        Figure(f"steady ingest at {nodes:,} nodes (CPU of one second of traffic)", f"{ingest_cpu * 100:.1f} % of a core",
               "<= 15 %", f"bare orjson.loads {ref * 100:.1f} %, msgspec {best['msgspec'] * 100:.1f} %",
               ingest_cpu <= 0.15,
               f"{RENEWALS:,} renewals + {NODE_UPDATES} Node updates, {nbytes / 1e6:.1f} MB a second; best of "
               f"{seconds}; {ingest_cpu / (RENEWALS + NODE_UPDATES) * 1e6:.2f} us an event, of it the decode "
               f"(decode_events alone) {best['decode'] * 1e3:.0f} ms; every renewal a record through the sink "
               f"instead of the lane: {_general(best['general'])}; the tick (evaluate, one a second) "
               f"{best['tick'] * 1e3:.1f} ms; after {warm} s of renewals untimed (every node renewed once); "
               f"{len(view.nodes):,} nodes in the view; {load}"),
        Figure(f"steady ingest at {nodes:,} nodes against a bare decode", f"{ref / ingest_cpu:.2f}x",
               ">= 1.0x", f"bare orjson.loads {ref * 1e3:.0f} ms", ref / ingest_cpu >= 1.0,
               f"ingest {ingest_cpu * 1e3:.0f} ms CPU; reference / ingest, the same bytes in the same run"),
    ]


def stages(nodes: int = 13_000, seconds: int = 9) -> None:
    """Where a renewal's time goes: each stage of the ingest of one second of renewals timed on its
    own (best of ``seconds``), beside the bare decode of the same lines. For finding the next cut,
    not a target."""
    from nodewatch.core import wire

    fleet = foreign_recording._Fleet(nodes, 29)
    t0 = foreign_recording.START
    state = _listed(fleet, nodes, t0)
    leases = DECODERS["leases"]
    gc.freeze()
    raw = msgspec.json.Decoder(wire._WatchedLeaseEvent)
    evaluator = state.evaluator
    renewed = evaluator.renewed
    best: dict[str, float] = {}
    warm = warm_up(state, fleet, nodes, t0)
    for s in range(warm, warm + seconds):
        t = t0 + 1 + s
        lines = _renewal_lines(fleet, nodes, s, t)
        blocks = _blocks(lines)
        events: list = []

        def apply(events: list = events, at: float = t + 0.5) -> None:
            with state.batch():
                for etype, rec, _rv in events:
                    state.apply("leases", etype, rec, at)

        got = {"orjson.loads of every line (reference)": _cpu(_bare, orjson.loads, lines),
               "msgspec typed decode_lines": _cpu(lambda bs=blocks: [raw.decode_lines(b) for b in bs]),
               "decode_events (decode + records)": _cpu(
                   lambda bs=blocks, out=events: out.extend(e for b in bs for e in leases.decode_events(b)))}
        if s % 3 == 2:
            got["the lane: decode_watch + apply_lease_watch"] = _cpu(
                lambda bs=blocks, at=t + 0.5: [state.apply_lease_watch(leases.decode_watch(b), at) for b in bs])
        elif s % 3:
            evaluator.renewed = lambda name, track: True  # type: ignore[method-assign]
            got["apply, Evaluator.renewed left out"] = _cpu(apply)
            evaluator.renewed = renewed  # type: ignore[method-assign]
            tracks = [(rec.name, state.leases[rec.name]) for _e, rec, _rv in events]
            got["Evaluator.renewed alone"] = _cpu(lambda ts=tracks: [renewed(n, tr) for n, tr in ts])
        else:
            got["FleetState.apply of the records"] = _cpu(apply)
        got["the tick (evaluate)"] = _cpu(state.evaluate, t + 1)
        for k, v in got.items():
            best[k] = min(best.get(k, float("inf")), v)
    for k, v in best.items():
        print(f"{k:42s} {v * 1e3:6.1f} ms  {v / RENEWALS * 1e6:5.2f} us a renewal")
    print("%d renewals at %d nodes, best of %d; load %.1f %.1f %.1f" % ((RENEWALS, nodes, seconds) + os.getloadavg()))


if __name__ == "__main__":
    import argparse

    from .harness import print_table

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nodes", type=int, default=130_000)
    p.add_argument("--seconds", type=int, default=4)
    p.add_argument("--stages", action="store_true", help="time each stage of a renewal's ingest instead")
    a = p.parse_args()
    if a.stages:
        stages(a.nodes, a.seconds)
    else:
        print_table(run(a.nodes, a.seconds))
