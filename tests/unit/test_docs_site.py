"""The documentation site's contract with the code: every public name has a reference entry,
and every example under ``examples/docs`` is shown on a page and run by a test. (The strict
build itself, broken links and references included, is ``mkdocs build --strict`` in
``scripts/test``.)"""

from __future__ import annotations

import importlib
import re

import pytest

from tests.doc_examples import EXAMPLES, IN_MEMORY, ON_POSTGRES, ON_RABBITMQ, PYTEST_FILES
from tests.helpers import ROOT

DOCS = ROOT / "docs"

REFERENCE = {
    "queuey": "queuey.md",
    "queuey.sync": "sync.md",
    "queuey.workflows": "workflows.md",
    "queuey.batches": "batches.md",
    "queuey.testing": "testing.md",
    "queuey.backends": "backends.md",
    "queuey.backends.dashboard_store": "dashboard-store.md",
    "queuey.backends.postgres": "postgres.md",
    "queuey.backends.rabbitmq": "rabbitmq.md",
    "queuey.backends.memory": "memory.md",
    "queuey.topics": "topics.md",
    "queuey.http": "http.md",
    "queuey.dashboard": "dashboard.md",
    "queuey.observability": "observability.md",
}


def pages() -> dict[str, str]:
    return {str(path.relative_to(DOCS)): path.read_text() for path in DOCS.rglob("*.md")}


@pytest.mark.parametrize("module_name", sorted(REFERENCE))
def test_every_public_name_has_a_reference_entry(module_name: str) -> None:
    module = importlib.import_module(module_name)
    page = (DOCS / "reference" / REFERENCE[module_name]).read_text()
    entries = set(re.findall(r"^::: (\S+)$", page, flags=re.MULTILINE))
    missing = [name for name in module.__all__ if f"{module_name}.{name}" not in entries]
    assert missing == [], f"docs/reference/{REFERENCE[module_name]} lacks {missing}"
    stale = sorted(entry for entry in entries if entry.rpartition(".")[2] not in module.__all__)
    assert stale == [], f"docs/reference/{REFERENCE[module_name]} names non-public {stale}"


def test_every_reference_page_is_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in [*REFERENCE.values(), "index.md"]:
        assert f"reference/{page}" in nav


def test_every_public_name_and_method_has_a_docstring() -> None:
    """Read as the API reference reads them (griffe, statically), so that a constant's or a
    type alias's attribute docstring counts."""
    griffe = pytest.importorskip("griffe")  # the `docs` extra, which `dev` includes
    package = griffe.load("queuey", search_paths=[str(ROOT / "src")], resolve_aliases=True)
    undocumented = []
    for module_name in REFERENCE:
        module = importlib.import_module(module_name)
        found = (
            package[module_name.removeprefix("queuey").lstrip(".")]
            if "." in module_name
            else package
        )
        for name in module.__all__:
            target = found[name].final_target if found[name].is_alias else found[name]
            members = [target, *(target.members.values() if target.is_class else ())]
            for member in members:
                member = member.final_target if member.is_alias else member
                public = member is target or not member.name.startswith("_")
                if public and (member is target or member.is_function) and not member.docstring:
                    undocumented.append(f"{module_name}.{name}: {member.name}")
    assert undocumented == []


def test_every_example_is_shown_and_run() -> None:
    text = "\n".join(pages().values())
    included = set(re.findall(r'--8<-- "([\w/]+)\.py(?::[\w-]+)?"', text))
    examples = {path.stem for path in EXAMPLES.glob("*.py")}
    assert examples - included == set(), "examples no page includes"
    run = {*IN_MEMORY, *PYTEST_FILES, *ON_POSTGRES, *ON_RABBITMQ}
    assert examples == run, f"not run by a test: {examples - run}; missing: {run - examples}"
