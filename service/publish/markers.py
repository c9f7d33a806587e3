"""The hidden markers every post of the App carries, and finding them again.

A marker is an HTML comment, which GitHub renders as nothing:

- ``<!-- pr-review-agent:{dedupe_key} -->`` is in every review and comment a run
  publishes. Before posting, the publisher lists the pull request's reviews and comments
  and looks for it: a crash between GitHub accepting a post and the store recording it
  then costs nothing, because the retry finds the post and records it instead of posting
  a second one.
- ``<!-- pr-review-agent:notice:{dedupe_key} -->`` is in the one notice a trigger may get.
- ``<!-- pr-review-agent:outdated -->`` beside the run marker says the post describes a
  head that has since moved (the run's outcome is ``superseded``).
- ``<!-- pr-review-agent:description:start -->`` / ``…:end -->`` are the lines that fence
  a description written into the pull request body; the author's text outside them is
  kept as it is.

Only posts whose author is a Bot count as found (``is_own``): a person who pastes a marker
into their own comment cannot stop a review from being posted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

PREFIX: Final = "pr-review-agent"
DESCRIPTION_START: Final = f"<!-- {PREFIX}:description:start -->"
DESCRIPTION_END: Final = f"<!-- {PREFIX}:description:end -->"
OUTDATED: Final = f"<!-- {PREFIX}:outdated -->"

# A key goes inside an HTML comment: nothing that could end it early or span lines.
_KEY = re.compile(r"[A-Za-z0-9_./:\-]+")


def _check_key(dedupe_key: str) -> str:
    if not _KEY.fullmatch(dedupe_key) or "--" in dedupe_key:
        raise ValueError(f"dedupe key {dedupe_key!r} cannot be put in a marker")
    return dedupe_key


def run_marker(dedupe_key: str) -> str:
    """The marker of a run's publication: ``<!-- pr-review-agent:{dedupe_key} -->``."""
    return f"<!-- {PREFIX}:{_check_key(dedupe_key)} -->"


def notice_marker(dedupe_key: str) -> str:
    """The marker of a trigger's one notice."""
    return f"<!-- {PREFIX}:notice:{_check_key(dedupe_key)} -->"


def has_marker(text: str | None, marker: str) -> bool:
    """True when ``marker`` is in ``text`` as a whole line of its own."""
    if not text:
        return False
    return any(line.strip() == marker for line in text.splitlines())


def is_own(item: Mapping[str, Any], bot_login: str | None = None) -> bool:
    """True when a review or comment (GitHub's JSON) was written by a Bot — and, when the
    App's ``{slug}[bot]`` login is known, by that one."""
    user = item.get("user")
    if not isinstance(user, Mapping) or user.get("type") != "Bot":
        return False
    return bot_login is None or user.get("login") == bot_login


def find_marked(items: list[Mapping[str, Any]], marker: str,
                bot_login: str | None = None) -> Mapping[str, Any] | None:
    """The first of ``items`` (reviews or comments) that is the App's and carries
    ``marker``; PENDING reviews do not count (nobody else can see them)."""
    for item in items:
        if item.get("state") == "PENDING":
            continue
        body = item.get("body")
        if is_own(item, bot_login) and isinstance(body, str) and has_marker(body, marker):
            return item
    return None


def split_description_block(body: str) -> tuple[str, str | None, str]:
    """``(before, block, after)``: the author's text around the App's description block.

    ``block`` is None when the body holds no complete block (a start line followed by an
    end line); then ``before`` is the whole body.
    """
    lines = body.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.strip() == DESCRIPTION_START), None)
    if start is not None:
        end = next((i for i in range(start + 1, len(lines))
                    if lines[i].strip() == DESCRIPTION_END), None)
        if end is not None:
            return ("".join(lines[:start]), "".join(lines[start:end + 1]),
                    "".join(lines[end + 1:]))
    return body, None, ""


def with_description_block(body: str | None, block_content: str) -> str:
    """The pull request body with the App's block replaced (or appended), fenced by the
    start and end lines. The author's text before and after it is kept as written; at
    most a blank line is added to separate it from the block."""
    before, _, after = split_description_block(body or "")
    block = f"{DESCRIPTION_START}\n{block_content.strip()}\n{DESCRIPTION_END}\n"
    if not before.strip() and not after.strip():
        return block
    if before and not before.endswith("\n"):
        before += "\n"
    if before and not before.endswith("\n\n"):
        before += "\n"
    return before + block + after
