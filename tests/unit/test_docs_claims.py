"""Docs that match the product: no page (README, docs site, dashboard templates) names a
feature the package exports as missing from this version, and no docstring sends the reader to
a document that is not in the repository."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import queuey

ROOT = Path(__file__).resolve().parents[2]

# Ways of saying "this version does not have it".
MISSING = re.compile(
    r"\bnot (?:yet )?(?:a )?part of (?:this|the current) (?:version|release)"
    r"|\b(?:this|the current) (?:version|release)\b[^.|]*?\b(?:not|no)\b"
    r"|\b(?:does|do|is|are) not (?:have|support|offer|include|ship)\b[^.|]*?\byet\b"
    r"|\bnot yet (?:implemented|available|supported|built)\b"
    r"|\bcoming soon\b|\b(?:a )?(?:later|future) (?:version|release)\b"
    r"|\bwhen (?:they|it) (?:are|is) (?:added|built|available|implemented)\b",
    re.IGNORECASE,
)

# Words a page uses for an exported feature, and where the package exports it ("module" or
# "module:attribute"); the test checks each still resolves.
FEATURES = {
    "schedule": "queuey:Schedule",
    "periodic": "queuey:Schedule",
    "cron": "queuey:Schedule",
    "unique": "queuey:Unique",
    "dashboard": "queuey.dashboard:dashboard_app",
    "tracing": "queuey.observability",
    "metrics": "queuey.observability",
    "sync producer": "queuey.sync:Producer",
    "cancel": "queuey:CancelResult",
    "rabbitmq": "queuey.backends.rabbitmq:RabbitMqBackend",
    "topic": "queuey.topics",
    "result": "queuey:Job",
}
_WORDS = re.compile(r"[a-z][a-z_]+")


def _exports() -> set[str]:
    return {name.lower() for name in queuey.__all__}


def missing_claims(text: str) -> list[str]:
    """The sentences of ``text`` that say a feature the package exports is missing."""
    exported = _exports()
    found = []
    for sentence in re.split(r"(?<=[.!?])\s+|\n\s*\n|\|", re.sub(r"<[^>]+>", " ", text)):
        if not MISSING.search(sentence):
            continue
        lowered = " ".join(sentence.lower().split())
        words = {w.removesuffix("s") for w in _WORDS.findall(lowered)} | set(
            _WORDS.findall(lowered)
        )
        if any(feature in lowered for feature in FEATURES) or words & exported:
            found.append(" ".join(sentence.split()))
    return found


def _pages() -> list[Path]:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return pages + sorted((ROOT / "src" / "queuey" / "dashboard" / "templates").glob("*.html"))


@pytest.mark.parametrize("target", sorted(set(FEATURES.values())))
def test_every_feature_word_names_something_the_package_exports(target: str) -> None:
    module, _, attribute = target.partition(":")
    imported = importlib.import_module(module)
    if attribute:
        assert hasattr(imported, attribute), target


def test_no_page_names_an_exported_feature_as_missing() -> None:
    claims = {str(page.relative_to(ROOT)): missing_claims(page.read_text()) for page in _pages()}
    assert {page: found for page, found in claims.items() if found} == {}


@pytest.mark.parametrize(
    "text",
    [
        "Periodic jobs are not part of this version of queuey yet. When they are, this page",
        "| Schedules, Unique keys | kept for periodic and unique jobs, which this version "
        "does not have yet |",
        "<p>Unique jobs are coming soon.</p>",
        "The sync producer is not yet implemented.",
    ],
)
def test_the_check_catches_a_feature_called_missing(text: str) -> None:
    assert missing_claims(text) != []


@pytest.mark.parametrize(
    "text",
    [
        "No schedule yet: a worker registers its schedules when it starts.",
        "Unique jobs are refused on RabbitMQ: it has no primitive for them.",
        "The command opens the backend if it is not open yet.",
    ],
)
def test_the_check_lets_plain_statements_pass(text: str) -> None:
    assert missing_claims(text) == []


OUTSIDE = re.compile(r"\bDESIGN\b|SEEDS|\bseeds?\b|§(?!\d+\.\d+\))|design doc", re.IGNORECASE)


def test_no_docstring_refers_to_a_document_outside_the_repository() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted((ROOT / "src" / "queuey").rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if OUTSIDE.search(line) and "RFC" not in line
    ]
    assert found == []
