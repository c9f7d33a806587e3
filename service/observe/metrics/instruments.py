"""The process's own counters and histograms: events as this process sees them happen.

Each component that does something worth counting takes a ``Metrics`` (``None``: it counts
nothing) and calls one of the small methods below, so the names and labels live here and
nowhere else. The figures that are *state* — the queue, the budget windows, the breaker —
are not counted here: ``service.observe.metrics.state`` reads them from the store at scrape time,
so any replica gives the same answer whichever process did the work.

Labels are closed vocabularies (a stop reason, a refusal reason, a rung, an outcome's
class), never an id or free text, except ``installation`` on the rate-limit gauge (one
series per installation, which an operator wants to see).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["PREFIX", "Metrics"]

PREFIX = "pr_review_agent"

#: Seconds: a webhook is answered in milliseconds; an engine run takes minutes.
_WEBHOOK_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
_ENGINE_BUCKETS = (5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0)


class Metrics:
    """The instruments of one process, registered in ``registry`` (its own by default, so
    two instances — two tests — never share a figure)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(
            auto_describe=True)
        r = self.registry
        self.claims = Counter(
            f"{PREFIX}_queue_claims", "Claim attempts by workers, by outcome "
            "(claimed: a row was taken; empty: nothing was admissible).", ["outcome"],
            registry=r)
        self.admissions = Counter(
            f"{PREFIX}_budget_admissions", "Runs admitted by the budget governor, by the "
            "ladder rung they were admitted at.", ["rung"], registry=r)
        self.refusals = Counter(
            f"{PREFIX}_budget_refusals", "Candidates the budget governor refused, by rung "
            "and reason.", ["rung", "reason"], registry=r)
        self.engine_runs = Counter(
            f"{PREFIX}_engine_runs", "Engine runs finished, by stop reason.",
            ["stop_reason"], registry=r)
        self.engine_seconds = Histogram(
            f"{PREFIX}_engine_run_seconds", "Wall-clock seconds of each engine run.",
            buckets=_ENGINE_BUCKETS, registry=r)
        self.engine_tokens = Counter(
            f"{PREFIX}_engine_tokens", "Tokens the engine reported using.", registry=r)
        self.deliveries = Counter(
            f"{PREFIX}_webhook_deliveries", "Webhook deliveries answered, by outcome class "
            "(enqueued, already_queued, closed, declined, ignored, duplicate, ping, "
            "installation, unparseable, rejected: size, signature or headers; unavailable: "
            "the store failed, 503; error: a bug, 500).", ["outcome"], registry=r)
        self.delivery_seconds = Histogram(
            f"{PREFIX}_webhook_seconds", "Seconds from a delivery's first byte to its answer.",
            buckets=_WEBHOOK_BUCKETS, registry=r)
        self.poll_cycles = Counter(
            f"{PREFIX}_poll_cycles", "Poll cycles, by result (ok, failed, skipped).",
            ["result"], registry=r)
        self.poll_requests = Counter(
            f"{PREFIX}_poll_requests", "The poller's listing requests, by answer (full: a "
            "200 with items; not_modified: a free 304).", ["answer"], registry=r)
        self.log_reads = Counter(
            f"{PREFIX}_delivery_log_reads", "Reads of GitHub's webhook delivery log, by "
            "result (ok; failed: the read or a step failed, retried at the next read; "
            "standby: another process reads it).", ["result"], registry=r)
        self.log_recovered = Counter(
            f"{PREFIX}_delivery_log_recovered", "Failed deliveries recovered from the "
            "delivery log, by action (redelivered: GitHub was asked to send it again; "
            "fetched: its payload was taken from the log).", ["action"], registry=r)
        self.rate_remaining = Gauge(
            f"{PREFIX}_github_rate_limit_remaining", "GitHub's x-ratelimit-remaining for "
            "the core resource, by installation (0 for the App's own JWT), as last seen.",
            ["installation"], registry=r, multiprocess_mode="min")
        self.publishes = Counter(
            f"{PREFIX}_publish_attempts", "Attempts to post a run's result to GitHub, by "
            "outcome.", ["outcome"], registry=r)

    # -- one method per event, so callers never spell a name or a label ------------------

    def claimed(self, taken: bool) -> None:
        self.claims.labels("claimed" if taken else "empty").inc()

    def admitted(self, rung: str) -> None:
        self.admissions.labels(rung).inc()

    def refused(self, rung: str, reason: str) -> None:
        self.refusals.labels(rung, reason).inc()

    def engine_finished(self, stop_reason: str, seconds: float, tokens: int) -> None:
        self.engine_runs.labels(stop_reason).inc()
        self.engine_seconds.observe(max(0.0, seconds))
        if tokens > 0:
            self.engine_tokens.inc(tokens)

    def delivery(self, outcome: str, seconds: float) -> None:
        self.deliveries.labels(outcome_class(outcome)).inc()
        self.delivery_seconds.observe(max(0.0, seconds))

    def poll_cycle(self, result: str, *, full: int = 0, not_modified: int = 0) -> None:
        self.poll_cycles.labels(result).inc()
        if full:
            self.poll_requests.labels("full").inc(full)
        if not_modified:
            self.poll_requests.labels("not_modified").inc(not_modified)

    def delivery_log_read(self, result: str, *, redelivered: int = 0,
                          fetched: int = 0) -> None:
        self.log_reads.labels(result).inc()
        if redelivered:
            self.log_recovered.labels("redelivered").inc(redelivered)
        if fetched:
            self.log_recovered.labels("fetched").inc(fetched)

    def rate_limit(self, installation: int, remaining: int) -> None:
        self.rate_remaining.labels(str(installation)).set(remaining)

    def published(self, outcome: str) -> None:
        self.publishes.labels(outcome).inc()


#: The classes a recorded webhook outcome falls in (``service.intake.webhook.deliveries``).
_CLASSES = frozenset({"enqueued", "already_queued", "closed", "declined", "ignored",
                      "duplicate", "ping", "unparseable", "rejected", "unavailable", "error"})


def outcome_class(outcome: str) -> str:
    """A delivery's recorded outcome without its detail: ``closed:cancelled=2`` is
    ``closed``, ``ignored:draft`` is ``ignored``; anything else is ``other``."""
    head = outcome.split(":", 1)[0]
    if head.startswith("installation"):  # installation:created:…, installation_repositories:…
        return "installation"
    return head if head in _CLASSES else "other"
