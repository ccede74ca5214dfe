"""The synced Lease watch's lane (``FleetState.apply_lease_watch``, fed by ``Reflector.take_block``)
against the general way (each event a record through ``FleetState.apply``): the same state after
every block, whatever the events are: on-time renewals, renewTimes that do not advance, holders and
durations that change, Leases deleted and added, other namespaces, objects without a name, spec or
renewTime, renewTimes in odd forms."""

from __future__ import annotations

import random

import msgspec
import orjson
import pytest

from nodewatch.core.fleet import FleetState
from nodewatch.core.timeutil import format_time
from nodewatch.core.wire import DECODERS
from nodewatch.sources.reflector import LEASES, Reflector
from tests.support.factories import T0, lease, node

N = 40


def _line(etype: str, obj: dict) -> bytes:
    return orjson.dumps({"type": etype, "object": obj}) + b"\n"


def _listed(names: list[str]) -> FleetState:
    st = FleetState()
    for name in names:
        st.apply("nodes", "ADDED", node(name), T0 - 30, True)
        st.apply("leases", "ADDED", lease(name, T0 - 5, written=T0 - 5), T0 - 1, True)
    st.apply("nodes", "SYNCED", None, T0 - 1)
    st.apply("leases", "SYNCED", None, T0 - 1)
    st.evaluate(T0)
    return st


def _event(rng: random.Random, names: list[str], renew: dict[str, float], t: float) -> tuple[str, dict]:
    """One watch event of many kinds, most of them plain renewals."""
    name = rng.choice(names)
    kind = rng.random()
    if kind < 0.6:  # an on-time renewal
        renew[name] = max(renew.get(name, t - 10), t - rng.uniform(0, 0.05))
        return "MODIFIED", lease(name, renew[name], written=int(renew[name]))
    if kind < 0.66:  # the same renewTime again, or one that steps back
        return "MODIFIED", lease(name, renew.get(name, t) - rng.choice((0, 3)))
    if kind < 0.70:  # a new holder
        obj = lease(name, t)
        obj["spec"]["holderIdentity"] = name + "-other"
        renew[name] = t
        return "MODIFIED", obj
    if kind < 0.74:  # another duration
        obj = lease(name, t, duration=rng.choice((15, 40, 60)))
        renew[name] = t
        return "MODIFIED", obj
    if kind < 0.78:
        renew.pop(name, None)
        return "DELETED", lease(name, t)
    if kind < 0.82:  # a Lease not seen before (a new node), or one deleted coming back
        other = rng.choice((f"new-{rng.randrange(8)}", name))
        renew[other] = t
        return rng.choice(("ADDED", "MODIFIED")), lease(other, t)
    if kind < 0.85:
        obj = lease(name, t)
        obj["metadata"]["namespace"] = rng.choice(("default", ""))
        return "MODIFIED", obj
    if kind < 0.88:
        obj = lease(name, t)
        del obj["spec"]["renewTime"]
        return "MODIFIED", obj
    if kind < 0.90:
        return "MODIFIED", {"metadata": {"name": name, "namespace": "kube-node-lease"}}
    if kind < 0.92:
        return "MODIFIED", {"metadata": {"namespace": "kube-node-lease"}, "spec": {"renewTime": format_time(t, micro=True)}}
    # renewTimes in other forms: without a fraction, a leap second, a form parse_time refuses
    obj = lease(name, t)
    obj["spec"]["renewTime"] = rng.choice((format_time(t), "2027-01-15T08:00:60.000000Z", "not a time"))
    return "MODIFIED", obj


def _tracks(st: FleetState) -> dict:
    return {k: msgspec.structs.asdict(v) if hasattr(v, "__struct_fields__") else
            {f: getattr(v, f) for f in v.__slots__} for k, v in st.leases.items()}


def _views(st: FleetState, now: float) -> list:
    return [msgspec.to_builtins(v) for v in st.evaluate(now).nodes]


def _same(a: FleetState, b: FleetState, now: float) -> None:
    assert _tracks(a) == _tracks(b)
    assert {k: list(v) for k, v in a.store.beats.items()} == {k: list(v) for k, v in b.store.beats.items()}
    assert a.store.last_received == b.store.last_received
    assert a.store.generation == b.store.generation
    assert [p.message for p in a.store.problems] == [p.message for p in b.store.problems]
    assert _views(a, now) == _views(b, now)


@pytest.mark.parametrize("seed", range(6))
def test_the_lane_leaves_the_state_the_general_way_leaves(seed):
    rng = random.Random(seed)
    names = [f"n{i:03d}" for i in range(N)]
    general, lane = _listed(names), _listed(names)
    renew: dict[str, float] = {}
    decoder = DECODERS["leases"]
    fast = 0
    for second in range(40):
        t = T0 + second
        block = b"".join(_line(*_event(rng, names, renew, t)) for _ in range(rng.randrange(1, 30)))
        for etype, rec, _rv in decoder.decode_events(block):
            if rec is not None:
                general.apply("leases", etype, rec, t + 0.01)
        before = lane.store.generation
        lane.apply_lease_watch(decoder.decode_watch(block), t + 0.01)
        fast += lane.store.generation - before
        if second % 3 == 0:
            _same(general, lane, t + 0.5)
    _same(general, lane, T0 + 45)
    assert fast > 200  # most of them went the lane's own way (and every event counted once)


def test_before_the_watch_is_synced_every_event_goes_the_general_way():
    names = ["a", "b"]
    general, lane = FleetState(), FleetState()
    for st in (general, lane):
        st.apply("nodes", "ADDED", node("a"), T0, True)
    block = b"".join(_line("MODIFIED", lease(n, T0 - k)) for k, n in enumerate(names * 2))
    for etype, rec, _rv in DECODERS["leases"].decode_events(block):
        general.apply("leases", etype, rec, T0)
    lane.apply_lease_watch(DECODERS["leases"].decode_watch(block), T0)
    _same(general, lane, T0 + 1)


def _reflector(st: FleetState, lane: bool) -> Reflector:
    def sink(batch) -> None:
        with st.batch():
            for resource, etype, obj, t, listing in batch:
                st.apply(resource, etype, obj, t, listing)

    def none(*_a, **_k) -> None:
        return None

    return Reflector(None, LEASES, sink, none, none, wall=lambda: T0 + 2,  # type: ignore[arg-type]
                     frontier=st.track_lease_stream(), lane=(lambda events, t, _block: st.apply_lease_watch(events, t)) if lane else None)




def test_the_reflector_keeps_the_same_books_either_way():
    """Known keys, resourceVersion, event count and the frontier's write time: as its batch path keeps
    them; a block with a bookmark goes the general way (line by line) and is read all the same."""
    names = [f"n{i}" for i in range(5)]
    states = {way: _listed(names) for way in (False, True)}
    refl = {way: _reflector(states[way], way) for way in (False, True)}
    objs = [lease(n, T0 + 1 + k / 10, written=T0 + 1) for k, n in enumerate(names)]
    for k, o in enumerate(objs):
        o["metadata"]["resourceVersion"] = str(100 + k)
    other = lease("x", T0 + 1)
    other["metadata"]["namespace"] = "elsewhere"
    blocks = [b"".join(_line("MODIFIED", o) for o in objs[:3]),
              _line("DELETED", objs[3]) + _line("MODIFIED", other),
              _line("MODIFIED", objs[4]) + b'{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"900"}}}\n']
    for r in refl.values():
        for b in blocks:
            assert r.take_block(memoryview(b))
    a, b = refl[False], refl[True]
    assert a.known == b.known and ("elsewhere", "x") in b.known and "n3" not in b.known
    assert a.resource_version == b.resource_version == "900"
    assert a.events == b.events == 6
    assert a.frontier.written_to == b.frontier.written_to == T0 + 1  # type: ignore[union-attr]
    # the newest write of a block is its last Lease's that says one (the last here has no managedFields)
    tail = _line("MODIFIED", lease("n0", T0 + 1.9, written=T0 + 2)) + _line("MODIFIED", lease("n1", T0 + 1.9))
    for r in refl.values():
        assert r.take_block(memoryview(tail))
    assert a.frontier.written_to == b.frontier.written_to == T0 + 2  # type: ignore[union-attr]
    _same(states[False], states[True], T0 + 3)


def test_a_failure_inside_the_lane_is_a_problem_and_the_next_renewals_still_land(monkeypatch):
    """As ``apply`` turns any failure into a Problem, so does the lane (the stream reads on)."""
    st = _listed(["a", "b"])
    real = st.evaluator.renewed

    def renewed(name, track):
        if name == "a":
            raise RuntimeError("injected")
        return real(name, track)

    monkeypatch.setattr(st.evaluator, "renewed", renewed)
    block = _line("MODIFIED", lease("a", T0 + 1)) + _line("MODIFIED", lease("b", T0 + 1))
    st.apply_lease_watch(DECODERS["leases"].decode_watch(block), T0 + 1.01)
    assert [p.message for p in st.store.problems] == ["RuntimeError: injected"]
    assert st.leases["b"].renew_time == T0 + 1 and st.leases["b"].observed_at == T0 + 1.01
