"""``repository_files``: each read of a repository's config file, with its validator."""

from __future__ import annotations

from datetime import timedelta

from service.storage import repository_files
from service.storage.database import Database
from service.storage.repository_files import StoredFile
from tests.queue_helpers import T0

URL = "/repos/o/r/contents/.github/pr-review-agent.yml"


def test_a_read_is_kept_and_replaced_bytes_and_all(database: Database) -> None:
    with database.read() as tx:
        assert repository_files.get(tx, URL) is None
    found = StoredFile(URL, "o/r", True, b"review:\n  max_findings: 3\n\xe2\x9c\x93", '"e1"', T0)
    with database.transaction() as tx:
        repository_files.put(tx, found)
    with database.read() as tx:
        assert repository_files.get(tx, URL) == found
    gone = StoredFile(URL, "o/r", False, None, None, T0 + timedelta(hours=1),
                      problem="a directory")
    with database.transaction() as tx:
        repository_files.put(tx, gone)
    with database.read() as tx:
        assert repository_files.get(tx, URL) == gone
