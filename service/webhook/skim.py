"""A webhook payload decoded to the fields the App reads; the rest skipped, never built.

A ``pull_request`` delivery is about 25 KB of JSON, most of it the URLs of the head and
base repositories, and the trigger rules read some twenty fields of it. Parsing it whole
builds four to five hundred Python objects per delivery: the largest single cost of ingest
(docs/PERFORMANCE.md). ``skim`` decodes it with msgspec into a schema of ``FIELDS`` alone;
msgspec checks that the skipped parts are well-formed JSON as it steps over them, but builds
nothing for them.

The result is the payload *pruned*: the dict a full parse gives with every key not in
``FIELDS`` removed, so the rules cannot tell the two apart. Whatever the skim cannot read
exactly that way -- not JSON, not UTF-8, not an object, an object where a scalar was
expected or the other way round, a lone surrogate -- it leaves to the full parse
(``parse_body``), which decides as before and with the same messages; a well-formed
delivery from GitHub never goes there. One difference remains and changes no outcome: an
integer outside 64 bits in a read field stays an integer here where orjson would read a
float; the rules and the store refuse either as an id (``malformed_payload``).

``FIELDS`` must name every field ``classify_event`` (``service.triggers``) and ``Delivery``
(``service.webhook.deliveries``) read. tests/test_webhook_skim.py runs both over many payloads
with every read recorded, and fails on any read outside ``FIELDS``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

import msgspec

from service.github.webhooks import media_type

__all__ = ["FIELDS", "WHOLE_EVENTS", "skim", "skim_body", "tree"]

#: Dotted paths into a payload; a path ending at a field that holds an object keeps that
#: object whole (``issue.pull_request``: only its presence is read).
FIELDS: Final = (
    "action",
    "number",
    "installation.id",
    "repository.full_name",
    "sender.login", "sender.type", "sender.id",
    "pull_request.number", "pull_request.state", "pull_request.merged",
    "pull_request.merged_at", "pull_request.draft", "pull_request.author_association",
    "pull_request.head.sha",
    "pull_request.user.login", "pull_request.user.type", "pull_request.user.id",
    "issue.number", "issue.pull_request",
    "comment.id", "comment.body", "comment.in_reply_to_id", "comment.author_association",
    "comment.user.login", "comment.user.type", "comment.user.id",
    "comment.performed_via_github_app.id",
)

#: Events read whole: the installation events' repository lists are their point, and
#: they are rare.
WHOLE_EVENTS: Final = frozenset({"installation", "installation_repositories"})

_Tree = dict[str, "_Tree | None"]  # None: a field kept whole


def tree(paths: Iterable[str]) -> _Tree:
    """``FIELDS`` as nested dicts: ``{"pull_request": {"head": {"sha": None}, ...}, ...}``."""
    root: _Tree = {}
    for path in paths:
        *parents, leaf = path.split(".")
        node: _Tree | None = root
        for key in parents:
            if node is None:
                break  # under a field kept whole: already all of it
            child = node.setdefault(key, {})
            node = child
        if node is not None:
            node[leaf] = None
    return root


def _struct(name: str, node: _Tree) -> Any:
    """A msgspec Struct type for ``node``: each field absent (``UNSET``) unless sent.

    A nested object may also be null (a deleted account's ``user``); anything else there
    fails validation, and the delivery goes to the full parse.
    """
    fields: list[tuple[str, Any, Any]] = []
    for key, child in node.items():
        kind: Any = Any if child is None else (
            _struct(f"{name}_{key}", child) | None | msgspec.UnsetType)
        fields.append((key, kind, msgspec.UNSET))
    return msgspec.defstruct(name, fields)


_DECODER: Final = msgspec.json.Decoder(_struct("Payload", tree(FIELDS)))


def skim(body: bytes) -> dict[str, Any] | None:
    """The payload in ``body`` pruned to ``FIELDS``, or None: then parse it whole."""
    if not body.isascii():
        # msgspec checks the UTF-8 of the strings it decodes, not of those it skips; a body
        # that is not UTF-8 throughout is the full parse's to refuse.
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            return None
    try:
        payload = msgspec.to_builtins(_DECODER.decode(body))
    except msgspec.MsgspecError:
        return None
    return payload if isinstance(payload, dict) else None


def skim_body(event: str, body: bytes, content_type: str | None) -> dict[str, Any] | None:
    """``skim`` for a delivery the rules read in part: a JSON body of a trigger event."""
    if event in WHOLE_EVENTS or media_type(content_type) not in (None, "application/json"):
        return None
    return skim(body)
