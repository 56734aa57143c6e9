"""``queries.sql``'s parts: SQL text several statements share, written once, pasted (code only)
where a statement names it in braces, and never a statement of its own."""

from __future__ import annotations

from queuey.backends.postgres._sql import Statements, _raw_queries

SHARED_INSERT = 'INSERT INTO "s"."t" (id, kind, queue, job_type, status, priority'


def test_a_part_is_pasted_into_each_statement_that_names_it_and_is_no_statement() -> None:
    assert "publish_rows" not in _raw_queries()
    statements = Statements("s", "t")
    texts = {name: statements[name].as_string(None) for name in ("publish", "publish_once")}
    for name, text in texts.items():
        assert text.count(SHARED_INSERT) == 1, name
        assert "{" not in text.replace("{}", ""), f"{name} names a part that was not pasted"
    body = texts["publish"].split(SHARED_INSERT, 1)[1].split("ORDER BY n", 1)[0]
    assert body in texts["publish_once"], "both publish the same rows"
    assert "WHERE (SELECT fresh FROM claimed)" in texts["publish_once"]


def test_the_end_of_a_failed_workflow_step_is_written_once_for_every_statement_that_ends_one() -> (
    None
):
    assert "workflow_ended" not in _raw_queries()
    statements = Statements("s", "t")
    ending = ("dead_letter", "cancel", "finish_cancel", "reclaim")
    texts = {name: statements[name].as_string(None) for name in ending}
    shared = "doomed AS (\nSELECT e.child AS id, gone.id AS cause, gone.error"
    for name, text in texts.items():
        assert text.count(shared) == 1, name
        assert "{" not in text.replace("{}", ""), f"{name} names a part that was not pasted"
    bodies = {text.split(shared, 1)[1].split("), ready AS (", 1)[0] for text in texts.values()}
    assert len(bodies) == 1, "each statement ends failed workflow steps the same way"
    assert "released AS (" in bodies.pop()
