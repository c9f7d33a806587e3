"""The workers: a pool that claims through the governor, and one job from claim to finish.

- ``pool``: ``WorkerPool`` — N workers with stable owner ids, naps and ``wake()``,
  restarts with the same owner, graceful stop.
- ``job``: ``JobRunner`` — ack, re-read, checkout, diff, layer 2, engine, then settle +
  record + finish in one transaction, then publish.
- ``checkout``: bare git cache per repository, worktree per run, the token given to git alone.
- ``diff``: ``base...head`` split per file; excluded paths and the line cap (layer 2).
- ``estimate``: the pre-flight token estimate fitted on the ledger.
- ``record``: the ``runs`` row.
- ``settle``: how a job ends in the store, each ending one short transaction.
- ``pulls``: re-reading a pull request; which installation covers a repository.
- ``ports``: the ``Publisher`` protocol, the 👀 acknowledgement, test publishers.
- ``acknowledge``: ``EarlyAck`` — the 👀 as soon as work is queued, not when a worker is free.

See docs/WORKER.md.
"""

from service.github.pulls import PullRequest, parse_pull, read_pull
from service.run_content import Omitted
from service.worker.checkout import Checkouts, GitError, GitRunner
from service.worker.diff import FileDiff, Selection, select
from service.worker.estimate import Estimator, fit, load_estimator
from service.worker.installations import Installations
from service.worker.job import JobRunner, JobSettings
from service.worker.pool import WorkerPool, owner_id
from service.worker.ports import (
    Acknowledger,
    GitHubAck,
    NullPublisher,
    Publisher,
    RecordingPublisher,
    reaction_path,
)
from service.worker.record import RecordedRun, record_run

__all__ = [
    "Acknowledger",
    "Checkouts",
    "Estimator",
    "FileDiff",
    "GitError",
    "GitHubAck",
    "GitRunner",
    "Installations",
    "JobRunner",
    "JobSettings",
    "NullPublisher",
    "Omitted",
    "Publisher",
    "PullRequest",
    "RecordedRun",
    "RecordingPublisher",
    "Selection",
    "WorkerPool",
    "fit",
    "load_estimator",
    "owner_id",
    "parse_pull",
    "reaction_path",
    "read_pull",
    "record_run",
    "select",
]
