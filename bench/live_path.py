"""Live path: Lease events per second from the simulated API server, over the real HTTPS watch
(``LiveSource`` and its reflectors, urllib3 + TLS), into the core.

The simulated API server runs in a child process (``python -m bench.live_path serve``) so that it
has its own core and its own GIL: what is measured is nodewatch's side. The child loads ``nodes``
Nodes and Leases into a store-only ``SimServer``; on ``emit E`` it stores ``E`` Lease renewals as
fast as it can (objects pre-built, so generation is not the bottleneck; it reports its own rate)
and every watcher receives them.

Reference in the same run: ``kubectl get leases -A -w -o json`` (the real kubectl from the venv)
on the same server and the same kind of stream, counting the events it prints per second.

The child is shared with ``bench.start`` (``realistic=True``: 10 KB production-shaped Nodes).
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Callable, Iterator

from .harness import Figure

EMIT_BATCH = 5_000
STOPPED_AGE = 60.0
"""The realistic server's Leases start this much older than its setup: the ones ``renew`` skips
(stopped kubelets) are past the grace, whatever the setup took."""
TARGET = 20_000


# --- the server child ------------------------------------------------------------------------


def kubectl_path() -> Path:
    return Path(sys.executable).parent / "kubectl"


def _serve(argv: list[str]) -> int:
    from nodewatch.core.timeutil import format_time
    from nodewatch.sim.server import SimServer
    from nodewatch.sim.store import ObjectStore

    from .objects import raw_lease, raw_node

    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, required=True)
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--realistic", action="store_true", help="10 KB production-shaped Nodes")
    ap.add_argument("--history", type=int, default=1_000_000)
    args = ap.parse_args(argv)
    now = time.time()
    store = ObjectStore(history_limit=args.history)
    leases: list[dict] = []
    nodes_made: list[dict] = []
    for a in range(0, args.nodes, EMIT_BATCH):
        batch = []
        for i in range(a, min(args.nodes, a + EMIT_BATCH)):
            if args.realistic:
                node = raw_node(i)
            else:
                name = f"node-{i:05d}"
                node = {"kind": "Node", "apiVersion": "v1",
                        "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": f"zone-{i % 3}"}},
                        "status": {"conditions": [{"type": "Ready", "status": "True",
                                                   "lastTransitionTime": format_time(now - 3600)}]}}
            # realistic: as old as an incident's stopped kubelets until ``renew`` freshens the others
            lease = raw_lease(node["metadata"]["name"], now - (i % 10) - (STOPPED_AGE if args.realistic else 0))
            leases.append(lease)
            nodes_made.append(node)
            batch.append(("nodes", "ADDED", node, None))
            batch.append(("leases", "ADDED", lease, None))
        store.emit_many(batch)
    server = SimServer(None, run_fleet=False, store=store, kubeconfig_out=args.kubeconfig, bookmark_interval=5.0)
    server.start()
    print("ready", flush=True)
    renewer: Renewer | FastRenewer | None = None
    lease_templates: list | None = None
    renewed_at: list[float] = [math.nan] * len(leases)
    """Each Lease's last renewal on the server (``renew``, then the ``Renewer``; nan: as old as the setup)."""
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "emit":
            count = int(cmd[1])
            t = time.time()
            stamps = [format_time(t + k * 1e-5, micro=True) for k in range(count)]  # always advancing
            objs = []
            for k in range(count):  # pre-built: the store's own serialization is all that remains
                o = leases[k % len(leases)]
                objs.append({"kind": o["kind"], "apiVersion": o["apiVersion"], "metadata": o["metadata"],
                             "spec": {"holderIdentity": o["spec"]["holderIdentity"], "leaseDurationSeconds": 40,
                                      "renewTime": stamps[k]}})
            started = time.perf_counter()
            for a in range(0, count, EMIT_BATCH):
                store.emit_many(("leases", "MODIFIED", o, None) for o in objs[a:a + EMIT_BATCH])
            took = time.perf_counter() - started
            print(f"emitted {count} {took:.6f}", flush=True)
        elif cmd[0] == "renew":
            # The fleet as a live cluster has it: every kubelet renewed within the last 10 s, but
            # one node in ``skip`` stopped renewing (at setup: an incident's worth of Late/Overdue).
            # Built from templates (``_Template``, made once): through ``emit_many`` of dicts a
            # 130,000-node renew took ~30 s, so its first Leases were already Late on the server
            # when the start began. The times are taken when the batch is stored, not before.
            skip = int(cmd[1])
            period = float(cmd[2]) if len(cmd) > 2 else 10.0
            if lease_templates is None:
                lease_templates = [(("kube-node-lease", o["metadata"]["name"]), _Template(o, _lease_slots))
                                   for o in leases]
            # Lease i is stamped as renewed ``period`` x (1 - i/n) ago: the phase a renewer that starts
            # now at Lease 0 and renews one ``period``-th of them a slice (``Renewer``, ``FastRenewer``)
            # keeps, so no live Lease is ever older than ``period`` on the server. (Ages of 0-10 s in
            # index order, as before, left a fifth of them 20-25 s old by the first renewer cycle's end:
            # Late on the server itself at 130k, where a start outlasts it.)
            n = len(lease_templates)
            live = [(i, item) for i, item in enumerate(lease_templates) if not (skip and i % skip == 0)]
            for a in range(0, len(live), EMIT_BATCH):
                t = time.time()
                batch = []
                for i, (key, tpl) in live[a:a + EMIT_BATCH]:
                    when = t - period * (1 - i / n)
                    renewed_at[i] = when
                    stamp = (format_time(when, micro=True).encode(), format_time(when).encode())
                    batch.append((key, lambda rv, tpl=tpl, st=stamp: tpl.build((str(rv).encode(), st[0], st[1]))))
                store.emit_built("leases", batch)
            print(f"renewed {len(live)}", flush=True)
        elif cmd[0] == "renewing":
            if renewer is not None:
                print(renewer.stop(), flush=True)
                renewer = None
            else:
                renewer = Renewer(store, leases, int(cmd[1]), renewed_at)
                print("renewing", flush=True)
        elif cmd[0] == "fastrenewing":
            if renewer is not None:
                print(renewer.stop(), flush=True)
                renewer = None
            else:
                renewer = FastRenewer(store, leases, nodes_made, float(cmd[1]), float(cmd[2]),
                                      float(cmd[3]) if len(cmd) > 3 else FastRenewer.SLICE)
                nodes_made.clear()  # the templates hold them now (10 KB each: no second copy at 130k)
                print("renewing", flush=True)
        elif cmd[0] == "lag":
            print(f"lag {renewer.lag_between(float(cmd[1]), float(cmd[2])) if isinstance(renewer, FastRenewer) else -1:.3f}",
                  flush=True)
        elif cmd[0] == "quit":
            break
    if renewer is not None:
        renewer.stop()
    server.stop()
    return 0


class Renewer:
    """The kubelets of a live fleet, in the server child: every ``SLICE`` seconds the next slice of
    the Leases renewed now, each Lease every ``RENEW_EVERY`` seconds, except one in ``skip``
    (stopped). Says at its stop how far behind its schedule it fell.

    Every 15 s, not a kubelet's 10: at 65k on this loaded 2-core machine the child stored ~3,950
    renewals/s and fell 27-36 s behind a 10 s schedule (6,500/s), so live Leases really were older
    than two renew intervals on the server. 15 s keeps a renewed Lease short of Late (20 s) with a
    third less work; where it still falls more than 5 s behind, the bench says so.

    It also says how old a live Lease got on the server before it renewed it (from ``stamps``:
    ``renew``'s, then its own), in its first cycle (``first``) and after (``oldest``): the first
    cycle renews Leases that ``renew`` stamped in phase while it ran, so they reach 15 s plus
    ``renew``'s own time (~5 s at 130,000 nodes: 20-21 s, Late on the server itself; measured,
    59,966 of 105,717). A start that ``renew`` kept waiting begins after that cycle (``bench.start``)."""

    SLICE = 0.1
    RENEW_EVERY = 15.0

    def __init__(self, store, leases: list[dict], skip: int, stamps: list[float] | None = None) -> None:
        self.store, self.leases, self.skip = store, leases, skip
        self.stamps = stamps if stamps is not None else [math.nan] * len(leases)
        self.renewals = 0
        self.behind = 0.0
        self.first = 0.0
        self.oldest = 0.0
        """The oldest a live Lease was on the server when renewed: in the first cycle, and after it."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-renewer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from nodewatch.core.timeutil import format_time

        from .objects import lease_managed_fields

        n = len(self.leases)
        per_slice = max(1, int(n * self.SLICE / self.RENEW_EVERY))
        i, t0, k = 0, time.monotonic(), 0
        while not self._stop.is_set():
            due = t0 + k * self.SLICE
            self.behind = max(self.behind, time.monotonic() - due - self.SLICE)
            self._stop.wait(max(0.0, due - time.monotonic()))
            t = time.time()
            batch = []
            after = k * self.SLICE >= self.RENEW_EVERY
            stamps = self.stamps
            for _ in range(per_slice):
                o = self.leases[i]
                if not (self.skip and i % self.skip == 0):
                    age = t - stamps[i]  # (nan: never renewed: compares False)
                    if after and age > self.oldest:
                        self.oldest = age
                    elif not after and age > self.first:
                        self.first = age
                    stamps[i] = t
                    batch.append(("leases", "MODIFIED", {**o, "metadata": {**o["metadata"], "managedFields":
                                  lease_managed_fields(t)}, "spec": {**o["spec"], "renewTime": format_time(t, micro=True)}},
                                  None))
                i = (i + 1) % n
            self.store.emit_many(batch)
            self.renewals += len(batch)
            k += 1

    def stop(self) -> str:
        self._stop.set()
        self._thread.join()
        return f"renewed {self.renewals} behind {self.behind:.3f} oldest {self.oldest:.3f} first {self.first:.3f}"


class _Template:
    """An object's JSON with some string values left open (``SLOTS``), filled per change by joining
    bytes: the stand-in renewer's cost per renewal is a join, not a dict copy and a serialization."""

    SLOTS = ("\u2400RV\u2400", "\u2400NOW\u2400", "\u2400SEC\u2400")

    def __init__(self, obj: dict, where: Callable[[dict, tuple[str, str, str]], None]) -> None:
        import orjson

        probe = json_copy(obj)
        where(probe, self.SLOTS)
        data = orjson.dumps(probe)
        marks = [m.encode() for m in self.SLOTS]
        self.parts: list[bytes] = []
        self.order: list[int] = []
        rest = data
        while True:
            found = [(rest.find(m), k) for k, m in enumerate(marks) if rest.find(m) >= 0]
            if not found:
                break
            at, k = min(found)
            self.parts.append(rest[:at])
            self.order.append(k)
            rest = rest[at + len(marks[k]):]
        self.parts.append(rest)

    def build(self, values: tuple[bytes, bytes, bytes]) -> bytes:
        out = [self.parts[0]]
        for k, part in zip(self.order, self.parts[1:]):
            out.append(values[k])
            out.append(part)
        return b"".join(out)


def json_copy(obj: dict) -> dict:
    import orjson

    return orjson.loads(orjson.dumps(obj))


def _lease_slots(o: dict, slots: tuple[str, str, str]) -> None:
    o["metadata"]["resourceVersion"] = slots[0]
    o["spec"]["renewTime"] = slots[1]
    for m in o["metadata"].get("managedFields") or []:
        m["time"] = slots[2]


def _node_slots(o: dict, slots: tuple[str, str, str]) -> None:
    o["metadata"]["resourceVersion"] = slots[0]
    for c in o["status"].get("conditions") or []:
        c["lastHeartbeatTime"] = slots[2]


class FastRenewer:
    """The kubelets of a live fleet at full rate, in the server child: each Lease renewed every
    ``every`` seconds (10: a kubelet's), each Node's status reported every ``node_every`` seconds
    (the heartbeat times: 300 s, the kubelet's report without changes), in slices of ``SLICE``
    seconds. Each change is its object's JSON with the resourceVersion and times filled in
    (``_Template``) and stored by ``ObjectStore.emit_built``, so the child keeps 13,000 renewals a
    second of a 130,000-node fleet where ``Renewer`` (a dict and a serialization each) kept ~3,950.
    Says at its stop how far behind its schedule it fell."""

    SLICE = 0.1

    def __init__(self, store, leases: list[dict], nodes: list[dict], every: float, node_every: float,
                 slice_seconds: float = SLICE) -> None:
        self.store = store
        self.slice = slice_seconds
        self.leases = [(("kube-node-lease", o["metadata"]["name"]), _Template(o, _lease_slots)) for o in leases]
        self.nodes = [(("", o["metadata"]["name"]), _Template(o, _node_slots)) for o in nodes]
        self.every, self.node_every = every, node_every
        self.renewals = 0
        self.behind = 0.0
        self.lags: list[tuple[float, float]] = []
        """(wall time, seconds behind the schedule) of every slice: ``lag_between`` a window."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-fast-renewer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from nodewatch.core.timeutil import format_time

        def due(items: list, every: float) -> Iterator[list]:
            n = len(items)
            per = n * self.slice / every
            owed, i = 0.0, 0
            while True:
                owed += per
                take = int(owed)
                owed -= take
                out = [items[(i + k) % n] for k in range(take)] if n else []
                i = (i + take) % n if n else 0
                yield out

        leases, nodes = due(self.leases, self.every), due(self.nodes, self.node_every)
        t0, k = time.monotonic(), 0
        while not self._stop.is_set():
            when = t0 + k * self.slice
            lag = max(0.0, time.monotonic() - when - self.slice)
            self.behind = max(self.behind, lag)
            self._stop.wait(max(0.0, when - time.monotonic()))
            t = time.time()
            self.lags.append((t, lag))
            now, sec = format_time(t, micro=True).encode(), format_time(t).encode()
            for resource, items in (("leases", next(leases)), ("nodes", next(nodes))):
                if items:
                    self.renewals += self.store.emit_built(resource, [
                        (key, lambda rv, tpl=tpl, now=now, sec=sec: tpl.build((str(rv).encode(), now, sec)))
                        for key, tpl in items])
            k += 1

    def lag_between(self, t0: float, t1: float) -> float:
        """The most seconds behind its schedule in the wall-time window [t0, t1]."""
        return max((lag for t, lag in list(self.lags) if t0 <= t <= t1), default=0.0)

    def stop(self) -> str:
        self._stop.set()
        self._thread.join()
        return f"renewed {self.renewals} behind {self.behind:.3f}"


class ServerChild:
    """The simulated API server in a child process, driven over its stdin/stdout."""

    def __init__(self, nodes: int, realistic: bool = False, history: int = 1_000_000) -> None:
        self.dir = tempfile.TemporaryDirectory(prefix="nodewatch-bench-")
        self.kubeconfig = os.path.join(self.dir.name, "kubeconfig")
        self._err = open(os.path.join(self.dir.name, "server.log"), "wb")  # noqa: SIM115
        cmd = [sys.executable, "-m", "bench.live_path", "serve", "--nodes", str(nodes),
               "--kubeconfig", self.kubeconfig, "--history", str(history)]
        if realistic:
            cmd.append("--realistic")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err,
                                     cwd=str(Path(__file__).resolve().parent.parent))
        line = self._readline(timeout=600)
        if line != "ready":
            raise RuntimeError(f"simulated API server did not start: {line!r} (see {self._err.name})")

    def _readline(self, timeout: float) -> str:
        out: list[str] = []
        stdout: IO[bytes] = self.proc.stdout  # type: ignore[assignment]
        t = threading.Thread(target=lambda: out.append(stdout.readline().decode().strip()), daemon=True)
        t.start()
        t.join(timeout)
        return out[0] if out else "(timeout)"

    def emit(self, count: int) -> None:
        """Start emitting ``count`` renewals (returns at once; see ``emitted``)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"emit {count}\n".encode())
        self.proc.stdin.flush()

    def emitted(self, timeout: float = 600) -> float:
        """Seconds the child took to store the last ``emit``."""
        line = self._readline(timeout)
        parts = line.split()
        if len(parts) != 3 or parts[0] != "emitted":
            raise RuntimeError(f"unexpected answer from the server child: {line!r}")
        return float(parts[2])

    def renew(self, skip: int, period: float = 10.0) -> int:
        """Every Lease renewed within the last ``period`` seconds (in the phase of a renewer of that
        period started next, from Lease 0), except one in ``skip`` (0: none), which stay as old as
        the setup: the fleet a client meets when it starts during an incident. Returns how many were
        renewed."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"renew {skip} {period}\n".encode())
        self.proc.stdin.flush()
        line = self._readline(600)
        if not line.startswith("renewed "):
            raise RuntimeError(f"unexpected answer from the server child: {line!r}")
        return int(line.split()[1])

    def renewing(self, skip: int) -> None:
        """Start the child's ``Renewer`` (the fleet renews as a live one does, one in ``skip`` not)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"renewing {skip}\n".encode())
        self.proc.stdin.flush()
        if self._readline(60) != "renewing":
            raise RuntimeError("the server child did not start renewing")

    def fast_renewing(self, every: float = 10.0, node_every: float = 300.0, slice_seconds: float = FastRenewer.SLICE) -> None:
        """Start the child's ``FastRenewer`` (every Lease every ``every`` s, every Node's status every
        ``node_every`` s, the changes due made every ``slice_seconds``); ``stop_renewing`` stops it."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"fastrenewing {every} {node_every} {slice_seconds}\n".encode())
        self.proc.stdin.flush()
        if self._readline(600) != "renewing":
            raise RuntimeError("the server child did not start renewing")

    def lag(self, t0: float, t1: float) -> float:
        """The most seconds the ``FastRenewer`` fell behind its schedule between wall times t0 and t1."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"lag {t0} {t1}\n".encode())
        self.proc.stdin.flush()
        parts = self._readline(60).split()
        if len(parts) != 2 or parts[0] != "lag":
            raise RuntimeError(f"unexpected answer from the server child: {parts!r}")
        return float(parts[1])

    def stop_renewing(self) -> tuple[int, float, float, float]:
        """Stop it: (renewals stored, the most seconds it fell behind its schedule, the oldest a live
        Lease was on the server when renewed in its first cycle and after it: nan for the ``FastRenewer``)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"renewing 0\n")
        self.proc.stdin.flush()
        parts = self._readline(60).split()
        if len(parts) not in (4, 8) or parts[0] != "renewed":
            raise RuntimeError(f"unexpected answer from the server child: {parts!r}")
        if len(parts) == 4:
            return int(parts[1]), float(parts[3]), math.nan, math.nan
        return int(parts[1]), float(parts[3]), float(parts[7]), float(parts[5])

    def env(self) -> dict[str, str]:
        return {**os.environ, "KUBECONFIG": self.kubeconfig}

    def close(self) -> None:
        try:
            if self.proc.stdin:
                self.proc.stdin.write(b"quit\n")
                self.proc.stdin.close()
            self.proc.wait(10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait(5)
        self._err.close()
        self.dir.cleanup()

    def __enter__(self) -> "ServerChild":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- measuring -------------------------------------------------------------------------------


def measure_nodewatch(server: ServerChild, nodes: int, events: int, timeout: float = 300) -> tuple[float, float]:
    """(events/s through LiveSource into the core, the server's own emit rate)."""
    from nodewatch.core.settings import Settings
    from nodewatch.sources.live import LiveSource

    src = LiveSource(Settings(), kubeconfig=server.kubeconfig)
    lock = threading.Lock()
    seen = {"n": 0, "first": 0.0, "last": 0.0}
    done = threading.Event()
    real_sink = src._sink

    def counting_sink(batch: list) -> None:
        real_sink(batch)
        count(sum(1 for r, e, _o, _t, listing in batch if r == "leases" and e == "MODIFIED" and not listing))

    def count(k: int) -> None:
        if k:
            t = time.perf_counter()
            with lock:
                if seen["n"] == 0:
                    seen["first"] = t
                seen["n"] += k
                seen["last"] = t
                if seen["n"] >= events:
                    done.set()

    real_lane = src._lane

    def counting_lane(structs: list, received_at: float, block: bytes | memoryview) -> None:
        real_lane(structs, received_at, block)  # the synced lease watch's renewals come this way
        count(sum(1 for ev in structs if ev.type == "MODIFIED"))

    src._sink = counting_sink  # type: ignore[method-assign]  # reflectors are built in start()
    src._lane = counting_lane  # type: ignore[method-assign]
    src.start()
    try:
        if not src.wait_synced(120):
            raise RuntimeError("LiveSource did not sync with the simulated API server")
        if len(src.state.leases) != nodes:
            raise RuntimeError(f"LiveSource listed {len(src.state.leases)} leases, expected {nodes}")
        go = time.perf_counter()
        server.emit(events)
        emit_s = server.emitted()
        if not done.wait(timeout):
            raise RuntimeError(f"only {seen['n']} of {events} events arrived in {timeout}s")
        took = seen["last"] - go
        # every renewal landed in the state
        renewals = sum(t.renewals for t in src.state.leases.values())
        if renewals < events:
            raise RuntimeError(f"the state counted {renewals} renewals for {events} events")
        return events / took, events / emit_s
    finally:
        src.stop()


def measure_kubectl(server: ServerChild, nodes: int, events: int, window: float = 20.0) -> float:
    """Events per second ``kubectl get leases -A -w -o json`` prints, over at most ``window`` seconds."""
    # --chunk-size=0: with a paged initial list kubectl prints each page as one List document, so
    # counting top-level objects would count pages, not leases; one unpaged list prints each item
    proc = subprocess.Popen([str(kubectl_path()), "get", "leases", "-A", "-w", "-o", "json", "--chunk-size=0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=server.env())
    count = {"n": 0, "t": 0.0}
    listed = threading.Event()
    lock = threading.Lock()

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:  # each object is pretty-printed; its last line is "}" alone
            if line == b"}\n":
                with lock:
                    count["n"] += 1
                    count["t"] = time.perf_counter()
                    if count["n"] >= nodes:
                        listed.set()

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    try:
        if not listed.wait(120):
            raise RuntimeError(f"kubectl printed {count['n']} of the {nodes} listed leases")
        time.sleep(0.5)
        with lock:
            base = count["n"]
        go = time.perf_counter()
        server.emit(events)
        deadline = go + window
        while time.perf_counter() < deadline:
            with lock:
                if count["n"] - base >= events:
                    break
            time.sleep(0.05)
        with lock:
            got, last = count["n"] - base, count["t"]
        server.emitted()
        if got == 0:
            return 0.0
        return got / (last - go)
    finally:
        proc.kill()
        proc.wait(5)


def run(nodes: int = 65_000, seconds: float = 10.0) -> list[Figure]:
    """``seconds``: the stream is ``seconds`` x 30,000 renewals (1.5x the target's rate)."""
    events = max(1_000, int(seconds * 30_000))
    print(f"  live path: starting the simulated API server ({nodes:,} nodes)", file=sys.stderr, flush=True)
    with ServerChild(nodes, history=2 * events + 10) as server:
        print(f"  live path: LiveSource, {events:,} lease events", file=sys.stderr, flush=True)
        rate, server_rate = measure_nodewatch(server, nodes, events)
        print("  live path: kubectl get leases -A -w -o json", file=sys.stderr, flush=True)
        ref = measure_kubectl(server, nodes, events, window=max(5.0, seconds * 2))
    return [Figure("live path: lease events/s, sim server -> HTTPS watch -> core", f"{rate:,.0f}/s",
                   f">= {TARGET:,}/s", f"kubectl get -w -o json {ref:,.0f}/s", rate >= TARGET,
                   f"{nodes:,} nodes, {events:,} renewals; the server child stored them at "
                   f"{server_rate:,.0f}/s (if close to the measured rate, the server was the limit)")]


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        sys.exit(_serve(sys.argv[2:]))
    from .harness import print_table

    print_table(run(nodes=2_000, seconds=2.0))
