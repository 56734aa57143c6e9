"""``queuey publish``: one message to a topic of an app file, printed as JSON."""

from __future__ import annotations

import json
from typing import Any

import click

from queuey.cli._app import app_database_url, connect_backend
from queuey.cli._options import APP_DATABASE_URL, CONFIG, SCHEMA
from queuey.cli._root import echo_json, fail, main, run_async
from queuey.errors import QueueyError

__all__ = ["publish_command"]


@main.command("publish")
@CONFIG
@APP_DATABASE_URL
@SCHEMA
@click.option("--published-by", default="", help="Who publishes (recorded with the message).")
@click.option(
    "--priority",
    type=int,
    default=0,
    show_default=True,
    help="Higher is handled first (0..10).",
)
@click.argument("topic")
@click.argument("payload", default="{}")
def publish_command(
    config_path: str,
    database_url: str | None,
    schema: str,
    published_by: str,
    priority: int,
    topic: str,
    payload: str,
) -> None:
    """Publish PAYLOAD (JSON, default {}) to TOPIC and print the publication as JSON."""
    from queuey.topics import QueuesConfig, TopicPublisher, load_app_config
    from queuey.topics.config import topic_error
    from queuey.topics.publisher import TOPIC_MAX_PRIORITY

    try:
        app_config = load_app_config(config_path)
    except QueueyError as exc:
        fail(str(exc))
    if not QueuesConfig.valid_topic(topic):
        fail(topic_error(topic))
    if not 0 <= priority <= TOPIC_MAX_PRIORITY:
        fail(f"--priority: {priority} is out of range 0..{TOPIC_MAX_PRIORITY}")
    try:
        message = json.loads(payload, parse_constant=_refuse_constant)
    except ValueError as exc:  # JSONDecodeError included
        fail(f"the payload is not valid JSON: {exc}")
    url = app_database_url(database_url, app_config.database_url, config_path)

    async def publish() -> Any:
        backend = await connect_backend(app_config.queues, url, schema=schema)
        try:
            publisher = TopicPublisher(app_config.queues, backend)
            return await publisher.publish(topic, message, published_by, priority=priority)
        finally:
            await backend.close()

    try:
        publication = run_async(publish())
    except TypeError as exc:
        fail(str(exc))
    echo_json(publication.as_json(), indent=None)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (RFC 8259 has no NaN or Infinity)")
