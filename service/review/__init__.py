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
