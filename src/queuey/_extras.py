"""The package's name on the package index and the install hint for an optional extra.

The import name and the command are ``queuey``; the distribution is ``queuey-jobs`` (the name
``queuey`` on the index belongs to an unrelated project). Every message that tells a user to
install something is built here, so they all name the right distribution.
"""

from __future__ import annotations

__all__ = ["DISTRIBUTION", "extra_message", "install_hint", "missing_extra"]

DISTRIBUTION = "queuey-jobs"
"""The distribution name: ``pip install queuey-jobs``."""


def install_hint(extras: str) -> str:
    """The command that installs ``extras`` (``"rabbitmq"``, ``"http,metrics"``), e.g.
    ``pip install 'queuey-jobs[rabbitmq]'``."""
    return f"pip install '{DISTRIBUTION}[{extras}]'"


def missing_extra(what: str, extras: str, exc: ImportError) -> ImportError:
    """An ``ImportError`` for ``what`` (e.g. ``"the RabbitMQ backend"``) saying which extra to
    install, naming the module that is missing; raise it ``from exc``."""
    missing = exc.name or str(exc)
    return ImportError(
        f"{what} needs the {extras} extra: {install_hint(extras)} (no module named {missing!r})",
        name=exc.name,
    )


def extra_message(what: str, extras: str, exc: ImportError) -> str:
    """The one-line error for ``what`` failing to import: ``exc``'s own text when it already
    names the install command (an error from :func:`missing_extra`), else ``what`` needs the
    extra, the install command and ``exc``."""
    hint = install_hint(extras)
    if hint in str(exc):
        return str(exc)
    return f"{what} needs the {extras} extra ({hint}): {exc}"
