"""The simulated fleet's shape: nodes, workloads and pods, and how each renders as Kubernetes JSON.

The fleet is built from ``catalogue`` (pools, zones, workloads) and rendered with ``objects``.

The simulation keeps compact records (``SimNode``, ``SimPod``, ``Workload``) and renders a full,
realistic API object only when someone needs it (a sink, or ``SimFleet.objects``). Rendering is
deterministic, and every call returns a fresh dict, so consumers may keep what they get.

Pods per node: about 8 by default (three DaemonSets plus workload pods). Above
``LARGE_FLEET_NODES`` nodes the default drops to 2 (one DaemonSet pod and one workload pod), so a
65,000-node fleet stays at ~130,000 pods in memory; ``pods_per_node`` overrides it.
"""

from __future__ import annotations

import calendar
import hashlib
import math
import random
import uuid
from dataclasses import dataclass, field

from ..core import rules
from . import objects
from .catalogue import (
    CUSTOM_TOLERATION_SECONDS,
    DAEMONSETS,
    DEPLOYMENTS,
    REGIONS,
    STATEFULSETS,
    Pool,
    daemonset_tolerations,
    default_tolerations,
)
from .objects import fmt_time

LARGE_FLEET_NODES = 5000
DEFAULT_START = float(calendar.timegm((2026, 11, 29, 10, 0, 0, 0, 0, 0)))
DAY = 86400.0

# --- identity -------------------------------------------------------------------------------------


def make_uid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


_ALNUM = "bcdfghjklmnpqrstvwxz2456789"  # the alphabet of k8s.io/apimachinery/pkg/util/rand


def rand_suffix(rng: random.Random, n: int = 5) -> str:
    return "".join(rng.choice(_ALNUM) for _ in range(n))


def stable_hash(*parts: object, n: int = 10) -> str:
    h = hashlib.sha1("/".join(str(p) for p in parts).encode()).digest()
    out = []
    for b in h:
        out.append(_ALNUM[b % len(_ALNUM)])
        if len(out) == n:
            break
    return "".join(out)


# --- records ----------------------------------------------------------------------------------------


@dataclass(slots=True)
class Workload:
    kind: str  # Deployment | StatefulSet | DaemonSet
    namespace: str
    name: str
    uid: str
    image: str
    replicas: int
    tolerations: list[dict]
    created: float
    rs_name: str = ""
    rs_uid: str = ""
    revision: str = ""
    grace_seconds: int = 30
    cpu: str = "250m"
    memory: str = "256Mi"
    pods: set = field(default_factory=set)
    """Names of its current pods."""

    @property
    def owner_kind(self) -> str:
        return "ReplicaSet" if self.kind == "Deployment" else self.kind

    @property
    def owner_name(self) -> str:
        return self.rs_name if self.kind == "Deployment" else self.name

    @property
    def owner_uid(self) -> str:
        return self.rs_uid if self.kind == "Deployment" else self.uid

    def tolerates_noschedule(self, key: str) -> bool:
        return any(t.get("operator") == "Exists" and t.get("key") == key and t.get("effect") == "NoSchedule"
                   for t in self.tolerations)


@dataclass(slots=True)
class Cond:
    type: str
    status: str
    reason: str
    message: str
    heartbeat: float
    transition: float


@dataclass(slots=True)
class SimTaint:
    key: str
    effect: str
    time_added: float | None = None
    value: str = ""


@dataclass(slots=True)
class SimNode:
    index: int
    name: str
    uid: str
    region: str
    zone: str
    pool: Pool
    kubelet_version: str
    created: float
    labels: dict[str, str]
    ip: str
    provider_id: str
    machine_id: str
    system_uuid: str
    boot_id: str
    pod_cidr: str
    conditions: dict[str, Cond] = field(default_factory=dict)
    taints: list[SimTaint] = field(default_factory=list)
    unschedulable: bool = False
    pods: set = field(default_factory=set)
    """(namespace, name) of the pods bound to it."""
    deleted: bool = False
    # kubelet ---------------------------------------------------------------------------------
    kubelet_up: bool = True
    connected: bool = True
    clock_offset: float = 0.0
    runtime_down: bool = False
    cni_down: bool = False
    pressure: set = field(default_factory=set)
    cert_not_before: float = 0.0
    cert_not_after: float = math.inf
    rotation_at: float = math.inf
    slow_lease: bool = False
    lease_uid: str = ""
    lease_created: float = 0.0
    renew_time: float | None = None
    """Last renewTime written, on the node's clock."""
    lease_token: int = 0
    """Bumped to cancel a scheduled renewal."""
    status_token: int = 0
    last_report: float = 0.0
    sync_pending: bool = False
    # node lifecycle controller --------------------------------------------------------------------
    last_change: float = 0.0
    """Time the API server got the last lease renewal or Ready heartbeat change."""
    armed_deadline: float | None = None
    """The node's live entry in the controller's expiry heap (None: not armed)."""
    pod_seq: int = 0

    @property
    def zone_key(self) -> str:
        return rules.zone_key(self.labels)

    def ready(self) -> str | None:
        c = self.conditions.get("Ready")
        return c.status if c else None

    def node_clock(self, t: float) -> float:
        return t + self.clock_offset

    def can_talk(self, t: float) -> bool:
        """Can the kubelet reach and authenticate to the API server at ``t``?"""
        return self.kubelet_up and self.connected and t < self.cert_not_after and not self.deleted

    def has_taint(self, key: str, effect: str) -> bool:
        return any(x.key == key and x.effect == effect for x in self.taints)


@dataclass(slots=True)
class SimPod:
    wl: Workload
    name: str
    uid: str
    node: str
    created: float
    ip: str
    phase: str = "Running"
    ready: bool = True
    start_time: float = 0.0
    ready_since: float = 0.0
    deletion_at: float | None = None
    """When the delete request came (deletionTimestamp is this plus the grace)."""
    disruption_at: float | None = None
    evict_created: float | None = None
    evict_due: float | None = None
    evict_token: int = 0
    not_ready_since: float | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.wl.namespace, self.name)


# --- building the fleet ------------------------------------------------------------------------------


def zones_for(n_nodes: int) -> list[tuple[str, str]]:
    """(region, zone) pairs: six zones in two regions, nine zones in three above 1,000 nodes."""
    regions = REGIONS if n_nodes > 1000 else REGIONS[:2]
    return [(r, z) for r, zs in regions for z in zs]


def default_pods_per_node(n_nodes: int) -> int:
    return 8 if n_nodes <= LARGE_FLEET_NODES else 2


def node_name(pool: Pool, zone: str, index: int, width: int) -> str:
    code = zone.replace("-west-", "w").replace("-east-", "e").replace("-southeast-", "se")
    return f"{pool.name}-{code}-{index:0{width}d}"


def make_node(rng: random.Random, index: int, width: int, region: str, zone: str, pool: Pool,
              kubelet_version: str, created: float) -> SimNode:
    name = node_name(pool, zone, index, width)
    labels = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/instance-type": pool.instance_type,
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": pool.instance_type,
        "node-role.kubernetes.io/worker": "",
        "nodewatch.dev/pool": pool.name,
        rules.LABEL_REGION: region,
        rules.LABEL_ZONE: zone,
    }
    ip = f"172.{16 + (index >> 16)}.{(index >> 8) & 255}.{index & 255}"
    instance = f"i-0{rng.getrandbits(64):016x}"
    return SimNode(
        index=index, name=name, uid=make_uid(rng), region=region, zone=zone, pool=pool,
        kubelet_version=kubelet_version, created=created, labels=labels, ip=ip,
        provider_id=f"aws:///{zone}/{instance}", machine_id=f"{rng.getrandbits(128):032x}",
        system_uuid=str(uuid.UUID(int=rng.getrandbits(128))), boot_id=make_uid(rng),
        pod_cidr=f"10.{(index >> 8) & 255}.{index & 255}.0/24", lease_uid=make_uid(rng),
        lease_created=created,
    )


def healthy_conditions(t_node: float, since: float) -> dict[str, Cond]:
    """The conditions of a healthy node (heartbeat ``t_node`` on its clock)."""
    return {
        "NetworkUnavailable": Cond("NetworkUnavailable", "False", "CiliumIsUp", "Cilium is running on this node",
                                   since, since),
        "MemoryPressure": Cond("MemoryPressure", "False", "KubeletHasSufficientMemory",
                               "kubelet has sufficient memory available", t_node, since),
        "DiskPressure": Cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure",
                             t_node, since),
        "PIDPressure": Cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available",
                            t_node, since),
        "Ready": Cond("Ready", "True", "KubeletReady", "kubelet is posting ready status", t_node, since),
    }


def build_workloads(rng: random.Random, n_nodes: int, pods_per_node: int, start: float, version: str,
                    toleration_seconds: float) -> list[Workload]:
    """DaemonSets, Deployments and StatefulSets sized so the fleet has about ``pods_per_node`` pods a node."""
    n_ds = 3 if pods_per_node >= 6 else (1 if pods_per_node >= 2 else 0)
    per_node = max(0, pods_per_node - n_ds)
    total = n_nodes * per_node
    sts_total = total // 5
    dep_total = total - sts_total
    out: list[Workload] = []
    for ns, name, image in DAEMONSETS[:n_ds]:
        out.append(Workload("DaemonSet", ns, name, make_uid(rng), image.format(version=version), n_nodes,
                            daemonset_tolerations(), start - 200 * DAY, revision=stable_hash(name, n=10),
                            cpu="100m", memory="128Mi"))

    def spread(kind: str, catalogue: tuple, count: int) -> None:
        if count <= 0:
            return
        n_wl = max(1, min(count // 3, len(catalogue) * max(1, count // (len(catalogue) * 60))))
        base, extra = divmod(count, n_wl)
        for i in range(n_wl):
            ns, name, image = catalogue[i % len(catalogue)]
            if i >= len(catalogue):
                name = f"{name}-{i // len(catalogue)}"
            custom = CUSTOM_TOLERATION_SECONDS.get(name)
            tol = default_tolerations(custom if custom is not None else toleration_seconds)
            wl = Workload(kind, ns, name, make_uid(rng), image, base + (1 if i < extra else 0), tol,
                          start - rng.uniform(30, 300) * DAY, grace_seconds=60 if kind == "StatefulSet" else 30)
            if kind == "Deployment":
                wl.revision = stable_hash(ns, name, image, n=10)
                wl.rs_name = f"{name}-{wl.revision}"
                wl.rs_uid = make_uid(rng)
            else:
                wl.revision = f"{name}-{stable_hash(ns, name, image, n=10)}"
            out.append(wl)

    spread("Deployment", DEPLOYMENTS, dep_total)
    spread("StatefulSet", STATEFULSETS, sts_total)
    return out


def container_name(wl: Workload) -> str:
    return wl.name


def pod_ip(node: SimNode, seq: int) -> str:
    return f"10.{(node.index >> 8) & 255}.{node.index & 255}.{2 + seq % 250}"


def new_pod_name(rng: random.Random, wl: Workload, ordinal: int | None = None) -> str:
    if wl.kind == "StatefulSet":
        return f"{wl.name}-{ordinal}"
    if wl.kind == "DaemonSet":
        return f"{wl.name}-{rand_suffix(rng)}"
    return f"{wl.rs_name}-{rand_suffix(rng)}"


# --- rendering -----------------------------------------------------------------------------------------


def _cond_dict(c: Cond) -> dict:
    return objects.condition(c.type, c.status, reason=c.reason, message=c.message, heartbeat=c.heartbeat,
                             transition=c.transition)


def node_object(n: SimNode) -> dict:
    p = n.pool
    mem_ki = p.memory_gi * 1024 * 1024 - 380_000
    return objects.node(
        n.name, uid=n.uid, labels=dict(n.labels), created=n.created,
        conditions=[_cond_dict(c) for c in n.conditions.values()],
        taints=[objects.taint(t.key, t.effect, t.time_added, t.value) for t in n.taints],
        unschedulable=n.unschedulable,
        annotations={"node.alpha.kubernetes.io/ttl": "0",
                     "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
        spec={"podCIDR": n.pod_cidr, "podCIDRs": [n.pod_cidr], "providerID": n.provider_id},
        status={
            "capacity": {"cpu": str(p.cpu), "ephemeral-storage": "104845292Ki", "hugepages-1Gi": "0",
                         "hugepages-2Mi": "0", "memory": f"{mem_ki}Ki", "pods": "110"},
            "allocatable": {"cpu": f"{p.cpu * 1000 - 90}m", "ephemeral-storage": "95551679740",
                            "hugepages-1Gi": "0", "hugepages-2Mi": "0", "memory": f"{mem_ki - 1_000_000}Ki",
                            "pods": "110"},
            "addresses": [
                {"type": "InternalIP", "address": n.ip},
                {"type": "InternalDNS", "address": f"ip-{n.ip.replace('.', '-')}.{n.region}.compute.internal"},
                {"type": "Hostname", "address": n.name},
            ],
            "images": [
                {"names": [f"registry.k8s.io/kube-proxy:{n.kubelet_version}"], "sizeBytes": 30_461_329},
                {"names": ["quay.io/cilium/cilium:v1.16.3"], "sizeBytes": 196_502_114},
                {"names": ["registry.k8s.io/pause:3.10"], "sizeBytes": 320_368},
            ],
        },
        node_info={
            "machineID": n.machine_id,
            "systemUUID": n.system_uuid,
            "bootID": n.boot_id,
            "kernelVersion": p.kernel,
            "osImage": p.os_image,
            "containerRuntimeVersion": p.runtime,
            "kubeletVersion": n.kubelet_version,
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    )


def lease_object(n: SimNode) -> dict:
    return objects.lease(n.name, n.renew_time, uid=n.lease_uid, created=n.lease_created, node_uid=n.uid)


def pod_object(p: SimPod, node: SimNode | None) -> dict:
    wl = p.wl
    labels = {"app.kubernetes.io/name": wl.name}
    if wl.kind == "Deployment":
        labels["pod-template-hash"] = wl.revision
        generate = f"{wl.rs_name}-"
    elif wl.kind == "StatefulSet":
        labels["controller-revision-hash"] = wl.revision
        labels["statefulset.kubernetes.io/pod-name"] = p.name
        labels["apps.kubernetes.io/pod-index"] = p.name.rsplit("-", 1)[-1]
        generate = f"{wl.name}-"
    else:
        labels["controller-revision-hash"] = wl.revision
        labels["pod-template-generation"] = "1"
        generate = f"{wl.name}-"
    container = container_name(wl)
    spec: dict = {
        "containers": [{
            "name": container,
            "image": wl.image,
            "imagePullPolicy": "IfNotPresent",
            "resources": {"requests": {"cpu": wl.cpu, "memory": wl.memory}, "limits": {"memory": wl.memory}},
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
        }],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": wl.grace_seconds,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "schedulerName": "default-scheduler",
        "enableServiceLinks": True,
        "priority": 2000001000 if wl.kind == "DaemonSet" and wl.namespace == "kube-system" else 0,
        "preemptionPolicy": "PreemptLowerPriority",
        "tolerations": [dict(t) for t in wl.tolerations],
    }
    if wl.kind == "StatefulSet":
        spec["hostname"] = p.name
        spec["subdomain"] = wl.name
    if wl.kind == "DaemonSet":
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [p.node]}]}]}}}
    running = p.phase == "Running"
    ready_s = "True" if (p.ready and running) else "False"
    t_ready = p.ready_since if p.ready else (p.not_ready_since or p.start_time)
    conds = [
        {"type": "PodReadyToStartContainers", "status": "True" if running else "False",
         "lastTransitionTime": fmt_time(p.start_time)},
        {"type": "Initialized", "status": "True", "lastTransitionTime": fmt_time(p.start_time)},
        {"type": "Ready", "status": ready_s, "lastTransitionTime": fmt_time(t_ready)},
        {"type": "ContainersReady", "status": ready_s, "lastTransitionTime": fmt_time(t_ready)},
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": fmt_time(p.created)},
    ]
    if p.disruption_at is not None:
        conds.insert(0, {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager",
                         "message": "Taint manager: deleting due to NoExecute taint",
                         "lastTransitionTime": fmt_time(p.disruption_at)})
    status: dict = {"phase": p.phase, "conditions": conds, "qosClass": "Burstable"}
    if node is not None and p.node:
        status["hostIP"] = node.ip
        status["hostIPs"] = [{"ip": node.ip}]
    if running or p.phase in ("Succeeded", "Failed"):
        status["podIP"] = p.ip
        status["podIPs"] = [{"ip": p.ip}]
        status["startTime"] = fmt_time(p.start_time)
        state = ({"running": {"startedAt": fmt_time(p.start_time)}} if running else
                 {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": fmt_time(p.start_time),
                                 "finishedAt": fmt_time(p.deletion_at or p.start_time)}})
        status["containerStatuses"] = [{
            "name": container, "image": wl.image, "imageID": f"{wl.image.split(':')[0]}@sha256:"
            + hashlib.sha256(wl.image.encode()).hexdigest(),
            "containerID": "containerd://" + hashlib.sha256(p.uid.encode()).hexdigest(),
            "ready": ready_s == "True", "started": running, "restartCount": 0, "state": state,
        }]
    return objects.pod(
        p.name, wl.namespace, p.node, uid=p.uid, created=p.created, labels=labels, generate_name=generate,
        owners=[objects.owner(wl.owner_kind, wl.owner_name, wl.owner_uid)], spec=spec, status=status,
        deletion=None if p.deletion_at is None else p.deletion_at + wl.grace_seconds,
        deletion_grace=wl.grace_seconds)


def public_copy(obj: dict) -> dict:
    """A fresh deep copy without the simulator's private fields (top-level keys starting with '_')."""
    import orjson

    return orjson.loads(orjson.dumps({k: v for k, v in obj.items() if not k.startswith("_")}))
