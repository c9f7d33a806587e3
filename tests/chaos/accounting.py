"""The loss accounting of a chaos run: every trigger classified, every invariant checked.

In the manner of Jepsen's queue checker, each trigger the driver created is put in
exactly one class, from the store (``queue``, ``ledger``, ``runs``, ``notices``) and
from what GitHub (the simulator) actually shows:

- ``posted``: the review, description or reply was posted exactly once and recorded;
- ``recorded``: an honest ending with nothing to post, recorded as such (a failed
  automatic review, a pull request found closed, a refusal before any engine ran);
- ``abandoned``: every attempt was used; the row is visible as ``abandoned`` with its
  attempts, and its ledger rows say how each attempt ended;
- ``unfinished``: still queued, claimed, or recorded but not published (must be 0 after
  the drain);
- ``lost``: no queue row at all (must be 0).

Independently of the classes: no dedupe key's run marker appears on GitHub more than
once (posted twice, must be 0), nor any notice marker; every trigger has a check run on
GitHub, exactly one per head it was shown on, each ``completed``; for every trigger the ledger
charges at least what the engine reported across all its attempts, with no more ledger
rows than attempts (none charged twice); and no budget window was ever over its limit,
checked at every ledger row's reservation instant with the limits in force then.

Everything here is pure: it takes rows and posts, and returns a ``Report``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from service.storage.times import from_db_time

Class = Literal["posted", "recorded", "abandoned", "unfinished", "lost"]
CLASSES: tuple[Class, ...] = ("posted", "recorded", "abandoned", "unfinished", "lost")

RUN_MARKER = re.compile(r"^<!-- pr-review-agent:((?:pr_opened|mention):[^ ]+) -->$", re.M)
NOTICE_MARKER = re.compile(r"^<!-- pr-review-agent:notice:([^ ]+) -->$", re.M)
WINDOWS = (("session", timedelta(hours=5)), ("daily", timedelta(hours=24)),
           ("weekly", timedelta(days=7)))


@dataclass(frozen=True)
class Trigger:
    """One trigger the driver created: what it is, how GitHub told the agent, its key."""

    ident: str            # owner/name#N, the tag the engine sees
    kind: str             # pr_opened | mention
    command: str          # review | describe
    via: str              # webhook | poll
    repo: str
    number: int
    key: str
    delivery_id: str | None = None
    delivered: int | None = None  # the webhook's HTTP status; None: refused / not sent


@dataclass(frozen=True)
class Limits:
    """The effective window limits in force from ``since`` on."""

    since: datetime
    session: int
    daily: int
    weekly: int

    def of(self, window: str) -> int:
        return int(getattr(self, window))


@dataclass
class Verdict:
    trigger: Trigger
    cls: Class
    why: str
    attempts: int = 0
    charged: int = 0
    reported: int = 0
    engine_runs: int = 0
    posts: int = 0
    found_by: str = ""


@dataclass
class Report:
    verdicts: list[Verdict]
    posted_twice: dict[str, int]
    notices_twice: dict[str, int]
    undercharged: list[Verdict]
    window_breaches: list[str]
    stray_engine_runs: int
    open_reservations: int
    ledger_rows: int
    problems: list[str] = field(default_factory=list)

    def count(self, cls: Class) -> int:
        return sum(1 for v in self.verdicts if v.cls == cls)

    @property
    def counts(self) -> dict[str, int]:
        return {cls: self.count(cls) for cls in CLASSES}

    @property
    def ok(self) -> bool:
        return not (self.count("lost") or self.count("unfinished") or self.posted_twice
                    or self.notices_twice or self.undercharged or self.window_breaches
                    or self.stray_engine_runs or self.problems)

    def summary(self) -> str:
        found = Counter(v.found_by for v in self.verdicts)
        via = Counter(v.trigger.via for v in self.verdicts)
        lines = [
            f"triggers: {len(self.verdicts)} ({dict(via)}); first enqueued by {dict(found)}",
            f"classes: {self.counts}",
            f"posted twice: {len(self.posted_twice)}; notices twice: {len(self.notices_twice)}",
            f"undercharged: {len(self.undercharged)}; window breaches: "
            f"{len(self.window_breaches)}; stray engine runs: {self.stray_engine_runs}",
            f"ledger rows: {self.ledger_rows}; open reservations: {self.open_reservations}; "
            f"engine runs: {sum(v.engine_runs for v in self.verdicts)}",
        ]
        lines += [f"  {v.trigger.ident} {v.trigger.key}: {v.cls} ({v.why})"
                  for v in self.verdicts if v.cls in ("lost", "unfinished", "abandoned")]
        lines += [f"  posted twice: {key} x{n}" for key, n in self.posted_twice.items()]
        lines += [f"  undercharged: {v.trigger.key}: charged {v.charged} < reported "
                  f"{v.reported}" for v in self.undercharged]
        lines += [f"  {breach}" for breach in self.window_breaches]
        lines += [f"  problem: {problem}" for problem in self.problems]
        return "\n".join(lines)


def app_posts(posts: Mapping[str, Any]) -> list[str]:
    """The bodies of everything the App (a Bot) posted: reviews and conversation comments
    (submitted reviews only), plus pull request bodies (a description block)."""
    bodies = [r["body"] or "" for r in posts["reviews"]
              if r["user_type"] == "Bot" and r["state"] != "PENDING"]
    bodies += [c["body"] or "" for c in posts["issue_comments"] if c["user_type"] == "Bot"]
    bodies += [p["body"] or "" for p in posts["pull_bodies"]]
    return bodies


def marker_counts(bodies: Iterable[str]) -> tuple[Counter[str], Counter[str]]:
    """(run markers, notice markers) per dedupe key, over every body."""
    runs: Counter[str] = Counter()
    notices: Counter[str] = Counter()
    for body in bodies:
        runs.update(RUN_MARKER.findall(body))
        notices.update(NOTICE_MARKER.findall(body))
    return runs, notices


def charge(row: Mapping[str, Any]) -> int:
    used = row["used_tokens"]
    return int(row["reserved_tokens"] if used is None else used)


def window_breaches(ledger: Sequence[Mapping[str, Any]], limits: Sequence[Limits]
                    ) -> list[str]:
    """Every (row, window) where the charge reserved in ``(t - D, t]`` exceeds the limit in
    force at ``t``, for ``t`` each row's reservation instant.

    Sound with the final charges: a settled run never charges more than it reserved, and
    the last-committed row of any such set was admitted by a claim that counted all the
    others (the governor counts every row reserved after the window's start).
    """
    rows = sorted(((from_db_time(r["reserved_at"]), charge(r)) for r in ledger),
                  key=lambda pair: pair[0])
    ordered = sorted(limits, key=lambda lim: lim.since)
    breaches = []
    for at, _ in rows:
        in_force = [lim for lim in ordered if lim.since <= at]
        if not in_force:
            breaches.append(f"a reservation at {at.isoformat()} precedes every known policy")
            continue
        limit = in_force[-1]
        for name, duration in WINDOWS:
            total = sum(c for t, c in rows if at - duration < t <= at)
            if total > limit.of(name):
                breaches.append(f"{name} window ending {at.isoformat()}: charged {total} "
                                f"> limit {limit.of(name)}")
    return breaches


def classify(triggers: Sequence[Trigger], *, queue: Sequence[Mapping[str, Any]],
             ledger: Sequence[Mapping[str, Any]], runs: Sequence[Mapping[str, Any]],
             notices: Sequence[Mapping[str, Any]], deliveries: Sequence[Mapping[str, Any]],
             posts: Mapping[str, Any], engine_runs: Sequence[Mapping[str, Any]],
             limits: Sequence[Limits]) -> Report:
    """Classify every trigger and check every invariant (module docstring)."""
    queue_by = {row["dedupe_key"]: row for row in queue}
    runs_by = {row["dedupe_key"]: row for row in runs}
    ledger_by: dict[str, list[Mapping[str, Any]]] = {}
    for row in ledger:
        ledger_by.setdefault(row["dedupe_key"], []).append(row)
    reported: Counter[str] = Counter()
    engine_count: Counter[str] = Counter()
    stray = 0
    for run in engine_runs:
        if run.get("empty_prompt"):
            continue  # its serve died before writing the prompt; nothing was spent
        if run.get("trigger") is None:
            stray += 1
            continue
        reported[run["trigger"]] += int(run["tokens"])
        engine_count[run["trigger"]] += 1
    delivery_outcome = {row["delivery_id"]: row["outcome"] for row in deliveries}
    run_markers, notice_markers = marker_counts(app_posts(posts))
    problems: list[str] = []
    known_idents = {t.ident for t in triggers}
    stray += sum(n for ident, n in engine_count.items() if ident not in known_idents)

    verdicts = []
    for trigger in triggers:
        rows = ledger_by.get(trigger.key, [])
        verdict = Verdict(trigger=trigger, cls="lost", why="no queue row",
                          charged=sum(charge(r) for r in rows),
                          reported=reported[trigger.ident],
                          engine_runs=engine_count[trigger.ident],
                          posts=run_markers[trigger.key])
        outcome = delivery_outcome.get(trigger.delivery_id or "")
        verdict.found_by = "webhook" if outcome == "enqueued" else "poller"
        row = queue_by.get(trigger.key)
        if row is not None:
            verdict.attempts = int(row["attempts"])
            _judge(verdict, row, runs_by.get(trigger.key), rows)
            if len(rows) > verdict.attempts:  # each attempt reserves once, or it paid twice
                problems.append(f"{trigger.key}: {len(rows)} ledger rows for "
                                f"{verdict.attempts} attempts (charged twice)")
        verdicts.append(verdict)

    posted_twice = {key: n for key, n in run_markers.items() if n > 1}
    notices_twice = {key: n for key, n in notice_markers.items() if n > 1}
    for notice in notices:
        if notice["comment_id"] is not None and notice_markers[notice["dedupe_key"]] != 1:
            problems.append(f"notice for {notice['dedupe_key']} recorded as posted but "
                            f"{notice_markers[notice['dedupe_key']]} found on GitHub")
    for key in run_markers:
        if key not in queue_by:
            problems.append(f"a post carries the marker of {key}, which was never queued")
    problems += check_run_problems(triggers, posts.get("check_runs", []))
    return Report(
        verdicts=verdicts, posted_twice=posted_twice, notices_twice=notices_twice,
        undercharged=[v for v in verdicts if v.charged < v.reported],
        window_breaches=window_breaches(ledger, limits), stray_engine_runs=stray,
        open_reservations=sum(1 for r in ledger if r["settled_at"] is None),
        ledger_rows=len(ledger), problems=problems)


def check_run_problems(triggers: Sequence[Trigger],
                       check_runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each trigger's check runs on GitHub: at least one, one per head, all completed."""
    by_key: dict[str, list[Mapping[str, Any]]] = {}
    for run in check_runs:
        by_key.setdefault(str(run["external_id"]), []).append(run)
    problems = []
    for trigger in triggers:
        runs = by_key.get(trigger.key, [])
        heads = Counter(str(run["head_sha"]) for run in runs)
        if not runs:
            problems.append(f"{trigger.key}: no check run")
        problems += [f"{trigger.key}: {n} check runs on {head}"
                     for head, n in heads.items() if n > 1]
        problems += [f"{trigger.key}: check run on {run['head_sha']} left {run['status']}"
                     f" ({run['title']})" for run in runs if run["status"] != "completed"]
    return problems


def _judge(verdict: Verdict, row: Mapping[str, Any], run: Mapping[str, Any] | None,
           ledger: Sequence[Mapping[str, Any]]) -> None:
    status = row["status"]
    posts = verdict.posts
    stops = [r["stop_reason"] or "open" for r in ledger]
    if status == "abandoned":
        verdict.cls, verdict.why = "abandoned", f"{row['attempts']} attempts: {stops}"
        return
    if status in ("pending", "claimed"):
        verdict.cls, verdict.why = "unfinished", f"queue row {status}, attempts {stops}"
        return
    if status != "done":
        verdict.cls, verdict.why = "recorded", f"queue row {status}"
        return
    if run is None:
        last = stops[-1] if stops else "no ledger row"
        verdict.cls, verdict.why = "recorded", f"done without a run: {last}"
        if posts:
            verdict.cls, verdict.why = "unfinished", f"no run, yet {posts} post(s)"
        return
    outcome, failed = run["publish_outcome"], run["publish_failed_at"]
    if outcome is None and failed is None:
        verdict.cls, verdict.why = "unfinished", "recorded, not published"
        return
    if failed is not None:
        verdict.cls, verdict.why = "recorded", f"publication failed for good at {failed}"
        return
    nothing_posted = outcome in ("dry_run",) or (
        outcome in ("refused", "superseded") and row["kind"] == "pr_opened")
    expected = 0 if nothing_posted else 1
    if posts != expected:
        verdict.cls = "unfinished"
        verdict.why = f"publish_outcome {outcome} but {posts} post(s) on GitHub"
        return
    verdict.cls = "recorded" if nothing_posted else "posted"
    verdict.why = f"{outcome} ({run['outcome']})"
