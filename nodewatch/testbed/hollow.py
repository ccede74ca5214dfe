"""Hollow kubelets: the real kubelet's code as the testbed's nodes (``kubemark --morph=kubelet``).

A hollow node runs the kubelet itself (registration, the node lease controller, the node status
manager) on a fake container runtime, with no cgroups and no containers, so what it writes and
when is the real kubelet's, not nodewatch's model of it. Each one here:

- has its own node identity: a kubeconfig with a client certificate ``system:node:NAME`` in
  ``system:nodes`` (the API server's Node authorizer and NodeRestriction judge it as a kubelet);
- runs in its own mount namespace with a private tmpfs on ``/tmp``: v1.20's fake runtime listens on
  the fixed ``/tmp/kubelet_remote.sock`` (two hollow nodes in one namespace take each other's
  socket), and every version leaves its root folder ``/tmp/hollow-kubelet.*`` behind. The
  kubeconfig reaches it as an open file (``/dev/fd/3``), since ``/tmp`` (where a test's testbed
  folder may be) is hidden inside;
- talks to the API server through its own loopback ``Link``, a TCP relay that the scenarios can
  cut (a network partition: bytes are held, not refused) and restore.

Scenario verbs: ``stop`` (SIGKILL: the process is gone, as a crashed kubelet), ``freeze``
(SIGSTOP: alive but silent, as a hung one) and ``thaw``, ``disconnect``/``reconnect`` (the link),
``restart`` (a new process, a fresh root folder: a rebooted node).
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import yaml

from ..stop_signals import StopSignals
from . import pki as pki_mod
from . import processes
from .build_common import Binaries
from .controlplane import Testbed, TestbedError, kubeconfig

PREFIX = processes.CLIENT_PREFIX
READY_TIMEOUT = 120.0
HOLLOW_USE_HOST_IMAGE_SERVICE_FROM = 21
"""From 1.21 kubemark uses the host's image service unless ``--use-host-image-service=false``."""

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


class Link:
    """A loopback TCP relay to the API server that can be cut like a network.

    Cut: nothing more is relayed in either direction and new connections are accepted but left
    unanswered, as packets dropped on a partition (the kubelet's own timeouts then fire). Restored:
    the held connections are closed (they would have timed out) and new ones are relayed again.
    """

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = int(self._listener.getsockname()[1])
        self._cut = threading.Event()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket | None]] = []
        threading.Thread(target=self._accept, name=f"link-{self.port}", daemon=True).start()

    @property
    def cut_off(self) -> bool:
        return self._cut.is_set()

    def cut(self) -> None:
        self._cut.set()

    def restore(self) -> None:
        with self._lock:
            pairs, self._pairs = self._pairs, []
        self._cut.clear()
        for a, b in pairs:
            for s in (a, b):
                if s is not None:
                    _close(s)

    def close(self) -> None:
        self._closed.set()
        _close(self._listener)
        self.restore()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._cut.is_set():
                with self._lock:
                    self._pairs.append((client, None))  # held: no answer, as on a partition
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                _close(client)
                continue
            with self._lock:
                self._pairs.append((client, server))
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        peers = {a: b, b: a}
        try:
            while not self._closed.is_set():
                if self._cut.is_set():
                    time.sleep(0.2)  # hold everything: the bytes stay unread
                    continue
                ready, _, _ = select.select([a, b], [], [], 0.5)
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    peers[s].sendall(data)
        except (OSError, ValueError):
            return
        finally:
            if not self._cut.is_set():
                with self._lock:
                    if (a, b) in self._pairs:
                        self._pairs.remove((a, b))
                _close(a)
                _close(b)


def _close(s: socket.socket) -> None:
    try:
        s.close()
    except OSError:
        pass


@dataclass
class HollowNode:
    name: str
    zone: str
    region: str
    folder: Path
    link: Link
    kubelet_port: int = 0
    started: list[float] = field(default_factory=list)
    """Wall times this node's process was started."""

    @property
    def process(self) -> str:
        return f"{PREFIX}{self.name}"


def kubemark_argv(binaries: Binaries, node: HollowNode) -> list[str]:
    """The hollow node's command line, in its own mount namespace with a private ``/tmp``."""
    if binaries.kubemark is None:
        raise TestbedError(f"no kubemark in the {binaries.version} build: hollow kubelets need it")
    labels = ",".join([f"topology.kubernetes.io/zone={node.zone}", f"topology.kubernetes.io/region={node.region}",
                       f"failure-domain.beta.kubernetes.io/zone={node.zone}",
                       f"failure-domain.beta.kubernetes.io/region={node.region}", "nodewatch.testbed/hollow=true"])
    kubemark = [str(binaries.kubemark), "--morph=kubelet", f"--name={node.name}", "--kubeconfig=/dev/fd/3",
                f"--kubelet-port={node.kubelet_port}", "--kubelet-read-only-port=0", f"--node-labels={labels}",
                "--v=2"]
    if binaries.minor >= HOLLOW_USE_HOST_IMAGE_SERVICE_FROM:
        kubemark.append("--use-host-image-service=false")
    if os.geteuid() == 0:
        unshare = ["unshare", "--mount", "--propagation", "private"]
    else:  # a user namespace lets an unprivileged user mount its own tmpfs
        unshare = ["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private"]
    kubeconfig_path = node.folder / "kubeconfig"
    script = 'exec 3<"$1"; shift; mount -t tmpfs -o size=64m,mode=1777 tmpfs /tmp && exec "$@"'
    return [*unshare, "sh", "-c", script, "sh", str(kubeconfig_path), *kubemark]


class HollowFleet:
    """Hollow kubelets on a running testbed; the verbs the scenarios and tests use."""

    __test__ = False

    def __init__(self, tb: Testbed, binaries: Binaries, layout: list[tuple[str, str]], *,
                 prefix: str = "hollow", progress: Progress = _quiet) -> None:
        if shutil.which("unshare") is None:
            raise TestbedError("hollow kubelets need unshare (util-linux) for a mount namespace each")
        if binaries.version != tb.version:
            raise TestbedError(f"kubemark {binaries.version} for a {tb.version} control plane")
        self.tb = tb
        self.binaries = binaries
        self.progress = progress
        host, port = tb.server.removeprefix("https://").rsplit(":", 1)
        width = max(2, len(str(len(layout))))
        self.nodes: dict[str, HollowNode] = {}
        for i, (region, zone) in enumerate(layout):
            name = f"{prefix}-{zone}-{i:0{width}d}"
            self.nodes[name] = HollowNode(name=name, zone=zone, region=region, folder=tb.dir / "hollow" / name,
                                          link=Link((host, int(port))))
        self.node_order = list(self.nodes)

    def start(self) -> None:
        p = self.tb.pki
        ca_pem = p.ca_cert.read_bytes()
        for node in self.nodes.values():
            node.folder.mkdir(parents=True, exist_ok=True)
            cert, key = pki_mod.node_credentials(p, node.name)
            cfg = kubeconfig(f"https://127.0.0.1:{node.link.port}", ca_pem, None, f"system:node:{node.name}",
                             client_cert_pem=cert, client_key_pem=key)
            path = node.folder / "kubeconfig"
            path.touch(mode=0o600)
            path.write_text(yaml.safe_dump(cfg, sort_keys=False))
            self._spawn(node)
        self.progress(f"started {len(self.nodes)} hollow kubelets ({self.binaries.version})")

    def _spawn(self, node: HollowNode) -> None:
        node.kubelet_port = processes.free_port()
        processes.start(self.tb.dir, node.process, kubemark_argv(self.binaries, node),
                        program=str(self.binaries.kubemark))
        node.started.append(time.time())

    def pid(self, name: str) -> int:
        pid = processes.running(self.tb.dir).get(self.nodes[name].process)
        if pid is None:
            raise TestbedError(f"hollow kubelet {name} is not running; see {self.log(name)}")
        return pid

    def log(self, name: str) -> Path:
        return self.tb.dir / "logs" / f"{self.nodes[name].process}.log"

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        """Until every hollow node's Node says Ready=True and its Lease exists (the real kubelet's
        registration and first status, as a real cluster shows them)."""
        admin = self.tb.admin()
        deadline = time.monotonic() + timeout
        missing: list[str] = list(self.nodes)
        try:
            while time.monotonic() < deadline:
                dead = [n for n in self.nodes if processes.exited(self.tb.dir, self.nodes[n].process)]
                if dead:
                    raise TestbedError(f"hollow kubelet {dead[0]} exited; see {self.log(dead[0])}:\n"
                                       + _tail(self.log(dead[0])))
                nodes = {o["metadata"]["name"]: o for o in admin.get("/api/v1/nodes")["items"]}
                leases = {o["metadata"]["name"] for o in admin.get(
                    "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases")["items"]}
                missing = [n for n in self.nodes if n not in leases or not _ready(nodes.get(n))]
                if not missing:
                    return
                time.sleep(0.5)
        finally:
            admin.close()
        raise TestbedError(f"hollow kubelets not Ready after {timeout:.0f}s: {', '.join(missing)}; "
                           f"see {self.log(missing[0])}")

    # --- the verbs ------------------------------------------------------------------------------------

    def stop_kubelet(self, name: str) -> None:
        """SIGKILL: the kubelet is gone at once, nothing said on the way out."""
        os.kill(self.pid(name), signal.SIGKILL)

    def freeze(self, name: str) -> None:
        """SIGSTOP: the process stays, its connections stay open, nothing more is sent."""
        os.kill(self.pid(name), signal.SIGSTOP)

    def thaw(self, name: str) -> None:
        os.kill(self.pid(name), signal.SIGCONT)

    def disconnect(self, name: str) -> None:
        self.nodes[name].link.cut()

    def reconnect(self, name: str) -> None:
        self.nodes[name].link.restore()

    def restart(self, name: str) -> None:
        """A rebooted node: the old process killed (if alive), a new one with a fresh root folder."""
        node = self.nodes[name]
        processes.stop(self.tb.dir, (node.process,), timeout=2.0)
        self._spawn(node)

    def close(self) -> None:
        processes.stop(self.tb.dir, tuple(n.process for n in self.nodes.values()), timeout=5.0)
        for node in self.nodes.values():
            node.link.close()


def _ready(node: dict | None) -> bool:
    for c in ((node or {}).get("status", {}).get("conditions") or []):
        if c.get("type") == "Ready":
            return c.get("status") == "True"
    return False


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# --- scenarios, and the background driver of `nodewatch testbed up --kubelets hollow` ----------------------

SCENARIO_AT = 20.0
RESTART_AFTER = 60.0
SCENARIOS: dict[str, str] = {
    "steady": "nothing goes wrong",
    "kubelet-stop": f"one kubelet killed (SIGKILL) at +{SCENARIO_AT:.0f}s",
    "kubelet-freeze": f"one kubelet frozen (SIGSTOP) at +{SCENARIO_AT:.0f}s",
    "cutoff": f"one node's link to the API server cut at +{SCENARIO_AT:.0f}s",
    "restart": f"one kubelet killed at +{SCENARIO_AT:.0f}s and started again {RESTART_AFTER:.0f}s later",
}


def scenario_steps(name: str, fleet: HollowFleet, start: float, speed: float = 1.0) -> list[tuple[float, str, Callable[[], None]]]:
    """(wall time, description, action) of a hollow scenario; parts joined with ``+`` act on
    different nodes, in node order."""
    if speed <= 0:
        raise ValueError("--speed must be positive")
    parts = [p.strip() for p in (name or "steady").split("+")]
    for p in parts:
        if p not in SCENARIOS:
            raise ValueError(f"unknown hollow scenario {p!r}; one of: {', '.join(SCENARIOS)} (join with +)")
    free = iter(fleet.node_order)
    at = start + SCENARIO_AT / speed
    steps: list[tuple[float, str, Callable[[], None]]] = []
    for p in parts:
        if p == "steady":
            continue
        try:
            n = next(free)
        except StopIteration:
            raise ValueError(f"hollow scenario {name}: more parts than nodes") from None
        if p == "kubelet-stop":
            steps.append((at, f"stop {n}", partial(fleet.stop_kubelet, n)))
        elif p == "kubelet-freeze":
            steps.append((at, f"freeze {n}", partial(fleet.freeze, n)))
        elif p == "cutoff":
            steps.append((at, f"cut off {n}", partial(fleet.disconnect, n)))
        elif p == "restart":
            steps.append((at, f"stop {n}", partial(fleet.stop_kubelet, n)))
            steps.append((at + RESTART_AFTER / speed, f"restart {n}", partial(fleet.restart, n)))
    return sorted(steps, key=lambda s: s[0])


READY_FILE = "hollow.json"


def default_layout(nodes: int) -> list[tuple[str, str]]:
    """(region, zone) per node: zones of about four nodes (at most six), round-robin."""
    from .kubelets import default_layout as simulated_layout

    return simulated_layout(nodes)


def start_driver(tb: Testbed, *, nodes: int, scenario: str, speed: float, progress: Progress,
                 timeout: float = READY_TIMEOUT + 30) -> None:
    """Run the hollow kubelets (and their links) from a background process of the testbed."""
    import json
    import sys

    if scenario:
        for p in scenario.split("+"):
            if p.strip() not in SCENARIOS:
                raise ValueError(f"unknown hollow scenario {p.strip()!r}; one of: {', '.join(SCENARIOS)}")
    ready = tb.dir / READY_FILE
    ready.unlink(missing_ok=True)
    processes.start(tb.dir, "kubelets", [
        sys.executable, "-m", "nodewatch.testbed.hollow", "--dir", str(tb.dir), "--nodes", str(nodes),
        "--scenario", scenario, "--speed", str(speed)])
    deadline = time.monotonic() + timeout
    while not ready.exists():
        if "kubelets" not in processes.running(tb.dir) or time.monotonic() > deadline:
            raise TestbedError(f"the hollow kubelets did not start; see {tb.dir / 'logs' / 'kubelets.log'}:\n"
                               + _tail(tb.dir / "logs" / "kubelets.log"))
        time.sleep(0.3)
    info = json.loads(ready.read_text())
    progress(f"{len(info['nodes'])} hollow kubelets Ready ({tb.version}), scenario {scenario}")
    for t, step in info["steps"]:
        progress(f"  at +{t - info['start']:.0f}s: {step}")


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json

    from .build_common import built

    ap = argparse.ArgumentParser(prog="python -m nodewatch.testbed.hollow")
    ap.add_argument("--dir", required=True, type=Path)
    ap.add_argument("--nodes", type=int, required=True)
    ap.add_argument("--scenario", default="steady")
    ap.add_argument("--speed", type=float, default=1.0)
    args = ap.parse_args(argv)

    def log(line: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {line}", flush=True)

    tb = Testbed.load(args.dir.resolve())
    binaries = built(version=tb.version)
    if binaries is None:
        log(f"no {tb.version} build in the cache")
        return 2
    fleet = HollowFleet(tb, binaries, default_layout(args.nodes), progress=log)
    signals = StopSignals((signal.SIGTERM, signal.SIGINT)).install()  # for the life of the process
    try:
        fleet.start()
        fleet.wait_ready()
        start = time.time()
        steps = scenario_steps(args.scenario, fleet, start, args.speed)
        tmp = args.dir / (READY_FILE + ".tmp")
        tmp.write_text(json.dumps({"nodes": fleet.node_order, "start": start,
                                   "steps": [(t, what) for t, what, _ in steps]}))
        tmp.replace(args.dir / READY_FILE)
        for t, what, action in steps:
            if signals.wait(max(0.0, t - time.time())):
                break
            log(f"scenario: {what}")
            action()
        signals.wait()
    finally:
        fleet.close()
    return 0


if __name__ == "__main__":
    sys_exit = main()
    raise SystemExit(sys_exit)
