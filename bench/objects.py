"""Realistic Node and Lease objects as a real API server returns them (images, managedFields and all).

A Node from a production cluster is 10-20 KB of JSON, mostly ``status.images`` and
``managedFields``: the part nodewatch's informer-style transform throws away. Built with
``nodewatch.sim.objects`` (the builder the simulator and the tests use), plus what only a real
cluster adds: a resourceVersion and managedFields.
"""

from __future__ import annotations

from nodewatch.core.timeutil import format_time
from nodewatch.sim import objects

T0 = 1_800_000_000.0
ZONES = [("us-east-1", z) for z in ("us-east-1a", "us-east-1b", "us-east-1c")] + \
        [("eu-west-1", z) for z in ("eu-west-1a", "eu-west-1b")]


def raw_node(i: int) -> dict:
    name = f"ip-10-{i // 65536 % 256}-{i // 256 % 256}-{i % 256}.ec2.internal"
    region, zone = ZONES[i % len(ZONES)]
    images = [{"names": [f"registry.example.com/team-{j}/service-{j}@sha256:{'ab' * 32}",
                         f"registry.example.com/team-{j}/service-{j}:v1.{j}.{i % 7}"],
               "sizeBytes": 100_000_000 + j * 1_234_567} for j in range(30)]
    conds = [objects.condition(t, s, reason=r, message=m, heartbeat=T0 - 86400, transition=T0 - 86400)
             for t, s, r, m in (
        ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        ("Ready", "True", "KubeletReady", "kubelet is posting ready status"))]
    obj = objects.node(
        name, uid=f"7c2d9c1e-0000-4000-8000-{i:012d}", created=T0 - 86400, conditions=conds,
        labels={"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/instance-type": "m6i.2xlarge",
                "beta.kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "m6i.2xlarge",
                "topology.kubernetes.io/region": region, "topology.kubernetes.io/zone": zone,
                "failure-domain.beta.kubernetes.io/region": region,
                "failure-domain.beta.kubernetes.io/zone": zone,
                "eks.amazonaws.com/nodegroup": f"ng-{i % 12}", "eks.amazonaws.com/capacityType": "ON_DEMAND",
                "topology.ebs.csi.aws.com/zone": zone},
        annotations={"alpha.kubernetes.io/provided-node-ip": f"10.0.{i // 256 % 256}.{i % 256}",
                     "csi.volume.kubernetes.io/nodeid": f'{{"ebs.csi.aws.com":"i-0{i:016x}"}}',
                     "node.alpha.kubernetes.io/ttl": "0",
                     "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
        spec={"providerID": f"aws:///{zone}/i-0{i:016x}", "podCIDR": f"10.{i % 256}.0.0/24"},
        status={
            "capacity": {"cpu": "8", "ephemeral-storage": "104845292Ki", "hugepages-1Gi": "0",
                         "hugepages-2Mi": "0", "memory": "32386544Ki", "pods": "58"},
            "allocatable": {"cpu": "7910m", "ephemeral-storage": "95551679124", "hugepages-1Gi": "0",
                            "hugepages-2Mi": "0", "memory": "31369712Ki", "pods": "58"},
            "addresses": [{"type": "InternalIP", "address": f"10.0.{i // 256 % 256}.{i % 256}"},
                          {"type": "Hostname", "address": name}, {"type": "InternalDNS", "address": name}],
            "images": images,
        },
        node_info={"machineID": f"ec2{i:029x}", "systemUUID": f"ec2{i:029x}", "bootID": f"{i:032x}",
                   "kernelVersion": "6.1.112-124.190.amzn2023.x86_64", "osImage": "Amazon Linux 2023",
                   "containerRuntimeVersion": "containerd://1.7.22", "kubeletVersion": "v1.33.2-eks-7f9249a",
                   "kubeProxyVersion": "v1.33.2-eks-7f9249a", "operatingSystem": "linux",
                   "architecture": "amd64"},
    )
    meta = obj["metadata"]
    meta["resourceVersion"] = str(1000 + i)
    meta["managedFields"] = [{"manager": m, "operation": "Update", "apiVersion": "v1", "time": meta["creationTimestamp"],
                              "fieldsType": "FieldsV1",
                              "fieldsV1": {"f:status": {"f:conditions": {f"k:{{\"type\":\"{c}\"}}": {
                                  ".": {}, "f:lastHeartbeatTime": {}, "f:message": {}, "f:reason": {},
                                  "f:status": {}} for c in ("Ready", "MemoryPressure", "DiskPressure")}}}}
                             for m in ("kubelet", "kube-controller-manager", "aws-cloud-controller-manager")]
    return obj


def raw_lease(node_name: str, renew: float, rv: int = 1) -> dict:
    """A node's Lease as a v1.25+ API server stores it: with the kubelet's ``managedFields`` entry,
    whose time the server moves on every renewal (so a listed lease is dated by the server's clock,
    ``ingest.listed_renewal``). Until issue 29 the bench's Leases had none, which no real server of
    those releases serves: every listed age rested on renewTime alone."""
    obj = objects.lease(node_name, renew, uid=f"lease-{node_name}", created=T0 - 86400, node_uid=f"uid-{node_name}")
    obj["metadata"]["resourceVersion"] = str(rv)
    obj["metadata"]["managedFields"] = lease_managed_fields(renew)
    return obj


def lease_managed_fields(renew: float) -> list[dict]:
    """The kubelet's ``managedFields`` Update entry of a Lease renewed at ``renew`` (whole seconds,
    as the API server writes it)."""
    return [{"manager": "kubelet", "operation": "Update", "apiVersion": "coordination.k8s.io/v1",
             "time": format_time(renew), "fieldsType": "FieldsV1",
             "fieldsV1": {"f:metadata": {"f:ownerReferences": {}},
                          "f:spec": {"f:holderIdentity": {}, "f:leaseDurationSeconds": {}, "f:renewTime": {}}}}]
