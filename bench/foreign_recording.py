"""Recordings nodewatch did not write: an independent generator of a fleet's watch traffic.

Why: the replay benchmarks read recordings written by nodewatch's own ``Recorder`` from its own
simulator, so every line has the shape nodewatch writes (orjson's spacing, its key order, managed
fields cut down to the kubelet's times). A recording written by another tool, or a kubectl watch
log, has none of that, and a fast path tuned to one writer's bytes can miss it entirely (issue 29:
3.4x a bare stdlib decode against 1.35x on nodewatch's own). This module shares nothing with
nodewatch (no import of it: stdlib ``json`` and ``random`` only) and writes what the API server
sends and other recorders keep:

- objects in the API server's key order (``apiVersion, kind, metadata, spec, status``), metadata
  with ``uid``, ``creationTimestamp``, ``ownerReferences``, ``annotations`` and full
  ``managedFields`` (``fieldsV1`` included), Nodes with ``status.images`` and ``volumesAttached``;
- JSON Lines whose lines put the keys in other orders (``object`` first, ``t`` last), with extra
  fields (``seq``, ``received``, ``watch``), with stdlib spacing (``", "``/``": "``), compact, or
  keys sorted, a few with ``\\r\\n`` line ends or trailing blanks;
- or a kubectl watch log (``kubectl get -w --output-watch-events -o json``: 4-space indented
  documents, one watch per resource, the logs concatenated).

The fleet: ``nodes`` kubelets (one in 20 with its clock 95 s behind the API server's, one in 20
2.5 s ahead) renewing their Lease every 10 s (jittered, as kubelets do), posting
their Node status every 5 minutes (``nodeStatusReportFrequency``) and when it changes; at a third
of the run a zone loses 1 % of its nodes (their renewals stop), and 40 s later the node lifecycle
controller marks them Unknown and taints them unreachable (NoSchedule, then NoExecute); at two
thirds half of them come back. 5,000 nodes for 10 minutes: about 300,000 events, 120 MB.

``python -m bench.foreign_recording OUT [--nodes N] [--minutes M] [--style jsonl|kubectl]``.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from datetime import datetime, timezone
from typing import IO, Any, Iterator

RENEW_EVERY = 10.0
REPORT_EVERY = 300.0
GRACE = 40.0
START = 1_790_000_000.0  # 2026-09-21: a fixed start, so a seed gives the same bytes


def iso(t: float) -> str:
    return datetime.fromtimestamp(int(t), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro(t: float) -> str:
    whole = int(t)
    return datetime.fromtimestamp(whole, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{int((t - whole) * 1e6):06d}Z"


class _Fleet:
    """The objects of the fleet as the API server would send them, and their resourceVersions."""

    def __init__(self, nodes: int, seed: int) -> None:
        self.rng = random.Random(seed)
        self.rv = 4_100_000
        self.names = [f"ip-10-{20 + i // 65_000}-{(i // 256) % 254}-{i % 256}.ec2.internal" for i in range(nodes)]
        self.zones = ["us-east-1a", "us-east-1b", "us-east-1c"]
        self.uids = [self._uid() for _ in range(nodes)]
        self.lease_uids = [self._uid() for _ in range(nodes)]
        self.created = [START - self.rng.uniform(3600, 30 * 86400) for _ in range(nodes)]
        self.images = [self._images() for _ in range(4)]
        self.clock = [-95.0 if i % 20 == 7 else (2.5 if i % 20 == 11 else 0.0) for i in range(nodes)]
        """Each node's clock against the API server's: renewTime is written on it, managedFields on
        the server's (one node in 20 is 95 s behind, one 2.5 s ahead)."""
        self.down: set[int] = set()
        self.tainted: dict[int, float] = {}

    def _uid(self) -> str:
        h = "%032x" % self.rng.getrandbits(128)
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def _images(self) -> list[dict[str, Any]]:
        out = []
        for j in range(self.rng.randint(6, 10)):
            repo = f"602401143452.dkr.ecr.us-east-1.amazonaws.com/team-{j}/service-{self.rng.randint(1, 999)}"
            digest = "%064x" % self.rng.getrandbits(256)
            out.append({"names": [f"{repo}@sha256:{digest}", f"{repo}:v1.{self.rng.randint(0, 40)}.{j}"],
                        "sizeBytes": self.rng.randint(5_000_000, 900_000_000)})
        return out

    def next_rv(self) -> str:
        self.rv += self.rng.randint(1, 3)
        return str(self.rv)

    def lease(self, i: int, renew: float) -> dict[str, Any]:
        name = self.names[i]
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "creationTimestamp": iso(self.created[i]),
                "managedFields": [{
                    "apiVersion": "coordination.k8s.io/v1",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:ownerReferences": {
                        ".": {}, f'k:{{"uid":"{self.uids[i]}"}}': {}}},
                        "f:spec": {"f:holderIdentity": {}, "f:leaseDurationSeconds": {}, "f:renewTime": {}}},
                    "manager": "kubelet",
                    "operation": "Update",
                    "time": iso(renew),
                }],
                "name": name,
                "namespace": "kube-node-lease",
                "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": self.uids[i]}],
                "resourceVersion": self.next_rv(),
                "uid": self.lease_uids[i],
            },
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": micro(renew + self.clock[i])},
        }

    def node(self, i: int, heartbeat: float) -> dict[str, Any]:
        name = self.names[i]
        zone = self.zones[i % 3]
        down = i in self.down
        t_since = self.tainted.get(i)
        ready_status, ready_reason, ready_msg = ("True", "KubeletReady", "kubelet is posting ready status")
        cond_heartbeat = heartbeat
        taints: list[dict[str, Any]] = []
        if t_since is not None:
            ready_status, ready_reason, ready_msg = "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status."
            cond_heartbeat = t_since - GRACE
            taints = [{"effect": "NoSchedule", "key": "node.kubernetes.io/unreachable", "timeAdded": iso(t_since)},
                      {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "timeAdded": iso(t_since + 0.2)}]
        pressure = [(kind, "False", reason, msg) for kind, reason, msg in (
            ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"))]
        conditions = [{"lastHeartbeatTime": iso(cond_heartbeat), "lastTransitionTime": iso(self.created[i] + 40),
                       "message": msg if t_since is None else "Kubelet stopped posting node status.",
                       "reason": reason if t_since is None else "NodeStatusUnknown",
                       "status": status if t_since is None else "Unknown", "type": kind}
                      for kind, status, reason, msg in pressure]
        conditions.append({"lastHeartbeatTime": iso(cond_heartbeat),
                           "lastTransitionTime": iso(t_since if t_since is not None else self.created[i] + 40),
                           "message": ready_msg, "reason": ready_reason, "status": ready_status, "type": "Ready"})
        ip = "10.{}.{}.{}".format(*name.split("-")[2:4], name.split("-")[4].split(".")[0])
        obj: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "annotations": {
                    "alpha.kubernetes.io/provided-node-ip": ip,
                    "csi.volume.kubernetes.io/nodeid": json.dumps({"ebs.csi.aws.com": f"i-0{i:016x}"}),
                    "node.alpha.kubernetes.io/ttl": "0",
                    "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                },
                "creationTimestamp": iso(self.created[i]),
                "labels": {
                    "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/instance-type": "m6i.2xlarge",
                    "beta.kubernetes.io/os": "linux", "eks.amazonaws.com/capacityType": "ON_DEMAND",
                    "eks.amazonaws.com/nodegroup": f"workers-{zone[-1]}", "failure-domain.beta.kubernetes.io/region":
                    "us-east-1", "failure-domain.beta.kubernetes.io/zone": zone, "kubernetes.io/arch": "amd64",
                    "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                    "node.kubernetes.io/instance-type": "m6i.2xlarge", "topology.ebs.csi.aws.com/zone": zone,
                    "topology.kubernetes.io/region": "us-east-1", "topology.kubernetes.io/zone": zone,
                },
                "managedFields": [
                    {"apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:annotations": {
                        ".": {}, "f:alpha.kubernetes.io/provided-node-ip": {},
                        "f:volumes.kubernetes.io/controller-managed-attach-detach": {}}, "f:labels": {
                        ".": {}, "f:kubernetes.io/hostname": {}, "f:kubernetes.io/os": {}}},
                        "f:spec": {"f:providerID": {}}}, "manager": "kubelet", "operation": "Update",
                     "time": iso(self.created[i])},
                    {"apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:annotations": {
                        "f:node.alpha.kubernetes.io/ttl": {}}}, "f:spec": {"f:podCIDR": {}, "f:podCIDRs": {
                        ".": {}, 'v:"10.100.0.0/24"': {}}, "f:taints": {}}}, "manager": "kube-controller-manager",
                     "operation": "Update", "time": iso(t_since if t_since is not None else self.created[i] + 5)},
                    {"apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:conditions": {
                        'k:{"type":"Ready"}': {"f:lastHeartbeatTime": {}, "f:message": {}, "f:reason": {},
                                               "f:status": {}}}, "f:images": {}}}, "manager": "kubelet",
                     "operation": "Update", "subresource": "status", "time": iso(cond_heartbeat)},
                ],
                "name": name,
                "resourceVersion": self.next_rv(),
                "uid": self.uids[i],
            },
            "spec": {"podCIDR": "10.100.0.0/24", "podCIDRs": ["10.100.0.0/24"],
                     "providerID": f"aws:///{zone}/i-0{i:016x}"},
            "status": {
                "addresses": [{"address": ip, "type": "InternalIP"}, {"address": name, "type": "InternalDNS"},
                              {"address": name, "type": "Hostname"}],
                "allocatable": {"cpu": "7910m", "ephemeral-storage": "95491281146", "hugepages-1Gi": "0",
                                "hugepages-2Mi": "0", "memory": "31482144Ki", "pods": "58"},
                "capacity": {"cpu": "8", "ephemeral-storage": "104845292Ki", "hugepages-1Gi": "0",
                             "hugepages-2Mi": "0", "memory": "32496928Ki", "pods": "58"},
                "conditions": conditions,
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "images": self.images[i % len(self.images)],
                "nodeInfo": {"architecture": "amd64", "bootID": self.uids[(i + 1) % len(self.uids)],
                             "containerRuntimeVersion": "containerd://1.7.11", "kernelVersion":
                             "5.10.205-195.807.amzn2.x86_64", "kubeProxyVersion": "v1.29.0-eks-5e0fdde",
                             "kubeletVersion": "v1.29.0-eks-5e0fdde", "machineID": "%032x" % i,
                             "operatingSystem": "linux", "osImage": "Amazon Linux 2", "systemUUID": self.uids[i]},
            },
        }
        if taints:
            obj["spec"]["taints"] = taints
        if down:
            obj["status"]["volumesAttached"] = []
        return obj


def events(nodes: int, minutes: float, seed: int = 29) -> Iterator[tuple[float, str, str, dict[str, Any], bool]]:
    """(receive time, resource, type, object, listed) of the fleet's watch traffic, in time order."""
    fleet = _Fleet(nodes, seed)
    rng = fleet.rng
    t0 = START
    # the initial lists, as a recorder starting receives them: Nodes, then Leases
    phase = [rng.uniform(0, RENEW_EVERY) for _ in range(nodes)]
    report = [rng.uniform(0, REPORT_EVERY) for _ in range(nodes)]
    for i in range(nodes):
        yield t0 + 0.3 + i * 2e-5, "nodes", "ADDED", fleet.node(i, t0 - REPORT_EVERY + report[i]), True
    t_leases = t0 + 0.3 + nodes * 2e-5 + 0.05
    for i in range(nodes):
        yield t_leases + i * 1e-6, "leases", "ADDED", fleet.lease(i, t0 - RENEW_EVERY + phase[i]), True
    end = t0 + minutes * 60
    cut_at, back_at = t0 + minutes * 20, t0 + minutes * 40
    victims = sorted(rng.sample(range(0, nodes, 3), max(1, nodes // 100)))  # one zone's
    # one heap-free sweep per second: every kubelet acts at its own phase within the second
    second = t0 + 1
    while second <= end:
        batch: list[tuple[float, str, str, dict[str, Any]]] = []
        if cut_at <= second < cut_at + 1:
            fleet.down.update(victims)
        if back_at <= second < back_at + 1:
            for i in victims[::2]:
                fleet.down.discard(i)
                fleet.tainted.pop(i, None)
                batch.append((second + rng.random() * 0.5, "nodes", "MODIFIED", fleet.node(i, second)))
        if cut_at + GRACE <= second < cut_at + GRACE + 1:
            for i in victims:
                if i in fleet.down:
                    fleet.tainted[i] = second + 0.1
                    batch.append((second + 0.1 + rng.random() * 0.05, "nodes", "MODIFIED", fleet.node(i, second)))
        for i in range(nodes):
            if i in fleet.down:
                continue
            at = phase[i]
            if second - 1 <= t0 + at + RENEW_EVERY * int((second - t0 - at) / RENEW_EVERY) < second:
                renew = second - 1 + rng.random()
                batch.append((renew + rng.uniform(0.002, 0.03), "leases", "MODIFIED", fleet.lease(i, renew)))
            r = report[i]
            if second - 1 <= t0 + r + REPORT_EVERY * int((second - t0 - r) / REPORT_EVERY) < second:
                hb = second - 1 + rng.random()
                batch.append((hb + rng.uniform(0.002, 0.05), "nodes", "MODIFIED", fleet.node(i, hb)))
        batch.sort(key=lambda e: e[0])
        for t, resource, etype, obj in batch:
            yield t, resource, etype, obj, False
        second += 1


_STYLES = (
    {"separators": (", ", ": ")},  # stdlib default spacing
    {"separators": (",", ":")},
    {"separators": (", ", ": "), "sort_keys": True},
)


def write_jsonl(out: IO[str], nodes: int, minutes: float, seed: int = 29, server_version: str | None = None,
                synced: bool = False) -> int:
    """A v1 recording written as another recorder would: other key orders, spacing, extra fields.
    ``server_version``: said in the header's settings (else not at all); ``synced``: a ``SYNCED``
    line after each list (else none: the recorder did not say when its lists were complete)."""
    rng = random.Random(seed + 1)
    header: dict[str, Any] = {"source": {"name": "fleet-recorder 0.4", "kind": "external"},
                              "started_at": iso(START), "nodewatch_recording": 1,
                              "writer": {"name": "fleet-recorder", "version": "0.4.2"}}
    if server_version:
        header["settings"] = {"server_version": server_version}
    out.write(json.dumps(header) + "\n")
    n = 1
    listing: str | None = None
    for seq, (t, resource, etype, obj, listed) in enumerate(events(nodes, minutes, seed)):
        if synced and listing is not None and (not listed or resource != listing):
            out.write(json.dumps({"type": "SYNCED", "t": round(t, 6), "resource": listing}) + "\n")
            n += 1
        listing = resource if listed else None
        line: dict[str, Any] = {"object": obj, "type": etype, "resource": resource}
        if listed:
            line["list"] = True
        line["seq"] = seq
        line["watch"] = {"resource": resource, "attempt": 1}
        line["received"] = iso(t)
        line["t"] = round(t, 6)
        style = _STYLES[seq % 7 % 3]
        end = "\r\n" if rng.random() < 0.01 else ("  \n" if rng.random() < 0.01 else "\n")
        out.write(json.dumps(line, **style) + end)  # type: ignore[arg-type]
        n += 1
    return n


def write_kubectl(out: IO[str], nodes: int, minutes: float, seed: int = 29) -> int:
    """``kubectl get nodes -w --output-watch-events -o json`` then the same for leases, concatenated:
    4-space indented documents, no receive times. Returns the documents written."""
    docs = 0
    for resource in ("nodes", "leases"):
        for _t, r, etype, obj, _listed in events(nodes, minutes, seed):
            if r != resource:
                continue
            out.write(json.dumps({"type": etype, "object": obj}, indent=4) + "\n")
            docs += 1
    return docs


def write(path: str, nodes: int, minutes: float, style: str = "jsonl", seed: int = 29, **jsonl: Any) -> int:
    """Write the recording (``jsonl``, options of ``write_jsonl``) or kubectl log (``kubectl``) to
    ``path``; returns the lines (documents) written after the header."""
    with open(path, "w", encoding="utf-8", newline="") as f:
        if style == "kubectl":
            return write_kubectl(f, nodes, minutes, seed)
        return write_jsonl(f, nodes, minutes, seed, **jsonl) - 1


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--nodes", type=int, default=5_000)
    p.add_argument("--minutes", type=float, default=10)
    p.add_argument("--style", choices=("jsonl", "kubectl"), default="jsonl")
    p.add_argument("--seed", type=int, default=29)
    a = p.parse_args()
    t = time.perf_counter()
    n = write(a.out, a.nodes, a.minutes, a.style, a.seed)
    print(f"{n:,} events in {time.perf_counter() - t:.1f} s")


if __name__ == "__main__":
    main()
