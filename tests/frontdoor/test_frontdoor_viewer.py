"""Which viewer a front-door session gets (key options, wall users), the ``HOST:PORT`` syntax of
the doors' options, and the secrets they keep."""

from __future__ import annotations

import pytest

from nodewatch.frontdoor.files import host_key, replace_private, web_token
from nodewatch.frontdoor.listen import parse_listen, url_host
from nodewatch.frontdoor.viewer import KeyOptionError, default_viewer_command, wall_command_for, wants_wall

BASE = ["nodewatch", "attach", "/srv/hub"]


@pytest.mark.parametrize("options, wall", [
    ({}, False),
    ({"environment": {"NODEWATCH_WALL": "1"}}, True),
    ({"environment": {"NODEWATCH_WALL": "yes"}}, True),
    ({"environment": {"NODEWATCH_WALL": "0"}}, False),
    ({"environment": {"OTHER": "1"}}, False),
    ({"command": "nodewatch attach --wall"}, True),
    ({"command": "/usr/local/bin/nodewatch attach --wall"}, True),
    ({"command": "nodewatch attach"}, False),
    ({"command": "--wall"}, True),
])
def test_key_options_choose_wall_mode(options, wall):
    assert wants_wall(options) is wall
    assert wall_command_for(BASE)("alice", options) == BASE + ["--wall"] * wall


@pytest.mark.parametrize("command", ["bash", "nodewatch attach; sh", "nodewatch watch", "nodewatch attach 'x", "rm -rf /"])
def test_a_forced_command_other_than_the_viewer_is_refused(command):
    with pytest.raises(KeyOptionError):
        wall_command_for(BASE)("alice", {"command": command})


def test_wall_users():
    command_for = wall_command_for(BASE, ["tv"])
    assert command_for("tv", {}) == BASE + ["--wall"]
    assert command_for("alice", {}) == BASE
    assert command_for("alice", {}) is not command_for("alice", {})  # callers may extend it


def test_default_viewer_is_this_install_attaching():
    argv = default_viewer_command("/srv/hub")
    assert argv[1:] == ["-m", "nodewatch", "attach", "/srv/hub"]
    assert default_viewer_command()[1:] == ["-m", "nodewatch", "attach"]


@pytest.mark.parametrize("text, expected", [
    ("127.0.0.1:2222", ("127.0.0.1", 2222)),
    ("0.0.0.0:80", ("0.0.0.0", 80)),
    ("[::1]:8080", ("::1", 8080)),
    (":2222", ("127.0.0.1", 2222)),
    ("2222", ("127.0.0.1", 2222)),
    ("localhost:0", ("localhost", 0)),
])
def test_parse_listen(text, expected):
    assert parse_listen(text) == expected


@pytest.mark.parametrize("text", ["host", "host:", "host:70000", "host:-1", "a:b:c"])
def test_parse_listen_rejects(text):
    with pytest.raises(ValueError):
        parse_listen(text)


def test_url_host():
    assert url_host("::1") == "[::1]" and url_host("127.0.0.1") == "127.0.0.1"


def test_secrets_are_made_once_owner_only(tmp_path):
    token = web_token(tmp_path / "d" / "web-token")
    assert token.startswith("nwweb-") and len(token) > 30
    assert web_token(tmp_path / "d" / "web-token") == token
    assert (tmp_path / "d" / "web-token").stat().st_mode & 0o777 == 0o600
    assert web_token(tmp_path / "other") != token
    key = host_key(tmp_path / "k")
    assert host_key(tmp_path / "k").export_public_key() == key.export_public_key()
    assert (tmp_path / "k").stat().st_mode & 0o777 == 0o600
    replace_private(tmp_path / "url", b"one")
    replace_private(tmp_path / "url", b"two")
    assert (tmp_path / "url").read_bytes() == b"two" and (tmp_path / "url").stat().st_mode & 0o777 == 0o600
