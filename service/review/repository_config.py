"""Where the files come from: GitHub's contents API, revalidated, and the store.

A repository's ``.github/pr-review-agent.yml`` is read from its default branch (the
contents API without ``ref``), never from a pull request's head, so a pull request cannot
change the rules it is reviewed by; its organisation's defaults from the same path in
``<owner>/.github``. Each read is a conditional GET: GitHub answers 304 for an unchanged
file (free against the rate limit) and the bytes are taken from ``repository_files``. A
404 records that there is no file. Any other failure (5xx, a 403, a timeout) keeps the
last read when there is one — the rules do not flap during an outage — and otherwise
applies nothing of that file and says so.

``RepositoryConfigs.fresh`` is what a review uses (it always revalidates);
``RepositoryConfigs.stored`` reads the last reads without asking GitHub (the trigger rules
of both ingest paths, and the publisher); ``refresh_if_stale`` is the poller's, so an
automatic-review switch committed to a repository is seen within ``refresh_minutes``.
"""

from __future__ import annotations

import base64
import binascii
import functools
import logging
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, Final

import httpx

from service.config.repository.keys import FILE_PATH, MAX_FILE_BYTES
from service.config.repository.merge import (
    Effective,
    RepoTriggers,
    Source,
    merge,
    org_label,
    triggers,
)
from service.config.repository.parse import parse_repository_file
from service.config.schema import RepositoryConfigConfig, TriggersConfig
from service.github.client import GitHubClient
from service.github.conditional import ConditionalResult
from service.github.errors import GitHubError, NotFound
from service.storage import repository_files as files
from service.storage.database import Database, Transaction
from service.storage.repository_files import StoredFile

__all__ = ["RepositoryConfigs", "org_url", "repo_url"]

log = logging.getLogger(__name__)

#: The organisation's defaults live in this repository of the owner's.
ORG_REPOSITORY: Final = ".github"


def repo_url(repo: str) -> str:
    """The contents API path of ``repo``'s file (its default branch: no ``ref``)."""
    return f"/repos/{repo}/contents/{FILE_PATH}"


def org_url(repo: str) -> str:
    """The contents API path of the organisation's file for ``repo``."""
    owner = repo.split("/", 1)[0]
    return f"/repos/{owner}/{ORG_REPOSITORY}/contents/{FILE_PATH}"


@functools.lru_cache(maxsize=1024)
def _parsed(content: bytes) -> Any:
    return parse_repository_file(content)


def _source(label: str, stored: StoredFile | None) -> Source | None:
    if stored is None or (not stored.found and stored.problem is None):
        return None
    if stored.problem is not None:
        return Source(label, unreadable=stored.problem)
    return Source(label, parsed=_parsed(stored.content or b""))


def _decode(data: object) -> tuple[bytes | None, str | None]:
    """A contents API answer as the file's bytes, or why it is not a usable file."""
    if isinstance(data, list):
        return None, f"{FILE_PATH} is a directory, not a file"
    if not isinstance(data, dict) or data.get("type") != "file":
        return None, f"{FILE_PATH} is not a regular file"
    size = data.get("size")
    if isinstance(size, int) and size > MAX_FILE_BYTES:
        return None, (f"the file is {size:,} bytes, more than the {MAX_FILE_BYTES:,} a "
                      "repository config may have").replace(",", " ")
    if data.get("encoding") != "base64" or not isinstance(data.get("content"), str):
        return None, "GitHub did not send the file's content"
    try:
        return base64.b64decode(data["content"], validate=False), None
    except (binascii.Error, ValueError):
        return None, "GitHub sent content that is not base64"


class RepositoryConfigs:
    """Reads, stores and merges the config files of the App's repositories."""

    def __init__(self, *, store: Database, github: GitHubClient | None,
                 clock: Callable[[], datetime],
                 config: Callable[[], RepositoryConfigConfig] = RepositoryConfigConfig,
                 triggers: Callable[[], TriggersConfig] = TriggersConfig) -> None:
        """``config`` and ``triggers`` are read at each use (a SIGHUP replaces them)."""
        self._store = store
        self._github = github
        self._config = config
        self._triggers = triggers
        self._clock = clock

    def _allow(self) -> frozenset[str]:
        return frozenset(self._config().allow)

    # -- without GitHub ---------------------------------------------------------------------

    def stored(self, repo: str) -> Effective:
        """The settings the last reads give (no GitHub request). Inside a ``transaction()``
        on the same thread, the read joins it."""
        allow = self._allow()
        if not allow:
            return Effective()
        with self._store.read() as tx:
            org, own = files.get(tx, org_url(repo)), files.get(tx, repo_url(repo))
        return merge(_source(org_label(repo.split("/", 1)[0]), org),
                     _source(FILE_PATH, own), allow)

    def triggers(self, repo: str) -> RepoTriggers:
        """The automatic-review switches for ``repo`` from the last reads: what the trigger
        rules consult (``TriggerContext.repo_triggers``)."""
        return triggers(self._triggers(), self.stored(repo).settings)

    # -- from GitHub ------------------------------------------------------------------------

    async def fresh(self, installation_id: int, repo: str) -> Effective:
        """Revalidate both files with GitHub, then merge (what a review runs with)."""
        if not self._allow():
            return Effective()
        await self._read(installation_id, repo, org_url(repo))
        await self._read(installation_id, repo, repo_url(repo))
        return await self._store.run(self.stored, repo)

    async def for_review(self, installation_id: int, repo: str,
                         extra: Mapping[str, object]) -> Effective:
        """The repository's own config, read afresh for a review (never from the pull
        request's head); when GitHub cannot be read, the last read (or none) applies: a
        config is never a reason to fail a review."""
        try:
            found = await self.fresh(installation_id, repo)
        except Exception:
            log.exception("reading the repository's config failed; using the last read",
                          extra=dict(extra))
            found = await self._store.run(self.stored, repo)
        if found.notes:
            log.warning("the repository's config has problems; reviewing with the defaults "
                        "for what it could not set", extra={**extra, "problems": found.notes})
        return found

    async def refresh_if_stale(self, installation_id: int, repo: str, now: datetime) -> None:
        """Revalidate ``repo``'s files when the last read is older than
        ``repository_config.refresh_minutes`` (the poller calls this each cycle)."""
        config = self._config()
        if not config.allow:
            return
        age = timedelta(minutes=config.refresh_minutes)

        def last_reads(tx: Transaction) -> list[StoredFile | None]:
            return [files.get(tx, org_url(repo)), files.get(tx, repo_url(repo))]

        reads = await self._store.read_async(last_reads)
        if all(r is not None and now - r.read_at < age for r in reads):
            return
        await self.fresh(installation_id, repo)

    async def _read(self, installation_id: int, repo: str, url: str) -> None:
        if self._github is None:
            return
        prior = await self._store.read_async(files.get, url)
        extra = {"repo": repo, "path": url}
        etag: str | None = None
        try:
            if not self._github.conditional:  # a client without validators: a plain GET
                result = ConditionalResult(status=200, not_modified=False,
                                           data=await self._github.get_json(installation_id,
                                                                            url))
            else:
                result = await self._github.get_conditional(installation_id, url)
            etag = result.etag
            if result.not_modified and (prior is None or prior.content is None):
                # Validators this process holds, bytes the store does not: read it whole.
                data: object = await self._github.get_json(installation_id, url)
            elif result.not_modified:
                assert prior is not None
                await self._store.write_async(files.put, StoredFile(
                    url=url, repo=repo, found=prior.found, content=prior.content,
                    etag=prior.etag, problem=prior.problem, read_at=self._clock()))
                return
            else:
                data = result.data
        except NotFound:
            await self._store.write_async(files.put, StoredFile(
                url=url, repo=repo, found=False, content=None, etag=None,
                read_at=self._clock()))
            return
        except (GitHubError, httpx.HTTPError, TimeoutError) as exc:
            if prior is None:
                await self._store.write_async(files.put, StoredFile(
                    url=url, repo=repo, found=False, content=None, etag=None,
                    problem=f"GitHub would not serve the file ({_why(exc)})",
                    read_at=self._clock()))
            log.warning("could not read a repository config file; %s",
                        "using the last read" if prior is not None else "applying none of it",
                        extra={**extra, "error": _why(exc)})
            return
        content, problem = _decode(data)
        await self._store.write_async(files.put, StoredFile(
            url=url, repo=repo, found=True, content=content, problem=problem,
            etag=etag, read_at=self._clock()))


def _why(exc: BaseException) -> str:
    if isinstance(exc, GitHubError):
        return f"{exc.status or ''} {exc.message}".strip()
    return type(exc).__name__
