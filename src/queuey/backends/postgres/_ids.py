"""Job and workflow ids as the statements take them: canonical UUID strings."""

from __future__ import annotations

import uuid

from queuey.errors import ConfigError

__all__ = ["job_id_or_none", "parse_id"]


def parse_id(row_id: str | uuid.UUID, what: str = "job") -> str:
    """``row_id`` as a canonical UUID string; ``what`` names the id in the error (``"job"``,
    ``"batch"``).

    Raises:
        ConfigError: ``row_id`` is not a UUID.
    """
    if isinstance(row_id, uuid.UUID):
        return str(row_id)
    try:
        return str(uuid.UUID(row_id))
    except (ValueError, TypeError, AttributeError):
        raise ConfigError(f"{row_id!r} is not a {what} id (a UUID)") from None


def job_id_or_none(job_id: str | uuid.UUID) -> str | None:
    """``job_id`` as a canonical UUID string; ``None`` when it is not a UUID, so no job has it
    (a lookup says "no such job", as the memory backend does)."""
    try:
        return parse_id(job_id)
    except ConfigError:
        return None
