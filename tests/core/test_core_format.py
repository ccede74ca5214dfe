"""The dashboard's plain-text helpers, above all ``safe`` (untrusted cluster strings)."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nodewatch.core.format import (
    ago,
    bar,
    cert_text,
    clock_time,
    conditions_text,
    eviction_text,
    grace_text,
    taints_compact,
    taints_text,
    version_key,
)
from nodewatch.core.rules import Taint
from nodewatch.core.text import duration, safe, short_duration

FORBIDDEN_CATEGORIES = {"Cc", "Cf", "Cs", "Cn", "Zl", "Zp"}


def assert_inert(out: str) -> None:
    for ch in out:
        assert unicodedata.category(ch) not in FORBIDDEN_CATEGORIES, (out, hex(ord(ch)))
    assert "\x1b" not in out
    out.encode("utf-8")  # no lone surrogate may reach the terminal writer


@pytest.mark.parametrize("raw, expected", [
    ("worker-1", "worker-1"),
    ("[red]boom[/red]", "[red]boom[/red]"),  # markup is text; callers wrap it in Text()
    ("\x1b[2Jclear", "\\x1b[2Jclear"),
    ("\x1b]52;c;aGk=\x07x", "\\x1b]52;c;aGk=\\x07x"),  # OSC 52 clipboard write
    ("\x9b31mred", "\\x9b31mred"),  # C1 CSI
    ("a\u202eevil", "a\\u202eevil"),  # right-to-left override
    ("zero\u200bwidth", "zero\\u200bwidth"),
    ("bom\ufeff", "bom\\ufeff"),
    ("two\nlines\tand\rtab", "two lines and tab"),
    ("\ud800x", "\\ud800x"),
    ("日本", "日本"),
    (None, ""),
    (42, "42"),
])
def test_safe_makes_text_inert(raw, expected):
    assert safe(raw, 100) == expected


def test_safe_caps_length_with_ellipsis():
    assert safe("x" * 500, 10) == "x" * 9 + "…"
    assert len(safe("\x1b" * 500, 20)) == 20
    assert safe("abc", 0) == ""


def test_safe_limits_combining_marks():
    out = safe("e" + "\u0301" * 50 + "f", 100)
    assert out == "e\u0301\u0301f"


def test_safe_bounded_work_on_huge_input():
    huge = "\x1b[31m" * 1_000_000
    out = safe(huge, 50)
    assert len(out) == 50 and out.endswith("…")


@given(st.text(), st.integers(min_value=1, max_value=120))
@settings(max_examples=300, deadline=None)
def test_safe_fuzz(raw, n):
    out = safe(raw, n)
    assert len(out) <= n
    assert_inert(out)


@pytest.mark.parametrize("secs, text", [
    (0, "0s"), (12.7, "12s"), (59, "59s"), (60, "1m00s"), (185, "3m05s"), (600, "10m"),
    (3700, "1h01m"), (90000, "1d01h"), (-5, "-5s"), (None, "?"), (float("inf"), "∞"),
])
def test_duration(secs, text):
    assert duration(secs) == text


def test_bar_fills_and_clamps():
    assert bar(0.0, 8) == "░" * 8
    assert bar(1.0, 8) == "█" * 8
    assert bar(2.0, 8) == "█" * 8
    assert bar(0.5, 8) == "████░░░░"
    assert len(bar(0.37, 7)) == 7
    assert bar(None, 4) == "····"


def test_grace_text_reads_like_kubectl():
    assert grace_text("Ready", "True", 12.2, None, 100.0) == "NotReady in 12s"
    assert grace_text("Overdue", "True", -20.0, None, 100.0) == "grace over 20s"
    assert grace_text("Unknown", "Unknown", None, 100.0 - 180, 100.0) == "Unknown for 3m00s"
    assert grace_text("NotReady", "False", 30, 60.0, 100.0) == "NotReady for 40s"
    assert grace_text("Ready", "True", None, None, 100.0) == "lease age unknown"


def test_a_cluster_clock_ahead_of_ours_shows_no_negative_time():
    """A transition or taint the controller stamped 3 s "in the future" of this machine's clock."""
    assert grace_text("Unknown", "Unknown", None, 103.0, 100.0) == "Unknown for 0s"
    assert grace_text("Unknown", "Unknown", None, 103.0, 100.0, compact=True) == "down 0s"
    ahead = (Taint("node.kubernetes.io/unreachable", "NoExecute", "", 103.0),)
    assert taints_text(ahead, 100.0) == "unreachable:NoExec 0s"
    assert taints_compact(ahead, 100.0) == "unreach:NE 0s"


def test_eviction_and_cert_text():
    assert eviction_text(None) == ""
    assert eviction_text(272) == "evict in 4m32s"
    assert eviction_text(-100) == "evicted 1m40s ago"
    assert cert_text(None, 0) == "?"
    assert cert_text(10 * 86400 + 5, 0) == "10d"
    assert cert_text(3 * 3600, 0) == "3h"
    assert cert_text(-1, 0) == "EXPIRED"


def test_conditions_and_taints():
    assert conditions_text("True", (), False) == "R · · · ·"
    assert conditions_text("Unknown", ("MemoryPressure", "PIDPressure"), True) == "? M · P N"
    assert conditions_text(None, ("DiskPressure",), False) == "- · D · ·"
    taints = (Taint("node.kubernetes.io/unschedulable", "NoSchedule", "", 0.0),
              Taint("node.kubernetes.io/unreachable", "NoExecute", "", 40.0))
    assert taints_text(taints, 100.0) == "unreachable:NoExec 1m +1"
    assert taints_text((), 0) == ""
    evil = (Taint("\x1b[2J[red]k", "NoExecute"),)
    assert_inert(taints_text(evil, 0))
    assert "[red]k" in taints_text(evil, 0)


def test_short_duration():
    assert [short_duration(x) for x in (5, 125, 7300, 200000, None)] == ["5s", "2m", "2h", "2d", "?"]


def test_times_and_versions():
    assert clock_time(0) == "00:00:00Z"
    assert clock_time(0, date=True) == "1970-01-01 00:00:00Z"
    assert clock_time(None) == "?"
    assert ago(90, 100) == "10s ago" and ago(110, 100) == "in 10s"
    assert version_key("v1.33.10") > version_key("v1.33.9")
    assert version_key("") == (0,)
