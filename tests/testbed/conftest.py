"""The testbed tier: a real kube-apiserver and kube-controller-manager v1.20.2 on 127.0.0.1.

Built once into the per-user cache (cold: about four minutes on two cores; then instant), started
once per session with fresh PKI and data, and stopped by pid afterwards. These tests are
marked ``testbed``; the default ``pytest`` run leaves them out (``-m "not testbed"`` in
pyproject), and ``make test`` runs them as a tier of their own (``make test-testbed``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from campaign import APISERVER_FLAGS, CONTROLLER_FLAGS, Observed, run_campaign

from nodewatch.testbed.build import ensure_built
from nodewatch.testbed.controlplane import down, up


@pytest.fixture(scope="session")
def binaries():
    return ensure_built()


@pytest.fixture(scope="session")
def testbed(binaries, tmp_path_factory):
    """One control plane for the tier, with the agreement campaign's shortened node-lifecycle flags."""
    folder = tmp_path_factory.mktemp("testbed")
    tb = up(folder, binaries, controller_flags=CONTROLLER_FLAGS, apiserver_flags=APISERVER_FLAGS,
            progress=lambda line: print(f"testbed: {line}"))
    try:
        yield tb
    finally:
        down(folder, progress=lambda line: print(f"testbed: {line}"))


@pytest.fixture(scope="session")
def obs(testbed) -> Observed:
    """The agreement campaign, run once: what nodewatch predicted and what the controllers did."""
    observed = run_campaign(testbed, log=lambda line: print(f"campaign: {line}"))
    table = os.environ.get("NODEWATCH_AGREEMENT_TABLE")
    if table:
        from agreement_table import markdown

        Path(table).write_text(markdown(observed))
    return observed
