"""The flight recorder's write cost where a hub pays it: in a live source at 65,000 nodes, timed inside
the recorder, beside the JSON Lines recorder in windows of the same run.

``python -m bench.recorder_live [--nodes 65000] [--seconds 20] [--rounds 2] [--alternate CHECKOUT]``.

Why beside ``bench.recorder``: that benchmark feeds the recorders from ``SimFleet`` at 5,000 nodes
and multiplies the CPU by 13. At 65,000 nodes a hub's recorder works on thirteen times the objects
(its Lease dictionary, each Node's last version), which no longer stay in the processor's caches,
between the reflector's decoding and the state's applying of the same events, and with the
stand-in server on the other core. Here the recorder runs as the hub runs it: a ``LiveSource``
against ``bench.live_path``'s stand-in (production-shaped 10 KB Nodes, each watch event in its own
HTTP chunk, the changes made every 2 ms: 6,500 Lease renewals and ~217 Node status updates a
second at 65,000 nodes), its reads of the Lease watch handed to ``write_lease_watch`` and every
other event to ``write``, as ``hub_runner`` wires it. The CPU is the thread time spent inside the
recorder's entry points during a steady window (the outermost call only), so the figure is the
recorder's alone, not the ingest's.

Each round runs one window with a columnar recorder and one with a JSON Lines recorder (the
reference: the hub's other format, the same events), each in a fresh child process synced with
the same server.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from typing import Any

from .harness import Figure, child_json

WARMUP = 12.0
"""Seconds after the lists are in before the window: the recorder's first renewal of each Lease
learns it (the general path): every kubelet renews within 10 s (and its 4 % jitter)."""


def _child(kubeconfig: str, seconds: float, record_format: str) -> dict:
    """A live source with a flight recorder of ``record_format``, synced, then ``seconds`` of steady
    traffic timed inside the recorder (in this process)."""
    from nodewatch.core.settings import Settings
    from nodewatch.hub.flight_recorder import SegmentedRecorder
    from nodewatch.sources.live import LiveSource

    depth = threading.local()
    cpu: defaultdict[str, float] = defaultdict(float)
    calls: Counter[str] = Counter()
    timing = [False]

    class TimedRecorder(SegmentedRecorder):
        """The recorder's entry points, timed in the calling thread (a nested call, the general
        path's ``write`` under ``write_lease_watch``, is counted in the outer one)."""

        def _timed(self, what: str, call: Any, *args: Any, **kw: Any) -> Any:
            if not timing[0] or getattr(depth, "n", False):
                return call(*args, **kw)
            depth.n = True
            began = time.thread_time()
            try:
                return call(*args, **kw)
            finally:
                cpu[what] += time.thread_time() - began
                calls[what] += 1
                depth.n = False

        def write_lease_watch(self, *args: Any, **kw: Any) -> None:
            self._timed("leases (watch reads)", super().write_lease_watch, *args, **kw)

        def write(self, resource: str, *args: Any, **kw: Any) -> None:
            self._timed(resource, super().write, resource, *args, **kw)

        def write_health(self, *args: Any, **kw: Any) -> None:
            self._timed("health", super().write_health, *args, **kw)

        def write_cert(self, *args: Any, **kw: Any) -> None:
            self._timed("certificates", super().write_cert, *args, **kw)

    src = LiveSource(Settings(), kubeconfig=kubeconfig)
    with tempfile.TemporaryDirectory(prefix="nodewatch-recorder-live-") as tmp:
        rec = TimedRecorder(tmp, {"name": "recorder_live"}, src.settings, records=src.state.node_records,
                            record_format=record_format, keep_seconds=None, keep_bytes=None)
        src.recorder = rec  # type: ignore[assignment]  # a SegmentedRecorder has a Recorder's methods
        src.start()
        try:
            if not src.wait_synced(900):
                raise RuntimeError("nodewatch did not sync with the stand-in server")
            time.sleep(WARMUP)
            state = src.state

            def renewals() -> int:
                with state.lock:
                    return sum(t.renewals for t in state.leases.values())

            n0, w0, p0, t0 = renewals(), time.perf_counter(), time.process_time(), time.time()
            timing[0] = True
            time.sleep(seconds)
            timing[0] = False
            n1, w1, p1, t1 = renewals(), time.perf_counter(), time.process_time(), time.time()
        finally:
            src.stop()
            rec.close()
            written = sum(f.stat().st_size for f in os.scandir(tmp) if f.is_file())
    return {"cpu": dict(cpu), "calls": dict(calls), "wall": w1 - w0, "process": p1 - p0, "renewals": n1 - n0,
            "window": (t0, t1), "fast": rec.fast_lines, "bytes": written}


def _run_child(kubeconfig: str, seconds: float, record_format: str, checkout: str | None = None) -> dict:
    """``checkout``: this benchmark's code with that checkout's nodewatch (``harness.child_json``)."""
    return child_json("bench.recorder_live", ["child", kubeconfig, str(seconds), record_format], checkout)


def _share(r: dict) -> float:
    return sum(r["cpu"].values()) / r["wall"]


def _median(values: list[float]) -> float:
    s = sorted(values)
    return s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2


def run(nodes: int = 65_000, seconds: float = 20.0, rounds: int = 2, alternate: str | None = None) -> list[Figure]:
    """``alternate``: another checkout of nodewatch, whose columnar recorder gets a third window each
    round (before and after a change, against the same server), said in the note."""
    from .live_path import ServerChild
    from .steady_live import SLICE_SPREAD

    os.environ["NW_SIM_EVENT_CHUNKS"] = "1"  # (the server child inherits it): each event its own chunk
    results: dict[str, list[dict]] = {"columnar": [], "jsonl": [], "alternate": []}
    windows: list[tuple[str, str, str | None]] = [("columnar", "columnar", None), ("jsonl", "jsonl", None)]
    if alternate:
        windows.append(("alternate", "columnar", alternate))
    print(f"  recorder_live: a stand-in server of {nodes:,} nodes", file=sys.stderr, flush=True)
    with ServerChild(nodes, realistic=True, history=max(200_000, nodes // 5)) as server:
        server.renew(0)
        server.fast_renewing(10.0, 300.0, SLICE_SPREAD)
        behind = 0.0
        for r in range(rounds):
            for label, fmt, checkout in windows:
                res = _run_child(server.kubeconfig, seconds, fmt, checkout)
                behind = max(behind, server.lag(*res["window"]))
                results[label].append(res)
                print(f"  recorder_live: round {r + 1}, {label}: {_share(res) * 100:.2f} % of a core "
                      f"({res['renewals'] / res['wall']:,.0f} renewals/s)", file=sys.stderr, flush=True)
        server.stop_renewing()
    col, ref = results["columnar"], results["jsonl"]
    share, ref_share = _median([_share(r) for r in col]), _median([_share(r) for r in ref])
    rate = sum(r["renewals"] for r in col) / sum(r["wall"] for r in col)

    def parts(rs: list[dict]) -> str:
        wall = sum(r["wall"] for r in rs)
        renewals = sum(r["renewals"] for r in rs)
        keys = sorted({k for r in rs for k in r["cpu"]}, key=lambda k: -sum(r["cpu"].get(k, 0.0) for r in rs))
        return ", ".join(f"{k} {sum(r['cpu'].get(k, 0.0) for r in rs) / wall * 100:.2f} % "
                         f"({sum(r['cpu'].get(k, 0.0) for r in rs) / max(renewals, 1) * 1e6:.1f} us a renewal, "
                         f"{sum(r['calls'].get(k, 0) for r in rs):,} calls)" for k in keys)

    judged = behind <= 5.0
    load = "load %.1f %.1f %.1f" % os.getloadavg()
    alt = results["alternate"]
    if alt:
        load += (f"; the columnar recorder of {alternate}, a third window each round: "
                 + ", ".join(f"{_share(r) * 100:.2f}" for r in alt) + f" % (median {_median([_share(r) for r in alt]) * 100:.1f} %: "
                 + parts(alt) + ")")
    return [
        Figure(f"recorder_live: flight recorder write CPU in a live source at {nodes:,} nodes (columnar)",
               f"{share * 100:.1f} % of a core", "<= 5 %", f"JSON Lines recorder {ref_share * 100:.1f} %",
               judged and share <= 0.05,
               f"median of {rounds} windows of {seconds:g} s (each: " + ", ".join(f"{_share(r) * 100:.2f}" for r in col)
               + " %; JSON Lines " + ", ".join(f"{_share(r) * 100:.2f}" for r in ref) + " %); "
               f"{rate:,.0f} renewals/s; thread CPU inside the recorder's entry points: {parts(col)}; "
               f"the process (ingest and recording) {_median([r['process'] / r['wall'] for r in col]) * 100:.1f} % "
               f"(JSON Lines {_median([r['process'] / r['wall'] for r in ref]) * 100:.1f} %); the server at most "
               f"{behind:.1f} s behind its schedule{'' if judged else ' (more than 5 s: not judged)'}; {load}"),
    ]


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        print(json.dumps(_child(sys.argv[2], float(sys.argv[3]), sys.argv[4])))
        raise SystemExit(0)
    from .harness import print_table

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nodes", type=int, default=65_000)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--alternate", metavar="CHECKOUT", help="another checkout's columnar recorder in a third window")
    a = p.parse_args()
    print_table(run(a.nodes, a.seconds, a.rounds, a.alternate))
