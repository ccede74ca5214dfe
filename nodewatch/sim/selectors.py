"""Field and label selectors, with the real API server's grammar and its list of supported fields.

A field the real API server does not index for that resource is refused (400, "field label not
supported"), so a client that works against the simulator does not rely on something a real cluster
would reject.
"""

from __future__ import annotations

import re
from typing import Any, Callable, NamedTuple


class Slim(NamedTuple):
    """What selectors can look at: the selectable field values and the labels. The store keeps this
    instead of the whole object dict (the object itself is kept as JSON bytes), which keeps a
    65,000-node fleet and its change history small."""

    fields: dict[str, str]
    labels: dict[str, str]


Predicate = Callable[[Slim], bool]


class SelectorError(ValueError):
    """A selector the API server would answer with 400 BadRequest."""


def _path(*keys: str) -> Callable[[dict], str]:
    def get(obj: dict) -> str:
        value: Any = obj
        for k in keys:
            if not isinstance(value, dict):
                return ""
            value = value.get(k)
        if value is None:
            return ""
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    return get


_META = {"metadata.name": _path("metadata", "name"), "metadata.namespace": _path("metadata", "namespace")}

FIELDS: dict[str, dict[str, Callable[[dict], str]]] = {
    "nodes": {"metadata.name": _path("metadata", "name"), "spec.unschedulable": _path("spec", "unschedulable")},
    "namespaces": {"metadata.name": _path("metadata", "name"), "status.phase": _path("status", "phase")},
    "pods": {
        **_META,
        "spec.nodeName": _path("spec", "nodeName"),
        "spec.restartPolicy": _path("spec", "restartPolicy"),
        "spec.schedulerName": _path("spec", "schedulerName"),
        "spec.serviceAccountName": _path("spec", "serviceAccountName"),
        "spec.hostNetwork": _path("spec", "hostNetwork"),
        "status.phase": _path("status", "phase"),
        "status.podIP": _path("status", "podIP"),
        "status.nominatedNodeName": _path("status", "nominatedNodeName"),
    },
    "events": {
        **_META,
        "involvedObject.kind": _path("involvedObject", "kind"),
        "involvedObject.namespace": _path("involvedObject", "namespace"),
        "involvedObject.name": _path("involvedObject", "name"),
        "involvedObject.uid": _path("involvedObject", "uid"),
        "involvedObject.apiVersion": _path("involvedObject", "apiVersion"),
        "involvedObject.resourceVersion": _path("involvedObject", "resourceVersion"),
        "involvedObject.fieldPath": _path("involvedObject", "fieldPath"),
        "reason": _path("reason"),
        "reportingComponent": _path("reportingComponent"),
        "source": _path("source", "component"),
        "type": _path("type"),
    },
    "leases": dict(_META),
    "certificatesigningrequests": {"metadata.name": _path("metadata", "name"), "spec.signerName": _path("spec", "signerName")},
}

def slim_of(resource: str, obj: dict) -> Slim:
    """The selectable view of ``obj`` (a resource from ``FIELDS``)."""
    getters = FIELDS.get(resource, _META)
    fields = {name: get(obj) for name, get in getters.items()}
    meta = obj.get("metadata") or {}
    fields.setdefault("metadata.name", str(meta.get("name") or ""))
    fields.setdefault("metadata.namespace", str(meta.get("namespace") or ""))
    labels = meta.get("labels")
    return Slim(fields, {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {})


_UNESCAPED_COMMA = re.compile(r"(?<!\\),")


def _unescape(value: str) -> str:
    return value.replace("\\,", ",").replace("\\=", "=").replace("\\\\", "\\")


def parse_field_selector(resource: str, text: str | None) -> Predicate | None:
    """``a=b,c!=d`` -> predicate on the object's ``Slim``, None for an empty selector; SelectorError if bad."""
    if not text:
        return None
    fields = FIELDS.get(resource, {})
    tests: list[tuple[str, bool, str]] = []
    for part in _UNESCAPED_COMMA.split(text):
        if not part.strip():
            continue
        if "!=" in part:
            name, value = part.split("!=", 1)
            equal = False
        elif "==" in part:
            name, value = part.split("==", 1)
            equal = True
        elif "=" in part:
            name, value = part.split("=", 1)
            equal = True
        else:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        name = name.strip()
        if name not in fields:
            raise SelectorError(f"field label not supported: {name}")
        tests.append((name, equal, _unescape(value)))
    if not tests:
        return None

    def match(slim: Slim) -> bool:
        for name, equal, value in tests:
            if (slim.fields.get(name, "") == value) != equal:
                return False
        return True

    return match


_KEY = r"(?:[A-Za-z0-9][-A-Za-z0-9_.]*/)?[A-Za-z0-9]?[-A-Za-z0-9_.]*[A-Za-z0-9]"
_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_SET_RE = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s*\(\s*([^)]*?)\s*\)\s*$")
_OP_RE = re.compile(rf"^\s*({_KEY})\s*(==|=|!=|>|<)\s*({_VALUE})\s*$")
_EXISTS_RE = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")


def _split_requirements(text: str) -> list[str]:
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError(f"unable to parse requirement: unbalanced ')' in {text!r}")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise SelectorError(f"unable to parse requirement: unbalanced '(' in {text!r}")
    parts.append("".join(cur))
    return parts


def parse_label_selector(text: str | None) -> Predicate | None:
    """Kubernetes label selector (``=``, ``==``, ``!=``, ``in``, ``notin``, exists, ``!``, ``>``,
    ``<``) -> predicate on the object's ``Slim`` (its labels); None for an empty selector."""
    if not text or not text.strip():
        return None
    tests: list[Callable[[dict], bool]] = []
    for req in _split_requirements(text):
        if not req.strip():
            raise SelectorError(f"unable to parse requirement: empty requirement in {text!r}")
        if m := _SET_RE.match(req):
            key, op, values_text = m.groups()
            values = {v.strip() for v in values_text.split(",")}
            if not all(re.fullmatch(_VALUE, v) for v in values):
                raise SelectorError(f"unable to parse requirement: invalid value in {req!r}")
            tests.append(_requirement(key, op, frozenset(values)))
        elif m := _OP_RE.match(req):
            key, op, value = m.groups()
            if op in ("=", "==", "!="):
                tests.append(_requirement(key, op, frozenset((value,))))
            else:
                try:
                    bound = int(value)
                except ValueError:
                    raise SelectorError(f"unable to parse requirement: for '{op}', value must be an integer") from None
                tests.append(_numeric(key, op, bound))
        elif m := _EXISTS_RE.match(req):
            neg, key = m.groups()
            tests.append(_requirement(key, "!" if neg else "exists"))
        else:
            raise SelectorError(f"unable to parse requirement: {req.strip()!r}")

    def match(slim: Slim) -> bool:
        labels = slim.labels
        return all(t(labels) for t in tests)

    return match


def _requirement(key: str, op: str, values: frozenset[str] = frozenset()) -> Callable[[dict], bool]:
    """A set-based or equality requirement as a test of the labels: ``=`` is ``in`` a set of one
    (the key must be there), ``!=`` is ``notin`` one (a missing key passes), as the API server has it."""
    if op in ("in", "=", "=="):
        return lambda labels: key in labels and labels[key] in values
    if op in ("notin", "!="):
        return lambda labels: labels.get(key) not in values
    if op == "exists":
        return lambda labels: key in labels
    return lambda labels: key not in labels  # "!"


def _numeric(key: str, op: str, bound: int) -> Callable[[dict], bool]:
    def test(labels: dict) -> bool:
        try:
            v = int(labels[key])
        except (KeyError, ValueError, TypeError):
            return False
        return v > bound if op == ">" else v < bound

    return test


def combine(*preds: Predicate | None) -> Predicate | None:
    active = [p for p in preds if p is not None]
    if not active:
        return None
    if len(active) == 1:
        return active[0]
    return lambda slim: all(p(slim) for p in active)
