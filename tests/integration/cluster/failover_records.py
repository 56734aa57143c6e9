"""What the processes of one failover trial wrote (``failover_app``), read back and measured:
each figure the failover test asserts, and the JSON line it reports."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Trial"]


@dataclass
class Trial:
    """One failover: when the primary was stopped and the standby promoted, and the records.

    Attributes:
        backlog: job id -> when the backlog's ``enqueue_many`` returned.
        ok: job id -> when its enqueue returned (the producer's).
        fails: when each enqueue that raised did.
        runs: job id -> when each run of it began (both workers).
        settled: job id -> when its success was first recorded (the worker's ``on_settled``).
        settled_by: worker index -> when each of its successes was recorded.
        held_s: how long the primary's WAL sender was held before the crash (0: not held).
        lag_bytes: how far behind the standby's received WAL was just before the stop.
    """

    sync: bool
    held_s: float = 0.0
    stopped: float = 0.0
    promoted: float = 0.0
    backlog: dict[str, float] = field(default_factory=dict)
    ok: dict[str, float] = field(default_factory=dict)
    fails: list[float] = field(default_factory=list)
    runs: defaultdict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    settled: dict[str, float] = field(default_factory=dict)
    settled_by: dict[int, list[float]] = field(default_factory=dict)
    probe_s: float | None = None
    lag_bytes: int | None = None
    listening: int = 0

    def read(self, producer: Path, workers: list[Path]) -> None:
        """(Re)read every record file."""
        self.ok.clear()
        self.fails.clear()
        self.runs.clear()
        self.settled.clear()
        self.settled_by.clear()
        for kind, job, at in _lines(producer):
            if kind == "ok":
                self.ok[job] = at
            elif kind == "fail":
                self.fails.append(at)
        for index, path in enumerate(workers):
            mine = self.settled_by.setdefault(index, [])
            for kind, job, at in _lines(path):
                if kind == "run":
                    self.runs[job].append(at)
                elif kind == "settled":
                    self.settled.setdefault(job, at)
                    mine.append(at)

    def enqueued(self) -> dict[str, float]:
        """Job id -> when its enqueue returned, the backlog's included."""
        return {**self.backlog, **self.ok}

    def lost_enqueues(self) -> dict[str, float]:
        """Enqueues that returned whose job never ran: job id -> when it returned."""
        return {job: at for job, at in self.enqueued().items() if job not in self.runs}

    def lost_completions(self) -> dict[str, float]:
        """Jobs run again after their success was recorded: job id -> when it was recorded."""
        return {
            job: at
            for job, at in self.settled.items()
            if any(start > at for start in self.runs.get(job, []))
        }

    def duplicates(self) -> int:
        """Runs beyond the first of each job (those in flight at the failover, or lost)."""
        return sum(len(starts) - 1 for starts in self.runs.values())

    def waiting_at_stop(self) -> int:
        """Jobs enqueued before the primary stopped that had not begun to run by then."""
        return sum(
            1
            for job, at in self.enqueued().items()
            if at < self.stopped and min(self.runs.get(job, [self.stopped])) >= self.stopped
        )

    def producer_back_s(self) -> float | None:
        """Seconds from the promotion to the producer's first enqueue that returned after it."""
        after = [at for at in self.ok.values() if at > self.promoted]
        return min(after) - self.promoted if after else None

    def worker_back_s(self, index: int) -> float | None:
        """Seconds from the promotion to worker ``index``'s first success recorded after it."""
        after = [at for at in self.settled_by.get(index, []) if at > self.promoted]
        return min(after) - self.promoted if after else None

    def report(self) -> str:
        """The trial's figures as one JSON line."""
        return json.dumps(
            {
                "replication": "synchronous" if self.sync else "asynchronous",
                "enqueued": len(self.enqueued()),
                "failed_enqueues": len(self.fails),
                "waiting_at_stop": self.waiting_at_stop(),
                "handled": len(self.runs),
                "lost_enqueues": len(self.lost_enqueues()),
                "lost_completions": len(self.lost_completions()),
                "duplicate_runs": self.duplicates(),
                "wal_sender_held_s": self.held_s,
                "lag_bytes_before_stop": self.lag_bytes,
                "promote_s": round(self.promoted - self.stopped, 2),
                "producer_back_s": _rounded(self.producer_back_s()),
                "workers_back_s": [_rounded(self.worker_back_s(i)) for i in self.settled_by],
                "listen_probe_s": _rounded(self.probe_s),
            }
        )


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _lines(path: Path) -> list[tuple[str, str, float]]:
    if not path.exists():
        return []
    found = []
    for line in path.read_text().splitlines():
        kind, job, at, *_ = [*line.split(" ", 3), "", "", ""]
        try:
            found.append((kind, job, float(at)))
        except ValueError:  # a line being written as we read: read again later
            continue
    return found
