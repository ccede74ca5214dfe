"""Evidence not yet in: when a listed lease's age may not call its node Late or Overdue yet.

A Lease that arrived in a list was renewed at some moment before the list. Two things can make
its listed age a claim rather than evidence (issue 29):

- **Undated ages.** When the API server does not date that renewal (no ``managedFields`` write
  time that follows renewals: before v1.25, or a server that writes none), only ``renewTime`` says
  when, on the node's own clock (``ingest.listed_renewal``: ``age_from`` "renewTime" or
  "server-bound"). A node whose clock is 30 s behind then looks 30 s late in the list and renews on
  the watch a few seconds later. Seen at 65,000 nodes against the simulated server, whose kubelets
  stamp renewTime on a clock behind the wall: a first complete frame with 63,473 nodes Late.
  Such an age is evidence once the stream has carried one renewal interval (+ ``RENEWAL_MARGIN``)
  after the list (``evidence_due``): a live kubelet has renewed in it, a stopped one never will.
- **Renewals not read yet.** A dated age (``age_from`` "server") is right at the list's moment;
  the renewals after it are in the lease watch stream, and while nodewatch is busy with the
  65,000 Nodes they sit there unread. A frame at ``now`` that judges by ``now`` alone then calls
  every lease Late whose late time has passed although its renewal has long been written: measured
  at 65k on a quiet machine, frames before the complete one called up to 18,131 live nodes Late.
  Such an age is evidence once the stream has carried everything up to its late time.

Both are one rule: a listed age is evidence once the lease stream's **frontier** (``StreamFrontier``:
how far in time the stream is known to have been read) has passed the moment the age needs
(``evidence_needed``); until then the node is judged as if its lease age were unknown (no Late, no
Overdue from it; the API server's own Ready condition still counts) and the header says how many
leases are awaited. A lease that renewed on the watch ("receipt") is timed by that receipt, and
its age calls its node Late only once nodewatch's reader has read the stream up to its late time
(``receipt_awaiting``, ``StreamFrontier.read_to``): a reader that fell behind (the lease watch starved while the Node list is
applied) has the next renewal unread, and last session's start at 65k still called up to 11,111
live nodes Late in frames before the complete one. Until then the node is judged as of the frontier
(Ready, its age shown). Without a frontier (a source that does not track one: a replay, tests of
the rule by time alone) the frontier is ``now``.

A one-shot answer (``status``) cannot wait for every lease in doubt (issue 22: that wait came
exactly when an incident started); it judges by the list at once and names the doubt in words
(``FleetState.judge_lists_at_once``, ``commands.status.node_clock_note``).
"""

from __future__ import annotations

import math

from .rules import renew_interval

UNDATED = frozenset(("renewTime", "server-bound"))
"""``LeaseTrack.age_from`` values whose age the API server did not date (``views.AGE_FROM``)."""
LISTED = UNDATED | {"server"}
"""``LeaseTrack.age_from`` values of an age a list gave (a renewal seen on the watch: "receipt")."""

RENEWAL_MARGIN = 2.0
"""Beyond one renewal interval: the kubelet's jitter and the renewal's way through the watch."""
IN_FLIGHT = 1.0
"""A stream read to its end at ``t`` has carried every write made before ``t - IN_FLIGHT``: the
API server's watch dispatch and the network take less (a write made just before is still on its way)."""


QUIET = 5.0
"""A dated stream that has sent nothing at all for this long while its reader waited on it has
nothing to send: its frontier is ``now - IN_FLIGHT`` (at 65k renewals never pause that long)."""


class StreamFrontier:
    """How far in time the live lease stream is known to have been read (and applied).

    Fed from the stream's reader thread only (``sources/reflector``) and read by the evaluation
    (``at``): plain floats, one writer, a reader that may see the previous value, never a torn one.

    Two measures, for the two kinds of age (``at``'s ``dated``):

    - **Dated** ages (``age_from`` "server", v1.25 on): the server's write times of the Leases
      applied (``written``, clamped to their receipt). A watch delivers writes in their order, so
      every write before the newest one applied is in. This holds however far behind the server's
      own watch dispatch is: a stream read to its end says nothing about renewals the server has
      written and not sent yet (seen at 65k against the simulated server, one process serving the
      670 MB Node list beside the lease watch: frames called 3,400 live nodes Late with the
      stream read to its end). Where the stream is silent for ``QUIET`` (no renewals to carry),
      the silence is the frontier.
    - **Undated** ages (the server's write times do not follow renewals): the moments the reader
      found nothing left to read after applying a block (``caught_up``) or waits on an empty
      stream (``idle``), less ``IN_FLIGHT``.
    """

    __slots__ = ("written_to", "drained_to", "idle_since")

    def __init__(self) -> None:
        self.written_to = -math.inf
        """The newest server write time of a Lease applied (nodewatch's clock: clamped to its receipt)."""
        self.drained_to = -math.inf
        """The last moment the reader had read the stream to its end, less ``IN_FLIGHT``."""
        self.idle_since: float | None = None
        """The reader has been waiting on a stream with nothing left to read since then (None: it
        is reading, or has not found the stream empty)."""

    def written(self, t: float) -> None:
        """A write the server made at ``t`` (clamped to its receipt) was applied."""
        if t > self.written_to:
            self.written_to = t

    def caught_up(self, at: float) -> None:
        """At ``at`` the stream had nothing left to read: every write it carried ``IN_FLIGHT``
        before is in."""
        if at - IN_FLIGHT > self.drained_to:
            self.drained_to = at - IN_FLIGHT

    def untracked(self) -> None:
        """The reader cannot tell when it has read the stream to its end: judge by ``now`` alone
        (as before the frontier; a stream read through urllib3, ``chunked.BodyReader.drained``)."""
        self.written_to = self.drained_to = math.inf

    def idle(self, since: float | None) -> None:
        """The reader waits on an empty stream since ``since`` (None: it has something to read)."""
        self.idle_since = since

    def read_to(self, now: float) -> float:
        """How far nodewatch's own reader is known to have read what the stream delivered: ``now``
        while it waits on an empty stream, else the last moment it found nothing left to read. What
        a receipt-timed age waits for (``receipt_awaiting``): a reader behind has renewals unread;
        what the server has not sent yet is not asked here (the controller, timing renewals by its
        own informer, does not wait for it either)."""
        if self.idle_since is not None:
            return now
        return min(self.drained_to + IN_FLIGHT, now)

    def at(self, now: float, dated: bool) -> float:
        """The frontier at ``now`` for a ``dated`` age (see the class docstring), never past ``now``."""
        idle = self.idle_since
        if dated:
            f = self.written_to
            if idle is not None and now - idle >= QUIET:
                f = max(f, now - IN_FLIGHT)
        else:
            f = self.drained_to
            if idle is not None:
                f = max(f, now - IN_FLIGHT)
        return min(f, now)


def evidence_due(listed_at: float, lease_duration: float) -> float:
    """When an undated lease listed at ``listed_at`` (its list's SYNCED, received) that has not
    renewed on the watch since is judged by its listed age: one renewal interval +
    ``RENEWAL_MARGIN`` later."""
    return listed_at + renew_interval(lease_duration) + RENEWAL_MARGIN


def evidence_needed(age_from: str, observed_at: float | None, listed_at: float | None,
                    lease_duration: float) -> float | None:
    """How far the lease stream must have been read before a lease's age is evidence: for an
    undated listed age ``evidence_due``, for a dated one its late time; None when it is evidence
    already (renewed on the watch, no age, or no live list to wait after)."""
    if listed_at is None or age_from not in LISTED or observed_at is None:
        return None
    if age_from in UNDATED:
        return evidence_due(listed_at, lease_duration)
    return observed_at + 2 * renew_interval(lease_duration)


def receipt_awaiting(late_at: float, read_to: float) -> bool:
    """Whether a lease timed by its receipt on the watch ("receipt"), whose late time ``late_at``
    the clock has passed, is still no evidence: nodewatch's reader has not read the stream that far
    (``StreamFrontier.read_to``), so the renewal that would keep its node Ready may be sitting
    unread in it (a reader behind while 65,000 Nodes are applied). Its node is then judged as of
    ``read_to`` (not Late yet), and again once the reader has read past ``late_at``. A reader that
    keeps up waits on the stream, so a quiet or steady cluster's Late and Overdue come when the
    clock says (the testbed's Overdue window is a second or two: a wait of ``IN_FLIGHT`` there
    skipped it)."""
    return read_to < late_at


def awaiting_renewal(age_from: str, observed_at: float | None, listed_at: float | None, lease_duration: float,
                     now: float, frontier: float) -> float | None:
    """Whether a lease's age is not evidence yet at ``now`` with the stream read up to
    ``frontier``: the frontier it needs (``evidence_needed``), or None when it is evidence. An
    undated listed age waits from its list on; a dated one only once it would call the node Late
    (before, its age says Ready, which is true whatever is still in the stream)."""
    needed = evidence_needed(age_from, observed_at, listed_at, lease_duration)
    if needed is None or frontier >= needed or now < listed_at:  # type: ignore[operator]
        return None
    if age_from not in UNDATED and now <= needed:
        return None
    return needed
