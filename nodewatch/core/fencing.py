"""What to tell an SRE about StatefulSet pods on a node that stopped reporting, by release.

Why here: the drill-down and the incident report gave the same advice in two wordings, and both
named the ``node.kubernetes.io/out-of-service`` taint whatever the release. The taint frees the pods
only where PodGC deletes the terminating pods of a node that is not Ready and carries it
(``gcTerminating``, feature NodeOutOfServiceVolumeDetach: on by default from 1.26, GA in 1.28). On
v1.20.2 the testbed's PodGC left such a pod Terminating; on v1.37.2 it deleted it within one of its
20 s passes (``tests/testbed/test_out_of_service.py``). Before 1.26 the way out after fencing is to
delete the Node (PodGC deletes the pods of a Node that no longer exists, on every release) or to
force-delete the pods.
"""

from __future__ import annotations

from .settings import parse_minor

OUT_OF_SERVICE_DELETES_SINCE = (1, 26)
OUT_OF_SERVICE_TAINT = "node.kubernetes.io/out-of-service"
TAINT_TO_ADD = f"{OUT_OF_SERVICE_TAINT}=nodeshutdown:NoExecute"

_DONT = ("do not force-delete them before the node is fenced (powered off, or cut from its storage): two pods "
         "of one identity could write to the same volume")
_FORCE = "delete the Node, or force-delete the pods (kubectl delete pod --force --grace-period=0)"


def out_of_service_deletes_pods(version: str | None) -> bool | None:
    """Whether PodGC of this release deletes the terminating pods of a node that is not Ready and
    carries the out-of-service taint (None: the release is not known)."""
    mm = parse_minor(version)
    return None if mm is None else mm >= OUT_OF_SERVICE_DELETES_SINCE


def fencing_advice(version: str | None) -> str:
    """One sentence: what not to do, and what frees the pods after fencing on this release."""
    deletes = out_of_service_deletes_pods(version)
    mm = parse_minor(version)  # the release as parsed, for the words: the version string is the cluster's, untrusted
    if deletes is None or mm is None:
        after = (f"after fencing, add the taint {TAINT_TO_ADD} to the node (from Kubernetes 1.26 PodGC then "
                 f"deletes its terminating pods), or {_FORCE}")
    elif deletes:
        after = (f"after fencing, add the taint {TAINT_TO_ADD} to the node: PodGC then deletes its terminating "
                 "pods and their volumes are detached")
    else:
        gate = " or with its NodeOutOfServiceVolumeDetach feature gate on" if mm >= (1, 24) else ""
        after = (f"after fencing, {_FORCE}: on {mm[0]}.{mm[1]} the {OUT_OF_SERVICE_TAINT} taint does not delete them "
                 f"(PodGC does from 1.26{gate})")
    return f"{_DONT}; {after}."
