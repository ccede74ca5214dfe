"""The testbed tier: a real kube-apiserver and kube-controller-manager on 127.0.0.1, per release.

Every test that uses the control plane runs once per release in ``--testbed-version`` (repeatable;
or ``NODEWATCH_TESTBED_VERSIONS=1.20,latest``; default: 1.20 and latest): v1.20.2 from Debian's
source package and the newest release the Go module proxy serves. Each is built once into the
per-user cache (``nodewatch testbed build --version ...``; then instant), started once per
release with fresh PKI and data, and stopped by pid afterwards. These tests are marked
``testbed``; the default ``pytest`` run leaves them out (``-m "not testbed"`` in pyproject), and
``make test`` runs them as a tier of their own (``make test-testbed``).
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

DEFAULT_VERSIONS = ("1.20", "latest")


def pytest_addoption(parser):
    parser.addoption("--testbed-version", action="append", default=None, metavar="VERSION",
                     help="a release the testbed tier runs on: 1.20, latest, 1.N, 1.N.P (repeatable; "
                          f"default {' and '.join(DEFAULT_VERSIONS)} or $NODEWATCH_TESTBED_VERSIONS)")


def testbed_versions(config) -> list[str]:
    asked = config.getoption("--testbed-version", default=None)
    if asked:
        return list(asked)
    env = os.environ.get("NODEWATCH_TESTBED_VERSIONS")
    return [v.strip() for v in env.split(",") if v.strip()] if env else list(DEFAULT_VERSIONS)


def pytest_generate_tests(metafunc):
    if "tb_version" in metafunc.fixturenames:
        metafunc.parametrize("tb_version", testbed_versions(metafunc.config), indirect=True, scope="session")


@pytest.fixture(scope="session")
def tb_version(request) -> str:
    """The release asked for (``1.20``, ``latest``, ...): one run of the tier's tests per value."""
    return request.param


@pytest.fixture(scope="session")
def binaries(tb_version):
    return ensure_built(version=tb_version)


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
