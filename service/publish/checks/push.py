"""Telling GitHub what a check run should show: the push step of the check-run loop.

Every row whose state GitHub has not been told (``storage.checks.owed``) is pushed under a
lease renewed while the push runs, so two processes never push one row at once and a
push held up by pacing is not taken for a dead one. The lease hands back the row as it
stands: another process may have pushed it between the read and the lease. A row with no
check run yet is created (``POST /repos/{o}/{r}/check-runs``, ``external_id`` = the dedupe
key); once a create has been attempted (``create_started_at``), the check run is first
looked up by its ``external_id``, so a create whose answer was lost is never repeated.
Otherwise the run is updated (``PATCH .../check-runs/{id}``). Writes go through the
client's per-installation pacing.

An installation that answers 403 has not granted ``checks: write``: it is logged once,
shown on ``/healthz`` and left alone for ``FORBIDDEN_RETRY``. A 404 or 422 gives up on
that state (a later change is pushed afresh); anything transient ends the step for this
pass, the row left owed.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Final

import anyio
import httpx

from service.github.client import GitHubClient
from service.github.errors import Forbidden, GitHubError, NotFound, Unprocessable
from service.observe.health import Health
from service.runtime.alongside import alongside
from service.storage import checks
from service.storage.checks import CheckRow, CheckState, Target
from service.storage.database import Database

__all__ = ["FORBIDDEN_RETRY", "PUSH_LEASE", "STALE", "Pusher"]

log = logging.getLogger(__name__)

#: A push holds its row this long, renewed while it runs (a process killed mid-push
#: leaves the row to another within this long).
PUSH_LEASE: Final = timedelta(seconds=30)
#: Rows not pushed within this long after they last changed are left alone (an
#: installation that grants the permission a week later is not shown a week of history).
STALE: Final = timedelta(hours=24)
#: An installation that refused check runs is asked again after this long.
FORBIDDEN_RETRY: Final = timedelta(hours=1)
#: Rows pushed per pass at most.
BATCH: Final = 50


class _Later(Exception):
    """GitHub failed for now: stop pushing until the next pass."""


class Pusher:
    """Pushes owed check-run states to GitHub (the module docstring)."""

    def __init__(self, *, store: Database, github: GitHubClient,
                 installations: Callable[[str], Awaitable[int]],
                 clock: Callable[[], datetime], health: Health | None = None) -> None:
        self._store = store
        self._github = github
        self._installations = installations
        self._clock = clock
        self._health = health
        self._forbidden: dict[int, datetime] = {}  # installation -> when it refused

    async def push(self, now: datetime) -> int:
        """Push what is owed; how many check runs GitHub was told of. Repositories go side
        by side (each installation's writes are paced apart by the client, so one busy
        installation must not hold up the others); one repository's rows go in turn."""
        rows = await self._store.read_async(lambda tx: checks.owed(tx, since=now - STALE, now=now,
                                                             limit=BATCH))
        by_repo: dict[str, list[CheckRow]] = {}
        for row in rows:
            by_repo.setdefault(row.target.repo, []).append(row)
        pushed: list[int] = []
        async with anyio.create_task_group() as tasks:
            for group in by_repo.values():
                tasks.start_soon(self._push_all, group, now, pushed)
        return sum(pushed)

    async def _push_all(self, rows: list[CheckRow], now: datetime, pushed: list[int]) -> None:
        for row in rows:
            try:
                pushed.append(await self._push_one(row, now))
            except _Later:
                return  # GitHub is failing for now: the next pass tries again
            except Exception:
                log.exception("check run not pushed; the next pass tries again",
                              extra=self._extra(row))
                await self._store.write_async(checks.release, row.target, shield=True)

    async def _push_one(self, row: CheckRow, now: datetime) -> int:
        target, extra = row.target, self._extra(row)
        try:
            installation = await self._installations(target.repo)
        except (GitHubError, httpx.HTTPError) as exc:
            log.warning("check run not pushed: no installation found (%s)", exc, extra=extra)
            raise _Later from exc
        refused_at = self._forbidden.get(installation)
        if refused_at is not None and now - refused_at < FORBIDDEN_RETRY:
            return 0
        leased: CheckRow | None = await self._store.write_async(
            checks.lease, target, now, now + PUSH_LEASE, shield=True)
        if leased is None:
            return 0  # another process is pushing it
        if leased.version <= leased.shown_version:  # it pushed this very state meanwhile
            await self._store.write_async(checks.release, target, shield=True)
            return 0
        row = leased
        try:
            run_id = await self._holding(target, self._send(installation, row, now))
        except Forbidden as exc:
            await self._store.write_async(checks.release, target, shield=True)
            self._refused(installation, now, exc, extra)
            return 0
        except (NotFound, Unprocessable) as exc:
            # Not ours to retry: the repository or run is gone, or GitHub refused the
            # values. This version is given up on; a later change is pushed afresh.
            log.error("GitHub refused the check run (%s); this state is not retried", exc,
                      extra=extra)
            await self._store.write_async(checks.pushed, target, row.version, None, shield=True)
            return 0
        except (GitHubError, httpx.HTTPError) as exc:
            await self._store.write_async(checks.release, target, shield=True)
            log.warning("check run not pushed for now (%s); the next pass tries again", exc,
                        extra=extra)
            raise _Later from exc
        await self._store.write_async(checks.pushed, target, row.version, run_id, shield=True)
        if installation in self._forbidden:
            del self._forbidden[installation]
            if self._health is not None:
                self._health.check_runs_allowed(installation)
        log.info("check run %s: %s", row.state.status, row.state.title,
                 extra={**extra, "check_run_id": run_id})
        return 1

    async def _holding(self, target: Target, send: Awaitable[int]) -> int:
        """``await send`` while renewing the push lease every third of its length: a push
        held up by the client's pacing or retries is never taken for a dead one (which
        another process would then create again)."""
        async def renew(_: anyio.CancelScope) -> None:
            while True:
                await anyio.sleep(PUSH_LEASE.total_seconds() / 3)
                until = self._clock() + PUSH_LEASE
                await self._store.write_async(checks.renew, target, until, shield=True)

        _, run_id = await alongside(send, renew)
        assert run_id is not None  # nothing cancels the send's scope
        return run_id

    async def _send(self, installation: int, row: CheckRow, now: datetime) -> int:
        """Create or update the check run to show ``row.state``; its id."""
        target, state = row.target, row.state
        run_id = row.check_run_id
        if run_id is None and row.create_started_at is not None:
            run_id = await self._find(installation, row)
        if run_id is not None:
            await self._github.patch_json(
                installation, f"/repos/{target.repo}/check-runs/{run_id}",
                self._payload(state, now))
            return run_id
        await self._store.write_async(checks.creating, target, now, shield=True)
        data = await self._github.post_json(
            installation, f"/repos/{target.repo}/check-runs", {
                "name": target.name, "head_sha": target.head_sha,
                "external_id": target.dedupe_key, **self._payload(state, now)})
        created = data.get("id") if isinstance(data, dict) else None
        if not isinstance(created, int) or isinstance(created, bool):
            raise GitHubError("the created check run has no id", method="POST",
                              path=f"/repos/{target.repo}/check-runs")
        return created

    async def _find(self, installation: int, row: CheckRow) -> int | None:
        """The check run an earlier attempt created for ``row``, by its ``external_id``."""
        target = row.target
        async for run in self._github.paginate(
                installation, f"/repos/{target.repo}/commits/{target.head_sha}/check-runs",
                {"check_name": target.name, "filter": "all"}, items_key="check_runs"):
            if isinstance(run, dict) and run.get("external_id") == target.dedupe_key \
                    and isinstance(run.get("id"), int):
                log.info("found the check run an earlier attempt created; not creating "
                         "another", extra=self._extra(row))
                return int(run["id"])
        return None

    @staticmethod
    def _payload(state: CheckState, now: datetime) -> dict[str, object]:
        payload: dict[str, object] = {
            "status": state.status,
            "output": {"title": state.title, "summary": state.summary}}
        if state.conclusion is not None:
            payload["conclusion"] = state.conclusion
            payload["completed_at"] = now.isoformat().replace("+00:00", "Z")
        if state.details_url is not None:
            payload["details_url"] = state.details_url
        return payload

    def _refused(self, installation: int, now: datetime, exc: Forbidden,
                 extra: dict[str, object]) -> None:
        first = installation not in self._forbidden
        self._forbidden[installation] = now
        if first:
            log.warning("GitHub refused check runs on installation %d (%s): grant the App's "
                        "checks: write permission there; reviews still run and post",
                        installation, exc, extra={**extra, "installation_id": installation})
        if self._health is not None:
            self._health.check_runs_forbidden(installation, now, str(exc)[:200])

    @staticmethod
    def _extra(row: CheckRow) -> dict[str, object]:
        t = row.target
        return {"dedupe_key": t.dedupe_key, "repo": t.repo, "pr": t.pr_number,
                "head": t.head_sha}
