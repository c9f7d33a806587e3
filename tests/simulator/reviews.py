"""Validating a review's inline comments the way GitHub does: all or nothing.

Every comment is resolved against the diff of the review's ``commit_id``. One comment
that cannot be resolved fails the whole ``POST /pulls/{n}/reviews`` with 422
``{"message": "Unprocessable Entity", "errors": [...]}``, and, like GitHub, the errors
do not say which comment was at fault.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .diffs import FileDiff, Side
from .models import Revision
from .rest import ApiError, unprocessable

REVIEW_DOCS = "https://docs.github.com/rest/pulls/reviews#create-a-review-for-a-pull-request"
PATH_UNRESOLVED = "Path could not be resolved"
LINE_UNRESOLVED = "Line could not be resolved"
START_SAME_HUNK = "Pull request review thread start line must be part of the same hunk as the line."
START_PRECEDES = "Pull request review thread start line must precede the end line."
ONE_PENDING = "User can only have one pending review per pull request"


@dataclass(frozen=True)
class PreparedComment:
    path: str
    body: str
    line: int
    side: Side
    start_line: int | None
    start_side: Side | None
    position: int | None
    diff_hunk: str


def _invalid_request(detail: str) -> ApiError:
    return ApiError(422, f"Invalid request.\n\n{detail}", documentation_url=REVIEW_DOCS)


def _side(value: Any, default: Side) -> Side:
    if value is None:
        return default
    if value == "LEFT":
        return "LEFT"
    if value == "RIGHT":
        return "RIGHT"
    raise _invalid_request(f'"{value}" is not a valid side.')


def _positive_int(value: Any, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise _invalid_request(f'"{name}" must be a positive integer.')
    return value


def _resolve(raw: dict[str, Any], files: dict[str, FileDiff]) -> PreparedComment | str:
    """The comment resolved against the diff, or the error message GitHub would give."""
    path, body = raw["path"], raw["body"]
    diff = files.get(path)
    if diff is None:
        return PATH_UNRESOLVED
    position: int | None = None
    if raw.get("line") is None and raw.get("position") is not None:
        position = _positive_int(raw["position"], "position")
        target = diff.position_target(position)
        if target is None:
            return LINE_UNRESOLVED
        side, line = target
    else:
        line = _positive_int(raw.get("line"), "line")
        side = _side(raw.get("side"), "RIGHT")
    hunk = diff.hunk_at(side, line)
    if hunk is None:
        return LINE_UNRESOLVED
    if position is None:  # GitHub computes the legacy position of a line comment too
        position = diff.position_of(side, line)
    start_line: int | None = None
    start_side: Side | None = None
    if raw.get("start_line") is not None:
        start_line = _positive_int(raw["start_line"], "start_line")
        start_side = _side(raw.get("start_side"), side)
        if start_side == side and start_line >= line:
            return START_PRECEDES
        if not hunk.shows(start_side, start_line):
            return START_SAME_HUNK
    return PreparedComment(path=path, body=body, line=line, side=side, start_line=start_line,
                           start_side=start_side, position=position,
                           diff_hunk=hunk.text_through(side, line))


def prepare_comments(revision: Revision, comments: Any) -> list[PreparedComment]:
    """Resolve every comment or raise the single 422 that fails the whole review."""
    if comments is None:
        return []
    if not isinstance(comments, list):
        raise _invalid_request('For \'properties/comments\', it is not an array.')
    files = {f.path: f for f in revision.files}
    prepared: list[PreparedComment] = []
    errors: list[str] = []
    for raw in comments:
        if not isinstance(raw, dict):
            raise _invalid_request("Each comment must be an object.")
        for name in ("path", "body"):
            if not isinstance(raw.get(name), str):
                raise _invalid_request(f'"{name}" wasn\'t supplied.')
        result = _resolve(raw, files)
        if isinstance(result, str):
            if result not in errors:
                errors.append(result)
        else:
            prepared.append(result)
    if errors:
        raise unprocessable(*errors, documentation_url=REVIEW_DOCS)
    return prepared
