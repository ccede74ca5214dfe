"""Recording lines read fast (``replay/lines.py``) and one instant in one pass (``replay/instant.py``)
give what the plain parser and a seek of the indexed replay give."""

from __future__ import annotations

import gzip
import shutil

import orjson
import pytest

from nodewatch.core.objects import lease_from_dict, node_from_dict, pod_from_dict
from nodewatch.core.settings import Settings
from nodewatch.core.timeutil import parse_when
from nodewatch.sources.recording import Recorder, parse_line
from nodewatch.sources.replay import state_at
from nodewatch.sources.replay.lines import parse, stamp
from support.factories import T0, lease, node
from tests.sources.test_replay import generate

LINES = [
    {"t": T0, "resource": "nodes", "type": "ADDED", "object": node("n1"), "list": True},
    {"t": T0 + 1, "resource": "leases", "type": "MODIFIED", "object": lease("n1", T0)},
    {"t": T0 + 2, "resource": "pods", "type": "DELETED", "object": {"metadata": {"name": "p", "namespace": "x"}}},
    {"t": T0 + 3, "resource": "nodes", "type": "SYNCED"},
    {"t": T0 + 4, "health": {"resource": "leases", "connected": False, "last_error": "boom"}},
    {"t": T0 + 5, "cert": {"node": "n1", "not_after": T0 + 9}},
    {"t": T0 + 6, "settings": {"server_version": "v1.30.1"}},
    {"t": T0 + 7, "resource": "nodes", "type": "MODIFIED", "object": {"metadata": {"name": "n2", "labels": {"a": 1}}}},
    {"t": T0 + 8, "resource": "nodes", "type": "MODIFIED", "object": {"metadata": {}}},
    {"t": True, "resource": "nodes", "type": "ADDED", "object": node("n1")},
    {"t": T0, "resource": "widgets", "type": "ADDED", "object": {}},
    {"t": T0, "resource": "nodes", "type": "BOGUS", "object": {}},
    {"t": T0, "resource": "nodes", "type": "ADDED", "object": [1]},
    {"t": T0, "resource": "nodes", "type": "ADDED"},
    [1, 2],
]


def _same_object(resource: str, fast, plain) -> bool:
    if isinstance(fast, dict) or fast is None:
        return fast == plain
    return fast == {"nodes": node_from_dict, "leases": lease_from_dict, "pods": pod_from_dict}[resource](plain)


@pytest.mark.parametrize("d", LINES, ids=range(len(LINES)))
def test_a_line_parses_as_the_plain_parser_parses_it(d):
    line = orjson.dumps(d) + b"\n"
    plain_problems: list[str] = []
    fast_problems: list[str] = []
    plain = parse_line(7, line, plain_problems)
    fast = parse(7, line, fast_problems)
    assert fast_problems == plain_problems
    if plain is None:
        assert fast is None
        return
    assert (fast.line, fast.t, fast.resource, fast.etype, fast.listing, fast.health) == \
           (plain.line, plain.t, plain.resource, plain.etype, plain.listing, plain.health)
    assert _same_object(plain.resource, fast.obj, plain.obj)
    stamped = stamp(7, line, [])
    assert (stamped.t, stamped.resource, stamped.etype) == (plain.t, plain.resource, plain.etype)


def test_garbled_and_truncated_lines_are_reported_in_the_same_words():
    for line in (b'{"t": 1, "resource": "nodes", "type": "ADDED", "object": {"metadata"', b"not json\n", b"\n"):
        a: list[str] = []
        b: list[str] = []
        assert parse(3, line, a) is None and parse_line(3, line, b) is None
        assert a == b


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("inst") / "fleet.jsonl")
    generate(path, nodes=40, duration=400, dead={"node-0005", "node-0011"})
    return path


def _records(state):
    return state.node_records(), {n: (t.renew_time, t.observed_at, t.renewals) for n, t in state.leases.items()}


@pytest.mark.parametrize("at", [None, "+0", "+150.02", "+260", "+399"])
def test_one_instant_in_one_pass_is_the_seek_of_the_indexed_replay(recording, open_replay, at):
    state, seen, problems = state_at(recording, at)
    t = seen.at
    src = open_replay(recording)
    expected_t = src.replay.end if at is None else parse_when(at, src.replay.start)
    src.replay.seek(expected_t)
    assert t == expected_t
    assert problems == src.problems == []
    assert _records(state) == _records(src.state)
    assert {v.name: v.state for v in state.evaluate(t).nodes} == \
           {v.name: v.state for v in src.state.evaluate(t).nodes}


def test_one_pass_reads_gzip_and_puts_slightly_late_lines_in_time_order(tmp_path):
    path = str(tmp_path / "jitter.jsonl")
    rec = Recorder(path, {"kind": "test"}, Settings(server_version="v1.31.0"))
    rec.write("leases", "ADDED", lease("a", T0 - 1), T0, listing=True)
    rec.write("leases", "SYNCED", None, T0)
    rec.write("leases", "MODIFIED", lease("a", T0 + 20), T0 + 20)
    rec.write("leases", "MODIFIED", lease("a", T0 + 10), T0 + 10)  # written late by a racing thread
    rec.close()
    gz = path + ".gz"
    with open(path, "rb") as f, gzip.open(gz, "wb") as out:
        shutil.copyfileobj(f, out)
    for p in (path, gz):
        state, seen, problems = state_at(p, "+15")
        assert seen.at == T0 + 15 and seen.last == T0 + 20
        assert state.leases["a"].renew_time == T0 + 10
        state, seen, problems = state_at(p, None)
        assert (seen.at, state.leases["a"].renew_time) == (T0 + 20, T0 + 20)
        assert seen.read_to_end and (seen.start, seen.last) == (T0, T0 + 20)
        assert problems == ["1 lines are out of time order (up to 10.0s back); replayed in time order"]


def test_nodes_and_leases_come_out_as_records_and_the_index_skips_objects():
    from nodewatch.core.objects import LeaseRecord, NodeRecord

    e = parse(1, orjson.dumps(LINES[0]) + b"\n", [])
    assert type(e.obj) is NodeRecord and e.obj.name == "n1"
    e = parse(2, orjson.dumps(LINES[1]) + b"\n", [])
    assert type(e.obj) is LeaseRecord
    assert stamp(2, orjson.dumps(LINES[1]) + b"\n", []).obj is None
