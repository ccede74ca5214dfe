"""Evidence not yet in: when a listed lease's age may not call its node Late or Overdue yet.

A Lease that arrived in a list was renewed at some moment before the list; when the API server
does not date that renewal (no ``managedFields`` write time that follows renewals: before v1.25,
or a server that writes none), only ``renewTime`` says when, on the node's own clock
(``ingest.listed_renewal``: ``age_from`` "renewTime" or "server-bound"). A node whose clock is
30 s behind then looks 30 s late in the list and renews on the watch a few seconds later: the
list's age was a claim, and the evidence that settles it (a renewal on the watch, or none for a
whole renewal interval) had not arrived. Seen at 65,000 nodes against the simulated server, whose
kubelets stamp renewTime on a clock behind the wall by its own setup time: a first complete frame
with 63,473 nodes Late, falling as renewals arrived (issue 29).

So a frame drawn within one renewal interval (+ ``RENEWAL_MARGIN``) of the lease list completing
judges such a lease as unknown (no Late, no Overdue from its age; the API server's own Ready
condition still counts), and says how many are awaiting a renewal. After that the list's age
stands: a live kubelet has renewed by then (its renewal is timed by its receipt), a stopped one
never will. A lease the server dates (``age_from`` "server") or that renewed on the watch
("receipt") is evidence at once.

A one-shot answer (``status``) cannot wait a renewal interval for every lease in doubt (issue 22:
that wait came exactly when an incident started); it judges by the list at once and names the
doubt in words (``FleetState.judge_lists_at_once``, ``commands.status.node_clock_note``).
"""

from __future__ import annotations

from .rules import renew_interval

UNDATED = frozenset(("renewTime", "server-bound"))
"""``LeaseTrack.age_from`` values whose age the API server did not date (``views.AGE_FROM``)."""

RENEWAL_MARGIN = 2.0
"""Beyond one renewal interval: the kubelet's jitter and the renewal's way through the watch."""


def evidence_due(listed_at: float, lease_duration: float) -> float:
    """When a lease listed at ``listed_at`` (its list's SYNCED, received) that has not renewed on
    the watch since is judged by its listed age: one renewal interval + ``RENEWAL_MARGIN`` later."""
    return listed_at + renew_interval(lease_duration) + RENEWAL_MARGIN


def awaiting_renewal(age_from: str, listed_at: float | None, lease_duration: float, now: float) -> bool:
    """Whether a lease's age is not evidence yet at ``now``: undated by the server, and within
    ``evidence_due`` of its list (``listed_at`` None: no live list to wait after)."""
    return (listed_at is not None and age_from in UNDATED
            and listed_at <= now < evidence_due(listed_at, lease_duration))
