"""The ``repository_files`` table: each repository config file as last read from GitHub.

One row per file URL (a repository's ``.github/pr-review-agent.yml``, and the one in its
organisation's ``.github`` repository): whether GitHub had it, its bytes, the ETag they
came with and when they were read. A conditional read answered 304 is served from here,
so an unchanged file costs nothing against the rate limit; the trigger rules of both
ingest paths read the automatic-review keys from here without asking GitHub
(``service.review.repository_config``). Nothing here is a secret or review content: the files
are the repository's own, readable by anyone who can read the repository.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from service.storage.database import Transaction
from service.storage.times import from_db_time, to_db_time

__all__ = ["StoredFile", "get", "put"]

_GET = ("SELECT url, repo, found, etag, content, problem, read_at FROM repository_files"
        " WHERE url = ?")
_PUT = """
INSERT INTO repository_files (url, repo, found, etag, content, problem, read_at)
VALUES (:url, :repo, :found, :etag, :content, :problem, :read_at)
ON CONFLICT (url) DO UPDATE SET repo = excluded.repo, found = excluded.found,
  etag = excluded.etag, content = excluded.content, problem = excluded.problem,
  read_at = excluded.read_at
"""


@dataclass(frozen=True)
class StoredFile:
    """One file as last read: ``found`` False for a 404 (no such file); ``problem`` says
    why GitHub's answer could not be used as a file (a directory, too large to serve)."""

    url: str
    repo: str
    found: bool
    content: bytes | None
    etag: str | None
    read_at: datetime
    problem: str | None = None


def get(tx: Transaction, url: str) -> StoredFile | None:
    """The last read of ``url``, or None if it was never read."""
    row = tx.execute(_GET, (url,)).fetchone()
    if row is None:
        return None
    content = row[4]
    return StoredFile(url=row[0], repo=row[1], found=bool(row[2]),
                      content=None if content is None else bytes(content), etag=row[3],
                      problem=row[5], read_at=from_db_time(row[6]))


def put(tx: Transaction, file: StoredFile) -> None:
    """Record a read of ``file.url`` (replacing the previous one)."""
    tx.execute(_PUT, {"url": file.url, "repo": file.repo, "found": int(file.found),
                      "etag": file.etag, "content": file.content, "problem": file.problem,
                      "read_at": to_db_time(file.read_at)})
