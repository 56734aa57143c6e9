"""Job and workflow ids as the statements take them: canonical UUID strings."""

from __future__ import annotations

import uuid

from queuey.errors import ConfigError

__all__ = ["parse_id"]


def parse_id(row_id: str | uuid.UUID) -> str:
    """``row_id`` as a canonical UUID string.

    Raises:
        ConfigError: ``row_id`` is not a UUID.
    """
    if isinstance(row_id, uuid.UUID):
        return str(row_id)
    try:
        return str(uuid.UUID(row_id))
    except (ValueError, TypeError, AttributeError):
        raise ConfigError(f"{row_id!r} is not a job id (a UUID)") from None
