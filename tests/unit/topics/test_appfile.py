"""Loading an app file: tables, environment expansion, and errors that name the file and key."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from queuey.errors import ConfigError
from queuey.topics import load_app_config
from queuey.topics._expansion import expand_string

FULL = """
[database]
url = "${QT_DB_URL:-postgresql://localhost/fallback}"

[functions]
send_welcome = "handlers:send_welcome"

[queues]
enabled = false
prefix = "shop"
poll_secs = 5
batch = 3
max_attempts = 2
retry_backoff_secs = 0
lease_secs = 60
retain_hours = 0
publish = "$QT_PUBLISH"

[queues.subscribe]
"user.signed_up" = "send_welcome"
"order.paid"     = ["fulfil_order", "notify_ops"]

[http]
base = "/api"
secret = "${QT_SECRET}"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "app.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_full_file_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QT_PUBLISH", "authenticated")
    monkeypatch.setenv("QT_SECRET", "s3cret")
    monkeypatch.delenv("QT_DB_URL", raising=False)
    config = load_app_config(write(tmp_path, FULL))
    queues = config.queues
    assert config.path == tmp_path / "app.toml"
    assert config.folder == tmp_path
    assert (queues.enabled, queues.prefix, queues.channel()) == (False, "shop", "shop_queue")
    assert (queues.poll_secs, queues.batch, queues.max_attempts) == (5, 3, 2)
    assert (queues.retry_backoff_secs, queues.lease_secs, queues.retain_hours) == (0, 60, 0)
    assert queues.publish == "authenticated"
    assert queues.subscribers("order.paid") == ("fulfil_order", "notify_ops")
    assert dict(config.functions) == {"send_welcome": "handlers:send_welcome"}
    assert config.database_url == "postgresql://localhost/fallback"
    assert config.tables["http"] == {"base": "/api", "secret": "s3cret"}


def test_an_empty_file_gives_the_defaults(tmp_path: Path) -> None:
    config = load_app_config(write(tmp_path, ""))
    assert config.queues.channel() == "queuey_queue"
    assert dict(config.functions) == {}
    assert config.database_url is None


def test_an_empty_database_url_counts_as_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("QT_UNSET", raising=False)
    config = load_app_config(write(tmp_path, '[database]\nurl = "$QT_UNSET"\n'))
    assert config.database_url is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$QT_HOST", "db.example.com"),
        ("${QT_HOST}", "db.example.com"),
        ("postgres://$QT_HOST:5432/db", "postgres://db.example.com:5432/db"),
        ("${QT_HOST}_1", "db.example.com_1"),
        ("${QT_PORT:-5432}", "5432"),
        ("${QT_EMPTY:-us-east-1}", "us-east-1"),
        ("${QT_HOST:-other}", "db.example.com"),
        ("${QT_UNSET:-}", ""),
        ("${QT_UNSET:-postgres://a:b@c/d}", "postgres://a:b@c/d"),
        ("a${QT_UNSET}b", "ab"),
        ("$$19.99", "$19.99"),
        ("$$$$", "$$"),
        ("$19.99", "$19.99"),
        ("100 US$", "100 US$"),
        ("a $ b", "a $ b"),
        ("${unterminated", "${unterminated"),
        ("${}", "${}"),
        ("${1BAD}", "${1BAD}"),
        ("no dollar", "no dollar"),
    ],
)
def test_environment_references_expand(text: str, expected: str) -> None:
    environ = {"QT_HOST": "db.example.com", "QT_EMPTY": ""}
    assert expand_string(text, "app.toml", environ) == expected


def test_an_unset_variable_warns_naming_it_and_the_file(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="queuey.config"):
        assert expand_string("x$QT_MISSING", "/apps/app.toml", {}) == "x"
    assert "QT_MISSING" in caplog.text
    assert "/apps/app.toml" in caplog.text


def test_keys_are_not_expanded_and_values_in_arrays_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QT_FN", "from_env")
    text = '[queues.subscribe]\n"t" = ["$QT_FN", "plain"]\n[dashboard]\n"$QT_FN" = 1\n'
    config = load_app_config(write(tmp_path, text))
    assert config.queues.subscribers("t") == ("from_env", "plain")
    assert config.tables["dashboard"] == {"$QT_FN": 1}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[dashbaord]\nview = "public"\n',
            "[dashbaord]: not a table queuey reads (did you mean [dashboard]?",
        ),
        ("[queue]\nbatch = 2\n", "[queue]: not a table queuey reads (did you mean [queues]?"),
        (
            "[function]\nf = 'm:f'\n",
            "[function]: not a table queuey reads (did you mean [functions]?",
        ),
        ("[zzz]\nx = 1\n", "[zzz]: not a table queuey reads (known: [dashboard], [database]"),
        ("stray = 1\n[queues]\n", "[stray]: not a table queuey reads"),
    ],
)
def test_a_misspelt_table_is_refused_like_a_misspelt_key(
    tmp_path: Path, text: str, message: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_app_config(path)
    assert str(caught.value).startswith(f"{path}: {message}")


def test_a_value_with_quotes_cannot_change_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QT_EVIL", '"\nenabled = false\nx = "')
    config = load_app_config(write(tmp_path, '[queues]\npublish = "$QT_EVIL"\n'))
    assert config.queues.enabled is True
    assert config.queues.publish == '"\nenabled = false\nx = "'


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[queues]\npoll_secs = 0\n", "queues.poll_secs"),
        ("[queues]\nbatch = 0\n", "queues.batch"),
        ("[queues]\nlease_secs = 0\n", "queues.lease_secs"),
        ("[queues]\nmax_attempts = 0\n", "queues.max_attempts"),
        ("[queues]\nretain_hours = -1\n", "queues.retain_hours"),
        ("[queues]\nretry_backoff_secs = -10\n", "queues.retry_backoff_secs"),
        ('[queues]\npoll_secs = "30"\n', "queues.poll_secs"),
        ("[queues]\nbatch = 2.5\n", "queues.batch"),
        ('[queues]\nenabled = "false"\n', "queues.enabled"),
        ("[queues]\nprefix = 7\n", "queues.prefix"),
        ('[queues]\nprefix = "my-app"\n', "queues.prefix"),
        ("[queues]\npublish = true\n", "queues.publish"),
        ("[queues]\npoll_sec = 5\n", "queues.poll_sec"),
        ("[queues]\nsubscribe = 3\n", "queues.subscribe"),
        ('[queues.subscribe]\n"order paid" = "f"\n', "queues.subscribe"),
        ('[queues.subscribe]\n"t" = 3\n', 'queues.subscribe."t"'),
        ('[queues.subscribe]\n"t" = ["f", 1]\n', 'queues.subscribe."t"'),
        ("queues = 3\n", "queues"),
        ("functions = []\n", "functions"),
        ('[functions]\nsend = "no_colon"\n', "functions.send"),
        ("[functions]\nsend = 3\n", "functions.send"),
        ('[functions]\n"" = "m:f"\n', "functions"),
        ("[database]\nurl = 5432\n", "database.url"),
        ("database = 1\n", "database"),
    ],
)
def test_every_error_names_the_file_and_the_key(tmp_path: Path, text: str, key: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_app_config(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: {key}"), message
    assert caught.value.__cause__ is None


def test_a_toml_syntax_error_names_the_file_and_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "[queues]\nbatch = 1\npoll_secs = \n")
    with pytest.raises(ConfigError) as caught:
        load_app_config(path)
    assert str(caught.value).startswith(f"{path}: not valid TOML")
    assert "line 3" in str(caught.value)


def test_a_duplicate_key_is_a_syntax_error(tmp_path: Path) -> None:
    path = write(tmp_path, "[queues]\nbatch = 1\nbatch = 2\n")
    with pytest.raises(ConfigError, match="line 3"):
        load_app_config(path)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "nope.toml"
    with pytest.raises(ConfigError, match=f"^{path}: cannot read"):
        load_app_config(path)


def test_a_non_utf8_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "app.toml"
    path.write_bytes(b'[queues]\nprefix = "\xff"\n')
    with pytest.raises(ConfigError, match=f"^{path}: not UTF-8"):
        load_app_config(path)


def test_an_unknown_key_lists_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="known: batch, enabled"):
        load_app_config(write(tmp_path, "[queues]\nworkers = 3\n"))


def test_a_wrong_database_url_type_does_not_echo_the_value(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_app_config(write(tmp_path, '[database]\nurl = ["postgresql://u:hunter2@h/db"]\n'))
    assert "hunter2" not in str(caught.value)
