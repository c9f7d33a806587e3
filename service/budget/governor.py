"""The governor: the one way to a claim that can spend, and where a run is settled.

A claim that can spend goes through ``Governor.admit``, called by ``queue_lease.claim``
inside the claim's own ``BEGIN IMMEDIATE``. It reads everything that decides (the shared
policy, the breaker, the windows at their calibrated limits, the dollar window) in that
transaction, picks the rung, and either refuses (the row stays pending, no attempt spent)
or writes a ledger reservation of ``max_run_tokens`` (an answer's smaller share for a
question) that commits with the lease. An
unsettled reservation counts in full until it ages out of its windows: that fallback is
the whole concurrency guarantee, and why a crashed run is never granted an amnesty.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Final

from service.budget.breaker import BreakerState, read_breaker, record_trip, reset_breaker
from service.budget.dollars import MONTHLY
from service.budget.ladder import EXHAUSTED_PCT, MENTION_ONLY_PCT, Mode, first_at, mode_for
from service.budget.limits import over_cap, pacer_frees_at, repository_frees_at
from service.budget.policy import (
    DisagreementLog,
    default_authority,
    policy_text,
    publish,
    read_policy,
)
from service.budget.refusal import AdmissionCounter, Refusal, RefusalReason
from service.budget.snapshot import Snapshot, read_snapshot
from service.budget.usage import Usage, settlement_of
from service.budget.view import View, read_view, refusal_at
from service.budget.windows import ActorCharge, tightest
from service.config.schema import BudgetConfig
from service.storage import ledger, ledger_windows
from service.storage.database import Database, Transaction
from service.storage.errors import STORE_ERRORS
from service.storage.queue import Claim
from service.storage.queue_lease import NothingAdmissible

log = logging.getLogger(__name__)

#: The named lock every admission and every lapsed reservation's closing takes first, held
#: until the claim commits: no two claims (on any host) read the windows' remaining
#: allowance and reserve against it at once. (PostgreSQL: a transaction-scoped advisory
#: lock, chosen over SERIALIZABLE with retry — docs/STORAGE.md has the measurement.)
BUDGET_LOCK: Final = "budget"

#: Refusals worth a WARNING: nothing at all is being admitted.
_LOUD: Final = frozenset({"disabled", "exhausted", "breaker", "monthly_usd"})

def _system_clock() -> datetime:
    return datetime.now(UTC)


class Governor:
    """The one way to a claim that can spend.

    ``config`` may be replaced at any moment (SIGHUP) by one assignment of a new frozen
    ``BudgetConfig``; every decision reads it once. Its five shared fields give way to the
    ``budget_policy`` row when one exists; this governor publishes its own when none does
    (``publish=False`` never writes one: read-only tools). ``authority`` labels what it
    publishes; ``clock`` is read only to stamp the row's ``written_at``.
    """

    def __init__(self, store: Database, config: BudgetConfig, *,
                 authority: str | None = None,
                 clock: Callable[[], datetime] = _system_clock,
                 publish: bool = True, metrics: AdmissionCounter | None = None,
                 ask_run_tokens: int | None = None) -> None:
        self._store = store
        # What one answer to a question reserves (``ask.max_run_tokens``), never more
        # than a run: None reserves a whole run for it too.
        self.ask_run_tokens = ask_run_tokens
        self._metrics = metrics
        self._config = config
        self.authority = authority or default_authority()
        self._clock = clock
        self._publishes = publish
        self.refusals: dict[str, Refusal] = {}
        self.last_refusal: Refusal | None = None
        # Refused candidates in one claim all see the same ledger; measuring it again
        # for each would make an exhausted claim O(pending × window rows).
        self._memo: tuple[tuple[object, ...], View] | None = None
        self._actor_memo: tuple[tuple[object, ...],
                                dict[tuple[str, int], ActorCharge | None]] | None = None
        self._disagreements = DisagreementLog()
        if publish:
            self._publish(replace_row=False)

    # -- the config and the shared policy ---------------------------------------------------

    @property
    def config(self) -> BudgetConfig:
        """This process's own budget config (the shared policy may override five fields)."""
        return self._config

    @config.setter
    def config(self, new: BudgetConfig) -> None:
        self._config = new
        if not self._publishes:
            return
        # The authority's reload is the policy's reload; anyone else's stays local (and
        # is logged as disagreeing at the next claim if it does).
        try:
            with self._store.transaction() as conn:
                row = read_policy(conn)
                if row is None or (row.authority == self.authority
                                   and row.text != policy_text(new)):
                    publish(conn, new, authority=self.authority, now=self._clock(),
                            replace=True)
                    log.info("republished the shared budget policy",
                             extra={"authority": self.authority})
        except STORE_ERRORS as exc:
            log.error("could not republish the shared budget policy; the row in force "
                      "stays: %s", exc, extra={"authority": self.authority})

    def publish_policy(self) -> None:
        """Replace the shared policy row with this config's five fields (an operator's
        ``pr-review-agent budget --publish-policy``); this governor becomes the authority."""
        self._publish(replace_row=True)

    def _publish(self, *, replace_row: bool) -> None:
        with self._store.transaction() as conn:
            written = publish(conn, self._config, authority=self.authority,
                              now=self._clock(), replace=replace_row)
        if written:  # an operator replacing the row is worth noticing; a first start is not
            log.log(logging.WARNING if replace_row else logging.INFO,
                    "published the shared budget policy",
                    extra={"authority": self.authority, "replaced": replace_row})

    def _view(self, conn: Transaction, now: datetime, local: BudgetConfig
              ) -> tuple[tuple[object, ...], View]:
        # Valid only while nothing has written the store, through this transaction or
        # any other: the store's change marker moves on every write.
        key = (self._store.change_marker(conn), now, local)
        memo = self._memo  # one read: several threads may share this governor
        if memo is not None and memo[0] == key:
            return key, memo[1]  # read in this transaction, so under the lock already
        self._store.lock(conn, BUDGET_LOCK)  # before the read: no stale sum is read
        view = read_view(conn, now, local, dollars=local.monthly_usd is not None)
        self._disagreements.note(view.policy, local)
        self._memo = (key, view)
        return key, view

    # -- inside the claim -------------------------------------------------------------------

    def admit(self, conn: Transaction, claim: Claim, now: datetime) -> bool:
        """Reserve ``max_run_tokens`` for ``claim`` in the claim's transaction, or refuse.

        Raises ``NothingAdmissible`` when nothing could be admitted at ``now`` whatever
        the candidate (disabled, breaker tripped, a window exhausted or unable to fit a
        run, the dollar window unable to pay for one), which ends the claim's walk at
        once. Returns False for a refusal that depends on the candidate (a ``pr_opened``
        at MENTION_ONLY, a pull request the pacer has seen enough of, a person at their
        cap): the walk moves on. Refusals are remembered in ``refusals`` (by dedupe key)
        and ``last_refusal`` for the notice to the person who asked.
        """
        key, view = self._view(conn, now, self._config)
        decided = self._decide(conn, key, claim, now, view)
        if decided is not None:
            refusal, everyone = decided
            self._note(claim, refusal)
            if self._metrics is not None:
                self._metrics.refused(refusal.mode.value, refusal.reason)
            if everyone:
                raise NothingAdmissible(f"{refusal.reason} (window {refusal.window})")
            return False
        mode = mode_for(view.gauges)
        self._reserve(conn, claim, now, mode, view.config)
        if self._metrics is not None:
            self._metrics.admitted(mode.value)
        return True

    def waiting(self, claims: Sequence[Claim], now: datetime) -> list[Refusal | None]:
        """Why each of ``claims`` would be refused at ``now`` — the decision ``admit``
        would take, read from the store in one snapshot without reserving, remembering or
        logging anything (what a pending trigger's check run says it waits for); None for
        one that would be admitted."""
        local = self._config
        with self._store.read() as conn:
            view = read_view(conn, now, local, dollars=local.monthly_usd is not None)
            key: tuple[object, ...] = (object(),)  # this read's own per-person memo
            decided = [self._decide(conn, key, claim, now, view) for claim in claims]
        return [None if d is None else d[0] for d in decided]

    def _decide(self, conn: Transaction, key: tuple[object, ...], claim: Claim,
                now: datetime, view: View) -> tuple[Refusal, bool] | None:
        """Why ``claim`` may not be admitted on ``view``, and whether that holds for every
        candidate alike; None to admit it. Reads, never writes."""
        config = view.config

        def refused(reason: RefusalReason, mode: Mode, window: str | None,
                    frees_at: datetime | None) -> Refusal:
            return Refusal(dedupe_key=claim.dedupe_key, reason=reason, mode=mode,
                           window=window, frees_at=frees_at, at=now)

        if not config.enabled:
            return refused("disabled", Mode.EXHAUSTED, None, None), True
        if view.breaker.tripped(now):
            return refused("breaker", Mode.EXHAUSTED, None, view.breaker.tripped_until), True
        gauges = view.gauges
        mode = mode_for(gauges)
        if mode is Mode.EXHAUSTED:
            return refusal_at(claim.dedupe_key, "exhausted", mode,
                              first_at(gauges, EXHAUSTED_PCT), view=view, now=now), True
        worst = tightest(view.windows)
        if worst.remaining < config.max_run_tokens:
            return refused("insufficient", mode, worst.name, worst.frees_at), True
        if view.dollars is not None and not view.dollars.fits_a_run():
            return refused("monthly_usd", mode, MONTHLY, view.dollars.frees_at), True
        if mode is Mode.MENTION_ONLY and claim.job.kind == "pr_opened":
            return refusal_at(claim.dedupe_key, "mention_only", mode,
                              first_at(gauges, MENTION_ONLY_PCT), view=view, now=now), False
        paced = pacer_frees_at(conn, claim, now, config)
        if paced is not None:
            return refused("pacer", mode, None, paced), False
        capped_repo = repository_frees_at(conn, claim, now, config)
        if capped_repo is not None:
            return refused("repository", mode, None, capped_repo), False
        if config.per_installation_pct < 100:
            # A repository not (yet) known to be installed has no installation to charge.
            installation = ledger_windows.installation_of(conn, claim.job.repo)
            capped = None if installation is None else self._share(
                conn, key, ("installation", installation), now, view)
            if capped is not None:
                return refused("per_installation", mode, capped.window, capped.frees_at), False
        if config.per_actor_pct < 100:
            capped = self._share(conn, key, ("actor", claim.job.actor_id), now, view)
            if capped is not None:
                return refused("per_actor", mode, capped.window, capped.frees_at), False
        return None

    def close_lapsed(self, conn: Transaction, keys: Sequence[str],
                     now: datetime) -> None:
        """Close the open reservations of rows whose worker died (``queue_lease.claim``'s
        ``lapsed`` hook) as ``lost``, charged in full: nobody can say what they spent."""
        self._store.lock(conn, BUDGET_LOCK)
        for key in keys:
            if ledger.lose(conn, key, now):
                log.warning("closed the reservation of a lapsed lease as lost",
                            extra={"dedupe_key": key})
        self._memo = None

    def _reserve(self, conn: Transaction, claim: Claim, now: datetime, mode: Mode,
                 config: BudgetConfig) -> None:
        if ledger.lose(conn, claim.dedupe_key, now):
            log.warning("closed a predecessor reservation as lost",
                        extra={"dedupe_key": claim.dedupe_key, "attempt": claim.lease.attempt,
                               "owner": claim.lease.owner})
        ledger.reserve(conn, ledger.Reservation(
            dedupe_key=claim.dedupe_key, owner=claim.lease.owner, actor_id=claim.job.actor_id,
            mode=mode.value, tokens=self._reservation(claim, config), repo=claim.job.repo,
            pr_number=claim.job.pr_number), now)
        self._memo = None
        self.refusals.pop(claim.dedupe_key, None)

    def _reservation(self, claim: Claim, config: BudgetConfig) -> int:
        """The tokens ``claim`` reserves: ``max_run_tokens``, or an answer's smaller share."""
        if claim.job.command == "ask" and self.ask_run_tokens is not None:
            return min(self.ask_run_tokens, config.max_run_tokens)
        return config.max_run_tokens

    def _share(self, conn: Transaction, key: tuple[object, ...], who: tuple[str, int],
               now: datetime, view: View) -> ActorCharge | None:
        """The window where ``who`` (a person or an installation) is at its share."""
        # One person's (installation's) charge is the same for each of their candidates
        # in one walk.
        memo = self._actor_memo
        if memo is None or memo[0] != key:
            memo = (key, {})
            self._actor_memo = memo
        if who not in memo[1]:
            memo[1][who] = over_cap(conn, now, who[1], view.windows, view.config,
                                    installation=who[0] == "installation")
        return memo[1][who]

    def _note(self, claim: Claim, refusal: Refusal) -> None:
        """Remember ``refusal`` for the notice, and log it when its reason is new."""
        previous = self.refusals.get(claim.dedupe_key)
        self.refusals[claim.dedupe_key] = refusal
        self.last_refusal = refusal
        if previous is None or previous.reason != refusal.reason:
            log.log(logging.WARNING if refusal.reason in _LOUD else logging.INFO,
                    "budget refused a claim: %s (window %s, frees at %s)", refusal.reason,
                    refusal.window, refusal.frees_at,
                    extra={"dedupe_key": claim.dedupe_key, "repo": claim.job.repo,
                           "pr": claim.job.pr_number})

    # -- after the run ----------------------------------------------------------------------

    def mode_of(self, claim: Claim, *, conn: Transaction | None = None) -> Mode:
        """The rung ``claim``'s open reservation was admitted under.

        The worker asks this right after the claim to build the engine request:
        ``EngineRequest.mode = governor.mode_of(claim).engine_mode``. ``LookupError``
        when ``claim.lease.owner`` holds no open reservation for it (the lease was lost).
        """
        if conn is None:
            with self._store.read() as own:
                mode = ledger.open_mode(own, claim.dedupe_key, claim.lease.owner)
        else:
            mode = ledger.open_mode(conn, claim.dedupe_key, claim.lease.owner)
        if mode is None:
            raise LookupError(f"no open reservation for {claim.dedupe_key} held by "
                              f"{claim.lease.owner}")
        return Mode(mode)

    def settle(
        self,
        claim: Claim,
        usage: Usage,
        *,
        now: datetime,
        stop_reason: str = "completed",
        reviewed_lines: int | None = None,
        reviewed_since: str | None = None,
        conn: Transaction | None = None,
        resets_at: datetime | None = None,
        estimated_tokens: int | None = None,
    ) -> bool:
        """Record what the run cost on the open reservation ``(dedupe_key, owner)``.

        Returns False, changing nothing in the ledger, when there is no such open
        reservation: the lease lapsed and a later attempt closed it as ``lost`` — this
        worker's result is no longer its to publish. Pass ``conn`` to settle inside a
        caller's transaction (settle + record the run + finish commit together).

        ``stop_reason='usage_limit'`` also trips the breaker (``trip``) in the same
        transaction, until ``resets_at`` when the engine said when the limit resets —
        even when the row was no longer ours: the limit is a fact about the plan.
        """
        settlement = settlement_of(usage, stop_reason=stop_reason, reviewed_lines=reviewed_lines,
                                   reviewed_since=reviewed_since, resets_at=resets_at,
                                   estimated_tokens=estimated_tokens)

        def run(c: Transaction) -> bool:
            self._store.lock(c, BUDGET_LOCK)
            settled = ledger.settle(c, claim.dedupe_key, claim.lease.owner, settlement, now)
            if stop_reason == "usage_limit":
                self._trip(c, now=now, resets_at=resets_at)
            return settled

        if conn is None:  # on its own it writes only under the budget's lock: concurrent
            with self._store.transaction(concurrent=True) as own:
                settled = run(own)
        else:
            settled = run(conn)
        if not settled:
            log.warning("no open reservation to settle",
                        extra={"dedupe_key": claim.dedupe_key, "owner": claim.lease.owner,
                               "attempt": claim.lease.attempt})
        return settled

    # -- the circuit breaker ----------------------------------------------------------------

    def trip(self, *, now: datetime, resets_at: datetime | None = None) -> BreakerState:
        """Reality refused (a run ended ``usage_limit``): admit nothing until ``resets_at``
        (or ``DEFAULT_TRIP`` from now), and calibrate the limits down. Returns the new state.

        A trip while already tripped is the same event seen by another run in flight: it
        only extends ``tripped_until`` and neither recalibrates nor counts as a trip.
        ``settle(..., stop_reason='usage_limit')`` calls this itself.
        """
        with self._store.transaction() as tx:
            return self._trip(tx, now=now, resets_at=resets_at)

    def _trip(self, conn: Transaction, *, now: datetime, resets_at: datetime | None
              ) -> BreakerState:
        policy = read_policy(conn)
        config = self._config if policy is None else policy.apply(self._config)
        after = record_trip(conn, now=now, resets_at=resets_at, config=config)
        self._memo = None
        return after

    def reset_calibration(self) -> None:
        """Forget every trip: back to 100 %, untripped (``budget --reset-calibration``)."""
        with self._store.transaction() as tx:
            reset_breaker(tx)
        self._memo = None
        log.warning("budget calibration reset: limits back to 100%, breaker closed")

    # -- for operators ----------------------------------------------------------------------

    def breaker(self, now: datetime) -> tuple[bool, datetime | None]:
        """Whether the breaker is tripped at ``now``, and until when (for ``/healthz``)."""
        with self._store.read() as conn:
            state = read_breaker(conn)
        return state.tripped(now), state.tripped_until

    def snapshot(self, now: datetime) -> Snapshot:
        """Everything that decides, as the next claim at ``now`` would see it."""
        with self._store.read() as tx:
            return read_snapshot(tx, now, self._config, self._disagreements)
