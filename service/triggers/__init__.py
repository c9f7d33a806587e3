"""Trigger rules: which GitHub events and REST objects become queue work.

Pure functions only (no I/O, no clock), shared by the webhook receiver and the poller
so that both produce the same ``Job`` and dedupe key for the same event. See
docs/TRIGGERS.md for the rules with examples.
"""

from service.github.payload import PayloadError

from .allow import is_allowed_author, is_bot, is_own_app
from .classify import (
    REVIEW_ACTIONS,
    classify_comment,
    classify_event,
    classify_pull_request,
    pull_request_number,
)
from .decisions import (
    REASONS,
    AgentComments,
    Close,
    Decision,
    Decline,
    Enqueue,
    Ignore,
    TriggerContext,
)
from .markdown import mask_non_prose
from .mention import NEUTRALISER, Mention, find_mention, neutralise, validate_phrase

__all__ = [
    "NEUTRALISER",
    "REASONS",
    "REVIEW_ACTIONS",
    "AgentComments",
    "Close",
    "Decision",
    "Decline",
    "Enqueue",
    "Ignore",
    "Mention",
    "PayloadError",
    "TriggerContext",
    "classify_comment",
    "classify_event",
    "classify_pull_request",
    "find_mention",
    "is_allowed_author",
    "is_bot",
    "is_own_app",
    "mask_non_prose",
    "neutralise",
    "pull_request_number",
    "validate_phrase",
]
