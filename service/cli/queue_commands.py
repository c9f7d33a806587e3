"""``pr-review-agent queue …`` and ``runs …``: the operator's fixes, instead of SQL.

Each command is one short transaction through the same storage functions the service
uses (``service.storage.queue``, ``service.storage.runs``), whose ``WHERE`` comes from the
tables' lifecycles, so it is safe while ``serve`` runs: a row a worker holds is never
changed under it, and a row that moved since it was listed is reported, not forced.

- ``queue list`` / ``queue show KEY``: what is waiting, running, and why it ended;
- ``queue retry KEY``: an ``abandoned`` (every attempt used) or ``cancelled`` row back to
  ``pending`` with its attempts reset — the budget still decides when it runs;
- ``queue cancel KEY``: a ``pending`` row cancelled (a running one is left to its worker);
- ``runs list`` / ``runs republish KEY``: a run given up on (``publish_failed_at``) or
  recorded in a dry run offered to the publisher again, without running the engine; the
  running service posts it at its next re-offer (within 10 s).

Exit status: 0 done (or nothing to do), 1 refused (the message says why), 2 bad usage.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TextIO

from service.storage import ledger, runs
from service.storage import queue as queue_table
from service.storage.database import Database, Transaction
from service.storage.queue import QueueRow
from service.storage.times import from_db_time

__all__ = ["queue_cancel", "queue_list", "queue_retry", "queue_show", "runs_list",
           "runs_republish"]


def _iso(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.isoformat(timespec="seconds")
    return from_db_time(str(value)).isoformat(timespec="seconds")


def _table(rows: Sequence[Sequence[str]], out: TextIO) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip(), file=out)


def _row_json(row: QueueRow) -> dict[str, Any]:
    return {"dedupe_key": row.dedupe_key, "status": row.status, "kind": row.kind,
            "command": row.command, "repo": row.repo, "pr_number": row.pr_number,
            "head_sha": row.head_sha, "attempts": row.attempts,
            "enqueued_at": _iso(row.enqueued_at),
            "leased_until": None if row.leased_until is None else _iso(row.leased_until),
            "owner": row.owner}


def queue_list(store: Database, *, statuses: Sequence[str], repo: str | None, limit: int,
               as_json: bool, out: TextIO) -> int:
    """The newest rows, newest first. ``leased_until`` is a claimed row's lease, or the
    time before which a pending row (a retry delay, a deferral) is not claimed."""
    with store.read() as tx:
        rows = queue_table.listing(tx, statuses=statuses, repo=repo, limit=limit)
    if as_json:
        print(json.dumps([_row_json(r) for r in rows], indent=2), file=out)
        return 0
    if not rows:
        print("no queue rows" + (f" with status {', '.join(statuses)}" if statuses else ""),
              file=out)
        return 0
    _table([("STATUS", "KIND", "PULL REQUEST", "ATTEMPTS", "ENQUEUED", "UNTIL", "OWNER",
             "KEY")] + [
        (r.status, r.asked_for, f"{r.repo}#{r.pr_number}",
         str(r.attempts), _iso(r.enqueued_at), _iso(r.leased_until), r.owner or "-",
         r.dedupe_key) for r in rows], out)
    return 0


def queue_show(store: Database, key: str, *, now: datetime, as_json: bool, out: TextIO,
               err: TextIO) -> int:
    """One row, with what it cost (its newest ledger row) and its run, if any."""
    with store.read() as tx:
        row = queue_table.row(tx, key)
        cost = ledger.latest(tx, key)
        run = runs.inspect(tx, key)
        state = runs.state(tx, key, now) if run is not None else None
    if row is None:
        print(f"no queue row {key!r} (queue list shows the keys)", file=err)
        return 1
    shown: dict[str, Any] = _row_json(row)
    shown["ledger"] = cost
    shown["run"] = None if run is None else {
        **{k: v for k, v in run.items() if k != "findings"},
        "publication": None if state is None else state[0],
        "content": None if state is None else state[1],
        "findings": _count(run.get("findings"))}
    if as_json:
        print(json.dumps(shown, indent=2, default=str), file=out)
        return 0
    for name, value in shown.items():
        if isinstance(value, dict):
            print(f"{name}:", file=out)
            for k, v in value.items():
                print(f"  {k}: {'-' if v is None else v}", file=out)
        else:
            print(f"{name}: {'-' if value is None else value}", file=out)
    return 0


def _count(findings: object) -> int | None:
    """How many findings a run's stored JSON holds (None once purged)."""
    if not isinstance(findings, str):
        return None
    try:
        parsed = json.loads(findings)
    except ValueError:
        return None
    return len(parsed) if isinstance(parsed, list) else None


_WHY_NOT_RETRIED = {
    queue_table.PENDING: "is already pending; nothing to do",
    queue_table.DONE: "is done: its outcome is recorded (queue show). To review that head "
                      "again, ask on the pull request with the trigger phrase",
    queue_table.SUPERSEDED: "was superseded by a newer head of its pull request; that head "
                            "is reviewed instead",
}


def _step(store: Database, key: str, step: Callable[[Transaction, str], bool],
          err: TextIO) -> tuple[QueueRow | None, bool]:
    """Take ``step`` on ``key``'s row in one transaction: the row as it was, and whether
    the step moved it (None, after saying so, when there is no such row)."""
    with store.transaction() as tx:
        row = queue_table.row(tx, key)
        moved = row is not None and step(tx, key)
    if row is None:
        print(f"no queue row {key!r} (queue list shows the keys)", file=err)
    return row, moved


def queue_retry(store: Database, key: str, *, out: TextIO, err: TextIO) -> int:
    row, retried = _step(store, key, queue_table.retry, err)
    if row is None:
        return 1
    if retried:
        print(f"{key}: {row.status} -> pending, attempts reset; a worker claims it when the "
              "budget admits it", file=out)
        return 0
    if row.status == queue_table.CLAIMED:
        print(f"{key} is running (owner {row.owner}, lease until {_iso(row.leased_until)}); "
              "if that worker died, the row is offered again when the lease lapses", file=err)
        return 1
    print(f"{key} {_WHY_NOT_RETRIED.get(row.status, f'is {row.status}')}", file=err)
    return 0 if row.status == queue_table.PENDING else 1


def queue_cancel(store: Database, key: str, *, out: TextIO, err: TextIO) -> int:
    row, cancelled = _step(store, key, queue_table.cancel, err)
    if row is None:
        return 1
    if cancelled:
        print(f"{key}: pending -> cancelled (queue retry offers it again)", file=out)
        return 0
    if row.status == queue_table.CLAIMED:
        print(f"{key} is running (owner {row.owner}); a running review is not cut short: "
              "it ends by itself, within the engine's wall clock", file=err)
        return 1
    print(f"{key} is {row.status}; only a pending row can be cancelled", file=err)
    return 0 if row.status == queue_table.CANCELLED else 1


def runs_list(store: Database, *, repo: str | None, failed: bool, limit: int,
              as_json: bool, out: TextIO) -> int:
    with store.read() as tx:
        rows = runs.listing(tx, repo=repo, failed=failed, limit=limit)
    if as_json:
        print(json.dumps(rows, indent=2, default=str), file=out)
        return 0
    if not rows:
        print("no runs given up on" if failed else "no runs", file=out)
        return 0
    _table([("KIND", "OUTCOME", "PUBLISHED", "PULL REQUEST", "HEAD", "RECORDED", "ATTEMPTS",
             "KEY")]
           + [(str(r["kind"] or "-"), str(r["outcome"]), _publication(r),
               f"{r['repo']}#{r['pr_number']}",
               str(r["head_sha"])[:10], _iso(r["recorded_at"]), str(r["publish_attempts"]),
               str(r["dedupe_key"])) for r in rows], out)
    return 0


def _publication(run: dict[str, Any]) -> str:
    if run["publish_outcome"] is not None:
        return str(run["publish_outcome"])
    if run["publish_failed_at"] is not None:
        return "failed"
    return "purged" if run["content_purged_at"] is not None else "waiting"


def runs_republish(store: Database, key: str, *, now: datetime, out: TextIO,
                   err: TextIO) -> int:
    with store.transaction() as tx:
        state = runs.state(tx, key, now)
        done = state is not None and runs.republish(tx, key)
        run = runs.inspect(tx, key)
    if state is None:
        print(f"no run {key!r} (runs list shows the keys)", file=err)
        return 1
    publication, content = state
    if done:
        print(f"{key}: {publication} -> offered again, attempts reset; the running service "
              "posts it within 10 s (its marker keeps it from posting twice)", file=out)
        return 0
    if content == runs.PURGED:
        print(f"{key}: its content was purged (its pull request closed); nothing to post",
              file=err)
        return 1
    if publication in (runs.RECORDED, runs.LEASED):
        print(f"{key} is waiting to be published already; nothing to do", file=err)
        return 0
    comment = run.get("comment_id") if run else None
    print(f"{key} ended {publication}" + (f" (comment {comment})" if comment else "")
          + "; only a failed or dry-run run is published again", file=err)
    return 1
