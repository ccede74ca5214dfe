"""The core's views as plain JSON values, and back: what the hub sends its viewers.

Two ways, by cost. A ``NodeView`` (65,000 of them in a snapshot, thousands per second in the
stream) has a hand-written positional form, decoded without per-field dispatch. Everything else a
viewer receives (settings, zones, watch health, a node's details for the drill-down) goes through
one generic, type-directed codec: a dataclass is the list of its fields, an enum its name, and
decoding follows the dataclass's own annotations, so the codec never trusts the other side to say
which class to build (a viewer constructs only the core's plain data classes, nothing else).

JSON has no infinity: ``inf`` travels as ``None`` in the two fields where it means "never".
"""

from __future__ import annotations

import dataclasses
import enum
import math
import types
import typing
from collections.abc import Mapping
from functools import lru_cache
from sys import intern
from typing import Any

from ..core.causes import Cause, CauseKind
from ..core.rules import NodeState, Taint
from ..core.views import NodeView

_STATES = {s.name: s for s in NodeState}
_CAUSE_KINDS = {k.name: k for k in CauseKind}
VIEW_FIELDS = NodeView.__struct_fields__
RENEW_FIELDS = ("lease_observed_at", "lease_duration", "skew", "next_change")
"""What an on-time renewal changes in a Ready node's view (``Evaluator.renewed``): a delta's
``renew`` entries carry these four, in this order, after the node's key."""


class WireError(ValueError):
    """A value from the other side that does not fit the type expected."""


# --- NodeView: the hot path ----------------------------------------------------------------------


def view_to_wire(v: NodeView) -> list:
    """One view as a list in ``VIEW_FIELDS`` order; the last field, the node's cluster, only when it
    has one (a hub of one cluster sends the twenty fields it always sent)."""
    nc, sd = v.next_change, v.sort_deadline
    w = [
        v.name, v.zone, v.state.name, v.ready, v.lease_observed_at, v.lease_duration, v.grace, v.skew,
        v.eviction_at, [[t.key, t.effect, t.value, t.time_added] for t in v.taints] if v.taints else None,
        v.cordoned, list(v.pressure) if v.pressure else None, v.network_unavailable, v.cert_not_after,
        v.kubelet_version, [[c.kind.name, c.text] for c in v.causes] if v.causes else None, v.state_since,
        None if nc == math.inf else nc, None if sd == math.inf else sd, v.excluded,
    ]
    if v.cluster:
        w.append(v.cluster)
    return w


_causes_seen: dict[tuple, tuple[Cause, ...]] = {}


def view_from_wire(w: list) -> NodeView:
    """The inverse of ``view_to_wire``; raises WireError on a malformed entry."""
    try:
        (name, zone, state, ready, observed, duration, grace, skew, eviction_at, taints, cordoned, pressure,
         net, cert, kubelet, causes, since, nc, sd, excluded, *cluster) = w
        if cluster and (len(cluster) > 1 or not isinstance(cluster[0], str)):
            raise ValueError("a cluster that is not one string")
        return NodeView(  # positional, in VIEW_FIELDS order: the fastest way to build 65,000 of them
            name, intern(zone), _STATES[state], ready if ready is None else intern(ready), observed,
            shared_float(duration), shared_float(grace), skew, eviction_at,
            tuple(Taint(intern(k), intern(e), val, ta) for k, e, val, ta in taints) if taints else (), cordoned,
            tuple(intern(p) for p in pressure) if pressure else (), net, cert, intern(kubelet),
            _causes(causes) if causes else (), since, math.inf if nc is None else nc,
            math.inf if sd is None else sd, excluded, intern(cluster[0]) if cluster else "",
        )
    except (ValueError, TypeError, KeyError) as exc:
        raise WireError(f"malformed node view: {type(exc).__name__}: {str(exc)[:100]}") from None


_floats_seen: dict[float, float] = {}


def shared_float(x: float | None) -> float | None:
    """One float object per value for the fields set by the cluster's settings (lease duration,
    grace), the same on most nodes: 65,000 copies of 40.0 are 1.5 MB a field."""
    if x is None:
        return None
    hit = _floats_seen.get(x)
    if hit is None:
        if len(_floats_seen) >= 10_000:
            return x
        hit = _floats_seen[x] = x
    return hit


def _causes(items: list) -> tuple[Cause, ...]:
    """Causes repeat across nodes (the same text on every node of a failed zone): shared tuples."""
    key = tuple(tuple(c) for c in items)
    hit = _causes_seen.get(key)
    if hit is None:
        hit = tuple(Cause(_CAUSE_KINDS[k], str(text)) for k, text in items)
        if len(_causes_seen) < 50_000:
            _causes_seen[key] = hit
    return hit


# --- everything else: type-directed ---------------------------------------------------------------


def to_wire(obj: Any) -> Any:
    """A core value as JSON values: dataclasses as lists of their fields, enums by name."""
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, enum.Enum):
        return obj.name
    if isinstance(obj, NodeView):  # a msgspec Struct, not a dataclass: its own positional form
        return view_to_wire(obj)
    if dataclasses.is_dataclass(obj):
        return [to_wire(getattr(obj, f)) for f in _field_names(type(obj))]
    if isinstance(obj, Mapping):  # a dict, or a record's Labels
        return {str(k): to_wire(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset, typing.Sequence)):
        return [to_wire(v) for v in obj]
    raise TypeError(f"cannot send a {type(obj).__name__}")


def from_wire(tp: Any, value: Any) -> Any:
    """``value`` decoded as type ``tp`` (a core dataclass, a container of them, a scalar)."""
    try:
        return _decode(tp, value)
    except (TypeError, ValueError, KeyError, IndexError) as exc:
        raise WireError(f"malformed {getattr(tp, '__name__', tp)}: {type(exc).__name__}: {str(exc)[:100]}") from None


def _decode(tp: Any, value: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        real = [a for a in args if a is not type(None)]
        if len(real) == 1:
            return _decode(real[0], value)
        for a in real:  # float | str and the like: the first that fits
            try:
                return _decode(a, value)
            except (TypeError, ValueError, KeyError):
                continue
        raise ValueError(f"{value!r} fits none of {tp}")
    if tp is Any:
        return value
    if origin in (tuple, list, set, frozenset):
        args = typing.get_args(tp)
        if not isinstance(value, list):
            raise TypeError(f"expected a list, got {type(value).__name__}")
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(args) != len(value):
                raise ValueError("wrong tuple length")
            return tuple(_decode(a, v) for a, v in zip(args, value))
        item = args[0] if args else Any
        return origin(_decode(item, v) for v in value)
    if origin in (dict, Mapping):
        kt, vt = typing.get_args(tp) or (str, Any)
        if not isinstance(value, dict):
            raise TypeError(f"expected an object, got {type(value).__name__}")
        return {_decode(kt, k): _decode(vt, v) for k, v in value.items()}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp[value]
    if tp is NodeView:
        if not isinstance(value, list):
            raise TypeError(f"expected a list, got {type(value).__name__}")
        return view_from_wire(value)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = _hints(tp)
        names = _field_names(tp)
        if not isinstance(value, list) or len(value) != len(names):
            raise ValueError(f"expected {len(names)} fields")
        return tp(**{n: _decode(hints[n], v) for n, v in zip(names, value)})
    if tp is float:
        if value is None:
            return math.inf  # the only non-finite float sent
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError("expected a number")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError("expected an integer")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise TypeError("expected true or false")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise TypeError("expected a string")
        return value
    raise TypeError(f"cannot decode into {tp}")


@lru_cache(maxsize=None)
def _field_names(tp: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(tp) if f.init)


@lru_cache(maxsize=None)
def _hints(tp: type) -> dict[str, Any]:
    return typing.get_type_hints(tp)
