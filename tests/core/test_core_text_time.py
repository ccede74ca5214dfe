"""Timestamps, untrusted text and certificates: the small core helpers."""

from __future__ import annotations

import base64
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodewatch.core.certs import certificate_not_after
from nodewatch.core.text import middle_cut, safe
from nodewatch.core.timeutil import duration_seconds, format_time, parse_time, parse_when
from support.factories import make_cert_pem


@pytest.mark.parametrize("text, expected", [
    ("2026-11-29T10:00:00Z", 1795946400.0),
    ("2026-11-29T10:00:00.123456Z", 1795946400.123456),
    ("2026-11-29T12:00:00+02:00", 1795946400.0),
    ("2026-11-29T10:00:00", None),          # no offset: not RFC 3339
    ("2026-13-29T10:00:00Z", None),
    ("", None), ("yesterday", None), (None, None), (["x"], None), ("9" * 100, None),
])
def test_parse_time(text, expected):
    got = parse_time(text)
    assert got == (pytest.approx(expected, abs=1e-6) if expected is not None else None)


def test_format_round_trip():
    assert format_time(1795946400.0) == "2026-11-29T10:00:00Z"
    assert format_time(1795946400.5, micro=True) == "2026-11-29T10:00:00.500000Z"
    assert parse_time(format_time(1795946400.25, micro=True)) == pytest.approx(1795946400.25, abs=1e-6)
    assert format_time(None) is None


def test_parse_when():
    assert parse_when("+90", 1000.0) == 1090.0
    assert parse_when("2026-11-29T10:00:00Z", None) == 1795946400.0
    with pytest.raises(ValueError, match="RFC 3339"):
        parse_when("soon", 0.0)
    with pytest.raises(ValueError, match="start time is unknown"):
        parse_when("+5", None)


@pytest.mark.parametrize("text, offset", [
    ("+90", 90), ("-90", -90), ("+2.5", 2.5), ("+.5", 0.5), ("+5.", 5), (" +90 ", 90),
    ("+90s", 90), ("+15m", 900), ("+24h", 86400), ("+7d", 7 * 86400), ("+1h30m", 5400), ("-1m30s", -90),
    ("+1H30M", 5400), ("+0.5h", 1800), ("+1d2h3m4s", 93784),
])
def test_an_offset_from_the_start_is_seconds_or_a_duration(text, offset):
    """What a user types after an incident ("+15m", "+1h30m") as well as seconds ("+900")."""
    assert parse_when(text, 1000.0) == 1000.0 + offset


@pytest.mark.parametrize("text", ["+1x", "+", "+m", "+1h 30m", "+nan", "+inf", "+1e3", "+\u00b2", "+h1", "+1.2.3s"])
def test_what_is_no_offset_is_refused_with_the_forms_it_could_have(text):
    with pytest.raises(ValueError, match=r"RFC 3339.*\+15m"):
        parse_when(text, 1000.0)


def test_an_offset_beyond_a_century_or_a_float_is_refused():
    for text in ("+" + "9" * 400, "+" + "9" * 400 + "s", "+40000d"):
        with pytest.raises(ValueError, match="more than a century"):
            parse_when(text, 1000.0)


@given(st.text(max_size=24))
def test_duration_seconds_is_none_or_finite_and_never_raises(s):
    v = duration_seconds(s)
    assert v is None or (math.isfinite(v) and v >= 0)


@pytest.mark.parametrize("text, start, expected", [
    ("10:03", "2026-11-29T10:00:00Z", "2026-11-29T10:03:00Z"),
    ("10:03:07", "2026-11-29T10:00:00Z", "2026-11-29T10:03:07Z"),
    ("09:03", "2026-11-29T10:00:00Z", "2026-11-29T09:03:00Z"),   # before it, that day: "before the recording"
    ("01:00", "2026-11-29T23:00:00Z", "2026-11-30T01:00:00Z"),   # past midnight: the next day
    ("10:59", "2026-11-29T23:00:00Z", "2026-11-30T10:59:00Z"),   # over 12 h before the start: the next day
    ("11:00", "2026-11-29T23:00:00Z", "2026-11-29T11:00:00Z"),
    ("0:05", "2026-11-29T00:00:00Z", "2026-11-29T00:05:00Z"),
])
def test_parse_when_reads_a_time_of_day_on_the_recordings_day(text, start, expected):
    assert format_time(parse_when(text, parse_time(start))) == expected


def test_a_time_of_day_needs_the_recordings_day_and_a_real_time():
    with pytest.raises(ValueError, match="day is unknown"):
        parse_when("10:03", None)
    for bad in ("25:00", "10:60", "10:00:61"):
        with pytest.raises(ValueError, match="not a time of day"):
            parse_when(bad, 0.0)


@given(st.text(max_size=60))
def test_parse_time_never_raises(s):
    r = parse_time(s)
    assert r is None or isinstance(r, float)


@pytest.mark.parametrize("raw, shown", [
    ("node-1", "node-1"),
    ("[red]boom[/red]", "[red]boom[/red]"),           # markup stays literal text (the UI renders Text)
    ("\x1b[2Jclear", "\\x1b[2Jclear"),
    ("\x1b]52;c;ZXZpbA==\x07", "\\x1b]52;c;ZXZpbA==\\x07"),
    ("a\u202eb", "a\\u202eb"),
    ("zero\u200bwidth", "zero\\u200bwidth"),
    ("line\nbreak", "line break"),
    ("\x9b31m", "\\x9b31m"),
])
def test_safe_makes_escapes_visible(raw, shown):
    assert safe(raw) == shown


@given(st.text())
def test_safe_output_has_no_control_characters(s):
    out = safe(s, 80)
    assert len(out) <= 80
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in out)
    assert "\u202e" not in out and "\u200b" not in out


def test_certificate_not_after_pem_and_base64():
    pem = make_cert_pem("system:node:a", 1_900_000_000.0)
    assert certificate_not_after(pem.decode()) == pytest.approx(1_900_000_000.0, abs=1e-6)
    assert certificate_not_after(base64.b64encode(pem).decode()) == pytest.approx(1_900_000_000.0, abs=1e-6)


@pytest.mark.parametrize("junk", [None, "", "not base64!!", base64.b64encode(b"nope").decode(),
                                  "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----", 12])
def test_certificate_not_after_junk(junk):
    assert certificate_not_after(junk) is None


@given(st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=40), st.integers(5, 30))
def test_middle_cut_fits_the_width_and_keeps_both_ends(text, width):
    out = middle_cut(text, width)
    if len(text) <= width:
        assert out == text
    else:
        assert len(out) == width and "…" in out
        head, tail = out.split("…")
        assert text.startswith(head) and text.endswith(tail) and len(tail) >= len(head)


def test_middle_cut_leaves_what_it_cannot_count_as_it_is():
    assert middle_cut("zone-éééééééééééé", 12) == "zone-éééééééééééé"  # not ASCII: the cell's own cut
    assert middle_cut("abcdefgh", 4) == "abcdefgh"  # too narrow to say anything with an ellipsis
