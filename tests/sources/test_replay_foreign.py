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
from nodewatch.core.timeutil import parse_when
from nodewatch.sources.recording_input import read_recording
from nodewatch.sources.replay import state_at
from nodewatch.sources.replay.clusters import new_state
from nodewatch.sources.replay.index import apply_entry
from nodewatch.sources.replay.superseded import Superseded
from tests.sources.test_replay_superseded import _answers, _tracks

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


def test_renewals_are_left_out_without_a_synced_line(foreign, monkeypatch):
    """The lever, not a timing: on the old code a recording without SYNCED dropped nothing."""
    made: list[Superseded] = []
    original = Superseded.__init__

    def spy(self, *args, **kw):
        original(self, *args, **kw)
        made.append(self)

    monkeypatch.setattr(Superseded, "__init__", spy)
    state_at(foreign, None, compact=True, pods=False)
    renewals = sum(1 for e in made[0].events if e is None or e.resource == "leases")
    assert made[0].dropped > 0.8 * renewals
