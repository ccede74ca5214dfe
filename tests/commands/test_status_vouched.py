"""Which doubtful lease ages the one-shot ``status`` waits for (``status.vouched_renewals``).

A listed lease dated only by renewTime (the node's clock) is in doubt while its node is Ready. The
API server vouches for the node when its lease, by renewTime, is older than the node lifecycle
controller lets one be (grace + one monitor period + a margin) and it is still Ready: the
controller saw a renewal, the node's clock is behind. Younger than that, a stopped kubelet looks
the same, so the answer does not wait. The grace is the server version's (40 s before v1.32, 50 s
since): both sides are tested.
"""

from __future__ import annotations

import pytest

from nodewatch.commands.status import VOUCH_MARGIN, vouched_renewals
from nodewatch.core.fleet import FleetState
from nodewatch.core.settings import Settings
from support.factories import T0, lease, node


def listed(version: str, age: float) -> FleetState:
    state = FleetState(Settings(server_version=version))
    state.apply("nodes", "ADDED", node("a", transition=T0 - 3600), T0, True)
    state.apply("nodes", "SYNCED", None, T0)
    state.apply("leases", "ADDED", lease("a", T0 - age), T0, True)
    state.apply("leases", "SYNCED", None, T0)
    return state


@pytest.mark.parametrize(("version", "grace"), [("v1.20.2", 40.0), ("v1.33.2", 50.0)])
def test_vouched_only_beyond_what_the_controller_tolerates(version, grace):
    limit = grace + 5.0 + VOUCH_MARGIN
    late = listed(version, limit - 5)  # an incident's first minute: maybe a stopped kubelet
    doubt = late.ages_in_doubt(T0)
    assert set(doubt) == {"a"}
    assert vouched_renewals(late, T0, doubt) == {}
    behind = listed(version, limit + 5)  # Ready although the controller would have flipped it
    doubt = behind.ages_in_doubt(T0)
    assert vouched_renewals(behind, T0, doubt) == doubt


def test_the_grace_of_the_version_decides():
    """55 s by renewTime: beyond v1.20's 40 + 5 + 5, within v1.33's 50 + 5 + 5."""
    for version, vouched in (("v1.20.2", True), ("v1.33.2", False)):
        state = listed(version, 55)
        assert bool(vouched_renewals(state, T0, state.ages_in_doubt(T0))) is vouched, version
