"""``python -m bench [--quick] [--systems a,b] [--repetitions N] [--only m1,m2]``: measure,
print the table, write ``bench/results/latest.json``, ``docs/benchmarks.png`` and the
generated section of ``docs/benchmarks.md`` (with ``--only``: the named measurements only).

Systems whose library is missing (or a backend not merged yet) are reported as not measured.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import sys
from pathlib import Path
from typing import Any

from bench import report
from bench._model import QUICK, SYSTEMS, Plan
from bench._runner import environment, measure

ROOT = Path(__file__).resolve().parent.parent


def _server_versions() -> dict[str, str]:
    import asyncio

    import psycopg

    from bench.systems._env import AMQP_URL, DATABASE_URL

    async def probe() -> dict[str, str]:
        found: dict[str, str] = {}
        async with await psycopg.AsyncConnection.connect(DATABASE_URL) as conn:
            cursor = await conn.execute("SHOW server_version")
            row = await cursor.fetchone()
            found["postgres"] = f"PostgreSQL {row[0] if row else '?'}"
        try:
            import aio_pika

            async with await aio_pika.connect(AMQP_URL) as connection:
                underlay: Any = connection.transport
                props = underlay.connection.server_properties
                found["rabbitmq"] = str(props.get("version", "?"))
        except Exception as exc:  # the table says "?"; the systems report the failure
            found["rabbitmq"] = f"unreachable ({type(exc).__name__})"
        return found

    return asyncio.run(probe())


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the process exit status."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a reduced run, under two minutes")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated systems")
    parser.add_argument("--repetitions", type=int, help="override the repetitions")
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated measurements to take (e.g. enqueue_bulk,drain); default: all",
    )
    parser.add_argument("--no-write", action="store_true", help="print only; write no file")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else Plan()
    if args.repetitions:
        plan = dataclasses.replace(plan, repetitions=args.repetitions)
    if args.only:
        plan = dataclasses.replace(plan, only=tuple(m for m in args.only.split(",") if m))
    systems = [s for s in args.systems.split(",") if s]
    machine = {**environment(), **_server_versions()}
    machine["date"] = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    runs, errors = [], {}
    for result in measure(systems, plan):
        runs += result.runs
        if result.error:
            errors[result.system] = result.error
    print(report.table(runs))
    for target in report.targets(runs):
        status = {True: "met", False: "NOT MET", None: "not measured"}[target.met]
        print(f"  {status:13} {target.text}: {target.value}")
    if args.no_write:
        return 0
    command = "python -m bench" + (" --quick" if args.quick else "")
    (ROOT / "bench/results").mkdir(parents=True, exist_ok=True)
    (ROOT / "bench/results/latest.json").write_text(report.json_document(machine, runs))
    report.chart(runs, ROOT / "docs/benchmarks.png")
    report.write_markdown(
        ROOT / "docs/benchmarks.md", report.markdown(runs, machine, command, errors)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
