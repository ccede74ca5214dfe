"""The default toleration the fleet's pods were given, learned from the pods themselves.

Why: a node row's eviction countdown is that of the pods without a toleration of their own: the
``tolerationSeconds`` kube-apiserver's DefaultTolerationSeconds admission plugin writes into every
pod that has none for ``node.kubernetes.io/not-ready`` or ``unreachable``
(``--default-not-ready-toleration-seconds``, ``--default-unreachable-toleration-seconds``, 300 s
unless set). nodewatch cannot read the API server's flags; it reads what they wrote. On the v1.37.2
testbed with both flags at 60 s, a stopped kubelet's pods were Terminating while the node row
said "evict in 3m56s" from the 300 s default.

So each watched pod counts the seconds of its toleration of each of the two taints, as the
taint-eviction controller finds it (the pod's first toleration that tolerates the taint:
``rules.matching_tolerations``); a pod that tolerates the taint forever (a DaemonSet's) or not
at all is not counted. Where one value is held by more than half of the pods counted for a taint,
the node rows count with it (``Settings.learned_tolerations``), and the header says "(pods)".
A pod with a toleration of its own is still evicted by its own, in its row of the drill-down.

The counts change with each pod added, changed or deleted (``Ingest``), and are rebuilt from the
pods when a keyframe is restored; only a change of the value learned judges the nodes again.
"""

from __future__ import annotations

from collections.abc import Iterable

from .objects import PodRecord
from .rules import EVICTION_TAINTS, Taint, Toleration, matching_tolerations

Counts = dict[str, dict[float, int]]
"""Taint key -> tolerationSeconds -> pods."""


def seconds_of(tolerations: tuple[Toleration, ...]) -> tuple[tuple[str, float], ...]:
    """(taint key, seconds) of each eviction taint a pod with these tolerations tolerates for a
    while (not forever, not at all)."""
    out = []
    for key in EVICTION_TAINTS:
        used = matching_tolerations((Taint(key, "NoExecute"),), tolerations)
        if used:
            seconds = used[0].seconds
            if seconds is not None:
                out.append((key, max(0.0, float(seconds))))
    return tuple(out)


def count(counts: Counts, pod: PodRecord, n: int) -> None:
    """Add ``n`` (1 or -1) pods with ``pod``'s tolerations to ``counts``."""
    for key, seconds in seconds_of(pod.tolerations):
        by = counts.setdefault(key, {})
        left = by.get(seconds, 0) + n
        if left > 0:
            by[seconds] = left
        else:
            by.pop(seconds, None)
            if not by:
                del counts[key]


def counted(pods: Iterable[PodRecord]) -> Counts:
    """The counts of these pods (a keyframe restored)."""
    counts: Counts = {}
    for pod in pods:
        count(counts, pod, 1)
    return counts


def learned(counts: Counts) -> tuple[tuple[str, float], ...]:
    """(taint key, seconds) where more than half of the pods counted for that taint have those seconds."""
    out = []
    for key in sorted(counts):
        by = counts[key]
        seconds, most = max(by.items(), key=lambda kv: (kv[1], -kv[0]))
        if 2 * most > sum(by.values()):
            out.append((key, seconds))
    return tuple(out)
