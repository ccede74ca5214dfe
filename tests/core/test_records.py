"""The compact parts of a Node record (``Labels``, ``Conditions``, the flat addresses) read as the
mappings and pairs they replace, on both decoding paths."""

from __future__ import annotations

import orjson
import pytest

from nodewatch.core.objects import Condition, Conditions, node_from_dict
from nodewatch.core.wire import DECODERS
from support.factories import T0, node

HOST = "kubernetes.io/hostname"


def _both(obj: dict):
    """The record read as a dict and decoded typed (a one-item list)."""
    body = orjson.dumps({"kind": "NodeList", "metadata": {}, "items": [obj]})
    typed = DECODERS["nodes"].decode_list(body)[0][0]
    return node_from_dict(obj), typed


@pytest.mark.parametrize("path", [0, 1], ids=["dicts", "typed"])
def test_labels_answer_every_label_and_a_pool_shares_one_set(path):
    a = _both(node("a-1", labels={"team": "storage", "pool": "gpu"}))[path]
    b = _both(node("a-2", labels={"team": "storage", "pool": "gpu"}))[path]
    want = {HOST: "a-1", "topology.kubernetes.io/zone": "z1", "topology.kubernetes.io/region": "r1",
            "team": "storage", "pool": "gpu"}
    assert dict(a.labels) == want and a.labels == want and want == a.labels
    assert a.labels[HOST] == "a-1" and a.labels.get(HOST) == "a-1" and HOST in a.labels
    assert sorted(a.labels.items()) == sorted(want.items()) and len(a.labels) == 5
    assert a.labels.get("missing", "-") == "-" and "missing" not in a.labels
    with pytest.raises(KeyError):
        a.labels["missing"]
    assert b.labels[HOST] == "a-2" and a.labels != b.labels
    assert a.labels.common is b.labels.common  # the pool's labels, held once
    assert a.zone == "r1/z1"


def test_a_hostname_label_that_is_not_the_node_name_is_kept_as_it_is():
    obj = node("a-1", labels={HOST: "ip-10-0-0-1"})
    for rec in _both(obj):
        assert rec.labels[HOST] == "ip-10-0-0-1"
        assert dict(rec.labels) == obj["metadata"]["labels"]


@pytest.mark.parametrize("path", [0, 1], ids=["dicts", "typed"])
def test_conditions_read_as_a_mapping_of_condition_by_type(path):
    rec = _both(node("a", "False", reason="KubeletNotReady", message="PLEG", transition=T0 - 60,
                     conditions={"MemoryPressure": "True", "DiskPressure": "False"}))[path]
    c = rec.conditions
    ready = Condition("Ready", "False", "KubeletNotReady", "PLEG", T0 - 60, T0 - 60)
    assert c.get("Ready") == ready == c["Ready"]
    assert c.status("MemoryPressure") == "True" and c.status("PIDPressure") is None
    assert c.last_transition("Ready") == T0 - 60 and c.last_transition("PIDPressure") is None
    assert c.get("PIDPressure") is None and "PIDPressure" not in c and "DiskPressure" in c
    assert list(c) == ["Ready", "MemoryPressure", "DiskPressure"] and len(c) == 3
    assert [x.type for x in c.values()] == list(c) and rec.ready == "False"
    assert c == {x.type: x for x in c.values()}


def test_a_condition_type_given_twice_keeps_its_first_place_and_its_last_fields_as_a_dict_did():
    obj = node("a", "True", conditions={"MemoryPressure": "False"})
    obj["status"]["conditions"].append({"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"})
    for rec in _both(obj):
        assert list(rec.conditions) == ["Ready", "MemoryPressure"]
        assert rec.conditions.get("Ready").status == "Unknown" and rec.ready == "Unknown"
    assert _both(obj)[0] == _both(obj)[1]


def test_no_conditions_and_one_without_a_type():
    obj = node("a", None)
    obj["status"]["conditions"] = [{"status": "True"}]
    for rec in _both(obj):
        assert not rec.conditions and rec.conditions.get("Ready") is None and rec.ready is None
        assert rec.conditions == Conditions() == {}


def test_addresses_are_pairs_in_the_nodes_order_and_share_the_name():
    obj = node("a-1")
    obj["status"]["addresses"] = [{"type": "InternalIP", "address": "10.0.0.1"},
                                  {"type": "Hostname", "address": "a-1"}, {"type": "ExternalIP"}]
    for rec in _both(obj):
        assert rec.addresses == (("InternalIP", "10.0.0.1"), ("Hostname", "a-1"), ("ExternalIP", ""))
        assert rec.addresses[1][1] is rec.name
