"""The middleware chain: cross-cutting behaviour around every delivery, written once for both
faces (typed jobs and topic messages), in the spirit of Dramatiq's middleware and River's
worker middleware.

A middleware subclasses ``Middleware`` and overrides any of three typed hooks:

- ``around_call(delivery, call_next)``: wraps the run (handler lookup, decode, call and
  decision); returns the ``Outcome`` that will be settled.
- ``on_outcome(delivery, outcome)``: the backend recorded ``outcome``.
- ``on_settle_failure(delivery, outcome, error)``: the backend could not record it (counted
  once in ``settle_failures``; the delivery comes again later).

``Chain`` orders them: the first middleware is the outermost ``around_call`` and the first to
see the outcome. Hooks a middleware does not override cost nothing (they are left out when the
chain is built, once). A hook that raises is logged at ERROR with its traceback and never loses
the delivery: one raising in ``around_call`` makes the run fail with its exception (decided
like a handler's), one raising after the settle is skipped. The built-in members are
``OutcomeLog`` (always first) and ``SettledCallback`` (the worker's ``on_settled``);
``_runtime.stats`` adds the per-queue counters.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace

from queuey._outcome import DeferFor, Outcome, OutcomeKind, RetryAfter
from queuey._runtime.faces import Face
from queuey.backends.base import Delivery
from queuey.envelope import Envelope
from queuey.errors import ConfigError, HandlerSignal

__all__ = [
    "LEVELS",
    "CallNext",
    "Chain",
    "Failed",
    "Middleware",
    "OutcomeLog",
    "SettledCallback",
    "Unguarded",
]

CallNext = Callable[[Delivery], Awaitable[Outcome]]
"""The rest of the chain: runs the delivery (the next middleware, then the handler) and returns
its outcome."""

Failed = Callable[[Delivery, BaseException], Outcome]
"""The outcome of a run that raised ``error`` outside its handler (the face decides it)."""

LEVELS = {
    OutcomeKind.SUCCEEDED: logging.INFO,
    OutcomeKind.RETRIED: logging.WARNING,
    OutcomeKind.DEFERRED: logging.INFO,
    OutcomeKind.DEAD: logging.ERROR,
    OutcomeKind.CANCELLED: logging.WARNING,
    OutcomeKind.LEASE_LOST: logging.WARNING,
}
"""The log level of each outcome kind, the same on both faces."""

_HOOKS = frozenset({"around_call", "on_outcome", "on_settle_failure"})


class Middleware:
    """Base of every middleware; override the hooks you need (all are optional).

    Pass instances as ``Worker(..., middleware=[...])`` or ``Subscriber(..., middleware=[...])``;
    they run after the built-in ones, in the order given, for every delivery of either face
    (``delivery.envelope.kind`` says which). Hooks run on the event loop and must not block;
    ``on_outcome`` or ``on_settle_failure`` is called once per delivery that was run (none when
    shutdown cancelled it). A method named like a hook (``on_…``, ``around_…``) that is none is
    refused with ``ConfigError``, so a misspelt hook cannot silently never run::

        class Timing(Middleware):
            async def around_call(self, delivery: Delivery, call_next: CallNext) -> Outcome:
                started = time.monotonic()
                outcome = await call_next(delivery)
                seconds = time.monotonic() - started
                histogram.observe(seconds, queue=delivery.envelope.queue, kind=outcome.kind.value)
                return outcome

        worker = Worker(AppQueues, backend, middleware=[Timing()])
    """

    async def around_call(self, delivery: Delivery, call_next: CallNext) -> Outcome:
        """Run the delivery: ``return await call_next(delivery)``, with work before and after.

        Returning another ``Outcome`` replaces the run's. Raising is logged at ERROR and
        counts the run as failed with that exception (decided like a handler's, so retried or
        dead-lettered); the middleware around this one see that outcome. ``call_next`` only
        raises ``CancelledError`` (shutdown past its grace).
        """
        return await call_next(delivery)

    def on_outcome(self, delivery: Delivery, outcome: Outcome) -> None:
        """``outcome`` was recorded by the backend for ``delivery``."""

    def on_settle_failure(self, delivery: Delivery, outcome: Outcome, error: Exception) -> None:
        """The backend could not record ``outcome`` (``error``, usually a ``BackendError``);
        the delivery comes again later."""


def _check(middleware: object) -> Middleware:
    """``middleware`` if it is a ``Middleware`` whose hook-like methods are all known hooks.

    Raises:
        ConfigError: not a ``Middleware``, or a method named like a hook that is none (a typo
            would otherwise never run).
    """
    if not isinstance(middleware, Middleware):
        raise ConfigError(f"middleware: {middleware!r} is not a queuey Middleware")
    for name in dir(type(middleware)):
        if name.startswith(("around_", "on_")) and name not in _HOOKS:
            hooks = ", ".join(sorted(_HOOKS))
            raise ConfigError(
                f"middleware: {type(middleware).__name__}.{name} is not a hook ({hooks})"
            )
    return middleware


class Chain:
    """The ordered middleware of one runner, built once.

    Args:
        middleware: the members, outermost (first notified) first.
        face: whose logger and fields report a failing hook.

    Raises:
        ConfigError: a member is not a ``Middleware`` or names an unknown hook.
    """

    def __init__(self, middleware: Iterable[Middleware], face: Face) -> None:
        self.middleware = tuple(_check(member) for member in middleware)
        self._face = face
        members = self.middleware
        self._around = tuple(m for m in members if type(m).around_call is not _BASE_AROUND)
        self._outcome = tuple(m for m in members if type(m).on_outcome is not _BASE_OUTCOME)
        self._failure = tuple(m for m in members if type(m).on_settle_failure is not _BASE_FAILURE)

    @property
    def wrapping(self) -> tuple[Middleware, ...]:
        """The members whose ``around_call`` wraps each call, outermost first."""
        return self._around

    def wrap(self, call: CallNext, failed: Failed) -> CallNext:
        """``call`` nested in every ``around_call``, the first middleware outermost (``call``
        itself when none wraps calls); a member that raises is logged and its run decided by
        ``failed``."""
        for member in reversed(self._around):
            if isinstance(member, Unguarded):  # a built-in that raises only what it runs
                call = functools.partial(member.around_call, call_next=call)
            else:
                call = self._link(member, call, failed)
        return call

    def _link(self, member: Middleware, call_next: CallNext, failed: Failed) -> CallNext:
        async def call(delivery: Delivery) -> Outcome:
            try:
                return await member.around_call(delivery, call_next)
            except asyncio.CancelledError:
                raise
            except BaseException as exc:
                self._hook_failed(member, "around_call", delivery.envelope)
                return failed(delivery, exc)

        return call

    def settled(self, delivery: Delivery, outcome: Outcome) -> None:
        """Tell every member that ``outcome`` was recorded. Never raises ``Exception``."""
        for member in self._outcome:
            try:
                member.on_outcome(delivery, outcome)
            except Exception:
                self._hook_failed(member, "on_outcome", delivery.envelope)

    def settle_failed(self, delivery: Delivery, outcome: Outcome, error: Exception) -> None:
        """Tell every member that recording ``outcome`` failed. Never raises ``Exception``."""
        for member in self._failure:
            try:
                member.on_settle_failure(delivery, outcome, error)
            except Exception:
                self._hook_failed(member, "on_settle_failure", delivery.envelope)

    def _hook_failed(self, member: Middleware, hook: str, envelope: Envelope) -> None:
        name = type(member).__name__
        extra = self._face.fields(envelope)
        self._face.log.exception("middleware %s failed in %s", name, hook, extra=extra)


class Unguarded(Middleware):
    """A built-in member (cancellation, tracing) linked without the guard that logs a failing
    member: one coroutine frame less per run. What its ``around_call`` might raise besides
    ``call_next``'s cancellation (a bug, a tracing SDK failing) still fails only the run: the
    runner logs it and decides the run as failed, as the guard would."""


_BASE_AROUND = Middleware.around_call
_BASE_OUTCOME = Middleware.on_outcome
_BASE_FAILURE = Middleware.on_settle_failure


class OutcomeLog(Middleware):
    """The first member: logs each recorded outcome in its face's wording and fields (success
    and deferral at INFO, retry at WARNING, dead letter at ERROR), and each settle failure at
    ERROR ("could not record the outcome (job … succeeded): …"). The face's wording names the
    delivery (job type, id, queue and attempt; or topic, subscriber, message id and attempt),
    so any log format shows which one; the same are structured fields (``extra``)."""

    def __init__(self, face: Face) -> None:
        self._face = face
        self._log = face.log

    def on_outcome(self, delivery: Delivery, outcome: Outcome) -> None:
        """Log ``outcome`` if its level is enabled (nothing is built otherwise). A retry or
        deferral states the delay the backend really holds the job for (a delivery with
        ``held_for(delay)``, RabbitMQ's, rounds it up to its hold granularity). The handler's
        exception goes with it, traceback included (``exc_info``), when it raised one other
        than queuey's own signals (``Retry``, ``Fatal``, whose message says it all)."""
        level = LEVELS[outcome.kind]
        if self._log.isEnabledFor(level):
            envelope = delivery.envelope
            message, args = self._face.outcome_message(envelope, _as_held(delivery, outcome))
            raised = getattr(outcome, "exception", None)
            shown = None if isinstance(raised, HandlerSignal) else raised
            self._log.log(level, message, *args, exc_info=shown, extra=self._face.fields(envelope))

    def on_settle_failure(self, delivery: Delivery, outcome: Outcome, error: Exception) -> None:
        """Log the failure at ERROR, naming the outcome that was not recorded."""
        envelope = delivery.envelope
        message, args = self._face.outcome_message(envelope, _as_held(delivery, outcome))
        extra = self._face.fields(envelope)
        self._log.error("could not record the outcome (%s): %s", message % args, error, extra=extra)


def _as_held(delivery: Delivery, outcome: Outcome) -> Outcome:
    """``outcome`` with the delay the backend really holds a retry or deferral for, when its
    delivery says (``held_for(delay)``: RabbitMQ rounds up to its hold granularity)."""
    held_for = getattr(delivery, "held_for", None)
    if held_for is not None and isinstance(outcome, RetryAfter | DeferFor):
        return replace(outcome, delay=held_for(outcome.delay))
    return outcome


class SettledCallback(Middleware):
    """Calls ``callback(envelope, kind, text)`` after each recorded outcome: ``kind`` is the
    ``OutcomeKind`` value (``"succeeded"``, ``"retried"``, ``"deferred"``, ``"dead"``,
    ``"cancelled"``, ``"lease_lost"``) and ``text`` the error or reason (``""`` on success). A
    raising callback is logged at ERROR ("on_settled callback failed")."""

    def __init__(self, callback: Callable[[Envelope, str, str], None], face: Face) -> None:
        self._callback = callback
        self._face = face

    def on_outcome(self, delivery: Delivery, outcome: Outcome) -> None:
        """Call the callback; log (never raise) its failure."""
        envelope = delivery.envelope
        try:
            self._callback(envelope, outcome.kind.value, outcome.text)
        except Exception:
            extra = self._face.fields(envelope)
            self._face.log.exception("on_settled callback failed", extra=extra)
