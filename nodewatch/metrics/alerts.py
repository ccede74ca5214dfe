"""nodewatch's alerts, defined once: each as a Prometheus rule (PromQL over the metrics of
``collector.py``, with Go-template annotations) and as the same judgement on a ``FleetSample``
(what ``--alertmanager`` pushes without a Prometheus).

``deploy/prometheus/nodewatch-rules.yaml`` and the PrometheusRule beside it are written from
``RULES`` (``python -m nodewatch.metrics.alerts``); tests/metrics/test_metrics_rules.py checks the files
are what this module writes and runs ``promtool test rules`` on them.

Why these: kubernetes-mixin's KubeNodeNotReady waits ``for: 15m`` on the Ready condition, which
the controller flips only after the grace period; by then the NoExecute taint is coming and 300 s
later the pods are gone. Here the first page is the lease itself, past the grace: at the moment
the node turns Overdue (Ready still True), before or with the controller's flip, and firing on
while the lease stays stale.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ..core.multi import REQUIRED_STREAMS
from ..core.rules import NodeState
from .sample import ClusterSample, FleetSample

GROUP = "nodewatch"
FENCING = ("StatefulSet pods on a node the controller cannot reach are not replaced: the StatefulSet "
           "controller waits until the old pod is gone (at most one pod per identity). If the node is really "
           "dead, fence it first (power it off, or cut it from its storage), then delete the Node or "
           "force-delete its pods (kubectl delete pod --force --grace-period=0) so they start elsewhere. "
           "Never force-delete an unfenced node's pods: two pods with one identity may write the same volume.")

Fired = tuple[dict[str, str], dict[str, str]]
"""(labels, annotations) of one alert firing."""


@dataclass(frozen=True)
class Rule:
    name: str
    expr: str
    severity: str
    summary: str
    description: str
    """Go templates (Prometheus): ``$labels``, ``$value``, ``query``."""
    fire: Callable[[FleetSample], Iterator[Fired]]
    """The same judgement on a sample, with the annotations written out."""
    for_: str = "0s"
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def for_seconds(self) -> float:
        unit = {"s": 1, "m": 60, "h": 3600}[self.for_[-1]]
        return float(self.for_[:-1]) * unit

    def as_prometheus(self) -> dict:
        r: dict = {"alert": self.name, "expr": self.expr}
        if self.for_ != "0s":
            r["for"] = self.for_
        r["labels"] = {"severity": self.severity}
        r["annotations"] = {"summary": self.summary, "description": self.description, **self.extra}
        return r


def _ts(t: float) -> str:
    """A Unix time as Prometheus' ``humanizeTimestamp`` writes it (UTC)."""
    import datetime

    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f %z %Z")


def _overdue(s: FleetSample) -> Iterator[Fired]:
    """Past the grace, whether or not the controller has flipped Ready yet: the flip comes at its first
    monitor pass after the grace (within 5 s), often before a scrape saw the node Overdue."""
    toleration = {c.cluster: c.toleration for c in s.clusters}
    for n in s.nodes:
        if n.lease_age is not None and n.lease_age > n.grace:
            tol = toleration.get(n.cluster, 300.0)
            then = (SKIPPED if n.controller_skips else
                    "The node lifecycle controller marks it Ready=Unknown at its first pass past the grace (if it "
                    "has not yet), then taints it NoExecute; pods without their own toleration are evicted "
                    f"{tol:g}s after the taint.")
            yield ({"cluster": n.cluster, "node": n.name, "zone": n.zone},
                   {"summary": f"Node {n.name} stopped renewing its Lease: past the grace period",
                    "description": f"No renewal of node {n.name}'s Lease for {n.lease_age:.0f}s (grace {n.grace:g}s). "
                                   + then})


def _evicting(s: FleetSample) -> Iterator[Fired]:
    for n in s.nodes:
        if n.state is NodeState.EVICTING and n.eviction_at is not None:
            taint = _ts(n.taint_at) if n.taint_at is not None else "unknown"
            yield ({"cluster": n.cluster, "node": n.name, "zone": n.zone},
                   {"summary": f"Node {n.name} is NoExecute-tainted: its pods are being evicted",
                    "description": f"Tainted at {taint}; pods with only the default toleration are evicted at "
                                   f"{_ts(n.eviction_at)}.",
                    "eviction_time": _ts(n.eviction_at)})


def _statefulset(s: FleetSample) -> Iterator[Fired]:
    for n in s.nodes:
        if n.statefulset_pods > 0:
            yield ({"cluster": n.cluster, "node": n.name},
                   {"summary": f"{n.statefulset_pods} StatefulSet pods at risk on node {n.name}",
                    "description": f"Node {n.name} is {n.state.word}; {n.statefulset_pods} StatefulSet pods on it "
                                   "will not be replaced by themselves.", "fencing": FENCING})


def _zone(s: FleetSample) -> Iterator[Fired]:
    for z in s.zones:
        if z.state != "Normal":
            yield ({"cluster": z.cluster, "zone": z.zone, "state": z.state},
                   {"summary": f"Zone {z.zone} is in {z.state}",
                    "description": f"{z.not_ready} of {z.nodes} nodes of zone {z.zone} are not Ready; the controller "
                                   f"now taints at {z.taint_rate:g} nodes/s there."})


def _per_cluster(when: Callable[[ClusterSample], bool], summary: str,
                 description: Callable[[ClusterSample], str]) -> Callable[[FleetSample], Iterator[Fired]]:
    """A judgement that fires once for each cluster ``when`` holds for, labelled by the cluster
    (``{cluster}`` in ``summary`` is its name)."""
    def fire(s: FleetSample) -> Iterator[Fired]:
        for c in s.clusters:
            if when(c):
                yield {"cluster": c.cluster}, {"summary": summary.format(cluster=c.cluster),
                                               "description": description(c)}
    return fire


_master = _per_cluster(
    lambda c: c.all_zones_full, "Every zone of cluster {cluster} is in FullDisruption",
    lambda c: "The node lifecycle controller is in master disruption mode: it blames its own connectivity, "
              "taints nothing and evicts nothing until a node is Ready again.")
_suspect = _per_cluster(
    lambda c: c.controller_suspect, "The node lifecycle controller of cluster {cluster} may be down",
    lambda c: "Nodes stay past the grace period with Ready still True for more than two monitor periods: no "
              "controller is marking them Unknown.")


CERT_DAYS = 7


def _cert(s: FleetSample) -> Iterator[Fired]:
    for n in (*s.nodes, *s.certs_expiring):
        if n.cert_not_after is not None and n.cert_not_after - s.at < CERT_DAYS * 86400:
            yield ({"cluster": n.cluster, "node": n.name},
                   {"summary": f"Node {n.name}'s kubelet client certificate expires at {_ts(n.cert_not_after)}",
                    "description": "A kubelet with an expired client certificate cannot renew its Lease: the node "
                                   "goes Unknown and its pods are evicted. Check certificate rotation (CSRs "
                                   "pending or denied)."})


_blind = _per_cluster(
    lambda c: c.leases_blind and c.nodes > 0, "nodewatch is blind on cluster {cluster}",
    lambda c: f"{c.blind_reason or 'lease stream blind'}: no node's lease can be judged, so no node alert can fire.")


def _streams(s: FleetSample) -> Iterator[Fired]:
    for st in s.streams:
        if st.resource in REQUIRED_STREAMS and not st.up:
            yield ({"cluster": st.cluster, "resource": st.resource},
                   {"summary": f"nodewatch's {st.resource} stream of cluster {st.cluster} is down",
                    "description": "Not connected or not listed: what nodewatch says of this cluster is stale."})


_unreadable = _per_cluster(lambda c: bool(c.error), "nodewatch cannot read cluster {cluster}", lambda c: c.error)


def _recording(s: FleetSample) -> Iterator[Fired]:
    if s.recording:
        yield ({}, {"summary": f"nodewatch's flight recorder stopped: {s.recording}",
                    "description": "The fleet is still watched, judged and served; what happens now is not "
                                   "recorded for the postmortem. Free space in the hub's directory: recording "
                                   "resumes by itself."})


def _short(s: FleetSample) -> Iterator[Fired]:
    r = s.recorder
    holds = r.cap_holds_seconds if r is not None else None
    if r is not None and holds is not None and r.keep_seconds is not None and holds < r.keep_seconds:
        yield ({}, {"summary": "nodewatch's flight recorder keeps less than --keep",
                    "description": f"At {r.bytes_per_second or 0:.0f} bytes a second, --keep-bytes holds "
                                   f"{holds / 3600:.1f} h of the {r.keep_seconds / 3600:.1f} h asked: the oldest "
                                   "segments go first. Raise --keep-bytes (or give the directory more room)."})


def _never(_: FleetSample) -> Iterator[Fired]:
    return iter(())  # a process cannot report itself down: only Prometheus can


NODE = '{{ $labels.node }}'
SKIPPED = ("The node lifecycle controller skips this node at every pass instead (its Lease was written since "
           "the last renewal it counted: NodeControllerLeaseCircuitBreaker, 1.37+): it will not mark it Unknown "
           "nor evict its pods, even if the kubelet is down. Find who writes the Lease, or why the kubelet's "
           "clock stepped back.")
"""The Overdue page's ``then`` for a node the controller skips (``nodewatch_node_controller_skips``)."""
RULES: tuple[Rule, ...] = (
    Rule("NodewatchNodeLeaseOverdue",
         "nodewatch_node_lease_age_seconds > ignoring(node, zone) group_left "
         "nodewatch_node_monitor_grace_period_seconds",
         "critical", f"Node {NODE} stopped renewing its Lease: past the grace period",
         f"No renewal of node {NODE}'s Lease for {{{{ $value | humanizeDuration }}}}. "
         '{{ with printf "nodewatch_node_controller_skips{cluster=\'%s\',node=\'%s\'}" $labels.cluster '
         f'$labels.node | query }}}}{SKIPPED}{{{{ else }}}}The node lifecycle controller '
         "marks it Ready=Unknown at its first pass past the grace (if it has not yet), then taints it NoExecute; "
         "pods without their own toleration are evicted "
         '{{ with printf "nodewatch_default_toleration_seconds{cluster=\'%s\'}" $labels.cluster | query }}'
         '{{ . | first | value }}{{ else }}300{{ end }}s after the taint.{{ end }}', _overdue),
    Rule("NodewatchNodeEvicting",
         'nodewatch_node_eviction_timestamp_seconds and on(cluster, node, zone) '
         '(nodewatch_node_state{state="Evicting"} == 1)',
         "critical", f"Node {NODE} is NoExecute-tainted: its pods are being evicted",
         'Tainted at {{ with printf "nodewatch_node_noexecute_taint_timestamp_seconds{cluster=\'%s\',node=\'%s\'}" '
         '$labels.cluster $labels.node | query }}{{ . | first | value | humanizeTimestamp }}{{ else }}unknown'
         '{{ end }}; pods with only the default toleration are evicted at {{ $value | humanizeTimestamp }}.',
         _evicting, extra={"eviction_time": "{{ $value | humanizeTimestamp }}"}),
    Rule("NodewatchStatefulSetPodsAtRisk", "nodewatch_statefulset_pods_at_risk > 0", "critical",
         f"{{{{ $value }}}} StatefulSet pods at risk on node {NODE}",
         f"Node {NODE} is Unknown or being evicted; {{{{ $value }}}} StatefulSet pods on it will not be replaced "
         "by themselves.", _statefulset, extra={"fencing": FENCING}),
    Rule("NodewatchZoneDisruption", 'nodewatch_zone_state{state!="Normal"} == 1', "warning",
         "Zone {{ $labels.zone }} is in {{ $labels.state }}",
         'The controller now taints at {{ with printf "nodewatch_zone_eviction_rate{cluster=\'%s\',zone=\'%s\'}" '
         '$labels.cluster $labels.zone | query }}{{ . | first | value }}{{ end }} nodes/s in zone {{ $labels.zone }}.',
         _zone),
    Rule("NodewatchMasterDisruption", "nodewatch_cluster_all_zones_full_disruption == 1", "critical",
         "Every zone of cluster {{ $labels.cluster }} is in FullDisruption",
         "The node lifecycle controller is in master disruption mode: it blames its own connectivity, taints "
         "nothing and evicts nothing until a node is Ready again.", _master),
    Rule("NodewatchNodeControllerSuspect", "nodewatch_cluster_controller_suspect == 1", "critical",
         "The node lifecycle controller of cluster {{ $labels.cluster }} may be down",
         "Nodes stay past the grace period with Ready still True for more than two monitor periods: no "
         "controller is marking them Unknown.", _suspect),
    Rule("NodewatchKubeletCertificateExpiring",
         "nodewatch_kubelet_client_certificate_expiry_timestamp_seconds - ignoring(cluster, node) group_left "
         f"nodewatch_clock_timestamp_seconds < {CERT_DAYS} * 86400",
         "warning", f"Node {NODE}'s kubelet client certificate expires in {{{{ $value | humanizeDuration }}}}",
         "A kubelet with an expired client certificate cannot renew its Lease: the node goes Unknown and its "
         "pods are evicted. Check certificate rotation (CSRs pending or denied).", _cert),
    Rule("NodewatchBlind", "nodewatch_leases_blind == 1 and on(cluster) sum by (cluster) (nodewatch_nodes) > 0",
         "warning", "nodewatch is blind on cluster {{ $labels.cluster }}",
         "The lease stream is down, listing or silent: no node's lease can be judged, so no node alert can fire.",
         _blind, for_="1m"),
    Rule("NodewatchStreamDown", 'nodewatch_stream_up{resource=~"nodes|leases"} == 0', "warning",
         "nodewatch's {{ $labels.resource }} stream of cluster {{ $labels.cluster }} is down",
         "Not connected or not listed: what nodewatch says of this cluster is stale.", _streams, for_="2m"),
    Rule("NodewatchClusterUnreadable", "nodewatch_cluster_readable == 0", "warning",
         "nodewatch cannot read cluster {{ $labels.cluster }}",
         "Credentials rejected, connection refused or a bad kubeconfig entry: see nodewatch's status.",
         _unreadable, for_="1m"),
    Rule("NodewatchRecordingStopped", "nodewatch_flight_recorder_up == 0", "warning",
         "nodewatch's flight recorder stopped",
         "The fleet is still watched, judged and served; what happens now is not recorded for the postmortem. "
         "Free space in the hub's directory: recording resumes by itself.", _recording, for_="1m"),
    Rule("NodewatchRecordingShort",
         "nodewatch_flight_recorder_cap_holds_seconds < nodewatch_flight_recorder_keep_seconds", "warning",
         "nodewatch's flight recorder keeps less than --keep",
         "At the rate it writes, --keep-bytes holds {{ $value | humanizeDuration }} of the hours asked: the oldest "
         "segments go first. Raise --keep-bytes (or give the directory more room).", _short, for_="30m"),
    Rule("NodewatchDown", 'up{job="nodewatch"} == 0 or absent(up{job="nodewatch"})', "critical",
         "nodewatch is down: nothing pages for nodes that stop renewing",
         "Prometheus cannot scrape nodewatch (job nodewatch).", _never, for_="2m"),
)


def rules_document() -> dict:
    return {"groups": [{"name": GROUP, "interval": "10s", "rules": [r.as_prometheus() for r in RULES]}]}


def prometheus_rule_manifest() -> dict:
    """The same group as a prometheus-operator PrometheusRule."""
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
            "metadata": {"name": "nodewatch", "labels": {"app.kubernetes.io/name": "nodewatch", "role": "alert-rules"}},
            "spec": rules_document()}


HEADER = ("# Written by `python -m nodewatch.metrics.alerts` from nodewatch/metrics/alerts.py: edit that, not this.\n"
          "# Tested by tests/metrics/test_metrics_rules.py (promtool test rules).\n")


def render(doc: dict) -> str:
    import yaml

    return HEADER + yaml.safe_dump(doc, sort_keys=False, width=100, allow_unicode=True)


def main(argv: list[str]) -> int:
    """Write (or with ``--check``, compare) the two files under ``deploy/prometheus``."""
    from pathlib import Path

    out = Path(argv[argv.index("--dir") + 1]) if "--dir" in argv else Path("deploy/prometheus")
    files = {out / "nodewatch-rules.yaml": render(rules_document()),
             out / "nodewatch-prometheusrule.yaml": render(prometheus_rule_manifest())}
    stale = [p for p, text in files.items() if not p.exists() or p.read_text() != text]
    if "--check" in argv:
        for p in stale:
            print(f"{p}: not what nodewatch/metrics/alerts.py writes", file=sys.stderr)
        return 1 if stale else 0
    out.mkdir(parents=True, exist_ok=True)
    for p, text in files.items():
        p.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
