"""Priorities of the simulation's event heap.

At the same virtual instant, kubelet writes run before controller passes: a lease renewal that
reaches the API server "at" a monitor pass is seen by that pass, as it would be a moment earlier.
"""

PRIO_KUBELET = 0
PRIO_CONTROLLER = 1
