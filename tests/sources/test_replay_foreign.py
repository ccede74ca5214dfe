"""Recordings nodewatch did not write (``bench/foreign_recording.py``: other key orders, spacing,
extra fields, full managedFields, no ``SYNCED`` lines or with them, a server version or none) replay
to the state the slow generic path gives: every line read by ``recording.parse_line`` (a full JSON
decode into dicts) and applied through the dict readers in time order. ``status --replay``'s fast
path (the typed decoder, superseded renewals left out) and the plain one-pass replay must both
give it, at several instants."""

from __future__ import annotations

import math

import pytest

from bench import foreign_recording
from nodewatch.core.objects import NodeRecord
from nodewatch.core.timeutil import parse_when
from nodewatch.sources.recording_input import read_recording
from nodewatch.sources.replay import state_at
from nodewatch.sources.replay.clusters import new_state
from nodewatch.sources.replay.index import apply_entry
from nodewatch.sources.replay.lines import parse, plain_line
from nodewatch.sources.replay.superseded import Deferred, Superseded, deferred, deferred_lease
from tests.sources.test_replay_superseded import _answers, _same_answer, _tracks

NODES, MINUTES = 45, 3.0
"""45 nodes: one zone's 1 % is one node; it stops renewing at +60 s, is tainted at +100 s, comes
back at +120 s."""
AT = [None, "+0", "+0.6", "+9", "+59", "+61", "+99.5", "+101", "+121", "+150"]


def _generic(path: str, at: str | None):
    """The state at ``at`` the slow way: dicts, every line applied, in time order (stable)."""
    header, entries, problems = read_recording(path)
    assert not problems
    entries.sort(key=lambda e: e.t)
    target = parse_when(at, entries[0].t) if at else math.inf
    state = new_state(header, None, None, [])
    with state.batch():
        for e in entries:
            if e.t <= target:
                apply_entry(state, e, True)
    return state


@pytest.fixture(scope="module", params=[
    {}, {"synced": True}, {"server_version": "v1.31.2"}, {"server_version": "v1.22.4"},
    {"server_version": "v1.31.2", "synced": True},
], ids=["bare", "synced", "v1.31", "v1.22", "v1.31-synced"])
def foreign(request, tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("foreign") / "foreign.jsonl")
    foreign_recording.write(path, NODES, MINUTES, **request.param)
    return path


def test_the_generator_writes_what_nodewatch_does_not(foreign):
    with open(foreign, "rb") as f:
        text = f.read()
    assert b'"fieldsV1"' in text and b'"seq": ' in text and b"\r\n" in text
    assert b'{"object": {"apiVersion"' in text and b'"t": ' in text  # object first, stdlib spacing


@pytest.mark.parametrize("at", AT)
def test_a_foreign_recording_replays_to_the_generic_paths_state(foreign, at):
    slow = _generic(foreign, at)
    fast, seen, problems = state_at(foreign, at, compact=True, pods=False)
    full, _, _ = state_at(foreign, at)
    assert not problems
    assert _tracks(fast) == _tracks(slow) == _tracks(full)
    assert _answers(fast, seen.at, nodes=False) == _answers(slow, seen.at, nodes=False) == \
        _answers(full, seen.at, nodes=False)


def _superseded(path: str, monkeypatch, compact: bool = True) -> Superseded:
    """The ``Superseded`` the answer at the end of ``path`` was read through."""
    made: list[Superseded] = []
    original = Superseded.__init__

    def spy(self, *args, **kw):
        original(self, *args, **kw)
        made.append(self)

    monkeypatch.setattr(Superseded, "__init__", spy)
    state_at(path, None, compact=compact, pods=False)
    return made[0]


def _left_out(path: str, monkeypatch, compact: bool = True) -> tuple[int, int]:
    """(events ``Superseded`` left out, renewals it was given) of the answer at the end."""
    sup = _superseded(path, monkeypatch, compact)
    return sup.dropped, sum(1 for e in sup.events if e is None or e.resource == "leases")


def test_renewals_are_left_out_without_a_synced_line(foreign, monkeypatch):
    """The lever, not a timing: on the old code a recording without SYNCED dropped nothing."""
    dropped, renewals = _left_out(foreign, monkeypatch)
    assert dropped > 0.8 * renewals


_ODD_LEASE_LINES = [
    b'{"t": 1790000001.5, "resource": "leases", "type": "MODIFIED", "object": {"metadata": {"name": "a"}}}\n',
    b'{"object": null, "t": 1790000001.5, "resource": "leases", "type": "MODIFIED"}\n',
    b'{"t": 1790000001.5, "resource": "leases", "type": "MODIFIED", "object": {"metadata": {}}}\n',
    b'{"t": 1790000001.5, "resource": "leases", "type": "DELETED", "object": {"metadata": {"name": "a"}}}\n',
    b'{"t": 1790000001.5, "resource": "leases", "type": "MODIFIED", "object": {"metadata": {"name": "a"},'
    b' "spec": {"renewTime": 7}}}\n',
    b'{"t": 1790000001.5, "resource": "le\\u0061ses", "type": "ADDED", "object": {"metadata": {"name": "a"},'
    b' "spec": {"renewTime": "2026-09-21T14:13:20.000001Z", "holderIdentity": "a"}}}\n',
    b'{"t": 1790000001.5, "resource": "leases", "type": "ADDED", "cluster": "", "object": {"metadata": {"name": "a"}}}\n',
    b'{"t": 1790000001.5, "resource": "leases", "type": "ADDED", "health": {}, "object": {"metadata": {"name": "a"}}}\n',
    b'{"t": 1e300, "resource": "leases", "type": "ADDED", "object": {"metadata": {"name": "a"}}}\n',
    b'{"t": 1790000001.5, "resource": "leases", "type": "ADDED", "object": {"metadata": {"name": "a",'
    b' "namespace": "default"}, "spec": {"renewTime": "2026-09-21T14:13:20.000001Z"}}}\n',
    b'{"t": 1790000001.5, "resource": "leases", "type": "ADDED", "object": {"metadata": {"name": "a",'
    b' "managedFields": [{"manager": "kubelet", "operation": "Update", "time": "2026-09-21T14:13:20Z"}]},'
    b' "spec": {"renewTime": "2026-09-21T14:13:20.500000Z", "holderIdentity": "a", "leaseDurationSeconds": 40}}}\n',
    b'{"t": 1790000001.5, "resource": "nodes", "type": "ADDED", "object": {"metadata": {"name": "leases"}}}\n',
    b'{"t": 1790000001.5, "resource": "leases", "type": "ADDED", "object": [1, 2]}\n',
    b'{"t": 1790000001.5, "resource": "leases", "type": "ADDED", "object": {"metadata": {"name": "a"}}, "list": 3}\n',
]


def _two_step(n: int, line: bytes):
    """What ``_v1_entries`` made of a line before the one-decode path: ``plain_line``, then ``deferred``."""
    d = plain_line(line)
    e = deferred(n, line, d, False) if d is not None else None
    return e if e is not None and e.resource == "leases" else None


def _same_deferred(n: int, line: bytes) -> bool:
    """The one decode, or where it gives None the two-step way (as ``_v1_entries`` goes), against the
    two-step way alone."""
    one, two = deferred_lease(n, line) or _two_step(n, line), _two_step(n, line)
    if one is None or two is None:
        return one is None and two is None
    fields = ("line", "t", "resource", "etype", "listing", "cluster", "name", "renew", "replaces")
    return all(getattr(one, f) == getattr(two, f) for f in fields) and one.entry([]) == parse(n, line, [])


def test_a_lease_line_decoded_once_is_the_two_step_decodes_deferred(foreign):
    """Every Lease line of the foreign recording (other orders, spacing, extra fields) and odd ones
    (no name, null or non-object object, a DELETED, a renewTime of the wrong type, an escaped
    resource, an empty cluster, a health field, a wild time, a namespace that is not a node's):
    ``deferred_lease`` gives the ``Deferred`` the two decodes give (or leaves the line to them), and
    its entry is ``parse``'s."""
    with open(foreign, "rb") as f:
        lines = f.readlines()[1:]
    assert sum(deferred_lease(n, line) is not None for n, line in enumerate(lines)) > 0.8 * len(lines)
    for n, line in enumerate(lines + _ODD_LEASE_LINES):
        assert _same_deferred(n, line), line[:200]


def test_a_renewal_waits_without_its_lines_bytes(foreign):
    """The lever: a renewal waiting in the reorder window keeps its typed object, not the ~1 KB line
    (on the old code ``data`` was the line)."""
    with open(foreign, "rb") as f:
        line = next(line for line in f if b'"Lease"' in line and b'"MODIFIED"' in line)
    e = deferred_lease(5, line)
    assert e is not None and e.data is None and e.lease is not None


@pytest.fixture(scope="module")
def foreign_kubectl(tmp_path_factory) -> str:
    """The generator's kubectl log: the nodes' watch, then the leases' (``cat nodes.log leases.log``)."""
    path = str(tmp_path_factory.mktemp("foreign") / "foreign.kubectl.log")
    foreign_recording.write(path, NODES, MINUTES, "kubectl")
    return path


@pytest.mark.parametrize("at", AT)
def test_a_foreign_kubectl_log_answers_as_its_seek_at_every_instant(foreign_kubectl, at, open_replay):
    """Issue 22's concatenated logs, written by another generator: the one-shot answer (with and
    without Pods), the full one-pass replay and the indexed replay's seek agree at every instant."""
    assert _same_answer(foreign_kubectl, at, open_replay) > 0


@pytest.mark.parametrize("compact", [True, False])
def test_a_kubectl_logs_renewals_are_left_out_of_a_one_shot_answer_only(foreign_kubectl, monkeypatch, compact):
    """The lever on a kubectl log: its Leases made records for the sort are left out once superseded
    (on the old code nothing of a kubectl log was), and nothing is without ``compact`` (a full
    replay keeps every renewal)."""
    dropped, renewals = _left_out(foreign_kubectl, monkeypatch, compact)
    assert (dropped > 0.8 * renewals) if compact else dropped == 0


def test_a_kubectl_logs_node_updates_are_left_out_once_replaced(foreign_kubectl, monkeypatch):
    """A kubectl log's Node events are read typed and wait as their records; an update that replaces
    the node's record whole leaves out the ones before it, as on JSON Lines (on the old code each
    was a dict, held until the sort and applied)."""
    kept = [e for e in _superseded(foreign_kubectl, monkeypatch).events if e is not None and e.resource == "nodes"]
    with open(foreign_kubectl, "rb") as f:
        written = f.read().count(b'"kind": "Node",\n        "metadata"')
    assert all(type(e) is Deferred and type(e.node) is NodeRecord for e in kept)
    assert NODES <= len(kept) < written


def test_a_kubectl_logs_superseded_renewals_are_not_held_for_the_sort(foreign_kubectl, monkeypatch):
    """The lever of an answer to the end: every event is applied, so a renewal a later one of its
    Lease supersedes is left out as the log is read, not held, sorted and queued (on the old code
    every renewal of the log was in the sorted list); at an instant, all still are."""
    from nodewatch.sources.replay import instant

    held: list[list] = []
    original = instant.sort_entries

    def spy(*args, **kw):
        held.append(original(*args, **kw))
        return held[-1]

    monkeypatch.setattr(instant, "sort_entries", spy)
    with open(foreign_kubectl, "rb") as f:
        written = f.read().count(b'"kind": "Lease"')
    for at in (None, "+150"):
        state_at(foreign_kubectl, at, compact=True, pods=False)
    to_end, at_150 = ([e for e in out if e.resource == "leases" and e.etype != "HEALTH"] for out in held)
    assert written > 10 * NODES and len(at_150) == written
    assert NODES <= len(to_end) <= 2 * NODES
