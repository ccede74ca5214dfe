"""What ``status`` (of one cluster or several) waits for after the lists, before it answers, beyond
the doubtful lease ages (``status._await_doubtful_renewals``): the pods of the nodes tainted for
eviction, whose tolerations say the default the node rows count with (``core/pod_tolerations``)."""

from __future__ import annotations

import time
from typing import Any

TAINTED_PODS_WAIT = 5.0
"""Seconds ``status`` waits at most for the pods of the nodes tainted for eviction (their lists
start once the Node list is in: ~0.1-0.5 s on a testbed)."""


def await_tainted_nodes_pods(lives: list[Any], budget: float) -> None:
    """A node tainted for eviction is judged by the default toleration its pods show
    (``core/pod_tolerations``: the API server's may not be 300 s), and a live source watches the pods
    of the nodes not Ready once it knows them: wait, at most ``TAINTED_PODS_WAIT`` within ``--wait``,
    for those lists (of each live source in ``lives``: one a cluster), unless ``--toleration`` says
    it. Nothing tainted: no wait (a healthy fleet's answer is as fast as before). A network wait:
    real seconds."""
    waiting = []
    for live in lives:
        if "toleration_seconds" not in live.state.settings.overridden:
            tainted = live.state.eviction_tainted_nodes()
            if tainted:
                waiting.append((live, tainted))
    deadline = time.monotonic() + min(budget, TAINTED_PODS_WAIT)
    while waiting and time.monotonic() < deadline:
        waiting = [(live, tainted) for live, tainted in waiting if not live.pods_listed(tainted)]
        if waiting:
            time.sleep(0.05)
