"""``queuey queues show|pause|resume|limit``: flow control at run time, for every worker at once
(PostgreSQL).

``pause QUEUE`` is the queue's limit zero: no worker claims a row of it from its next claim on
(what runs finishes); ``--kind topic`` pauses a topic, ``--kind app`` a topic app by its prefix.
``resume`` undoes it and wakes the workers. ``limit QUEUE SPEC...`` puts the limits spelt
``concurrency N`` or ``rate N/PER``, then optionally ``of JobType`` and ``by field,...``, in
place of the queue's declared limits from the next claim on; ``limit QUEUE --declared`` brings
the declared ones back, ``limit QUEUE --none`` lifts every limit. Each change is in the audit
log (who, when, old -> new). ``show`` lists the pauses and the limits set; ``--json`` prints
``{"paused": [{kind, queue, by, at}], "limits": [{kind, queue, limits, by, at}]}``. Exit codes:
0 done, 2 bad usage (a limit that does not parse; a queue or job type the database does not know,
unless ``--force``), 3 the database cannot be reached.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import click

from queuey._terminal import printable
from queuey.cli._admin import admin_for
from queuey.cli._options import DATABASE_URL, SCHEMA, json_option
from queuey.cli._root import echo_json, fail, main, run_async
from queuey.errors import ConfigError

if TYPE_CHECKING:
    from queuey.backends.postgres import Admin

__all__: list[str] = []

_PauseKind = Literal["job", "topic", "app"]
_LimitKind = Literal["job", "topic"]

KIND = click.option(
    "--kind",
    type=click.Choice(["job", "topic", "app"]),
    default="job",
    show_default=True,
    help="A job queue, a topic, or a topic app (by its [queues] prefix).",
)
CHANNEL = click.option(
    "--topic-channel",
    default=None,
    help="The topic app's NOTIFY channel (<prefix>_queue), to wake its subscribers at once.",
)


FORCE = click.option(
    "--force",
    is_flag=True,
    help="Act on a name nothing here uses yet (no job, no worker's limits, no pause).",
)


def _check_names(
    admin: Admin, queue: str, kind: str, job_types: Sequence[str], force: bool
) -> None:
    """Exit 2 when the database knows neither QUEUE nor a job type a limit names (a typo
    would otherwise pause or limit nothing and say it did), unless ``--force``."""
    if force or kind == "app":
        return
    unknown = run_async(
        admin.unknown_names(queue, "topic" if kind == "topic" else "job", job_types)
    )
    if "queue" in unknown:
        fail(
            f"no {kind} queue {printable(queue)!r} is known here (no job of it, no worker's "
            "limits, no pause): check the name (queuey status lists the queues), or pass "
            "--force to act on it before anything uses it"
        )
    if unknown:
        names = ", ".join(repr(printable(name)) for name in unknown)
        fail(
            f"no job of type {names} is in {printable(queue)!r}: a job type is named as "
            "registered (Job's name=, by default module.ClassName; queuey status --queues "
            "shows them); pass --force to set it anyway"
        )


@main.group("queues")
def queues() -> None:
    """Pause, resume and set the flow limits of a queue for every worker (PostgreSQL)."""


@queues.command("pause")
@DATABASE_URL
@SCHEMA
@KIND
@FORCE
@click.argument("queue")
def pause_command(
    database_url: str | None, schema: str, kind: _PauseKind, force: bool, queue: str
) -> None:
    """Pause QUEUE for every worker: its limit zero (what runs finishes)."""
    admin = admin_for(database_url, schema)
    _check_names(admin, queue, kind, (), force)
    changed = run_async(admin.pause_queue(queue, kind))
    click.echo(f"{kind} {printable(queue)} {'paused' if changed else 'was already paused'}")


@queues.command("resume")
@DATABASE_URL
@SCHEMA
@KIND
@CHANNEL
@click.argument("queue")
def resume_command(
    database_url: str | None, schema: str, kind: _PauseKind, topic_channel: str | None, queue: str
) -> None:
    """Resume QUEUE for every worker and wake them."""
    admin = admin_for(database_url, schema)
    changed = run_async(admin.resume_queue(queue, kind, topic_channel=topic_channel))
    click.echo(f"{kind} {printable(queue)} {'resumed' if changed else 'was not paused'}")


@queues.command("limit")
@DATABASE_URL
@SCHEMA
@click.option("--kind", type=click.Choice(["job", "topic"]), default="job", show_default=True)
@CHANNEL
@click.option("--declared", is_flag=True, help="Back to the limits the code declares.")
@click.option("--none", "lift", is_flag=True, help="No limit at all (until set again).")
@FORCE
@click.argument("queue")
@click.argument("limits", nargs=-1)
def limit_command(
    database_url: str | None,
    schema: str,
    kind: _LimitKind,
    topic_channel: str | None,
    declared: bool,
    lift: bool,
    force: bool,
    queue: str,
    limits: tuple[str, ...],
) -> None:
    """Set QUEUE's flow limits for every worker, e.g. 'rate 14/1s' 'concurrency 3 by tenant'."""
    from queuey.limits import parse_limit

    if sum((declared, lift, bool(limits))) != 1:
        raise click.UsageError("give LIMITS, or --declared, or --none (one of them)")
    try:
        specs = None if declared else [parse_limit(text) for text in limits]
    except ConfigError as exc:
        fail(str(exc))
    admin = admin_for(database_url, schema)
    job_types = sorted({spec.job_type for spec in specs or () if spec.job_type is not None})
    _check_names(admin, queue, kind, job_types, force)
    changed = run_async(admin.set_limits(queue, specs, kind, topic_channel=topic_channel))
    click.echo(f"{kind} {printable(queue)}: {printable(changed)}")


@queues.command("show")
@DATABASE_URL
@SCHEMA
@json_option("the module help")
def show_command(database_url: str | None, schema: str, as_json: bool) -> None:
    """List the paused queues and the queues whose limits were set at run time."""
    pauses, limits = run_async(admin_for(database_url, schema).flow_state())
    if as_json:
        paused = [
            {"kind": p.kind, "queue": p.queue, "by": p.paused_by, "at": p.paused_at.isoformat()}
            for p in pauses
        ]
        rows = [
            {"kind": s.kind, "queue": s.queue, "limits": s.shown, "by": s.set_by}
            | {"at": s.set_at.isoformat()}
            for s in limits
        ]
        echo_json({"paused": paused, "limits": rows})
        return
    for p in pauses:
        click.echo(f"paused  {p.kind} {printable(p.queue)} (by {printable(p.paused_by)})")
    for s in limits:
        click.echo(f"limits  {s.kind} {printable(s.queue)}: {printable(s.shown)} (by {s.set_by})")
    if not pauses and not limits:
        click.echo("nothing paused; every queue runs under its declared limits")
