"""What a trigger rule decides, and what it needs to know to decide it.

Every rule returns exactly one ``Decision``: ``Enqueue`` (a job for the queue), ``Close``
(the pull request closed: callers cancel its pending rows and queue retention),
``Decline`` (a person declined one of the App's findings in a reply on its thread) or
``Ignore`` with a short machine-readable reason. The reasons are a closed vocabulary
(``REASONS``) so that logs, the webhook's 202 body and docs/TRIGGERS.md agree; the only
open-ended ones are ``event:<name>`` and ``action:<name>``, which echo what GitHub sent.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass, field

from service.config.repository.merge import RepoTriggers
from service.config.schema import TriggersConfig
from service.model.jobs import Job

from .mention import validate_phrase

#: Every fixed ``Ignore`` reason and what it means. ``event:<name>`` (an event the agent
#: does not act on) and ``action:<name>`` (an action of a handled event it does not act
#: on) complete the vocabulary.
REASONS: dict[str, str] = {
    "auto_review_off": "automatic review is off (triggers.auto_review, or the repository's "
                       ".github/pr-review-agent.yml), so pull requests are not reviewed unasked",
    "on_push_off": "a new head was pushed and on_push is off (triggers.on_push, or the "
                   "repository's .github/pr-review-agent.yml)",
    "draft": "the pull request is a draft",
    "bot_author": "the pull request or comment was written by a bot account",
    "not_a_pull_request": "the comment is on a plain issue, not a pull request",
    "comment_edited": "edited comments never trigger, whatever the new text says",
    "comment_deleted": "deleted comments never trigger",
    "own_app": "the comment was written by this App (its [bot] login or its App id)",
    "own_comment": "the comment id is one the agent recorded as its own (agent_comments)",
    "no_mention": "the comment does not mention the trigger phrase outside code and quotes",
    "author_not_allowed": "the author may not trigger: a comment that mentions the phrase, or a "
                          "pull request opened by someone outside the allowlist",
    "decliner_not_allowed": "a reply declining a finding came from someone other than the pull "
                            "request's author or a person allowed to ask",
    "malformed_payload": "the payload lacks a field the rules need, or has the wrong type",
    "closed_by_poller": "a delivery saying a pull request closed changes nothing: anyone holding "
                        "one captured delivery could send it again, so a close is taken from "
                        "GitHub's own listing by the poller, and the worker reads the pull "
                        "request's state before it spends anything",
}

_OPEN_PREFIXES = ("event:", "action:")




@dataclass(frozen=True)
class Enqueue:
    """Put ``job`` on the queue (idempotent on ``job.dedupe_key``)."""

    job: Job


@dataclass(frozen=True)
class Close:
    """The pull request closed: cancel its pending rows and queue its content for retention."""

    repo: str
    pr_number: int
    merged: bool


@dataclass(frozen=True)
class Ignore:
    """Nothing to do. ``reason`` is from ``REASONS`` or ``event:*``/``action:*``;
    ``detail`` is free text for a log line (never parsed)."""

    reason: str
    detail: str = ""

    def __post_init__(self) -> None:
        if self.reason not in REASONS and not self.reason.startswith(_OPEN_PREFIXES):
            raise ValueError(f"unknown ignore reason {self.reason!r}")


def starts_declining(body: str, phrases: Sequence[str]) -> bool:
    """Whether ``body`` starts with one of ``phrases`` (any case; a typographic apostrophe
    counts as a plain one, as phones type "won’t fix")."""
    said = body.strip().lower().replace("\u2019", "'")
    wanted = tuple(p.strip().lower().replace("\u2019", "'") for p in phrases if p.strip())
    return bool(wanted) and said.startswith(wanted)


@dataclass(frozen=True)
class Decline:
    """A reply on a review thread declines the finding it answers (``reply_to``, the
    thread's first comment): callers mark that finding ``declined`` if it is one of the
    App's open findings on the pull request (``service.storage.posted_findings``), and do
    nothing otherwise. ``by`` is the person who declined, for the log."""

    repo: str
    pr_number: int
    reply_to: int
    by: str


Decision = Enqueue | Close | Decline | Ignore

#: The agent's own comment ids: a container (a set read from ``agent_comments``) or a
#: predicate (a lookup the caller owns). Either way the rules only ask "is this id ours?".
AgentComments = Container[int] | Callable[[int], bool]


@dataclass(frozen=True)
class TriggerContext:
    """Everything the rules consult besides the payload itself.

    ``app_id`` and ``app_slug`` identify the App (its comments are authored by
    ``f"{app_slug}[bot]"``); ``agent_comments`` answers whether a comment id is one the
    publisher recorded as its own. Building a context validates the trigger phrase, so a
    bad ``triggers.mention`` fails at startup rather than on the first comment.
    """

    config: TriggersConfig
    app_id: int
    app_slug: str
    agent_comments: AgentComments = field(default=frozenset(), compare=False)
    #: A reply on a review thread that starts with one of these (any case) declines the
    #: finding it answers (``review.decline_phrases``); empty: replies decline nothing.
    decline_phrases: tuple[str, ...] = ()
    #: The automatic-review switches of a repository (its ``.github/pr-review-agent.yml``
    #: as last read, over the operator's); None: the operator's alone.
    repo_triggers: Callable[[str], RepoTriggers] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        validate_phrase(self.config.mention)
        if isinstance(self.app_id, bool) or not isinstance(self.app_id, int) or self.app_id <= 0:
            raise ValueError(f"app_id must be a positive integer, got {self.app_id!r}")
        if not self.app_slug or not self.app_slug.strip() or self.app_slug != self.app_slug.strip():
            raise ValueError(f"app_slug must be a non-empty slug, got {self.app_slug!r}")

    def declines(self, body: str) -> bool:
        """Whether a reply's ``body`` starts with one of ``decline_phrases``."""
        return starts_declining(body, self.decline_phrases)

    @property
    def bot_login(self) -> str:
        """The login the App's comments carry: ``{slug}[bot]``."""
        return f"{self.app_slug}[bot]"

    def triggers_for(self, repo: str) -> RepoTriggers:
        """Whether ``repo``'s pull requests are reviewed unasked: when opened, when pushed
        to, and as drafts."""
        if self.repo_triggers is not None:
            return self.repo_triggers(repo)
        return RepoTriggers(auto_review=self.config.auto_review, on_push=self.config.on_push,
                            drafts=False)

    def is_agent_comment(self, comment_id: int) -> bool:
        """True when ``comment_id`` is recorded as one the agent posted."""
        known = self.agent_comments
        if callable(known):
            return bool(known(comment_id))
        return comment_id in known
