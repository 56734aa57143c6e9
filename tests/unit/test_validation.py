"""One validation for every option surface: the error shape, and the type rules (a bool is not
an int, a float is not an int, only a bool is a bool, only a string is a string) across
``Queue`` options, ``RetryPolicy``, job class keywords, ``[queues]`` keys and ``[http]`` keys,
plus the declaration mistakes refused at class creation."""

from __future__ import annotations

import copy
import json
import math
import tempfile
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queuey import ConfigError, Job, Queue, QueueSet, RetryPolicy
from queuey._validation import Site, check_bool, check_float, check_int, check_str
from queuey.http import HttpConfig
from queuey.topics import QueuesConfig, load_app_config

# -- strategies: anything but the right type ---------------------------------------------------

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=10),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.just(timedelta(seconds=1)),
)
NOT_INT = SCALARS.filter(lambda v: isinstance(v, bool) or not isinstance(v, int))
NOT_BOOL = SCALARS.filter(lambda v: not isinstance(v, bool))
NOT_STR = SCALARS.filter(lambda v: not isinstance(v, str))
NOT_NUMBER = SCALARS.filter(lambda v: isinstance(v, bool) or not isinstance(v, int | float))

# TOML can say: strings, booleans, integers, floats, arrays and tables.
TOML_VALUES = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.text(
        st.characters(categories=["L", "M", "N", "P", "S", "Zs", "Cc"], exclude_characters="$"),
        max_size=10,
    ),  # `$` would be expanded
    st.lists(st.integers(min_value=0, max_value=9), max_size=2),
)
TOML_NOT_INT = TOML_VALUES.filter(lambda v: isinstance(v, bool) or not isinstance(v, int))
TOML_NOT_BOOL = TOML_VALUES.filter(lambda v: not isinstance(v, bool))
TOML_NOT_STR = TOML_VALUES.filter(lambda v: not isinstance(v, str))

QUEUES_INT_KEYS = [
    "poll_secs",
    "batch",
    "max_attempts",
    "retry_backoff_secs",
    "lease_secs",
    "retain_hours",
    "max_redeliveries",
    "publish_timeout_secs",
]


def toml_value(value: Any) -> str:
    """``value`` written as TOML."""
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, str):
        return '"' + "".join(_toml_char(c) for c in value) + '"'
    return json.dumps(value)


def _toml_char(char: str) -> str:
    return f"\\u{ord(char):04x}" if char in '"\\' or ord(char) < 0x20 or char == "\x7f" else char


def config_error_in_file(text: str) -> tuple[str, str]:
    """``(path, message)``: the ``ConfigError`` loading an app file holding ``text``."""
    with tempfile.TemporaryDirectory(prefix="queuey-validation-") as folder:
        path = Path(folder) / "app.toml"
        path.write_text(text, encoding="utf-8")
        return str(path), error_of(lambda: load_app_config(path))


def declare_queue(**options: Any) -> type[QueueSet]:
    class AppQueues(QueueSet):
        emails = Queue(**options)

    return AppQueues


def error_of(build: Any) -> str:
    with pytest.raises(ConfigError) as caught:
        build()
    assert caught.value.__cause__ is None
    return str(caught.value)


def job_error_of(build: Any) -> str:
    """The error raised declaring a job class inside ``build``, without the ``<locals>``
    part of the class's qualified name."""
    return error_of(build).rpartition("<locals>.")[2]


# -- the error shape ---------------------------------------------------------------------------


def test_the_error_shape_at_every_kind_of_site() -> None:
    cases = [
        (Site.table("queues"), "queues.batch: expected an integer >= 1, got 0"),
        (
            Site.table("queues", "app.toml"),
            "app.toml: queues.batch: expected an integer >= 1, got 0",
        ),
        (
            Site.section("[http]", "app.toml"),
            "app.toml: [http] batch: expected an integer >= 1, got 0",
        ),
        (
            Site.declaration("AppQueues.emails"),
            "AppQueues.emails: batch: expected an integer >= 1, got 0",
        ),
        (Site(), "batch: expected an integer >= 1, got 0"),
    ]
    for site, text in cases:
        assert error_of(lambda site=site: check_int(0, "batch", low=1, site=site)) == text


def test_a_located_error_keeps_its_key() -> None:
    site = Site.declaration("AppQueues.images")
    assert str(site.locate(ConfigError("retry base: too big"))) == (
        "AppQueues.images: retry base: too big"
    )
    with pytest.raises(ConfigError, match=r"^f\.toml: \[http\] max: no$"):
        with Site.section("[http]", "f.toml").context():
            raise ConfigError("max: no")


def test_messages_show_a_value_only_when_it_is_short_and_plain() -> None:
    secret = "s3cr3t-" * 10
    assert secret not in error_of(lambda: check_int(secret, "batch"))
    assert "a string of 70 characters" in error_of(lambda: check_bool(secret, "enabled"))
    assert error_of(lambda: check_str(["hunter2"], "url")) == "url: expected a string, got list"
    assert error_of(lambda: check_bool("no", "durable")) == (
        "durable: expected true or false, got 'no'"
    )


@given(NOT_INT)
def test_check_int_refuses_every_non_int(value: Any) -> None:
    with pytest.raises(ConfigError, match=r"^n: expected an integer"):
        check_int(value, "n")


@given(NOT_BOOL)
def test_check_bool_refuses_every_non_bool(value: Any) -> None:
    with pytest.raises(ConfigError, match=r"^b: expected true or false"):
        check_bool(value, "b")


@given(NOT_STR)
def test_check_str_refuses_every_non_str(value: Any) -> None:
    with pytest.raises(ConfigError, match=r"^s: expected a string, got "):
        check_str(value, "s")


@given(st.one_of(NOT_NUMBER, st.sampled_from([math.inf, -math.inf, math.nan, 0, -1.5, 10**400])))
def test_check_float_positive_refuses_non_numbers_and_non_positive(value: Any) -> None:
    with pytest.raises(ConfigError, match=r"^f: expected a finite number > 0"):
        check_float(value, "f", positive=True)


# -- Queue options -----------------------------------------------------------------------------


def test_a_non_bool_durable_is_refused_naming_the_set_and_attribute() -> None:
    assert error_of(lambda: declare_queue(durable="no")) == (
        "AppQueues.emails: durable: expected true or false, got 'no'"
    )
    assert declare_queue(durable=False).all()[0].config.durable is False


@pytest.mark.parametrize("key", ["prefetch", "max_priority"])
@settings(max_examples=30)
@given(value=NOT_INT)
def test_queue_int_options_refuse_every_non_int(key: str, value: Any) -> None:
    message = error_of(lambda: declare_queue(**{key: value}))
    assert message.startswith(f"AppQueues.emails: {key}: expected an integer in ")


@given(NOT_BOOL)
def test_queue_durable_refuses_every_non_bool(value: Any) -> None:
    message = error_of(lambda: declare_queue(durable=value))
    assert message.startswith("AppQueues.emails: durable: expected true or false, got ")


@given(NOT_STR.filter(lambda v: v is not None))
def test_queue_name_refuses_every_non_string(value: Any) -> None:
    message = error_of(lambda: declare_queue(name=value))
    assert message.startswith("AppQueues.emails: name: expected a string, got ")


@given(NOT_STR.filter(lambda v: v is not None))
def test_a_queue_set_prefix_must_be_a_string(value: Any) -> None:
    def build() -> None:
        class Prefixed(QueueSet, prefix=value):
            q = Queue()

    assert error_of(build).startswith("Prefixed: prefix: expected a string, got ")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"message_ttl": True}, "AppQueues.emails: message_ttl: expected a duration, got True"),
        ({"message_ttl": "0s"}, "AppQueues.emails: message_ttl: a duration must be greater"),
        ({"retry": "3x"}, "AppQueues.emails: retry: expected a RetryPolicy, got '3x'"),
        ({"prefetch": 1.0}, "AppQueues.emails: prefetch: expected an integer in 1..65535, got 1.0"),
        ({"max_priority": 256}, "AppQueues.emails: max_priority: expected an integer in 0..255"),
        ({"name": " "}, "AppQueues.emails: name: expected a non-empty string, got ' '"),
        ({"colour": "red"}, "AppQueues.emails: colour: unknown queue option(s)"),
    ],
)
def test_queue_option_errors(options: dict[str, Any], message: str) -> None:
    assert error_of(lambda: declare_queue(**options)).startswith(message)


# -- declaration mistakes ----------------------------------------------------------------------


def test_one_queue_object_in_two_attributes_is_refused() -> None:
    def build() -> None:
        class Twice(QueueSet):
            a = b = Queue()

    assert error_of(build) == (
        "Twice.b: this Queue() is already Twice.a; declare a new Queue() for each attribute"
    )


def test_one_queue_object_in_two_sets_is_refused() -> None:
    shared = Queue()

    class First(QueueSet):
        q = shared

    def build() -> None:
        class Second(QueueSet):
            q = shared

    assert error_of(build) == (
        "Second.q: this Queue() is already First.q; declare a new Queue() for each attribute"
    )
    assert First.q.name == "q" and First.q.queue_set is First


def test_a_set_that_fails_binds_none_of_its_queues() -> None:
    fine = Queue()

    def build() -> None:
        class Broken(QueueSet):
            a = fine
            b = Queue(prefetch=0)

    assert error_of(build).startswith("Broken.b: prefetch")
    assert fine.queue_set is None

    class Fixed(QueueSet):
        a = fine

    assert Fixed.a is fine and fine.name == "a"


def test_a_bad_retry_policy_of_a_queue_names_the_set_and_attribute() -> None:
    def build() -> None:
        class AppQueues(QueueSet, prefix="myapp"):
            emails = Queue()
            images = Queue(retry=RetryPolicy.exponential(3, base="10m", max="1m"))

    assert error_of(build) == (
        "AppQueues.images: retry base: base (0:10:00) is greater than max (0:01:00)"
    )


class Jobs(QueueSet, prefix="jobs"):
    work = Queue()


def test_a_bad_retry_policy_of_a_job_names_the_job_class() -> None:
    def build() -> None:
        class SendEmail(
            Job[Jobs], queue=Jobs.work, retry=RetryPolicy.exponential(base="10m", max="1m")
        ):
            to: str

    assert job_error_of(build) == (
        "SendEmail: retry base: base (0:10:00) is greater than max (0:01:00)"
    )


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        (
            {"retry": RetryPolicy.fixed(0, "1s")},
            "Bad: retry max_attempts: expected an integer >= 1",
        ),
        ({"retry": RetryPolicy.fixed(2, "0s")}, "Bad: retry delay: a duration must be greater"),
        (
            {"retry": RetryPolicy.exponential(factor=0)},
            "Bad: retry factor: expected a finite number",
        ),
        ({"retry": 3}, "Bad: retry: expected a RetryPolicy, got 3"),
        ({"name": ""}, "Bad: name: expected a non-empty string, got ''"),
        ({"name": 7}, "Bad: name: expected a string, got int"),
        ({"queue": None}, "Bad: queue: expected a Queue attribute of a QueueSet (queue=...), got"),
        ({"queue": Queue()}, "Bad: queue: expected a Queue attribute of a QueueSet"),
    ],
)
def test_job_class_keyword_errors_name_the_job_class(
    keywords: dict[str, Any], message: str
) -> None:
    keywords = {"queue": Jobs.work, **keywords}

    def build() -> None:
        class Bad(Job[Jobs], **keywords):
            pass

    assert job_error_of(build).startswith(message)


# -- RetryPolicy --------------------------------------------------------------------------------


@given(NOT_INT)
def test_retry_max_attempts_refuses_every_non_int(value: Any) -> None:
    for policy in (
        RetryPolicy.none(value),
        RetryPolicy.fixed(value, "1s"),
        RetryPolicy.exponential(value),
        RetryPolicy(max_attempts=value),
    ):
        assert (policy.problem or "").startswith("retry max_attempts: expected an integer >= 1")


@given(NOT_BOOL)
def test_retry_jitter_refuses_every_non_bool(value: Any) -> None:
    policy = RetryPolicy.exponential(jitter=value)
    assert (policy.problem or "").startswith("retry jitter: expected true or false")
    with pytest.raises(ConfigError, match=r"^retry jitter"):
        policy.decide(1)


@given(NOT_NUMBER)
def test_retry_factor_refuses_every_non_number(value: Any) -> None:
    policy = RetryPolicy.exponential(factor=value)
    assert (policy.problem or "").startswith("retry factor: expected a finite number > 0")


@given(NOT_INT, st.sampled_from(["fixed", "exponential"]))
def test_a_bad_policy_names_the_queue_it_is_declared_for(value: Any, kind: str) -> None:
    policy = RetryPolicy.fixed(value, "1s") if kind == "fixed" else RetryPolicy.exponential(value)
    message = error_of(lambda: declare_queue(retry=policy))
    assert message.startswith("AppQueues.emails: retry max_attempts: expected an integer")


def test_an_invalid_policy_says_so_and_equals_no_valid_one() -> None:
    bad = RetryPolicy.exponential(max_attempts=0)
    assert repr(bad).startswith("<RetryPolicy, invalid: retry max_attempts")
    assert bad != RetryPolicy() and bad != RetryPolicy.exponential()
    good = RetryPolicy.exponential(3, base="1s", max="1m")
    assert good.check() is good and good.problem is None
    assert repr(good).startswith("RetryPolicy(max_attempts=3, backoff=<Backoff.EXPONENTIAL")


# -- [queues] keys -----------------------------------------------------------------------------


@pytest.mark.parametrize("key", QUEUES_INT_KEYS)
@settings(max_examples=30)
@given(value=NOT_INT)
def test_queues_int_keys_refuse_every_non_int(key: str, value: Any) -> None:
    message = error_of(lambda: QueuesConfig(**{key: value}))
    assert message.startswith(f"queues.{key}: expected an integer in ")


@given(NOT_BOOL)
def test_queues_enabled_refuses_every_non_bool(value: Any) -> None:
    message = error_of(lambda: QueuesConfig(enabled=value))
    assert message.startswith("queues.enabled: expected true or false, got ")


@pytest.mark.parametrize("key", ["prefix", "publish"])
@settings(max_examples=30)
@given(value=NOT_STR)
def test_queues_string_keys_refuse_every_non_string(key: str, value: Any) -> None:
    message = error_of(lambda: QueuesConfig(**{key: value}))
    assert message.startswith(f"queues.{key}: expected a string, got ")


@pytest.mark.parametrize("key", QUEUES_INT_KEYS)
@settings(max_examples=30)
@given(value=TOML_NOT_INT)
def test_queues_int_keys_in_a_file_name_the_file_and_key(key: str, value: Any) -> None:
    path, message = config_error_in_file(f"[queues]\n{key} = {toml_value(value)}\n")
    assert message.startswith(f"{path}: queues.{key}: expected an integer in ")


@settings(max_examples=30)
@given(TOML_NOT_BOOL)
def test_queues_enabled_in_a_file_names_the_file_and_key(value: Any) -> None:
    path, message = config_error_in_file(f"[queues]\nenabled = {toml_value(value)}\n")
    assert message.startswith(f"{path}: queues.enabled: expected true or false, got ")


# -- [http] keys -------------------------------------------------------------------------------


@given(NOT_INT)
def test_http_max_body_bytes_refuses_every_non_int(value: Any) -> None:
    message = error_of(lambda: HttpConfig.from_table({"max_body_bytes": value}, "app.toml"))
    assert message.startswith("app.toml: [http] max_body_bytes: expected an integer >= 1, got ")


@pytest.mark.parametrize(
    ("table", "prefix"),
    [
        ({"base": None}, "app.toml: [http] base: expected a string, got "),
        ({"jwt": {"audience": None, "secret": "x" * 40}}, "app.toml: [http.jwt] audience:"),
        ({"jwt": {"audience": "q", "secret": None}}, "app.toml: [http.jwt] secret:"),
        ({"api_keys": [{"id": None, "sha256": "0" * 64}]}, "app.toml: [[http.api_keys]] #1 id:"),
        (
            {"api_keys": [{"id": "a", "sha256": "0" * 64, "org": None}]},
            "app.toml: [[http.api_keys]] #1 org:",
        ),
    ],
)
@settings(max_examples=30)
@given(value=NOT_STR.filter(lambda v: v is not None))
def test_http_string_keys_refuse_every_non_string(
    table: dict[str, Any], prefix: str, value: Any
) -> None:
    filled = copy.deepcopy(table)
    _replace_none(filled, table, value)
    message = error_of(lambda: HttpConfig.from_table(filled, "app.toml"))
    assert message.startswith(prefix), message
    assert "expected a string, got " in message


def _replace_none(target: Any, original: Any, value: Any) -> None:
    """Put ``value`` wherever ``original`` holds ``None`` (in ``target``, its copy)."""
    items = original.items() if isinstance(original, dict) else enumerate(original)
    for key, item in items:
        if item is None:
            target[key] = value
        elif isinstance(item, dict | list):
            _replace_none(target[key], item, value)


@given(NOT_INT)
def test_http_config_built_in_python_refuses_every_non_int_limit(value: Any) -> None:
    message = error_of(lambda: HttpConfig(max_body_bytes=value))
    assert message.startswith("max_body_bytes: expected an integer >= 1, got ")
