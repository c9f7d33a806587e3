"""The config sections of what the App posts: ``publish``, ``checks`` and ``ask``.

Declared like every section (``service.config.declare.key``); ``schema.Config`` holds them.
"""

from __future__ import annotations

from dataclasses import dataclass

from service.config.checks import check_name_problem
from service.config.declare import key
from service.model.severity import SEVERITIES

#: GitHub refuses a comment over 65,536 characters; an answer leaves room for its quote
#: of the question and its footer.
MAX_ANSWER_CHARS = 60_000


@dataclass(frozen=True, kw_only=True)
class PublishConfig:
    dry_run: bool = key("bool",
        "Do everything except post to GitHub (runs are recorded as `dry_run`; no 👀, no "
        "notices). Reloadable with SIGHUP.",
        False)
    describe_updates_body: bool = key("bool",
        "`@claude describe` writes the description into the pull request's body, between marked "
        "lines that keep the author's own text, instead of posting it as a comment.",
        False)
    summary_comment: bool = key("bool",
        "Keep one summary comment of the App's on each reviewed pull request, edited in "
        "place after every review: the latest overview, the open findings by severity, "
        "what became of each head, the cost so far.",
        True)


@dataclass(frozen=True, kw_only=True)
class ChecksConfig:
    """Each trigger's check run on the head it reviews (docs/PUBLISHER.md)."""

    enabled: bool = key("bool",
        "Show every trigger as a check run on its head: `queued`, `in_progress`, then "
        "`completed` with what happened. Needs the App's `checks: write` permission.",
        True)
    name: str = key("str",
        "The check run's name (`@claude describe` adds ` (describe)`): what a branch "
        "protection rule requires.",
        "pr-review-agent", check=check_name_problem)
    fail_on: str | None = key("str?",
        "A severity (`critical`, `major`, `minor`, `nit`): a review with a finding at or above "
        "it concludes `failure`, so the check can gate merging. `null`: never.",
        None, allowed=SEVERITIES)


@dataclass(frozen=True, kw_only=True)
class AskConfig:
    """``@claude ask`` and questions in the App's own review threads (docs/TRIGGERS.md)."""

    max_answer_chars: int = key("int",
        "The longest answer posted, in characters; a longer one is cut, and says so.",
        4_000, minimum=200, maximum=MAX_ANSWER_CHARS)
    max_run_tokens: int = key("int",
        "Tokens reserved for one answer, instead of `budget.max_run_tokens` (never more "
        "than it: the smaller of the two is reserved). An answer is one call of the "
        "engine, so the context it reads is sized to this.",
        60_000, minimum=1_000)
