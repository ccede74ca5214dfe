"""What the simulated fleet is made of: regions and zones, node pools, and the workloads it runs.

A realistic mix (an AWS-like fleet; Deployments, StatefulSets and DaemonSets of a typical shop;
a few teams with their own ``tolerationSeconds``) that ``shapes`` builds nodes and pods from.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core import rules

REGIONS = (
    ("eu-west-1", ("eu-west-1a", "eu-west-1b", "eu-west-1c")),
    ("us-east-1", ("us-east-1a", "us-east-1b", "us-east-1c")),
    ("ap-southeast-1", ("ap-southeast-1a", "ap-southeast-1b", "ap-southeast-1c")),
)


@dataclass(frozen=True)
class Pool:
    name: str
    instance_type: str
    cpu: int
    memory_gi: int
    kernel: str
    os_image: str
    runtime: str


POOLS = (
    Pool("general", "m6i.2xlarge", 8, 32, "6.1.112-124.190.amzn2023.x86_64", "Amazon Linux 2023.6.20241010",
         "containerd://1.7.22"),
    Pool("compute", "c6i.4xlarge", 16, 32, "6.1.112-124.190.amzn2023.x86_64", "Amazon Linux 2023.6.20241010",
         "containerd://1.7.22"),
    Pool("memory", "r6i.2xlarge", 8, 64, "6.8.0-1017-aws", "Ubuntu 24.04.1 LTS", "containerd://1.7.24"),
)

DEPLOYMENTS = (
    ("shop", "frontend", "ghcr.io/acme/shop-frontend:4.12.1"),
    ("shop", "cart", "ghcr.io/acme/cart:2.3.0"),
    ("shop", "checkout", "ghcr.io/acme/checkout:2.8.4"),
    ("payments", "payments-api", "ghcr.io/acme/payments-api:7.1.0"),
    ("payments", "ledger-worker", "ghcr.io/acme/ledger-worker:7.1.0"),
    ("search", "query", "ghcr.io/acme/search-query:1.19.2"),
    ("monitoring", "grafana", "docker.io/grafana/grafana:11.3.0"),
    ("kube-system", "coredns", "registry.k8s.io/coredns/coredns:v1.11.3"),
    ("ingress-nginx", "ingress-nginx-controller", "registry.k8s.io/ingress-nginx/controller:v1.11.3"),
    ("shop", "recommendations", "ghcr.io/acme/recommendations:0.9.7"),
)
STATEFULSETS = (
    ("data", "postgres", "docker.io/library/postgres:16.4"),
    ("data", "kafka", "docker.io/bitnami/kafka:3.8.0"),
    ("data", "redis", "docker.io/library/redis:7.4.1"),
    ("monitoring", "prometheus", "quay.io/prometheus/prometheus:v2.55.0"),
    ("search", "elasticsearch", "docker.elastic.co/elasticsearch/elasticsearch:8.15.3"),
)
DAEMONSETS = (
    ("kube-system", "kube-proxy", "registry.k8s.io/kube-proxy:{version}"),
    ("kube-system", "cilium", "quay.io/cilium/cilium:v1.16.3"),
    ("monitoring", "node-exporter", "quay.io/prometheus/node-exporter:v1.8.2"),
)

# Custom tolerations some teams set (the rest get the admission plugin's 300s defaults).
CUSTOM_TOLERATION_SECONDS = {"checkout": 30, "kafka": 600}


def default_tolerations(seconds: float) -> list[dict]:
    """What the DefaultTolerationSeconds admission plugin adds to a pod without its own."""
    return [
        {"key": rules.TAINT_NOT_READY, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": int(seconds)},
        {"key": rules.TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": int(seconds)},
    ]


def daemonset_tolerations() -> list[dict]:
    """The tolerations the DaemonSet controller adds to every daemon pod (no tolerationSeconds)."""
    out = [
        {"key": rules.TAINT_NOT_READY, "operator": "Exists", "effect": "NoExecute"},
        {"key": rules.TAINT_UNREACHABLE, "operator": "Exists", "effect": "NoExecute"},
    ]
    for key in (rules.TAINT_DISK_PRESSURE, rules.TAINT_MEMORY_PRESSURE, rules.TAINT_PID_PRESSURE,
                rules.TAINT_UNSCHEDULABLE, rules.TAINT_NETWORK_UNAVAILABLE):
        out.append({"key": key, "operator": "Exists", "effect": "NoSchedule"})
    return out
