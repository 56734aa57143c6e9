"""Durations, retry math, queue-set validation, job binding, envelopes."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from queuey import (
    ConfigError,
    DuplicateHandlerError,
    Envelope,
    Job,
    JobContext,
    MalformedEnvelopeError,
    MemoryBackend,
    Producer,
    Queue,
    QueueSet,
    RetryPolicy,
    Worker,
    parse_delay,
    parse_duration,
)
from queuey._outcome import Ack, DeadLetter, DeferFor, RetryAfter, decide
from queuey.durations import MAX_DURATION
from queuey.errors import Defer, Fatal, Retry
from queuey.queues import snake_case


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("30s", 30),
        ("2 m", 120),
        ("30", 30),
        ("1h", 3600),
        ("1.5s", 1.5),
        (timedelta(minutes=1), 60),
        (2.5, 2.5),
        (7, 7),
    ],
)
def test_duration_forms(text: Any, seconds: float) -> None:
    assert parse_duration(text).total_seconds() == seconds


@pytest.mark.parametrize("bad", ["0", "0s", 0, "-1s", "soon", "10 parsecs", "", True, None])
def test_declared_durations_refuse_zero_and_garbage(bad: Any) -> None:
    with pytest.raises(ConfigError, match="job_timeout"):
        parse_duration(bad, "job_timeout")


def test_runtime_delay_zero_means_now() -> None:
    assert parse_delay(0) == timedelta(0)
    with pytest.raises(ConfigError):
        parse_delay(-1)


@given(st.integers(min_value=1, max_value=10**6), st.sampled_from(["ms", "s", "m", "h"]))
def test_duration_strings_round_trip(amount: int, unit: str) -> None:
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]
    if amount * scale > MAX_DURATION.total_seconds():
        with pytest.raises(ConfigError, match="longer than the longest duration queuey takes"):
            parse_duration(f"{amount}{unit}")
        return
    assert parse_duration(f"{amount}{unit}").total_seconds() == pytest.approx(amount * scale)
    assert parse_duration(f"{amount} {unit}") == parse_duration(f"{amount}{unit}")


def test_seed_retry_examples() -> None:
    fixed = RetryPolicy.fixed(3, "2s")
    assert [fixed.decide(n) for n in (1, 2, 3, 4)] == [timedelta(seconds=2)] * 2 + [None, None]
    exp = RetryPolicy.exponential(10, base="1s", max="5m", jitter=False)
    assert [exp.computed_delay(n).total_seconds() for n in (0, 1, 2, 3, 9, 10)] == [
        1,
        1,
        2,
        4,
        256,
        300,
    ]
    assert RetryPolicy.none().decide(1) is None
    assert RetryPolicy.exponential().max_attempts == 3


@given(
    attempt=st.integers(min_value=0, max_value=10_000),
    base=st.floats(min_value=0.001, max_value=100),
    factor=st.floats(min_value=0.1, max_value=50),
    seed=st.integers(),
)
def test_exponential_delay_is_capped_and_jitter_stays_in_range(
    attempt: int, base: float, factor: float, seed: int
) -> None:
    policy = RetryPolicy.exponential(5, base=base, factor=factor, max=base * 100)
    computed = policy.computed_delay(attempt)
    assert timedelta(0) <= computed <= policy.max
    jittered = policy.delay_for(attempt, random.Random(seed))
    assert timedelta(0) <= jittered <= computed + timedelta(microseconds=1)


@given(st.integers(min_value=1, max_value=60))
def test_exponential_delays_never_shrink_with_factor_above_one(attempt: int) -> None:
    policy = RetryPolicy.exponential(100, base="1s", factor=2, max="1h", jitter=False)
    assert policy.computed_delay(attempt + 1) >= policy.computed_delay(attempt)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"base": "0s"}, "retry base"),
        ({"base": "10m", "max": "1m"}, "greater than max"),
        ({"factor": 0}, "factor"),
        ({"max_attempts": 0}, "max_attempts"),
    ],
)
def test_bad_policies(kwargs: dict[str, Any], message: str) -> None:
    # A bad policy is reported where it is bound (naming the queue or job, see
    # test_declaration_errors) or used, not where it is built inside a declaration.
    policy = RetryPolicy.exponential(**kwargs)
    assert policy.problem is not None and message in policy.problem
    with pytest.raises(ConfigError, match=message):
        policy.check()
    with pytest.raises(ConfigError, match=message):
        policy.decide(1)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("Emails", "emails"),
        ("SendEmails", "send_emails"),
        ("HTTPCalls", "http_calls"),
        ("HTTP", "http"),
        ("ImageResize2", "image_resize2"),
        ("Resize2xImages", "resize2x_images"),
        ("Already_Snake", "already_snake"),
        ("XMLHTTPRequest", "xmlhttp_request"),
    ],
)
def test_snake_case_matches_the_seed(name: str, expected: str) -> None:
    assert snake_case(name) == expected


def test_queue_set_resolves_names_and_defaults() -> None:
    class App(QueueSet, prefix="myapp"):
        emails = Queue(prefetch=10)
        image_resize = Queue(name="img", message_ttl="30s", max_priority=0)

    assert [q.name for q in App.all()] == ["myapp.emails", "myapp.img"]
    assert App.emails.config.prefetch == 10
    assert App.image_resize.config.message_ttl == timedelta(seconds=30)
    assert App.by_name("myapp.img") is App.image_resize


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"prefetch": 0}, r"Bad\.q: prefetch"),
        ({"prefetch": 65536}, "prefetch"),
        ({"message_ttl": "0s"}, r"Bad\.q: message_ttl"),
        ({"name": ""}, r"Bad\.q: name"),
        ({"max_priority": 256}, "max_priority"),
        ({"colour": "red"}, "unknown queue option"),
    ],
)
def test_queue_options_are_checked_at_class_creation(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):

        class Bad(QueueSet):
            q = Queue(**options)


def test_duplicate_resolved_names_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"Dup\.b: queue name 'x' is already used by Dup\.a"):

        class Dup(QueueSet):
            a = Queue(name="x")
            b = Queue(name="x")


class Mine(QueueSet, prefix="mine"):
    work = Queue()


class Theirs(QueueSet, prefix="theirs"):
    work = Queue()


class MyJob(Job[Mine], queue=Mine.work):
    n: int = 0


class TheirJob(Job[Theirs], queue=Theirs.work, name="custom.name"):
    n: int = 0


def test_job_binding_and_names() -> None:
    assert MyJob.job_name() == f"{__name__}.MyJob"
    assert TheirJob.job_name() == "custom.name"
    assert MyJob.job_queue() is Mine.work
    with pytest.raises(ConfigError, match="belongs to Theirs, not Mine"):

        class Wrong(Job[Mine], queue=Theirs.work):
            pass

    with pytest.raises(ConfigError, match="queue="):

        class Missing(Job[Mine]):
            pass


async def test_foreign_jobs_and_handlers_are_refused_at_runtime() -> None:
    backend = MemoryBackend()
    producer = await Producer.create(Mine, backend)
    with pytest.raises(TypeError, match="TheirJob belongs to Theirs, not Mine"):
        await producer.enqueue(TheirJob())  # type: ignore[arg-type]
    assert backend.pending("theirs.work") == 0
    worker = Worker(Mine, backend)
    with pytest.raises(TypeError, match="not a job of Mine"):
        worker.register(TheirJob, lambda job, ctx: None)  # type: ignore[arg-type]

    async def wrong_annotation(job: TheirJob, ctx: JobContext) -> None: ...

    with pytest.raises(TypeError, match="takes TheirJob"):
        worker.register(MyJob, wrong_annotation)
    worker.register(MyJob, lambda job: None)
    with pytest.raises(DuplicateHandlerError, match="registered twice"):
        worker.register(MyJob, lambda job: None)
    with pytest.raises(ConfigError, match="not a queue of Mine"):
        Worker(Mine, backend, queues=[Theirs.work])


def test_worker_concurrency_defaults_to_summed_prefetch() -> None:
    class Two(QueueSet):
        a = Queue(prefetch=3)
        b = Queue(prefetch=5)

    assert Worker(Two, MemoryBackend()).concurrency == 8
    assert Worker(Two, MemoryBackend(), queues=[Two.a]).concurrency == 3


def test_envelope_decodes_old_and_extended_forms() -> None:
    old = b'{"job_id":"1","job_type":"t","queue":"q","attempt":2,"enqueued_at_ms":5,"payload":{}}'
    env = Envelope.from_bytes(old)
    assert (env.deferrals, env.priority, env.headers) == (0, 0, {})
    extended = old[:-1] + b',"correlation_id":"x","future":1}'
    assert Envelope.from_bytes(extended) == env
    with pytest.raises(MalformedEnvelopeError):
        Envelope.from_bytes(b"not json")
    with pytest.raises(MalformedEnvelopeError):
        Envelope.from_bytes(b'{"job_id":"1"}')
    assert Envelope.from_bytes(env.to_bytes()) == env


def test_envelope_transitions() -> None:
    env = Envelope.new("t", "q", {"a": 1}, priority=7)
    retry = env.next_attempt()
    assert (retry.attempt, retry.priority, retry.job_id) == (2, 0, env.job_id)
    deferred = env.deferred(10)
    assert (deferred.attempt, deferred.deferrals, deferred.priority) == (1, 1, 10)


def test_decide_maps_every_ending() -> None:
    env = Envelope.new("t", "q", {})
    policy = RetryPolicy.fixed(2, "1s")
    assert decide(env, None, policy, 10) == Ack()
    retry = decide(env, ValueError("x"), policy, 10)
    assert isinstance(retry, RetryAfter) and retry.delay == timedelta(seconds=1)
    assert decide(env.next_attempt(), Retry("x"), policy, 10) == DeadLetter(
        "max attempts (2) exhausted after attempt 2: x"
    )
    assert decide(env, Fatal("bad"), policy, 10) == DeadLetter("fatal error: bad")
    deferred = decide(env, Defer("30s"), policy, 10)
    assert isinstance(deferred, DeferFor) and deferred.envelope.priority == 10
