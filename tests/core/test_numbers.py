"""Extreme numbers from a recording, a kubectl log, the API or the command line.

Every class: times (``t``, ``not_after``, health times, object timestamps), durations
(``tolerationSeconds``, ``leaseDurationSeconds``, settings), counts (relists) and command-line
``--at``. Wild values are reported with their line number and skipped, never a traceback; a
single wild line never moves a recording's time frame; nothing draws a 300-digit number.
"""

from __future__ import annotations

import json
import math
import re

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nodewatch.cli import main
from nodewatch.core.objects import lease_from_dict
from nodewatch.core.settings import Settings
from nodewatch.core.text import duration, short_duration
from nodewatch.core.timeutil import MAX_SECONDS, MAX_TIME, format_time, parse_time, parse_when, seconds, valid_time
from nodewatch.sources.kubectl_format import iter_entries
from nodewatch.sources.line_guards import MAX_GAP
from nodewatch.sources.recording import parse_line
from nodewatch.ui.replay_bar import replay_text
from support.factories import T0, lease, node

WILD = [1e308, -1e308, float("nan"), -5, 10**30, -(10**30), MAX_TIME + 1]


def header(started: float = T0) -> bytes:
    return orjson.dumps({"nodewatch_recording": 1, "started_at": format_time(started, micro=True), "source": {},
                         "settings": {"server_version": "v1.33.0"}})


def recording(tmp_path, lines: list[bytes], started: float = T0) -> str:
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"\n".join([header(started), *lines]) + b"\n")
    return str(path)


def sound_lines(n: int = 20, t0: float = T0) -> list[bytes]:
    out = [orjson.dumps({"t": t0, "resource": "nodes", "type": "ADDED", "object": node("a"), "list": True}),
           orjson.dumps({"t": t0, "resource": "nodes", "type": "SYNCED", "object": None})]
    out += [orjson.dumps({"t": t0 + 10 * i, "resource": "leases", "type": "MODIFIED", "object": lease("a", t0 + 10 * i)})
            for i in range(n)]
    return out


def wild_line(t: object) -> bytes:
    # orjson refuses NaN and huge ints; json writes them as NaN / digits, as a hostile file would
    return json.dumps({"t": t, "resource": "leases", "type": "MODIFIED", "object": lease("a", T0)}).encode()


# --- times read from a recording ---------------------------------------------------------------


@pytest.mark.parametrize("t", WILD + ["1e308", True, None])
def test_a_wild_time_is_reported_with_its_line_number(t):
    problems: list[str] = []
    assert parse_line(7, wild_line(t), problems) is None
    assert len(problems) == 1 and problems[0].startswith("line 7: "), problems  # NaN is not even JSON


@pytest.mark.parametrize("t", WILD)
@pytest.mark.parametrize("where", ["start", "middle", "end"])
def test_a_wild_line_never_moves_the_time_frame(tmp_path, open_replay, t, where):
    lines = sound_lines()
    at = {"start": 2, "middle": 10, "end": len(lines)}[where]
    lines.insert(at, wild_line(t))
    src = open_replay(recording(tmp_path, lines))
    assert (src.replay.start, src.replay.end) == (T0, T0 + 190)
    assert any(p.startswith(f"line {at + 2}:") for p in src.problems), src.problems


@pytest.mark.parametrize("offset", [-86400 * 365, -7200, 7200, 86400 * 3650])
@pytest.mark.parametrize("where", ["start", "end"])
def test_a_single_plausible_but_lone_time_never_moves_the_frame(tmp_path, open_replay, offset, where):
    """A time that is a valid date, but alone: before the header's start, or an hour away from all."""
    lines = sound_lines()
    lines.insert(2 if where == "start" else len(lines), wild_line(T0 + (190 if offset > 0 else 0) + offset))
    src = open_replay(recording(tmp_path, lines))
    assert (src.replay.start, src.replay.end) == (T0, T0 + 190)
    assert src.problems and "line" in src.problems[0]


def test_a_real_gap_confirmed_by_more_lines_is_kept(tmp_path, open_replay):
    later = T0 + 190 + 2 * MAX_GAP
    lines = sound_lines() + [wild_line(later), wild_line(later + 10)]
    src = open_replay(recording(tmp_path, lines))
    assert src.replay.end == later + 10


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(t=st.floats(allow_nan=True, allow_infinity=True) | st.integers(min_value=-(10**40), max_value=10**40),
       at=st.integers(0, 22))
def test_any_number_as_a_time_never_breaks_the_frame(tmp_path_factory, open_replay, t, at):
    lines = sound_lines()
    lines.insert(at, wild_line(t))
    src = open_replay(recording(tmp_path_factory.mktemp("n"), lines))
    assert T0 - 300 <= src.replay.start <= T0 and src.replay.end == T0 + 190 or src.replay.end == t


def test_cert_and_health_numbers_are_checked(tmp_path, open_replay):
    lines = sound_lines() + [
        json.dumps({"t": T0 + 5, "cert": {"node": "a", "not_after": 1e308}}).encode(),
        json.dumps({"t": T0 + 6, "health": {"resource": "leases", "connected": False, "down_since": -1e308,
                                            "relists": 10**30}}).encode(),
    ]
    src = open_replay(recording(tmp_path, lines))
    text = "\n".join(src.problems)
    assert "line 24: certificate line without node and a valid not_after" in text
    assert "line 25: health down_since" in text and "line 25: health relists" in text
    src.replay.seek(src.replay.end)
    assert src.state.evaluate(T0 + 190).nodes  # the rest replays


# --- times in a kubectl log -----------------------------------------------------------------------


def kubectl_lines(times: list[float]) -> list[tuple[int, bytes]]:
    docs = [{"type": "MODIFIED", "object": {**lease("a", t), "kind": "Lease"}} for t in times]
    return [(i + 1, orjson.dumps(d)) for i, d in enumerate(docs)]


def test_a_lone_wild_object_time_does_not_carry_the_kubectl_replay_away():
    problems: list[str] = []
    times = [T0, T0 + 10, 4e9, T0 + 20, T0 + 30]
    got = [e.t for e in iter_entries(kubectl_lines(times), problems)]
    assert got == [T0, T0 + 10, T0 + 10, T0 + 20, T0 + 30]
    assert problems and problems[0].startswith("line 3: object time")


def test_a_confirmed_jump_in_a_kubectl_log_is_followed():
    problems: list[str] = []
    times = [T0, T0 + 2 * 3600, T0 + 2 * 3600 + 10]
    got = [e.t for e in iter_entries(kubectl_lines(times), problems)]
    assert got[-1] >= T0 + 2 * 3600 and not problems


# --- numbers from the API --------------------------------------------------------------------------


@pytest.mark.parametrize("value", [1e308, -1e308, 10**30, "nan", "1e999", float("inf")])
def test_durations_from_the_api_are_bounded(value):
    obj = lease("a", T0)
    obj["spec"]["leaseDurationSeconds"] = value
    d = lease_from_dict(obj).duration_seconds
    assert d is None or abs(d) <= MAX_SECONDS


@pytest.mark.parametrize("count", [10**18, -5, 0, 2.5, "7"])
def test_event_counts_from_the_api_are_bounded(count):
    from nodewatch.core.objects import event_from_dict
    from support.factories import event

    obj = event("e", "a", "Reason", "message", T0)
    obj["count"] = count
    assert 1 <= event_from_dict(obj).count <= 10**9


@given(st.floats(allow_nan=True) | st.integers() | st.text(max_size=8) | st.booleans() | st.none())
def test_seconds_and_valid_time_never_raise_and_stay_in_range(v):
    s = seconds(v)
    assert s is None or (math.isfinite(s) and abs(s) <= MAX_SECONDS)
    t = valid_time(v)
    assert t is None or 0 <= t <= MAX_TIME
    assert format_time(t) is None or len(format_time(t)) == 20
    assert parse_time(v) is None or 0 <= parse_time(v) <= MAX_TIME


# --- what is drawn --------------------------------------------------------------------------------


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_no_duration_is_drawn_with_more_than_a_few_characters(x):
    assert len(duration(x)) <= 8 and len(short_duration(x)) <= 8


class WildReplay:
    start, end, playing, speed, complete = 0.0, 1e308, False, 1.0, True

    def position(self) -> float:
        return 1e300


def test_the_replay_bar_never_draws_a_300_digit_duration():
    text = replay_text(WildReplay(), 120).plain  # type: ignore[arg-type]
    assert max(len(d) for d in re.findall(r"\d+", text)) <= 4 and ">100y" in text


# --- the command line -----------------------------------------------------------------------------


@pytest.mark.parametrize("at", ["+1e308", "-1e308", "+nan", "-99999999999999999999999", "+" + "9" * 400,
                                "-5", "+999999", "1969-12-31T23:59:59Z", "9999-12-31T23:59:59Z"])
def test_status_at_with_wild_values_is_a_clear_error(tmp_path, capsys, at):
    path = recording(tmp_path, sound_lines())
    rc = main(["status", "--replay", path, f"--at={at}"])
    _, err = capsys.readouterr()
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err


@given(st.text(max_size=30))
def test_parse_when_raises_only_value_error(text):
    try:
        t = parse_when(text, T0)
    except ValueError:
        return
    assert 0 <= t <= MAX_TIME


@pytest.mark.parametrize("flag, value", [("--grace", "nan"), ("--toleration", "1e308"), ("--zone-threshold", "inf"),
                                         ("--eviction-rate", "-1"), ("--large-cluster-threshold", "-3")])
def test_wild_settings_are_refused_with_exit_2(capsys, flag, value):
    rc = main(["status", "--demo", flag, value])
    assert rc == 2 and flag in capsys.readouterr().err


def test_wild_settings_in_a_recording_header_are_ignored(tmp_path, open_replay):
    path = tmp_path / "h.jsonl"
    path.write_bytes(json.dumps({"nodewatch_recording": 1, "started_at": format_time(T0),
                                 "settings": {"overridden": ["grace_seconds"], "grace_seconds": 1e308}}).encode()
                     + b"\n" + b"\n".join(sound_lines()) + b"\n")
    src = open_replay(path)
    assert src.settings.grace == Settings(server_version=None).grace
    assert any("settings" in p for p in src.problems)
