"""The advice for StatefulSet pods on a node that stopped reporting names the out-of-service taint
only on releases whose PodGC then deletes the pods (judged on the testbed: ``test_out_of_service``)."""

from __future__ import annotations

import pytest

from nodewatch.core.fencing import OUT_OF_SERVICE_TAINT, fencing_advice, out_of_service_deletes_pods


@pytest.mark.parametrize(("version", "deletes"), [
    ("v1.20.2", False), ("v1.25.16", False), ("v1.26.0", True), ("v1.28.3-eks-1234", True), ("v1.37.2", True),
    (None, None), ("", None), ("not a version", None),
])
def test_podgc_deletes_the_pods_of_an_out_of_service_node_from_1_26(version, deletes):
    assert out_of_service_deletes_pods(version) is deletes


def test_the_advice_follows_the_release():
    for advice in (fencing_advice(v) for v in ("v1.20.2", "v1.37.2", None)):
        assert advice.startswith("do not force-delete them before the node is fenced")
    assert "PodGC then deletes its terminating pods and" in fencing_advice("v1.37.2")
    old = fencing_advice("v1.20.2")
    assert old.count(OUT_OF_SERVICE_TAINT) == 1 and "on 1.20 the node.kubernetes.io/out-of-service taint does not" in old
    assert "delete the Node, or force-delete the pods" in old
    unknown = fencing_advice(None)
    assert "from Kubernetes 1.26" in unknown and "force-delete the pods" in unknown


def test_an_untrusted_version_string_is_not_repeated():
    assert "\x1b" not in fencing_advice("v1.20.2\x1b[31mred")
