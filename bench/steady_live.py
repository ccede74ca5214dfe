"""Steady state over HTTPS: a live fleet's watch traffic from a server that keeps up, into
nodewatch's live source, beside a raw reader of the same streams.

``python -m bench.steady_live [--nodes 130000] [--seconds 20]``. The server is the stand-in of
``bench/live_path.py`` in its own process (a store-only ``SimServer``, production-shaped Nodes and
Leases, TLS, a bearer token): its ``FastRenewer`` renews every Lease every 10 s and reports every
Node's status every 300 s (13,000 renewals and ~430 Node updates a second at 130,000 nodes, the
issue's GKE figure), each change's JSON built from a template, so the server keeps that rate on
two cores; it says how far behind its schedule it fell (the figures are not judged past 5 s).

Measured, each in its own process, one after the other against the same running server:

- **nodewatch**: ``LiveSource`` (its reflectors over HTTPS, the typed decode, the state's apply),
  listed, synced and evaluated (every node has its view, as after the first frame: a renewal then
  replaces its node's view, which it does not before one), then ``seconds`` of the steady stream
  with an evaluation a second, as the dashboard's tick: the process's CPU over the window (user +
  system, all threads) less the evaluations' own (the main thread's CPU while it evaluates, said in
  the note; ``bench/frame.py`` times the tick), the renewals it applied, and at the end of the
  window the nodes not Ready in its evaluation ("behind": a client or server that falls behind
  shows up as Late nodes; the fleet has no stopped kubelet). Until session 40 nothing was
  evaluated, so every renewal only marked its node for the next evaluation (cheaper than the
  view swap it costs in a dashboard);
- **references**: a raw reader of the same two watch streams (from the current resourceVersion)
  that ``orjson.loads`` every line, over the same length of window: through ``urllib3`` with the
  same CA and token (a TLS record a read, as the official client reads), and through nodewatch's
  own reader (``sources/tls_stream.py``: reads that gather what has arrived), so that the second
  ratio is nodewatch's cost beyond the bare decode of the same bytes read the same way.

How the stand-in delivers (``--event-chunks``, ``--slice``): by default it makes the changes due
every 100 ms and sends what it has in one chunk, bursts of ~1,300 renewals no API server sends.
The API server flushes a busy watch event by event as the kubelets' renewals come, spread over the
second; ``--event-chunks`` sends each event in its own chunk and makes the changes every 2 ms (the
most the stand-in keeps up with on two cores), which is nearer. A reader's cost depends on it: one
that reads a record at a time wakes once an event when they come spread.

Targets (issue 29): ingest <= 15 % of a core; >= 1.0x the reference (its CPU / nodewatch's); 0
nodes behind.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from typing import Any

from .harness import Figure, child_json

WARMUP = 5.0
"""Seconds of the steady stream before a window starts (the list's garbage, the first renewals)."""


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _client(kubeconfig: str, seconds: float, record: str = "") -> dict:
    """nodewatch's live source, synced, over ``seconds`` of steady traffic (in this process).
    ``record``: a format (``columnar``, ``jsonl``): a flight recorder writes everything the source
    receives into segments of that format, as the hub's does (``hub_runner``)."""
    from nodewatch.core.rules import NodeState
    from nodewatch.core.settings import Settings
    from nodewatch.sources.live import LiveSource

    src = LiveSource(Settings(), kubeconfig=kubeconfig)
    rec = None
    tmp = tempfile.TemporaryDirectory(prefix="nodewatch-steady-rec-")
    if record:
        from nodewatch.hub.flight_recorder import SegmentedRecorder

        rec = SegmentedRecorder(tmp.name, {"name": "steady"}, src.settings, records=src.state.node_records,
                                record_format=record, keep_seconds=None, keep_bytes=None)
        src.recorder = rec
    started = time.perf_counter()
    src.start()
    try:
        if not src.wait_synced(900):
            raise RuntimeError("nodewatch did not sync with the stand-in server")
        synced = time.perf_counter() - started
        state = src.state
        ticks = [0.0]

        def tick() -> Any:
            m = time.thread_time()
            view = state.evaluate(time.time())
            ticks[0] += time.thread_time() - m
            return view

        end = time.perf_counter() + WARMUP
        while time.perf_counter() < end:
            tick()
            time.sleep(1.0)

        def renewals() -> int:
            with state.lock:
                return sum(t.renewals for t in state.leases.values())

        n0, c0, w0, t0 = renewals(), _cpu(), time.perf_counter(), time.time()
        ticks[0] = 0.0
        end = w0 + seconds
        while time.perf_counter() < end:
            time.sleep(max(0.0, min(1.0, end - time.perf_counter())))
            tick()
        c1, w1, n1, t1 = _cpu(), time.perf_counter(), renewals(), time.time()
        view = state.evaluate(time.time())
        not_ready = sum(1 for v in view.nodes if v.state is not NodeState.READY)
        import nodewatch

        return {"code": os.path.dirname(os.path.dirname(nodewatch.__file__)),
                "cpu": c1 - c0 - ticks[0], "ticks": ticks[0], "wall": w1 - w0, "renewals": n1 - n0,
                "nodes": len(view.nodes), "window": (t0, t1),
                "not_ready": not_ready, "synced": synced, "counts": {k.word: c for k, c in view.counts.items() if c}}
    finally:
        src.stop()
        if rec is not None:
            rec.close()
        tmp.cleanup()


def _raw(kubeconfig: str, seconds: float, gathered: bool = False) -> dict:
    """The reference: both watch streams read over the same HTTPS and every line ``orjson.loads``-ed;
    through urllib3 (a record a read, as the official client reads), or ``gathered`` by nodewatch's
    own TLS reader (``sources/tls_stream.py``: what is left is the decode)."""
    import base64
    import ssl
    import tempfile
    import threading
    from urllib.parse import urlencode

    import orjson
    import urllib3
    import yaml

    with open(kubeconfig) as f:
        kc = yaml.safe_load(f)
    cluster = kc["clusters"][0]["cluster"]
    token = kc["users"][0]["user"]["token"]
    ca = tempfile.NamedTemporaryFile("wb", suffix=".crt", delete=False)  # noqa: SIM115
    ca.write(base64.b64decode(cluster["certificate-authority-data"]))
    ca.close()
    ctx = ssl.create_default_context(cafile=ca.name)
    pool = urllib3.PoolManager(ssl_context=ctx, headers={"Authorization": f"Bearer {token}"})
    server = cluster["server"]
    counts = {"lines": 0, "bytes": 0}
    stop = threading.Event()
    paths = ("/api/v1/nodes", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases")
    versions = [orjson.loads(pool.request("GET", f"{server}{p}?limit=1").data)["metadata"]["resourceVersion"]
                for p in paths]

    def read(path: str, rv: str) -> None:
        query = {"watch": "1", "resourceVersion": rv, "allowWatchBookmarks": "true"}
        if gathered:  # nodewatch's own TLS reader: the same reads, no decode, no state
            from nodewatch.sources.chunked import BodyReader
            from nodewatch.sources.kubeconfig import Connection

            resp = Connection(kubeconfig).get(path, query, timeout=(10.0, 3600.0), stream=True)
            body = BodyReader(resp, 256 * 1024)
            chunks = iter(body.read, b"")
        else:
            resp = pool.request("GET", f"{server}{path}?{urlencode(query)}",
                                preload_content=False, timeout=urllib3.Timeout(connect=10, read=None))
            chunks = resp.stream(256 * 1024)
        buf = b""
        for chunk in chunks:
            buf += chunk
            lines = buf.split(b"\n")
            buf = lines.pop()
            for line in lines:
                if line:
                    orjson.loads(line)
            counts["lines"] += len(lines)
            counts["bytes"] += len(chunk)
            if stop.is_set():
                break
        resp.release_conn()

    threads = [threading.Thread(target=read, args=(p, rv), daemon=True) for p, rv in zip(paths, versions)]
    for t in threads:
        t.start()
    time.sleep(WARMUP)
    n0, b0, c0, w0, t0 = counts["lines"], counts["bytes"], _cpu(), time.perf_counter(), time.time()
    time.sleep(seconds)
    c1, w1, n1, b1, t1 = _cpu(), time.perf_counter(), counts["lines"], counts["bytes"], time.time()
    stop.set()
    os.unlink(ca.name)
    return {"cpu": c1 - c0, "wall": w1 - w0, "lines": n1 - n0, "bytes": b1 - b0, "window": (t0, t1)}


ALTERNATE = os.environ.get("NW_STEADY_ALTERNATE")
"""A second checkout of nodewatch (a path): its live source is measured too, in a third window
against the same server (before and after a change, in one run), and said in the note."""


def _child(kind: str, kubeconfig: str, seconds: float, checkout: str | None = None, record: str = "") -> dict:
    """``checkout``: this benchmark's code with that checkout's nodewatch (``harness.child_json``)."""
    return child_json("bench.steady_live", [kind, kubeconfig, str(seconds), record], checkout)


SLICE_BURSTS = 0.1
"""Seconds between the stand-in's batches of changes by default: 1,300 renewals at once every
100 ms at 130,000 nodes, bursts no API server sends."""
SLICE_SPREAD = 0.002
"""With ``--event-chunks``: a batch every 2 ms (26 renewals), nearer an API server's delivery (each
event flushed as the kubelets' renewals come, spread over the second); the most the stand-in keeps
up with on two cores."""


def run(nodes: int = 130_000, seconds: float = 20.0, record: str = "", slice_seconds: float = SLICE_BURSTS
        ) -> list[Figure]:
    """``record``: nodewatch's source records what it receives (a hub's flight recorder, that
    format), so its CPU is a hub's: ingest and recording. ``slice_seconds``: how often the stand-in
    makes the changes due (``SLICE_BURSTS``, ``SLICE_SPREAD``)."""
    from .live_path import ServerChild

    print(f"  steady_live: a stand-in server of {nodes:,} nodes", file=sys.stderr, flush=True)
    with ServerChild(nodes, realistic=True, history=max(200_000, nodes // 5)) as server:
        server.renew(0)
        server.fast_renewing(10.0, 300.0, slice_seconds)
        print("  steady_live: nodewatch", file=sys.stderr, flush=True)
        nw = _child("client", server.kubeconfig, seconds, record=record)
        print("  steady_live: the raw reader", file=sys.stderr, flush=True)
        ref = _child("raw", server.kubeconfig, seconds)
        print("  steady_live: the raw reader, gathered as nodewatch reads", file=sys.stderr, flush=True)
        ref2 = _child("raw-gathered", server.kubeconfig, seconds)
        alt = None
        if ALTERNATE:
            print(f"  steady_live: nodewatch of {ALTERNATE}", file=sys.stderr, flush=True)
            alt = _child("client", server.kubeconfig, seconds, ALTERNATE, record=record)
        behind = max(server.lag(*nw["window"]), server.lag(*ref["window"]), server.lag(*ref2["window"]),
                     server.lag(*alt["window"]) if alt else 0.0)
        changes, *_ = server.stop_renewing()
    load = "load %.1f %.1f %.1f" % os.getloadavg()
    share, ref_share, ref2_share = nw["cpu"] / nw["wall"], ref["cpu"] / ref["wall"], ref2["cpu"] / ref2["wall"]
    rate = nw["renewals"] / nw["wall"]
    judged = behind <= 5.0
    note = (("each watch event in its own HTTP chunk (as the API server flushes them); " if os.environ.get(
             "NW_SIM_EVENT_CHUNKS") == "1" else "the server's watch chunks hold what it had to send; ")
            + f"changes made every {slice_seconds * 1000:g} ms; "
            + f"the server stored {changes:,} changes, at most {behind:.1f} s behind its schedule in the windows"
            f"{'' if judged else ' (more than 5 s: not judged)'}; {load}")
    if alt:
        note += (f"; the live source of {alt['code']}, a third window: {alt['cpu'] / alt['wall'] * 100:.1f} % of a "
                 f"core ({ref_share / (alt['cpu'] / alt['wall']):.2f}x), {alt['renewals'] / alt['wall']:,.0f} renewals/s, "
                 f"{alt['not_ready']:,} not Ready")
    return [
        Figure(f"steady ingest over HTTPS at {nodes:,} nodes (nodewatch's CPU{', recording ' + record if record else ''})",
               f"{share * 100:.1f} % of a core",
               "<= 15 %", f"raw reader + orjson.loads {ref_share * 100:.1f} % (urllib3), {ref2_share * 100:.1f} % "
               "(gathered)", judged and share <= 0.15,
               f"{rate:,.0f} renewals/s applied over {nw['wall']:.0f} s; reference {ref['lines'] / ref['wall']:,.0f} "
               f"lines/s, {ref['bytes'] / ref['wall'] / 1e6:.1f} MB/s; synced after {nw['synced']:.1f} s; an evaluation "
               f"a second beside it, {nw['ticks'] / nw['wall'] * 100:.1f} % of a core, not counted; {note}"),
        Figure(f"steady ingest over HTTPS at {nodes:,} nodes against a raw reader", f"{ref_share / share:.2f}x",
               ">= 1.0x", f"raw reader {ref['cpu']:.2f} s CPU in {ref['wall']:.0f} s", judged and ref_share >= share,
               f"nodewatch {nw['cpu']:.2f} s CPU in {nw['wall']:.0f} s; reference CPU share / nodewatch's"),
        Figure(f"steady ingest over HTTPS at {nodes:,} nodes against a raw reader gathered as nodewatch reads",
               f"{ref2_share / share:.2f}x", ">= 1.0x",
               f"raw reader (tls_stream) {ref2['cpu']:.2f} s CPU in {ref2['wall']:.0f} s", judged and ref2_share >= share,
               "the same reads of the socket as nodewatch's (sources/tls_stream.py), every line orjson.loads-ed: "
               "nodewatch's cost beyond the bare decode"),
        Figure(f"nodes behind in the steady state at {nodes:,} nodes", f"{nw['not_ready']:,}", "0",
               f"{nw['nodes']:,} nodes, none stopped", judged and nw["not_ready"] == 0,
               f"states at the window's end: {nw['counts']}"),
    ]


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("client", "raw", "raw-gathered"):
        if sys.argv[1] == "client":
            print(json.dumps(_client(sys.argv[2], float(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else "")))
        elif sys.argv[1] == "raw-gathered":
            print(json.dumps(_raw(sys.argv[2], float(sys.argv[3]), gathered=True)))
        else:
            print(json.dumps(_raw(sys.argv[2], float(sys.argv[3]))))
        raise SystemExit(0)
    from .harness import print_table

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nodes", type=int, default=130_000)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--event-chunks", action="store_true",
                   help="the server sends each watch event in its own HTTP chunk, as the API server does "
                        "under a steady stream (NW_SIM_EVENT_CHUNKS=1; default: what it has in one chunk)")
    p.add_argument("--record", choices=("columnar", "jsonl"), default="",
                   help="nodewatch's source records what it receives, as a hub's flight recorder does")
    p.add_argument("--slice", type=float, default=None, metavar="SECONDS",
                   help=f"the stand-in makes the changes due every SECONDS (default {SLICE_BURSTS:g}; "
                        f"with --event-chunks {SLICE_SPREAD:g})")
    a = p.parse_args()
    if a.event_chunks:
        os.environ["NW_SIM_EVENT_CHUNKS"] = "1"  # (the server child inherits it)
    spread = a.slice if a.slice is not None else SLICE_SPREAD if a.event_chunks else SLICE_BURSTS
    print_table(run(a.nodes, a.seconds, a.record, spread))
