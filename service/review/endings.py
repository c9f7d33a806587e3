"""The ways a job ends without an engine: declined by the repository's config,
superseded by a newer head, nothing left to review after exclusions, or nothing that fits
the model's window. Each settles the reservation at zero, and each says so on the pull
request (a check run, or a recorded run the publisher posts)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from service.config.repository.merge import Effective
from service.config.schema import Config
from service.github.pulls import PullRequest
from service.model.jobs import Job
from service.publish.checks import text
from service.publish.run import RecordedRun
from service.publish.run_content import AskAnswer, Coverage
from service.review.calls import CallPlan
from service.review.diff import Selection
from service.review.engine_call import Plan
from service.review.prepare import Known
from service.review.repository import declined_by
from service.review.settle import NOTHING_SPENT, Settlement
from service.storage.queue import Claim

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Endings:
    """What the job runner ends a job with when no engine runs."""

    settle: Settlement
    clock: Callable[[], datetime]
    config: Callable[[], Config]
    publish: Callable[[RecordedRun, dict[str, object]], Awaitable[None]]

    async def declined(self, claim: Claim, pull: PullRequest, known: Known,
                        repository: Effective, extra: dict[str, object]) -> bool:
        """A ``pr_opened`` the repository's config has turned off since the ingest decided
        (on an older read): settled at zero, its check run saying which key."""
        pushed = known.previous_head not in (None, pull.head_sha)
        key = declined_by(repository.settings, draft=pull.draft, pushed=pushed)
        if key is None:
            return False
        log.info("not reviewed: the repository's config sets %s", key, extra=extra)
        mention = self.config().triggers.mention
        await self.settle.settle_zero(
            claim, "refused", head_sha=pull.head_sha,
            check=lambda charged: text.with_config_notes(
                text.declined_by_repository(key, mention, charged), repository.notes))
        return True

    async def supersede(self, claim: Claim, pull: PullRequest, extra: dict[str, object]) -> None:
        """A ``pr_opened`` whose head moved: the reservation settles at zero as ``refused``
        (the worker declined stale work before any engine ran), no run is recorded, and —
        when automatic review would take it — the current head is queued, so a pull
        request pushed to before its first review still gets one."""
        follow_up = None
        if self.config().triggers.auto_review and not pull.draft:
            follow_up = Job(kind="pr_opened", repo=claim.job.repo,
                            pr_number=claim.job.pr_number, actor_id=pull.author_id,
                            head_sha=pull.head_sha)
        log.info("superseded: the head moved to %s", pull.head_sha,
                 extra={**extra, "requeued": follow_up is not None})
        await self.settle.settle_zero(claim, "refused", enqueue=follow_up,
                                       head_sha=claim.job.head_sha or pull.head_sha,
                                       check=partial(text.superseded, pull.head_sha))

    async def nothing_read(self, claim: Claim, plan: Plan, planned: CallPlan) -> None:
        """No file fits any call: a run that read nothing, settled at zero, each file
        named with why (never a review that looks clean)."""
        selection = plan.selection
        run = RecordedRun(
            claim=claim, head_sha=plan.pull.head_sha, base_sha=plan.pull.base_sha,
            reviewed_since=plan.since, stop_reason="refused",
            outcome="failed" if claim.job.command != "review" else "truncated",
            findings=(), assessment=None, description=None,
            omitted=(*selection.omitted, *planned.packing.omitted), usage=NOTHING_SPENT,
            recorded_at=self.clock(), detail="no file fits a call of the model's window",
            coverage=planned.packing.coverage(len(selection.omitted)),
            answer=None if plan.asked is None else AskAnswer(
                question=plan.asked.question.text, reply_to=plan.asked.reply_to))
        if await self.settle.commit(run, reviewed_lines=None,
                                     estimated_tokens=planned.estimate):
            await self.publish(run, plan.extra)

    async def nothing_to_review(self, claim: Claim, pull: PullRequest, since: str | None,
                                 selection: Selection, extra: dict[str, object]) -> None:
        """Every change was withheld (or there is none): a completed run with no findings,
        settled at zero, so the publisher can say what was left out."""
        run = RecordedRun(
            claim=claim, head_sha=pull.head_sha, base_sha=pull.base_sha, reviewed_since=since,
            outcome="completed", stop_reason="completed", findings=(), assessment=None,
            description=None, omitted=selection.omitted, usage=NOTHING_SPENT,
            recorded_at=self.clock(), detail="nothing left to review after layer 2",
            coverage=Coverage(files=len(selection.omitted), reviewed=0),
        )
        if await self.settle.commit(run, reviewed_lines=None):
            log.info("nothing to review after exclusions; recorded", extra=extra)
            await self.publish(run, extra)
