"""Which clusters to watch: fleet files, several --context, --all-contexts (no network)."""

from __future__ import annotations

import pytest
import yaml

from nodewatch.cli import main
from nodewatch.core.settings import Settings
from nodewatch.sources.multi_config import FleetFileError, all_contexts, parse_fleet, read_fleet_file


def test_a_fleet_file_lists_contexts_with_their_own_settings(tmp_path):
    f = tmp_path / "fleet.yaml"
    f.write_text("clusters:\n"
                 "  - prod-eu\n"
                 "  - context: prod-us\n    kubeconfig: ~/us.yaml\n"
                 "  - context: batch\n    name: batch-tuned\n    grace: 20\n    zone-threshold: 0.4\n")
    eu, us, batch = read_fleet_file(str(f))
    assert (eu.name, eu.context, eu.kubeconfig, eu.overrides) == ("prod-eu", "prod-eu", None, {})
    assert us.kubeconfig == "~/us.yaml"
    assert (batch.name, batch.context) == ("batch-tuned", "batch")
    s = batch.settings(Settings(toleration_seconds=120).with_server_version("v1.33.0"))
    assert s.grace == 20 and s.unhealthy_zone_threshold == 0.4 and s.toleration_seconds == 120
    assert s.origin("grace_seconds") == "flag"
    assert eu.settings(Settings().with_server_version("v1.31.0")).grace == 40  # its server's version decides


@pytest.mark.parametrize("data, words", [
    ([], "expected a list"),
    ({"nope": 1}, "expected a list"),
    ([{"kubeconfig": "x"}], "needs a `context`"),
    ([{"context": "a", "graec": 3}], "unknown key 'graec'"),
    ([{"context": "a", "grace": -1}], "not negative"),
    ([{"context": "a", "grace": "40s"}], "must be a number"),
    ([{"context": "a", "zone-threshold": 2}], "outside"),
    (["a", {"context": "a"}], "two clusters are called 'a'"),
    ([{"context": 3}], "non-empty string"),
])
def test_fleet_file_errors_say_where_and_why(data, words):
    with pytest.raises(FleetFileError) as e:
        parse_fleet(data, "f.yaml")
    assert words in str(e.value) and "f.yaml" in str(e.value)


def test_unreadable_fleet_files(tmp_path):
    with pytest.raises(FleetFileError, match="cannot read"):
        read_fleet_file(str(tmp_path / "missing.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("clusters: [a,\n")
    with pytest.raises(FleetFileError, match="not YAML"):
        read_fleet_file(str(bad))


def test_all_contexts_reads_the_kubeconfig_in_order(tmp_path):
    kc = tmp_path / "kc"
    kc.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "b",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": n, "context": {"cluster": "c", "user": "u"}} for n in ("b", "a", "z")],
    }))
    assert all_contexts(str(kc)) == ["b", "a", "z"]


def test_command_line_choices_exclude_each_other(tmp_path, capsys):
    f = tmp_path / "fleet.yaml"
    f.write_text("- a\n- b\n")
    assert main(["status", "--fleet", str(f), "--context", "a"]) == 2
    assert "choose one of" in capsys.readouterr().err
    assert main(["status", "--fleet", str(tmp_path / "none.yaml")]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert main(["status", "--fleet", str(f), "--at", "+0"]) == 2
    assert "--at needs" in capsys.readouterr().err
