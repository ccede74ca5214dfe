"""The default toleration the fleet's pods were given, learned from the pods themselves.

Why: a node row's eviction countdown is that of the pods without a toleration of their own: the
``tolerationSeconds`` kube-apiserver's DefaultTolerationSeconds admission plugin writes into every
pod that has none for ``node.kubernetes.io/not-ready`` or ``unreachable``
(``--default-not-ready-toleration-seconds``, ``--default-unreachable-toleration-seconds``, 300 s
unless set). nodewatch cannot read the API server's flags; it reads what they wrote. On the v1.37.2
testbed with both flags at 60 s, a stopped kubelet's pods were Terminating while the node row
said "evict in 3m56s" from the 300 s default.

So each pod counts the seconds of its toleration of each of the two taints, as the taint-eviction
controller finds it (the pod's first toleration that tolerates the taint:
``rules.matching_tolerations``); a pod that tolerates the taint forever (a DaemonSet's) or not at
all is not counted. Where one value is held by more than half of the pods counted for a taint, the
node rows count with it (``Settings.learned_tolerations``) and the header says "(pods)"; where the
pods disagree, with the default. Where no pod is counted any more (a live source watches the pods
of the nodes not Ready only, and the pod garbage collector force-deletes them all once such a node
is tainted out-of-service), the value learned last stays: the pods are gone, the API server's
default is not. A pod with a toleration of its own is still evicted by its own, in its row of the
drill-down.

``Tally`` is the one rule: the state's ``Ingest`` feeds it every pod event, a keyframe keeps a copy, and a one-shot answer that applies no pod (``replay/superseded.py``) feeds its own with the
same events in the same order.
"""

from __future__ import annotations

from .rules import EVICTION_TAINTS, Taint, Toleration, matching_tolerations

Seconds = tuple[tuple[str, float], ...]
"""(taint key, tolerationSeconds) of each eviction taint a pod tolerates for a while, by key."""


def seconds_of(tolerations: tuple[Toleration, ...]) -> Seconds:
    """The ``Seconds`` of a pod with these tolerations."""
    out = []
    for key in EVICTION_TAINTS:
        used = matching_tolerations((Taint(key, "NoExecute"),), tolerations)
        if used:
            seconds = used[0].seconds
            if seconds is not None:
                out.append((key, max(0.0, float(seconds))))
    return tuple(out)


class Tally:
    """How many pods tolerate each eviction taint for how long, and the default it shows
    (``learned``: (taint key, seconds), by key)."""

    __slots__ = ("counts", "learned")

    def __init__(self, learned: Seconds = ()) -> None:
        self.counts: dict[str, dict[float, int]] = {}
        self.learned = learned

    def copy(self) -> Tally:
        """A copy to keep (a keyframe's: a few small dictionaries, not a pass over the pods)."""
        tally = Tally(self.learned)
        tally.counts = {key: dict(by) for key, by in self.counts.items()}
        return tally

    def change(self, old: Seconds, new: Seconds) -> bool:
        """A pod's ``Seconds`` went from ``old`` to ``new`` (``()``: none, or no pod); True when
        what is learned changed."""
        if old == new:
            return False
        self._add(old, -1)
        self._add(new, 1)
        learned = self._learned()
        if learned == self.learned:
            return False
        self.learned = learned
        return True

    def _add(self, seconds: Seconds, n: int) -> None:
        counts = self.counts
        for key, value in seconds:
            by = counts.setdefault(key, {})
            left = by.get(value, 0) + n
            if left > 0:
                by[value] = left
            else:
                by.pop(value, None)
                if not by:
                    del counts[key]

    def _learned(self) -> Seconds:
        before = dict(self.learned)
        out = []
        for key in sorted(EVICTION_TAINTS):
            by = self.counts.get(key)
            if by:
                value, most = max(by.items(), key=lambda kv: (kv[1], -kv[0]))
                if 2 * most > sum(by.values()):
                    out.append((key, value))
            elif key in before:  # no pod counted now: what the last ones showed stays
                out.append((key, before[key]))
        return tuple(out)
