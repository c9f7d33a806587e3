"""Events and REST objects to decisions: the one set of rules both ingest paths share.

The webhook receiver calls ``classify_event(event, payload, ctx)``. The poller, which
sees REST objects rather than events, calls ``classify_pull_request`` for each pull
request from ``GET /pulls`` and ``classify_comment`` for each comment from
``GET /issues/comments`` and ``GET /pulls/comments``. ``classify_event`` unwraps the
payload and delegates to those two, so a comment seen by both paths yields the same
``Job`` and therefore the same dedupe key.

The REST path carries no action, so its callers say what the webhook's action would
have said: ``pushed=True`` for a pull request whose head moved since an earlier head was
enqueued (a ``synchronize``), ``edited=True`` for a comment seen before (an ``edited``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from service.github import payload as f
from service.github.payload import PayloadError
from service.model.jobs import CommentSource, Job

from .allow import is_allowed_author, is_bot, is_own_app, login_of
from .decisions import Close, Decision, Decline, Enqueue, Ignore, TriggerContext
from .mention import find_mention

#: ``pull_request`` actions that ask for a review of the current head.
REVIEW_ACTIONS = frozenset({"opened", "reopened", "ready_for_review"})
_PULL_REQUEST_ACTIONS = REVIEW_ACTIONS | {"synchronize", "closed"}
_SHA = re.compile(r"[0-9a-fA-F]{40}(?:[0-9a-fA-F]{24})?")
_PULL_HTML = re.compile(r"/pull/(\d+)(?:[#?/]|$)")
_ISSUE_HTML = re.compile(r"/issues/(\d+)(?:[#?/]|$)")
_PULLS_API = re.compile(r"/pulls/(\d+)$")
_ECHO_LIMIT = 64  # an event or action name echoed into a reason is cut to this


def classify_event(event: str, payload: object, ctx: TriggerContext) -> Decision:
    """Decide what a webhook delivery asks for. Never raises for any payload.

    ``event`` is the ``X-GitHub-Event`` header; ``payload`` the parsed body. A payload
    missing what the rules need is ``Ignore("malformed_payload", detail)``.
    """
    if not isinstance(payload, Mapping):
        return Ignore("malformed_payload", "the payload is not a JSON object")
    try:
        if event == "pull_request":
            return _pull_request_event(payload, ctx)
        if event == "issue_comment":
            return _issue_comment_event(payload, ctx)
        if event == "pull_request_review_comment":
            return _review_comment_event(payload, ctx)
    except PayloadError as exc:
        return Ignore("malformed_payload", str(exc))
    return Ignore(f"event:{_echo(event)}")


def classify_pull_request(
    pr: Mapping[str, Any],
    repo: str,
    ctx: TriggerContext,
    *,
    pushed: bool = False,
) -> Decision:
    """Decide whether pull request ``pr`` (a webhook or REST object) is auto-reviewed now.

    A closed pull request is a ``Close``. Otherwise it is a ``pr_opened`` job for its
    current head unless ``auto_review`` is off, ``pushed`` and ``on_push`` is off, it is
    a draft (and drafts are not reviewed), its author is a bot, or its author may not
    trigger (the same allowlist as a mention: ``allowed_associations`` or
    ``allowed_users``). The switches are the repository's (``TriggerContext.triggers_for``).
    Raises ``PayloadError`` for a malformed ``pr``.
    """
    f.repo_name(repo, "repo")
    number = f.positive_int(pr, "number", "pull_request")
    if f.optional_string(pr, "state", "pull_request") == "closed":
        # REST list objects carry merged_at but not merged; webhooks carry both.
        merged = f.flag(pr, "merged", "pull_request") or pr.get("merged_at") is not None
        return Close(repo=repo, pr_number=number, merged=merged)
    config = ctx.config
    switches = ctx.triggers_for(repo)
    if not switches.auto_review:
        return Ignore("auto_review_off")
    if pushed and not switches.on_push:
        return Ignore("on_push_off")
    if f.flag(pr, "draft", "pull_request") and not switches.drafts:
        return Ignore("draft")
    user = f.mapping(pr, "user", "pull_request")
    if is_bot(user):
        return Ignore("bot_author", login_of(user))
    # A stranger's pull request on a public repository must not spend the team's budget
    # unasked: automatic review follows the same allowlist as a mention. Anyone allowed
    # can still ask for a review of it with the trigger phrase.
    if not is_allowed_author(user, pr.get("author_association"), config):
        return Ignore("author_not_allowed", login_of(user))
    head_sha = _sha(f.string(f.mapping(pr, "head", "pull_request"), "sha", "pull_request.head"))
    actor_id = f.positive_int(user, "id", "pull_request.user")
    return Enqueue(Job(kind="pr_opened", repo=repo, pr_number=number, actor_id=actor_id,
                       head_sha=head_sha))


def classify_comment(
    comment: Mapping[str, Any],
    source: CommentSource,
    repo: str,
    pr_number: int | None,
    ctx: TriggerContext,
    *,
    edited: bool = False,
    pr_author: str | None = None,
) -> Decision:
    """Decide whether ``comment`` (a webhook or REST object) asks the agent for work, or
    declines one of its findings.

    ``source`` is ``"issue"`` for a conversation comment, ``"review"`` for a diff comment;
    ``pr_number`` is ``None`` for a comment on a plain issue (``pull_request_number``
    derives it from a REST object). ``pr_author`` is the pull request author's login when
    the caller knows it (a webhook payload carries it; a REST listing does not): a reply
    declining a finding counts from the author or from anyone allowed to ask. Raises
    ``PayloadError`` for a malformed ``comment``.
    """
    if source not in ("issue", "review"):
        raise ValueError(f"comment source must be 'issue' or 'review', got {source!r}")
    f.repo_name(repo, "repo")
    if edited:
        return Ignore("comment_edited")
    if pr_number is None:
        return Ignore("not_a_pull_request")
    if isinstance(pr_number, bool) or not isinstance(pr_number, int) or pr_number <= 0:
        raise PayloadError(f"pr_number: expected a positive integer, got {pr_number!r}")
    comment_id = f.positive_int(comment, "id", "comment")
    if ctx.is_agent_comment(comment_id):
        return Ignore("own_comment", str(comment_id))
    user = f.optional_mapping(comment, "user", "comment")
    app = f.optional_mapping(comment, "performed_via_github_app", "comment")
    if is_own_app(user, app, ctx):
        return Ignore("own_app", str(comment_id))
    if is_bot(user):
        return Ignore("bot_author", login_of(user))
    body = f.optional_string(comment, "body", "comment")
    mention = find_mention(body, ctx.config.mention)
    # A reply's thread is named by its root (GitHub points every reply at it). In one of
    # the App's own threads a decline stays a decline even when it names the App, and is
    # never also answered; any other use of the phrase there is a question about the
    # finding, unless it names a command.
    in_thread = (f.positive_int(comment, "in_reply_to_id", "comment")
                 if source == "review" and comment.get("in_reply_to_id") is not None
                 else None)
    ours = in_thread is not None and ctx.is_agent_comment(in_thread)
    if in_thread is not None and (mention is None or ours) and ctx.declines(body):
        return _decline(comment, repo, pr_number, in_thread, ctx, pr_author=pr_author)
    if mention is None:
        return Ignore("no_mention")
    association = comment.get("author_association")
    if user is None or not is_allowed_author(user, association, ctx.config):
        who = login_of(user) or "an unknown author"
        return Ignore("author_not_allowed", f"{who} ({association})")
    actor_id = f.positive_int(user, "id", "comment.user")
    command = "ask" if ours and not mention.explicit else mention.command
    return Enqueue(Job(kind="mention", repo=repo, pr_number=pr_number, actor_id=actor_id,
                       comment_id=comment_id, comment_source=source, command=command))


def _decline(comment: Mapping[str, Any], repo: str, pr_number: int, reply_to: int,
             ctx: TriggerContext, *, pr_author: str | None) -> Decision:
    """A reply on a review thread that starts with a decline phrase: a decline, when its
    author may decline.

    Whether the thread is one of the App's findings is the store's to say (the caller
    marks only an open finding whose comment is ``reply_to``), so the rule stays pure.
    """
    user = f.optional_mapping(comment, "user", "comment")
    login = login_of(user)
    is_author = bool(login) and pr_author is not None and login.lower() == pr_author.lower()
    if user is None or not (is_author or is_allowed_author(
            user, comment.get("author_association"), ctx.config)):
        who = login or "an unknown author"
        return Ignore("decliner_not_allowed", f"{who} ({comment.get('author_association')})")
    return Decline(repo=repo, pr_number=pr_number, reply_to=reply_to, by=login)


def pull_request_number(comment: Mapping[str, Any], source: CommentSource) -> int | None:
    """The pull request a REST comment belongs to, or ``None`` for a plain issue.

    A review comment names it in ``pull_request_url``. A conversation comment's
    ``issue_url`` cannot tell a pull request from an issue, but its ``html_url`` can:
    GitHub links it under ``/pull/{n}`` for a pull request and ``/issues/{n}`` otherwise.
    """
    if source == "review":
        url = f.string(comment, "pull_request_url", "comment")
        match = _PULLS_API.search(url)
        if match is None:
            raise PayloadError("comment.pull_request_url: expected a URL ending /pulls/{n}")
        return int(match.group(1))
    if source != "issue":
        raise ValueError(f"comment source must be 'issue' or 'review', got {source!r}")
    html = f.string(comment, "html_url", "comment")
    pull = _PULL_HTML.search(html)
    if pull is not None:
        return int(pull.group(1))
    if _ISSUE_HTML.search(html) is not None:
        return None
    raise PayloadError("comment.html_url: expected a URL under /pull/{n} or /issues/{n}")


def _pull_request_event(payload: Mapping[str, Any], ctx: TriggerContext) -> Decision:
    action = _action(payload)
    if action not in _PULL_REQUEST_ACTIONS:
        return Ignore(f"action:{_echo(action)}")
    repo = _repository(payload)
    pr = f.mapping(payload, "pull_request", "payload")
    if action == "closed":
        number = f.positive_int(pr, "number", "pull_request")
        return Close(repo=repo, pr_number=number, merged=f.flag(pr, "merged", "pull_request"))
    return classify_pull_request(pr, repo, ctx, pushed=action == "synchronize")


def _issue_comment_event(payload: Mapping[str, Any], ctx: TriggerContext) -> Decision:
    action = _action(payload)
    early = _comment_action(action)
    if early is not None:
        return early
    repo = _repository(payload)
    issue = f.mapping(payload, "issue", "payload")
    comment = f.mapping(payload, "comment", "payload")
    # issue.pull_request is present (an object) exactly when the issue is a pull request.
    on_pull = issue.get("pull_request") is not None
    pr_number = f.positive_int(issue, "number", "issue") if on_pull else None
    return _check_sender(payload, classify_comment(comment, "issue", repo, pr_number, ctx), ctx)


def _review_comment_event(payload: Mapping[str, Any], ctx: TriggerContext) -> Decision:
    action = _action(payload)
    early = _comment_action(action)
    if early is not None:
        return early
    repo = _repository(payload)
    pr = f.mapping(payload, "pull_request", "payload")
    comment = f.mapping(payload, "comment", "payload")
    pr_number = f.positive_int(pr, "number", "pull_request")
    author = login_of(f.optional_mapping(pr, "user", "pull_request")) or None
    decision = classify_comment(comment, "review", repo, pr_number, ctx, pr_author=author)
    return _check_sender(payload, decision, ctx)


def _comment_action(action: str) -> Ignore | None:
    """Only ``created`` can trigger: an edit or deletion never does, whatever the text."""
    if action == "created":
        return None
    if action == "edited":
        return Ignore("comment_edited")
    if action == "deleted":
        return Ignore("comment_deleted")
    return Ignore(f"action:{_echo(action)}")


def _check_sender(payload: Mapping[str, Any], decision: Decision, ctx: TriggerContext) -> Decision:
    """A second look at who caused the delivery, per GitHub's advice on self-triggering.

    For ``created`` the sender is the comment's author, so this only ever confirms what
    ``classify_comment`` decided; it exists so that a payload whose comment and sender
    disagree errs towards not triggering.
    """
    if not isinstance(decision, Enqueue | Decline):
        return decision
    sender = f.optional_mapping(payload, "sender", "payload")
    if is_own_app(sender, None, ctx):
        return Ignore("own_app", "sender")
    if is_bot(sender):
        return Ignore("bot_author", login_of(sender))
    return decision


def _action(payload: Mapping[str, Any]) -> str:
    return f.string(payload, "action", "payload")


def _repository(payload: Mapping[str, Any]) -> str:
    repository = f.mapping(payload, "repository", "payload")
    return f.repo_name(repository.get("full_name"), "repository.full_name")


def _sha(value: str) -> str:
    if _SHA.fullmatch(value) is None:
        raise PayloadError("pull_request.head.sha: expected a 40- or 64-digit hex commit sha")
    return value.lower()


def _echo(name: object) -> str:
    """An event or action name as it may appear in a reason: short and printable."""
    text = name if isinstance(name, str) else type(name).__name__
    return "".join(c if c.isprintable() else "?" for c in text[:_ECHO_LIMIT])

