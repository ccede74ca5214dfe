"""``wire.watched_write_time``: a watched Lease's write time without its record, the record's
``written_at`` for every shape of managed fields (the frontier of the lease stream reads it on
every read of the watch)."""

from __future__ import annotations

import orjson
import pytest

from nodewatch.core.wire import DECODERS, _lease_record, watched_write_time
from tests.support.factories import T0, lease


def _entry(manager: str, operation: str = "Update", time: object = "2027-01-15T08:00:05Z") -> dict:
    return {"manager": manager, "operation": operation, "apiVersion": "coordination.k8s.io/v1", "time": time,
            "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:renewTime": {}}}}


SHAPES = [
    [_entry("kubelet")],
    [_entry("kubelet", time="2027-01-15T08:00:06Z")],
    [_entry("n1")],  # a manager named as the holder
    [_entry("n2")],  # another's: not the holder's
    [_entry("kubelet", "Apply")],
    [_entry("kubelet", time="2027-01-15T08:00:01Z"), _entry("kubelet", time="2027-01-15T08:00:09Z")],
    [_entry("kubelet", time="not a time")],
    [_entry("kubelet", time=5)],  # does not fit the types: read as the dict path reads it
    [],
    None,
]


@pytest.mark.parametrize("holder", ["n1", "", None])
@pytest.mark.parametrize("managed", SHAPES)
def test_the_write_time_is_the_records(managed, holder):
    obj = lease("n1", T0)
    if holder is None:
        del obj["spec"]["holderIdentity"]
    else:
        obj["spec"]["holderIdentity"] = holder
    if managed is not None:
        obj["metadata"]["managedFields"] = managed
    line = orjson.dumps({"type": "MODIFIED", "object": obj}) + b"\n"
    for _ in range(2):  # the second time from the memo
        (ev,) = DECODERS["leases"].decode_watch(line)
        rec = _lease_record(ev.object)
        assert watched_write_time(ev.object) == (rec.written_at if rec is not None else None)
