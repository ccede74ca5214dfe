"""The dashboard's workers, its replay look-ahead and its keymap: failures are shown, dear work is
not done every tick, and keys move where the user's file says."""

from __future__ import annotations

from textual.widgets import Input
from textual.worker import WorkerFailed

from nodewatch.core.clock import ManualClock
from nodewatch.ui import app as app_module
from nodewatch.ui.app import binding_ids, run_dashboard
from nodewatch.ui.help import HelpScreen
from nodewatch.ui.keymap import keymap_path, load_keymap
from nodewatch.ui.replay_bar import NextChange
from support.factories import T0
from support.ui_support import FakeReplay
from tests.ui.test_ui_app import SIZE, make_app


def toasts(app) -> list[str]:
    return [str(n.message) for n in app._notifications]


async def settle(app, pilot) -> None:
    """Let the workers finish, failed ones too (the app, not the test, is to handle them)."""
    try:
        await app.workers.wait_for_complete()
    except WorkerFailed:
        pass
    await pilot.pause()


async def test_a_failing_evaluate_worker_is_shown_once_and_the_dashboard_carries_on(monkeypatch):
    monkeypatch.setattr(app_module, "THREADED_EVALUATE_NODES", 1)
    src, app = make_app()
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await pilot.pause()
        ticks = app.ticks
        real = src.state.evaluate

        def broken(now):
            raise ValueError("a bug in the rules")

        src.state.evaluate = broken
        for _ in range(2):
            app._scheduled_tick()
            await settle(app, pilot)
        assert app.worker_errors == 2 and app.ticks == ticks
        shown = [t for t in toasts(app) if "a bug in the rules" in t]
        assert shown == ["evaluate failed: ValueError: a bug in the rules"]  # once while it repeats
        await pilot.pause()
        on_screen = [str(t.render()) for t in app.screen.query("Toast")]
        assert any("a bug in the rules" in t for t in on_screen), on_screen  # shown, not only listed
        src.state.evaluate = real
        app._scheduled_tick()
        await settle(app, pilot)
        assert app.ticks == ticks + 1  # it recovers at the next tick


def test_next_change_is_asked_again_only_when_the_position_leaves_the_known_span():
    clock = ManualClock(T0)
    r = FakeReplay(clock, T0 - 300, T0 + 600, changes=[T0 + 30, T0 + 180])
    nc = NextChange()
    answers = []
    for t in (T0, T0 + 1, T0 + 10, T0 + 29.5):
        clock.set(t)
        answers.append(nc.at(r))
    assert answers == [T0 + 30] * 4 and r.next_change_calls == 1
    clock.set(T0 + 30)
    assert nc.at(r) == T0 + 180 and r.next_change_calls == 2
    clock.set(T0 + 100)
    assert nc.at(r) == T0 + 180 and r.next_change_calls == 2
    clock.set(T0 + 5)  # a seek back: ask again
    assert nc.at(r) == T0 + 30 and r.next_change_calls == 3
    clock.set(T0 + 200)
    assert nc.at(r) is None and r.next_change_calls == 4
    clock.set(T0 + 500)
    assert nc.at(r) is None and r.next_change_calls == 4  # nothing ahead stays nothing ahead


async def test_ticks_do_not_replay_ahead_every_time():
    src, app = make_app(replay=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        calls = src.replay.next_change_calls
        for _ in range(10):
            src.clock.advance(1)
            app.tick()
        await pilot.pause()
        assert src.replay.next_change_calls == calls  # the next change (T0+30) is still ahead
        await pilot.press("n")
        assert src.replay.position() == T0 + 30 and src.replay.next_change_calls == calls + 1


def test_load_keymap_reads_ids_and_reports_what_it_cannot_use(tmp_path):
    ids = binding_ids()
    f = tmp_path / "keys.toml"
    f.write_text('app.search = "ctrl+f"\n"table.choose" = "enter,o"\nnope.x = "a"\n'
                 '[replay]\nnext_change = "N"\nfaster = 3\n')
    keymap, problems = load_keymap(f, ids)
    assert keymap == {"app.search": "ctrl+f", "table.choose": "enter,o", "replay.next_change": "N"}
    assert len(problems) == 2 and "'nope.x'" in problems[0] and "replay.faster" in problems[1]
    assert load_keymap(tmp_path / "missing.toml", ids) == ({}, [])
    f.write_text("app.search = \n")
    keymap, problems = load_keymap(f, ids)
    assert keymap == {} and len(problems) == 1 and str(f) in problems[0]


def test_keymap_path_follows_the_environment(tmp_path):
    assert keymap_path({"NODEWATCH_KEYMAP": "/x/k.toml", "XDG_CONFIG_HOME": "/c"}).as_posix() == "/x/k.toml"
    assert keymap_path({"XDG_CONFIG_HOME": "/c"}).as_posix() == "/c/nodewatch/keys.toml"
    assert keymap_path({}).as_posix().endswith("/.config/nodewatch/keys.toml")


async def test_a_remapped_key_moves_the_action_and_the_help_says_so(monkeypatch):
    monkeypatch.delenv("NODEWATCH_KEYMAP", raising=False)
    src, app = make_app()
    app.keymap = {"app.search": "ctrl+f"}
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("slash")
        assert app.query_one("#search", Input).disabled  # "/" no longer opens the search
        await pilot.press("ctrl+f")
        assert not app.query_one("#search", Input).disabled
        groups = dict(app._binding_groups())
        search = next(b for b in groups["Dashboard"] if b.id == "app.search")
        assert search.key == "ctrl+f"
        await pilot.press("escape", "question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert "keys.toml" in str(app.screen.query_one("#help-keymap").render())


def test_run_dashboard_reads_the_users_keymap(monkeypatch, tmp_path):
    f = tmp_path / "keys.toml"
    f.write_text('app.quit = "x"\nno.such = "y"\n')
    monkeypatch.setenv("NODEWATCH_KEYMAP", str(f))
    src, _ = make_app()
    seen = []
    monkeypatch.setattr(app_module.NodewatchApp, "run", lambda self, *a, **k: seen.append(
        (self.keymap, self.keymap_problems)))
    assert run_dashboard(src) == 0
    assert seen[0][0] == {"app.quit": "x"} and "no.such" in seen[0][1][0]
