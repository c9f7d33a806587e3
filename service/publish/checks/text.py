"""What a check run says, for every way a trigger can go (pure: no I/O, ``now`` passed in).

Each function returns the ``CheckState`` one situation shows: its status, its conclusion
once completed, a title a person reads in the checks list and a summary that says what
happened and what to do. docs/PUBLISHER.md shows an example of each. Nothing here is ever
green when nothing was reviewed: every ending that reviewed nothing is ``neutral`` and
says why.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Final

from service.model.severity import SEVERITIES, at_least
from service.publish import coverage
from service.publish.run_content import Omitted
from service.storage.checks import COMPLETED, IN_PROGRESS, QUEUED, CheckState

__all__ = [
    "MAX_SUMMARY",
    "abandoned",
    "closed",
    "declined_by_repository",
    "described",
    "dry_run",
    "engine_failed",
    "moved",
    "not_posted",
    "nothing_to_review",
    "queued",
    "refused_estimate",
    "refused_size",
    "reviewed",
    "reviewed_superseded",
    "reviewing",
    "superseded",
    "waiting_for_budget",
    "waiting_for_plan",
    "waiting_for_retry",
    "with_config_notes",
]

#: GitHub's limit on ``output.summary``; ours stay far below it.
MAX_SUMMARY: Final = 65_535

_STOPS: Final = {
    "engine_unavailable": "the engine could not start",
    "infrastructure": "something outside the review failed (GitHub, git or the store)",
    "engine_error": "the engine failed",
    "timeout": "the engine ran past its wall clock",
    "usage_limit": "the model's plan reported its usage limit",
    "truncated": "the engine stopped at its token cap",
    "lost": "the worker stopped mid-run",
    "failed": "the engine's answer could not be used",
}


def _at(t: datetime) -> str:
    return f"{t.strftime('%Y-%m-%d %H:%M')} UTC"


def _in(t: datetime, now: datetime) -> str:
    minutes = max(0, round((t - now).total_seconds() / 60))
    if minutes < 2:
        return "in about a minute"
    if minutes < 90:
        return f"in about {minutes} minutes"
    hours = round(minutes / 60)
    return f"in about {hours} hours" if hours < 36 else f"in about {round(hours / 24)} days"


def _sha(sha: str) -> str:
    return f"`{sha[:7]}`"


def _n(count: int, one: str, many: str | None = None) -> str:
    return f"{count:,} {one if count == 1 else (many or one + 's')}".replace(",", " ")


def _stop(reason: str | None) -> str:
    return _STOPS.get(reason or "", f"it stopped ({reason})" if reason else "it stopped")


# -- open ------------------------------------------------------------------------------

def queued(what: str) -> CheckState:
    """Enqueued, waiting for a worker (``what``: "review" or "description")."""
    return CheckState(QUEUED, f"Queued: the {what} starts when a worker is free",
                      f"The {what} is queued and starts as soon as a worker is free.")


def waiting_for_budget(what: str, reason: str, window: str | None,
                       frees_at: datetime | None, now: datetime) -> CheckState:
    """Refused by the budget for now; stays queued and runs when allowance frees up."""
    why = {
        "disabled": "reviews are paused by the operator (budget.enabled is off)",
        "exhausted": f"the {window or 'budget'} window's token allowance is used up",
        "insufficient": f"what is left of the {window or 'budget'} window is less than one "
                        "run needs",
        "monthly_usd": "the monthly dollar cap is reached",
        "breaker": "the model's plan reported its usage limit, so reviews are paused",
        "per_actor": f"this person has used their share of the {window or 'budget'} window",
        "per_installation": ("this installation of the App has used its share of the "
                             f"{window or 'budget'} window"),
        "repository": "this repository has had as many reviews as the operator allows it "
                      "in 24 hours",
        "pacer": "this pull request has had as many reviews as one may have in 24 hours",
        "mention_only": "the budget is near its limit, so only requests people make by "
                        "mention are taken",
    }.get(reason, "the token budget does not allow another run yet")
    if frees_at is not None and frees_at > now:
        when = f"the {window or 'budget'} window frees allowance at {_at(frees_at)}"
        title = f"Waiting for budget: {when}"
        after = f"It runs by itself then ({_in(frees_at, now)})."
    else:
        title = "Waiting for budget"
        after = "It runs by itself as soon as the budget allows."
    return CheckState(QUEUED, title, f"The {what} has not started: {why}. {after} "
                                     "Nothing is lost: the request stays queued.")


def waiting_for_plan(what: str, resets_at: datetime, now: datetime) -> CheckState:
    """The plan's usage limit stopped the run; it runs again by itself after the reset."""
    return CheckState(
        QUEUED, f"Waiting for the plan's usage limit to reset at {_at(resets_at)}",
        f"The {what} was stopped by the model's plan usage limit. It is queued again and "
        f"runs by itself after the reset, {_at(resets_at)} ({_in(resets_at, now)}); the "
        "attempt it lost is not counted.")


def waiting_for_retry(what: str, stop_reason: str | None, *, attempts: int,
                      max_attempts: int, retry_at: datetime | None,
                      now: datetime) -> CheckState:
    """An attempt failed without a result; the next one waits for its retry delay."""
    when = (f"at {_at(retry_at)} ({_in(retry_at, now)})"
            if retry_at is not None and retry_at > now else "as soon as a worker is free")
    return CheckState(
        QUEUED, f"Retrying: attempt {attempts} of {max_attempts} did not finish",
        f"Attempt {attempts} of {max_attempts} did not finish: {_stop(stop_reason)}. "
        f"The {what} is tried again {when}.")


def reviewing(what: str, head_sha: str, attempt: int) -> CheckState:
    """A worker is on it."""
    again = f" (attempt {attempt})" if attempt > 1 else ""
    verb = "Describing" if what == "description" else "Reviewing"
    return CheckState(IN_PROGRESS, f"{verb} {head_sha[:7]}{again}",
                      f"A worker is writing the {what} of {_sha(head_sha)}{again}.")


# -- completed -------------------------------------------------------------------------

def _done(conclusion: str, title: str, summary: str, url: str | None = None) -> CheckState:
    return CheckState(COMPLETED, title, summary[:MAX_SUMMARY], conclusion, url)


def _cost(tokens: int | None, cost_usd: float | None, earlier: int = 0) -> str:
    spent = "an unknown number of tokens" if tokens is None else _n(tokens, "token")
    dollars = (f"${cost_usd:.2f}" if cost_usd is not None
               else "dollars not reported by the engine")
    before = (f"; earlier attempts that did not finish were charged {_n(earlier, 'token')}"
              if earlier else "")
    return f"{spent} ({dollars}){before}"


def _charged(charged: int) -> str:
    """What a trigger that ended without a finished run cost: the ledger's charge for it
    (an attempt that did not finish is charged its reservation), or nothing."""
    if not charged:
        return "Nothing was charged."
    return (f"Earlier attempts that did not finish were charged {_n(charged, 'token')}; "
            "nothing more was charged.")


def reviewed(severities: Iterable[str], *, tokens: int | None, cost_usd: float | None,
             url: str | None, fail_on: str | None, coverage: tuple[str, str] | None = None,
             partial_conclusion: str = "neutral", reduced: bool = False,
             earlier: int = 0) -> CheckState:
    """Reviewed and posted: ``success``, or ``failure`` when a finding is at or above
    ``fail_on``. A partial review (``coverage``: its title, "Reviewed 42 of 50 files",
    and its sentence) is never a plain "Reviewed": its title names the coverage, and it
    concludes ``partial_conclusion`` unless a finding fails it."""
    counts = Counter(severities)
    total = sum(counts.values())
    found = ", ".join(_n(counts[s], s) for s in SEVERITIES if counts[s]) or "no findings"
    failing = fail_on is not None and any(at_least(s, fail_on) for s in counts)
    title = (f"Reviewed: {found}" if total else "Reviewed: no findings")
    if coverage is not None:
        title = f"{coverage[0]}: {found}"
    lines = [f"**Findings:** {found}." if total else "**Findings:** none.",
             f"**Cost:** {_cost(tokens, cost_usd, earlier)}."]
    if url is not None:
        lines.append(f"**Review:** [on the pull request]({url}).")
    if coverage is not None:
        lines.append(f"**Partial:** {coverage[1]} (`review.partial_conclusion` sets this "
                     "check's conclusion.)")
    if reduced:
        lines.append("**Reduced:** the budget is near its limit, so only correctness and "
                     "security were reviewed.")
    if failing:
        lines.append(f"**Failing:** a finding is `{fail_on}` or more serious "
                     "(`checks.fail_on`).")
    conclusion = ("failure" if failing
                  else partial_conclusion if coverage is not None else "success")
    return _done(conclusion, title, "\n\n".join(lines), url)


def described(url: str | None, *, tokens: int | None, cost_usd: float | None,
              earlier: int = 0) -> CheckState:
    """``@claude describe`` answered."""
    where = f" [on the pull request]({url})" if url else " on the pull request"
    return _done("success", "Description posted",
                 f"The description is posted{where}.\n\n**Cost:** "
                 f"{_cost(tokens, cost_usd, earlier)}.", url)


def nothing_to_review(omitted: Sequence[Omitted], url: str | None,
                      charged: int = 0) -> CheckState:
    """No changed file was read — every one excluded, withheld, or too large for the
    model's window: nothing was reviewed (never green)."""
    shown = ", ".join(f"`{o.path}`" for o in omitted[:10])
    more = f" and {len(omitted) - 10} more" if len(omitted) > 10 else ""
    why = coverage.breakdown(omitted)
    title = ("Not reviewed: nothing left after exclusions"
             if all(o.reason == "excluded" for o in omitted)
             else f"Not reviewed: 0 of {_n(len(omitted), 'file')} read")
    return _done("neutral", title,
                 f"No changed file was read ({why or 'no changes'}: {shown or 'none'}{more}), "
                 f"so nothing was reviewed. {_charged(charged)}", url)


def refused_size(files: int, largest: int, limit: int, phrase: str,
                 charged: int = 0) -> CheckState:
    """Every file is over ``review.max_diff_lines``: too large for any part to be reviewed."""
    return _done(
        "neutral", f"Not reviewed: too large ({_n(files, 'file')}, each over {limit} lines)",
        f"Every changed file is over `review.max_diff_lines` ({limit}); the largest has "
        f"{_n(largest, 'line')}. Nothing was reviewed. {_charged(charged)} A review "
        "covers the files that fit, so splitting the change, or excluding generated files "
        f"(`review.excluded_paths`), lets it be reviewed; then write `{phrase} review`.")


def refused_estimate(estimate: int, reserved: int, lines: int, phrase: str,
                     charged: int = 0) -> CheckState:
    """The pre-flight estimate is above one run's reservation."""
    return _done(
        "neutral", f"Not reviewed: estimated {_n(estimate, 'token')}, over the "
                   f"{_n(reserved, 'token')[:-len(' tokens')]}-token limit",
        f"The change ({_n(lines, 'line')} sent for review) is estimated at "
        f"{_n(estimate, 'token')}, more than one run may spend (`budget.max_run_tokens`: "
        f"{_n(reserved, 'token')}). {_charged(charged)} A smaller change, or excluding "
        f"generated files (`review.excluded_paths`), can be reviewed: write `{phrase} review` "
        "after.")


def engine_failed(stop_reason: str | None, detail: str | None, url: str | None, *,
                  tokens: int | None = 0, cost_usd: float | None = None,
                  earlier: int = 0) -> CheckState:
    """The engine ran and produced no usable review; what the run cost, as charged."""
    said = f" ({detail})" if detail else ""
    reply = f" The reply is [on the pull request]({url})." if url else ""
    cost = (f"\n\n**Cost:** {_cost(tokens, cost_usd, earlier)}." if tokens != 0
            else f" {_charged(earlier)}")
    return _done("neutral", f"Not reviewed: {_stop(stop_reason)}",
                 f"The review did not complete: {_stop(stop_reason)}{said}.{reply} A new "
                 f"push, or a mention, asks again.{cost}", url)


def abandoned(stop_reason: str | None, attempts: int, charged: int = 0) -> CheckState:
    """Every attempt failed; the queue gave up on the trigger."""
    cost = (f" The attempts were charged {_n(charged, 'token')} in all." if charged
            else " Nothing was charged.")
    return _done("neutral", f"Not reviewed: failed after {_n(attempts, 'attempt')}",
                 f"Every attempt failed; the last: {_stop(stop_reason)}. The operator's log "
                 f"says more. A new push, or a mention, asks again.{cost}")


def superseded(new_head: str | None, charged: int = 0) -> CheckState:
    """A newer head replaced this one before it was reviewed."""
    newer = f" {_sha(new_head)}" if new_head else ""
    return _done("neutral", "Not reviewed: superseded by a newer head",
                 f"The pull request moved on to a newer head{newer} before this one was "
                 f"reviewed; the newer head is the one reviewed. {_charged(charged)}")


def reviewed_superseded(new_head: str | None, *, tokens: int | None,
                        cost_usd: float | None, earlier: int = 0) -> CheckState:
    """Reviewed, and paid for, but the head moved on before the review was posted: an
    automatic review of an old head is not posted (the newer head gets its own)."""
    newer = f" {_sha(new_head)}" if new_head else " a newer head"
    title = (f"Reviewed, not posted: superseded by {new_head[:7]}" if new_head
             else "Reviewed, not posted: superseded by a newer head")
    return _done("neutral", title,
                 f"This head was reviewed, but the pull request moved on to{newer} before "
                 "the review was posted, so it was not posted: the newer head is reviewed "
                 f"on its own.\n\n**Cost:** {_cost(tokens, cost_usd, earlier)}.")


def moved(new_head: str) -> CheckState:
    """A mention asked about this head, and the pull request moved on before its review:
    the request is answered on the newer head."""
    return _done("neutral", f"Answered on the newer head {new_head[:7]}",
                 f"The pull request moved on to {_sha(new_head)} before the request was "
                 "taken up; it is answered there.")


def closed(merged: bool, charged: int = 0) -> CheckState:
    """The pull request closed before its review."""
    how = "merged" if merged else "closed"
    return _done("neutral", f"Not reviewed: the pull request was {how}",
                 f"The pull request was {how} before the review started. {_charged(charged)}")


def dry_run(*, tokens: int | None = 0, cost_usd: float | None = None,
            earlier: int = 0) -> CheckState:
    """``publish.dry_run``: recorded, nothing posted."""
    cost = (f"\n\n**Cost:** {_cost(tokens, cost_usd, earlier)}." if tokens != 0 or earlier
            else " Nothing was charged.")
    return _done("neutral", "Dry run: nothing posted",
                 f"The run is recorded but `publish.dry_run` is on, so nothing was posted.{cost}")


def not_posted(url: str | None = None) -> CheckState:
    """The run is recorded but GitHub refused its post for good."""
    return _done("neutral", "Reviewed, but the review could not be posted",
                 "The review is recorded, but GitHub refused to take it (the pull request "
                 "may be locked, or a permission is missing). The operator's log says why; "
                 "clearing the run's failure stamp offers it again.", url)


_MAX_NOTES: Final = 20


def declined_by_repository(key: str, phrase: str, charged: int = 0) -> CheckState:
    """The repository's ``.github/pr-review-agent.yml`` turns this automatic review off."""
    return _done("neutral", f"Not reviewed: the repository's config sets {key}",
                 f"`.github/pr-review-agent.yml` sets `{key}`, so this pull request is not "
                 f"reviewed automatically. Write `{phrase} review` in a comment to ask for a "
                 f"review. {_charged(charged)}")


def with_config_notes(state: CheckState, notes: tuple[str, ...]) -> CheckState:
    """``state`` with the repository config's problems added to its summary: a broken
    file is shown on every check run until it is fixed, never silently ignored."""
    if not notes:
        return state
    shown = [f"- {note[:500]}" for note in notes[:_MAX_NOTES]]
    if len(notes) > _MAX_NOTES:
        shown.append(f"- … and {len(notes) - _MAX_NOTES} more (`pr-review-agent check-config "
                     "--repository-file` lists them all)")
    lines = "\n".join(shown)
    return replace(state, summary=f"{state.summary}\n\n**Repository config**\n\n{lines}")
