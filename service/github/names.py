"""GitHub's names, checked before they become a path, a refspec or a URL.

A repository name becomes a directory, a commit sha and a branch a git argument: each is
held to what GitHub itself allows, so that nothing from a payload can name something else.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["validate_branch", "validate_repo", "validate_sha"]

_REPO_RE: Final = re.compile(r"([A-Za-z0-9][A-Za-z0-9-]{0,38})/([A-Za-z0-9._-]{1,100})")
_SHA_RE: Final = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_BRANCH_RE: Final = re.compile(r"[A-Za-z0-9._/-]+")


def validate_repo(repo: str) -> tuple[str, str]:
    """``owner/name`` split in two, or ValueError: the name becomes a directory."""
    match = _REPO_RE.fullmatch(repo)
    if match is None or match.group(2) in (".", ".."):
        raise ValueError(f"not a repository name: {repo!r}")
    return match.group(1), match.group(2)


def validate_sha(sha: str) -> str:
    if not _SHA_RE.fullmatch(sha):
        raise ValueError(f"not a full commit sha: {sha!r}")
    return sha


def validate_branch(ref: str) -> str:
    """A branch name safe to put in a refspec (no ``:``, spaces, ``..`` or leading ``-``)."""
    if (not _BRANCH_RE.fullmatch(ref) or ".." in ref or ref.startswith(("-", "/"))
            or ref.endswith(("/", ".lock"))):
        raise ValueError(f"not a usable branch name: {ref!r}")
    return ref
