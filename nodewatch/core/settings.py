"""The controller settings nodewatch judges nodes by.

Every number here is a default of a real Kubernetes component (see
``docs/kubernetes-rules.md``); each can be overridden on the command line, and
the dashboard and ``status`` show the values in use with where each came from.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, fields, replace

from .rules import TAINT_NOT_READY, TAINT_UNREACHABLE
from .timeutil import MAX_SECONDS

GRACE_BEFORE_1_32 = 40.0
GRACE_SINCE_1_32 = 50.0
LIMITS: dict[str, tuple[float, float]] = {
    "grace_seconds": (0.0, MAX_SECONDS),
    "toleration_seconds": (0.0, MAX_SECONDS),
    "monitor_period_seconds": (0.0, MAX_SECONDS),
    "startup_grace_seconds": (0.0, MAX_SECONDS),
    "lease_duration_seconds": (0.0, MAX_SECONDS),
    "unhealthy_zone_threshold": (0.0, 1.0),
    "eviction_rate": (0.0, 1e6),
    "secondary_eviction_rate": (0.0, 1e6),
    "large_cluster_threshold": (0.0, 1e9),
}
"""The range of each setting a user or a recording's header may give (inclusive)."""


def check_setting(name: str, value: object) -> None:
    """Raises ValueError (a message for the user) when ``value`` is not a number in ``LIMITS[name]``."""
    lo, hi = LIMITS.get(name, (-math.inf, math.inf))
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name}: {str(value)[:24]!r} is not a number")
    if not (lo <= value <= hi):  # also NaN
        raise ValueError(f"{name}: {value:g} is outside {lo:g}..{hi:g}")


@dataclass(frozen=True, slots=True)
class Settings:
    grace_seconds: float | None = None
    """KCM --node-monitor-grace-period. ``None``: decided by the API server version (40s / 50s)."""
    toleration_seconds: float = 300.0
    """kube-apiserver --default-not-ready/unreachable-toleration-seconds."""
    monitor_period_seconds: float = 5.0
    """KCM --node-monitor-period: how often the controller looks at each node."""
    startup_grace_seconds: float = 60.0
    """KCM --node-startup-grace-period: grace for a node that never posted Ready."""
    unhealthy_zone_threshold: float = 0.55
    """KCM --unhealthy-zone-threshold (with more than 2 not-ready nodes)."""
    eviction_rate: float = 0.1
    """KCM --node-eviction-rate, nodes/s per zone."""
    secondary_eviction_rate: float = 0.01
    """KCM --secondary-node-eviction-rate, nodes/s in a partially disrupted large zone."""
    large_cluster_threshold: int = 50
    """KCM --large-cluster-size-threshold: zones above it keep the secondary rate."""
    lease_duration_seconds: float = 40.0
    """kubelet nodeLeaseDurationSeconds, used when a Lease does not say."""
    server_version: str | None = None
    """The API server's gitVersion, when known; picks the default grace."""
    overridden: frozenset[str] = field(default_factory=frozenset)
    """Names of the settings the user set explicitly."""
    learned_tolerations: tuple[tuple[str, float], ...] = ()
    """(taint key, seconds): the toleration most of the watched pods have for that NoExecute taint
    (``pod_tolerations.Tally``: what the API server's DefaultTolerationSeconds plugin wrote into
    them). Used instead of ``toleration_seconds`` unless the user set that; derived from the
    state's pods, never recorded."""

    @property
    def grace(self) -> float:
        """The grace period in force."""
        if self.grace_seconds is not None:
            return self.grace_seconds
        return default_grace_for_version(self.server_version)

    def toleration_for(self, key: str) -> float:
        """The pods' toleration of the NoExecute taint ``key`` that a node's eviction countdown
        counts: the flag, else what the pods say (``learned_tolerations``), else the default."""
        if "toleration_seconds" not in self.overridden:
            for k, seconds in self.learned_tolerations:
                if k == key:
                    return seconds
        return self.toleration_seconds

    @property
    def toleration(self) -> float:
        """The toleration of ``unreachable`` in force (a node that stopped reporting is tainted so)."""
        return self.toleration_for(TAINT_UNREACHABLE)

    def origin(self, name: str) -> str:
        """Where a setting's value came from, for the screen: 'flag', 'server vX.Y', 'pods' or 'default'."""
        if name in self.overridden:
            return "flag"
        if name == "grace_seconds" and self.server_version:
            return f"server {self.server_version}"
        if name == "toleration_seconds":
            return self.toleration_origin(TAINT_UNREACHABLE)  # the one ``toleration`` is
        return "default"

    def toleration_origin(self, key: str) -> str:
        """Where ``toleration_for(key)`` came from: 'flag', 'pods' or 'default'."""
        if "toleration_seconds" in self.overridden:
            return "flag"
        return "pods" if any(k == key for k, _ in self.learned_tolerations) else "default"

    def toleration_text(self) -> str:
        """``toleration 60s (pods)``; ``toleration 45s, not-ready 300s (pods)`` when the two taints'
        tolerations differ; ``toleration 300s (default), not-ready 60s (pods)`` when the pods taught
        only one of them."""
        unreachable, not_ready = self.toleration, self.toleration_for(TAINT_NOT_READY)
        u_from, n_from = self.toleration_origin(TAINT_UNREACHABLE), self.toleration_origin(TAINT_NOT_READY)
        if u_from != n_from:
            return f"toleration {unreachable:g}s ({u_from}), not-ready {not_ready:g}s ({n_from})"
        both = f"{unreachable:g}s" if unreachable == not_ready else f"{unreachable:g}s, not-ready {not_ready:g}s"
        return f"toleration {both} ({u_from})"

    def with_server_version(self, version: str | None) -> "Settings":
        return replace(self, server_version=version)

    def override(self, **values: float | None) -> "Settings":
        """A copy with the given settings set by the user; ``None`` values are ignored."""
        chosen = {k: v for k, v in values.items() if v is not None}
        names = {f.name for f in fields(self)}
        unknown = set(chosen) - names
        if unknown:
            raise ValueError(f"unknown settings: {sorted(unknown)}")
        for name, v in chosen.items():
            check_setting(name, v)
        return replace(self, overridden=self.overridden | frozenset(chosen), **chosen)

    def as_dict(self) -> dict[str, float | int | str | None]:
        return {
            "grace_seconds": self.grace,
            "toleration_seconds": self.toleration_seconds,
            "monitor_period_seconds": self.monitor_period_seconds,
            "startup_grace_seconds": self.startup_grace_seconds,
            "unhealthy_zone_threshold": self.unhealthy_zone_threshold,
            "eviction_rate": self.eviction_rate,
            "secondary_eviction_rate": self.secondary_eviction_rate,
            "large_cluster_threshold": self.large_cluster_threshold,
            "server_version": self.server_version,
        }

    def summary(self, *, zone_threshold: bool = False) -> str:
        """The settings in force, each with where it came from, in one line (the dashboard's header,
        ``status``): ``grace 50s (server v1.33.1) · toleration 300s (default) · monitor 5s (default)``;
        with ``zone_threshold`` the unhealthy-zone threshold too."""
        line = (
            f"grace {self.grace:g}s ({self.origin('grace_seconds')}) · "
            f"{self.toleration_text()} · "
            f"monitor {self.monitor_period_seconds:g}s ({self.origin('monitor_period_seconds')})"
        )
        return f"{line} · zone threshold {self.unhealthy_zone_threshold:g}" if zone_threshold else line


_VERSION = re.compile(r"v?(\d+)\.(\d+)")


def parse_minor(version: str | None) -> tuple[int, int] | None:
    """(major, minor) from a gitVersion such as ``v1.32.3-eks-1234``."""
    if not version:
        return None
    m = _VERSION.match(version.strip())
    if not m:
        return None
    return int(m.group(1)), int(m.group(2))


def default_grace_for_version(version: str | None) -> float:
    """40s up to v1.31, 50s from v1.32 (kubernetes PR #126287). Unknown version: 40s."""
    mm = parse_minor(version)
    if mm is not None and mm >= (1, 32):
        return GRACE_SINCE_1_32
    return GRACE_BEFORE_1_32


_PATCH = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")


def parse_patch(version: str | None) -> tuple[int, int, int] | None:
    """(major, minor, patch) from a gitVersion such as ``v1.20.2``; None without a patch number."""
    if not version:
        return None
    m = _PATCH.match(version.strip())
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


TAINT_QUEUE_FIXED_IN = ((1, 20, 5), (1, 21, 0))
"""kubernetes PR #96876 ("fix nodelifecyle controller not add NoExecute taint bug"): in 1.21.0,
cherry-picked to 1.20.5. From PR #89059 (1.19) until then ``markNodeForTainting`` took a waiting
node out of the zone queue's set but not its heap (``SetRemove``), then added it again: every
monitor pass left one more entry. The fix (``Remove``) keeps one entry per node."""


def taint_queue_keeps_duplicates(version: str | None) -> bool:
    """Whether the controller of this API server version leaves the extra queue entries that
    re-taint nodes and hold back the nodes behind them (v1.19.0 to v1.20.4; see
    ``TAINT_QUEUE_FIXED_IN``). The 1.19 and 1.18 branches got the fix in later patch releases
    that are not told apart here: every 1.19 counts as affected. Unknown version: False."""
    minor = parse_minor(version)
    mm = parse_patch(version) or (minor + (0,) if minor else None)
    if mm is None:
        return False
    if mm[:2] == (1, 19):
        return True
    if mm[:2] == (1, 20):
        return mm < TAINT_QUEUE_FIXED_IN[0]
    return False


TAINT_IN_THE_FLIP_PASS_SINCE = (1, 34)
"""kubernetes PR #120816 ("NoExecute taint should be added when a Node's ready condition becomes
Unknown", issue #120815), first in 1.34.0 (read in the released trees: v1.33.13's
``monitorNodeHealth`` still hands ``&observedReadyCondition`` to ``processTaintBaseEviction``,
v1.34.0's hands ``currentReadyCondition``; upstream test ``TestApplyNoExecuteTaintsToUnreachableNode``
came with it). Before, the pass judged the node by the Ready condition it had *observed*, before its
own update: the Unknown it wrote was seen, and the node queued, one pass later."""


LEASE_CIRCUIT_BREAKER_SINCE = (1, 37)
"""The node controller's ``NodeControllerLeaseCircuitBreaker`` (beta and on by default in 1.37):
before it marks a node Unknown it reads the live Lease, and if its resourceVersion is not the one
of the last Lease that moved the probe on (a renewTime newer than the one before), it skips the
node for that pass ("Update health of Node from Controller error, Skipping - no pods will be
evicted"), meant for a lease cache that fell behind."""


def lease_circuit_breaker(version: str | None) -> bool:
    """Whether the controller of this version holds off marking a node Unknown while its Lease was
    written after the last renewal it counted (``LEASE_CIRCUIT_BREAKER_SINCE``). A kubelet whose
    clock stepped back writes such Leases every 10 s; an annotation of a dead node's Lease is one
    such write: on the v1.37.2 testbed the controller skipped the node at every pass and never
    marked it Unknown in both cases; v1.20.2 marked it after the grace."""
    mm = parse_minor(version)
    return mm is not None and mm >= LEASE_CIRCUIT_BREAKER_SINCE


WRITE_TIME_FOLLOWS_VALUES_SINCE = (1, 25)


def writes_follow_renewals(server_version: str | None) -> bool:
    """Whether an API server of this version moves a field manager's time on every write that
    changes a value (kubernetes PR #110058): then a Lease's ``managedFields`` time is its last
    renewal's, on the server's clock (``ingest.listed_renewal``; the lease stream's dated frontier,
    ``core/evidence.py``; readers that predict a renewal's timing, ``replay/superseded.py``)."""
    mm = parse_minor(server_version)
    return mm is not None and mm >= WRITE_TIME_FOLLOWS_VALUES_SINCE


def taint_queued_in_the_flip_pass(version: str | None) -> bool:
    """Whether the controller of this API server version queues a node for its NoExecute taint in
    the monitor pass that writes its Ready=Unknown (1.34+, ``TAINT_IN_THE_FLIP_PASS_SINCE``), rather
    than one pass later, and so keeps the taints of the nodes that pass flipped when it enters
    master disruption mode (``rules.effective_taints``). Unknown version: False, as the other version
    inputs (a live source always knows it from ``/version``)."""
    mm = parse_minor(version)
    return mm is not None and mm >= TAINT_IN_THE_FLIP_PASS_SINCE
