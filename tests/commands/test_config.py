"""The user's settings file and its environment overrides (``nodewatch/config.py``), applied by the
dashboard; ``nodewatch info``; ``--node`` opening a drill-down. Bad values are warnings, never fatal."""

from __future__ import annotations

import json

import pytest

from nodewatch import config
from nodewatch.cli import main
from nodewatch.ui.app import NodewatchApp, theme_memory
from nodewatch.ui.drilldown import DrillDown
from nodewatch.ui.fleet_table import FleetTable
from nodewatch.ui.rows import COLUMN_KEYS
from support.ui_support import incident_source


def _write(tmp_path, text: str) -> dict[str, str]:
    (tmp_path / "nodewatch").mkdir(exist_ok=True)
    (tmp_path / "nodewatch" / "config.toml").write_text(text)
    return {"XDG_CONFIG_HOME": str(tmp_path), "HOME": str(tmp_path)}


def test_file_values_then_environment_overrides(tmp_path):
    env = _write(tmp_path, 'theme = "textual-light"\nrefresh = 2\ncolumns = ["state", "renew"]\ncontext = "prod"\n')
    c = config.load_config(env, known_columns=COLUMN_KEYS)
    assert (c.theme, c.refresh, c.context, c.problems) == ("textual-light", 2.0, "prod", ())
    assert c.columns == ("name", "state", "renew")  # a row always says which node it is
    c = config.load_config({**env, "NODEWATCH_REFRESH": "0.5", "NODEWATCH_COLUMNS": "name,cause",
                            "NODEWATCH_CONTEXT": "staging"}, known_columns=COLUMN_KEYS)
    assert (c.refresh, c.columns, c.context) == (0.5, ("name", "cause"), "staging")


@pytest.mark.parametrize("text, expected", [
    ("refresh = 100\n", "refresh: 100s is outside"),
    ('columns = ["state", "bogus"]\n', "columns: unknown 'bogus'"),
    ("wat = 1\n", "unknown setting 'wat'"),
    ("theme = [1\n", "config.toml:"),  # not TOML at all
    ('theme = "\\u001b[31m"\n', "theme: expected a name"),  # an escape sequence is not a name
])
def test_bad_values_are_named_and_left_out(tmp_path, text, expected):
    c = config.load_config(_write(tmp_path, text), known_columns=COLUMN_KEYS)
    assert len(c.problems) == 1 and expected in c.problems[0], c.problems
    assert (c.theme, c.refresh, c.columns) == (None, None, None)


def test_no_file_is_no_problem(tmp_path):
    assert config.load_config({"XDG_CONFIG_HOME": str(tmp_path)}) == config.UserConfig()


def test_the_chosen_theme_is_remembered_outside_the_users_file(tmp_path):
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    assert config.remembered_theme(env) is None
    assert config.remember_theme("textual-light", env) is None
    assert config.remembered_theme(env) == "textual-light"
    assert not (tmp_path / "cfg").exists()
    (tmp_path / "ro").mkdir(mode=0o500)
    problem = config.remember_theme("x", {"XDG_STATE_HOME": str(tmp_path / "ro" / "sub")})
    assert problem is None or "could not remember" in problem  # root may write anyway; never raises


def test_front_door_sessions_never_remember():
    assert theme_memory({"NODEWATCH_FRONTDOOR": "ssh"}) is None
    assert theme_memory({}) is config.remember_theme


async def test_the_dashboard_applies_columns_and_theme_and_reports_a_picked_theme():
    chosen: list[str] = []
    app = NodewatchApp(incident_source(), columns=("name", "state", "renew"), theme="textual-light",
                       on_theme_chosen=lambda name: chosen.append(name) or None)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        assert app.query_one("#table", FleetTable).column_keys == ("name", "state", "renew")
        assert app.theme == "textual-light"
        assert chosen == []  # applying the user's setting is not a choice to remember
        await pilot.press("T")
        await pilot.pause()
        assert chosen == ["textual-dark"]


async def test_an_unknown_theme_is_a_warning_and_the_dashboard_starts():
    app = NodewatchApp(incident_source(), theme="no-such-theme")
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        assert app.theme != "no-such-theme"
        assert any("no-such-theme" in str(n.message) for n in app._notifications)


async def test_focus_opens_the_drill_down_first():
    src = incident_source()
    name = src.state.evaluate(src.clock.now()).nodes[0].name
    app = NodewatchApp(src, focus=name)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        assert isinstance(app.screen, DrillDown) and app.screen.node == name


def test_dashboards_take_node(monkeypatch):
    from nodewatch.cli import build_parser

    for command in ("watch", "demo", "replay"):
        args = build_parser(only=command).parse_args([command, "--node", "n1", *(["x.jsonl"] if command == "replay" else [])])
        assert args.node == "n1"


def test_config_context_is_the_default_context(tmp_path, monkeypatch, capsys):
    env = _write(tmp_path, 'context = "from-config"\n')
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    seen = {}
    import nodewatch.commands.status as status

    monkeypatch.setattr(status, "run", lambda args: seen.setdefault("context", args.context) and 0)
    main(["status"])
    assert seen["context"] == "from-config"
    seen.clear()
    main(["status", "--context", "given"])
    assert seen["context"] == "given"


def test_info_names_every_file(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert main(["info", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    paths = {f["what"]: f["path"] for f in out["files"]}
    assert paths["settings (theme, refresh, columns, context)"] == str(tmp_path / "cfg" / "nodewatch" / "config.toml")
    assert paths["last theme chosen"] == str(tmp_path / "state" / "nodewatch" / "theme")
    assert not (tmp_path / "cfg").exists() and not (tmp_path / "state").exists()  # info creates nothing


def test_info_names_the_testbed_cache_where_the_testbed_builds(monkeypatch, tmp_path):
    from nodewatch.commands.info import testbed_cache
    from nodewatch.testbed.build import cache_dir

    assert testbed_cache() == cache_dir()
    monkeypatch.setenv("NODEWATCH_TESTBED_CACHE", str(tmp_path / "tb"))
    assert testbed_cache() == cache_dir() == (tmp_path / "tb").resolve()
