"""The schema: one ordered list of migrations, applied by ``service.storage.migrate``.

Entry n-1 takes a file from version n-1 to n; ``PRAGMA user_version`` records how many
have run. Versions 1-19 are the reviewer's original schema (docs/STORAGE.md), 20 onwards
the App's own.
"""

from __future__ import annotations

from typing import Final

# -- schema --------------------------------------------------------------------------------
#
# One entry per schema version, in order; entry n-1 takes a file from version n-1 to n.
# Each entry is a tuple of single statements (never a script: executescript() issues a
# COMMIT of its own, which would split a migration from its version bump). Entries are
# append-only: a released migration is never edited, a change is a new entry.
# CREATEs say IF NOT EXISTS because a file written before this list existed carries
# version 1's tables at user_version 0 and must adopt them.

MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    # 1: ETags and watermarks.
    (
        "CREATE TABLE IF NOT EXISTS etags (path TEXT PRIMARY KEY, etag TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS watermarks (name TEXT PRIMARY KEY, at TEXT NOT NULL)",
    ),
    # 2: the queue.
    (
        "CREATE TABLE IF NOT EXISTS queue ("
        "dedupe_key TEXT PRIMARY KEY, kind TEXT NOT NULL, repo TEXT NOT NULL,"
        " pr_number INTEGER NOT NULL, head_sha TEXT, actor_id INTEGER NOT NULL,"
        " status TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,"
        " enqueued_at TEXT NOT NULL, leased_until TEXT, owner TEXT)",
    ),
    # 3: the ledger, and the index every rolling-window sum reads.
    (
        "CREATE TABLE IF NOT EXISTS ledger ("
        "id INTEGER PRIMARY KEY AUTOINCREMENT, dedupe_key TEXT NOT NULL,"
        " owner TEXT NOT NULL, actor_id INTEGER NOT NULL, mode TEXT NOT NULL,"
        " reserved_tokens INTEGER NOT NULL, used_tokens INTEGER, usage_confidence TEXT,"
        " engine TEXT, model TEXT, reserved_at TEXT NOT NULL, settled_at TEXT)",
        "CREATE INDEX IF NOT EXISTS ledger_window ON ledger (reserved_at)",
    ),
    # 4: the per-contributor window.
    ("CREATE INDEX IF NOT EXISTS ledger_actor_window ON ledger (actor_id, reserved_at)",),
    # 5: what the pre-flight estimate is fitted against.
    ("ALTER TABLE ledger ADD COLUMN reviewed_lines INTEGER",),
    # 6: why a run ended.
    ("ALTER TABLE ledger ADD COLUMN stop_reason TEXT",),
    # 7: the comment a mention came from, and which endpoint it was on.
    (
        "ALTER TABLE queue ADD COLUMN comment_id INTEGER",
        "ALTER TABLE queue ADD COLUMN comment_source TEXT",
    ),
    # 8: runs, the only table holding review content.
    (
        "CREATE TABLE IF NOT EXISTS runs ("
        "dedupe_key TEXT PRIMARY KEY, repo TEXT NOT NULL, pr_number INTEGER NOT NULL,"
        " head_sha TEXT NOT NULL, outcome TEXT NOT NULL, findings TEXT NOT NULL,"
        " comment_id INTEGER, recorded_at TEXT NOT NULL, published_at TEXT,"
        " content_purged_at TEXT)",
    ),
    # 9: the circuit breaker's scalars.
    ("CREATE TABLE IF NOT EXISTS budget_state (key TEXT PRIMARY KEY, value TEXT NOT NULL)",),
    # 10: the one shared budget policy.
    (
        "CREATE TABLE IF NOT EXISTS budget_policy ("
        "id INTEGER PRIMARY KEY CHECK (id = 1), authority_repo TEXT NOT NULL,"
        " policy TEXT NOT NULL, written_at TEXT NOT NULL)",
    ),
    # 11: the pull request a ledger row paid for, and the pacer's index.
    (
        "ALTER TABLE ledger ADD COLUMN repo TEXT",
        "ALTER TABLE ledger ADD COLUMN pr_number INTEGER",
        "CREATE INDEX IF NOT EXISTS ledger_pull_request ON ledger (repo, pr_number, reserved_at)",
    ),
    # 12: how publication ended.
    ("ALTER TABLE runs ADD COLUMN publish_outcome TEXT",),
    # 13: publication retries, and giving up.
    (
        "ALTER TABLE runs ADD COLUMN publish_attempts INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE runs ADD COLUMN publish_failed_at TEXT",
    ),
    # 14: what the agent itself posted.
    (
        "CREATE TABLE IF NOT EXISTS agent_comments ("
        "repo TEXT NOT NULL, comment_id INTEGER NOT NULL, posted_at TEXT NOT NULL,"
        " PRIMARY KEY (repo, comment_id))",
    ),
    # 15: one open reservation per trigger. The cleanup must come first and in the same
    # transaction: the unique index cannot be built over duplicates, and a crash between
    # the two must not leave duplicates without the index. Every older open row for a
    # key is closed as lost at exactly the charge it was carrying (its reservation), at
    # its own reserved_at; the newest (highest id) stays open for its worker to settle.
    (
        "UPDATE ledger"
        " SET used_tokens = COALESCE(used_tokens, reserved_tokens),"
        " usage_confidence = 'unavailable', stop_reason = 'lost', settled_at = reserved_at"
        " WHERE settled_at IS NULL AND EXISTS (SELECT 1 FROM ledger AS newer"
        " WHERE newer.dedupe_key = ledger.dedupe_key AND newer.settled_at IS NULL"
        " AND newer.id > ledger.id)",
        "CREATE UNIQUE INDEX IF NOT EXISTS ledger_open ON ledger (dedupe_key)"
        " WHERE settled_at IS NULL",
    ),
    # 16: the head an incremental round diffed from.
    ("ALTER TABLE ledger ADD COLUMN reviewed_since TEXT",),
    # 17: what excluded_paths withheld.
    ("ALTER TABLE runs ADD COLUMN omitted TEXT NOT NULL DEFAULT '[]'",),
    # 18: the review's overall assessment.
    ("ALTER TABLE runs ADD COLUMN assessment TEXT",),
    # 19: @claude describe.
    (
        "ALTER TABLE queue ADD COLUMN command TEXT NOT NULL DEFAULT 'review'",
        "ALTER TABLE runs ADD COLUMN description TEXT",
    ),
    # 20 onwards are the App's own. 20: webhook deliveries, keyed by X-GitHub-Delivery.
    (
        "CREATE TABLE IF NOT EXISTS deliveries ("
        "delivery_id TEXT PRIMARY KEY, event TEXT NOT NULL, action TEXT,"
        " installation_id INTEGER, received_at TEXT NOT NULL, outcome TEXT NOT NULL)",
    ),
    # 21: the repositories the App is installed on.
    (
        "CREATE TABLE IF NOT EXISTS repositories ("
        "repo TEXT PRIMARY KEY, installation_id INTEGER NOT NULL,"
        " added_at TEXT NOT NULL, removed_at TEXT)",
    ),
    # 22: Last-Modified beside the ETag (service.model.etags.Validators).
    ("ALTER TABLE etags ADD COLUMN last_modified TEXT",),
    # 23: the claim's indexes. queue_live holds only rows a claim may take, in FIFO
    # order, so the walk reads no done rows and needs no sort; its WHERE must stay the
    # text queue.py derives from its lifecycle table ("claim" sources) or the planner
    # cannot use it. queue_leases answers "does this pull request hold a live lease?".
    (
        "CREATE INDEX IF NOT EXISTS queue_live ON queue (enqueued_at, dedupe_key)"
        " WHERE status IN ('pending', 'claimed')",
        "CREATE INDEX IF NOT EXISTS queue_leases"
        " ON queue (repo, pr_number, status, leased_until)",
    ),
    # 24: hourly charge totals, kept by triggers on every ledger write so that no
    # writer (the governor, a migration, an operator's UPDATE) can forget them. A window
    # is then the sum of its whole hours plus the raw rows of its first, partial hour:
    # the same number as SUM(COALESCE(used_tokens, reserved_tokens)) over its rows, at
    # a cost that does not grow with the ledger. An hour is the first 13 characters of
    # the fixed-width UTC time (YYYY-MM-DDTHH).
    (
        "CREATE TABLE IF NOT EXISTS ledger_hours ("
        "hour TEXT PRIMARY KEY, charged INTEGER NOT NULL)",
        "INSERT INTO ledger_hours (hour, charged)"
        " SELECT substr(reserved_at, 1, 13), SUM(COALESCE(used_tokens, reserved_tokens))"
        " FROM ledger GROUP BY substr(reserved_at, 1, 13)",
        "CREATE TRIGGER IF NOT EXISTS ledger_hours_insert AFTER INSERT ON ledger BEGIN"
        " INSERT INTO ledger_hours (hour, charged)"
        " VALUES (substr(NEW.reserved_at, 1, 13),"
        " COALESCE(NEW.used_tokens, NEW.reserved_tokens))"
        " ON CONFLICT (hour) DO UPDATE SET charged = charged + excluded.charged; END",
        "CREATE TRIGGER IF NOT EXISTS ledger_hours_update"
        " AFTER UPDATE OF used_tokens, reserved_tokens, reserved_at ON ledger BEGIN"
        " UPDATE ledger_hours"
        " SET charged = charged - COALESCE(OLD.used_tokens, OLD.reserved_tokens)"
        " WHERE hour = substr(OLD.reserved_at, 1, 13);"
        " INSERT INTO ledger_hours (hour, charged)"
        " VALUES (substr(NEW.reserved_at, 1, 13),"
        " COALESCE(NEW.used_tokens, NEW.reserved_tokens))"
        " ON CONFLICT (hour) DO UPDATE SET charged = charged + excluded.charged; END",
        "CREATE INDEX IF NOT EXISTS ledger_open_window ON ledger (reserved_at)"
        " WHERE settled_at IS NULL",
        "CREATE TRIGGER IF NOT EXISTS ledger_hours_delete AFTER DELETE ON ledger BEGIN"
        " UPDATE ledger_hours"
        " SET charged = charged - COALESCE(OLD.used_tokens, OLD.reserved_tokens)"
        " WHERE hour = substr(OLD.reserved_at, 1, 13); END",
    ),    # 25: pull requests seen closing (webhook or poll), for cancellation and the
    # retention sweep; and agent_comments looked up by id alone (ids are global on
    # GitHub, and the trigger rules ask "is this comment ours?" without a repository).
    (
        "CREATE TABLE IF NOT EXISTS closed_pull_requests ("
        "repo TEXT NOT NULL, pr_number INTEGER NOT NULL, merged INTEGER NOT NULL,"
        " closed_at TEXT NOT NULL, purged_at TEXT, PRIMARY KEY (repo, pr_number))",
        "CREATE INDEX IF NOT EXISTS agent_comments_id ON agent_comments (comment_id)",
    ),
    # 26: what each run cost in dollars, as the engine reported it (NULL: not reported),
    # and hourly totals of the rows that have a cost, kept by triggers in the shape of
    # migration 24, so that the trailing 30-day dollar window is read from at most 720
    # hourly rows at every claim instead of a month of ledger rows. Dollars are summed
    # as whole micro-dollars: integer totals never drift under repeated add/subtract.
    (
        "ALTER TABLE ledger ADD COLUMN cost_usd REAL",
        "CREATE TABLE IF NOT EXISTS ledger_cost_hours ("
        "hour TEXT PRIMARY KEY, micro_usd INTEGER NOT NULL, tokens INTEGER NOT NULL,"
        " runs INTEGER NOT NULL)",
        "CREATE TRIGGER IF NOT EXISTS ledger_cost_hours_insert AFTER INSERT ON ledger"
        " WHEN NEW.cost_usd IS NOT NULL BEGIN"
        " INSERT INTO ledger_cost_hours (hour, micro_usd, tokens, runs)"
        " VALUES (substr(NEW.reserved_at, 1, 13),"
        " CAST(round(NEW.cost_usd * 1000000) AS INTEGER),"
        " COALESCE(NEW.used_tokens, NEW.reserved_tokens), 1)"
        " ON CONFLICT (hour) DO UPDATE SET micro_usd = micro_usd + excluded.micro_usd,"
        " tokens = tokens + excluded.tokens, runs = runs + excluded.runs; END",
        "CREATE TRIGGER IF NOT EXISTS ledger_cost_hours_update"
        " AFTER UPDATE OF cost_usd, used_tokens, reserved_tokens, reserved_at ON ledger"
        " WHEN OLD.cost_usd IS NOT NULL OR NEW.cost_usd IS NOT NULL BEGIN"
        " UPDATE ledger_cost_hours"
        " SET micro_usd = micro_usd - CAST(round(OLD.cost_usd * 1000000) AS INTEGER),"
        " tokens = tokens - COALESCE(OLD.used_tokens, OLD.reserved_tokens), runs = runs - 1"
        " WHERE hour = substr(OLD.reserved_at, 1, 13) AND OLD.cost_usd IS NOT NULL;"
        " INSERT INTO ledger_cost_hours (hour, micro_usd, tokens, runs)"
        " SELECT substr(NEW.reserved_at, 1, 13),"
        " CAST(round(NEW.cost_usd * 1000000) AS INTEGER),"
        " COALESCE(NEW.used_tokens, NEW.reserved_tokens), 1 WHERE NEW.cost_usd IS NOT NULL"
        " ON CONFLICT (hour) DO UPDATE SET micro_usd = micro_usd + excluded.micro_usd,"
        " tokens = tokens + excluded.tokens, runs = runs + excluded.runs; END",
        "CREATE TRIGGER IF NOT EXISTS ledger_cost_hours_delete AFTER DELETE ON ledger"
        " WHEN OLD.cost_usd IS NOT NULL BEGIN"
        " UPDATE ledger_cost_hours"
        " SET micro_usd = micro_usd - CAST(round(OLD.cost_usd * 1000000) AS INTEGER),"
        " tokens = tokens - COALESCE(OLD.used_tokens, OLD.reserved_tokens), runs = runs - 1"
        " WHERE hour = substr(OLD.reserved_at, 1, 13); END",
    ),
    # 27: the publisher's own record. notices holds at most one notice per trigger (the
    # primary key is the rule), written before the post so that two passes cannot both
    # post; runs.publish_lease_until keeps two processes from publishing one run at once
    # (a crashed attempt's lease lapses and the run is offered again); the two partial
    # indexes serve the re-offer scan (runs still to publish) and the retention sweep
    # (runs whose content is still held), so neither reads the whole table.
    (
        "CREATE TABLE IF NOT EXISTS notices ("
        "dedupe_key TEXT PRIMARY KEY, kind TEXT NOT NULL, comment_id INTEGER,"
        " posted_at TEXT NOT NULL)",
        "ALTER TABLE runs ADD COLUMN publish_lease_until TEXT",
        "CREATE INDEX IF NOT EXISTS runs_unpublished ON runs (recorded_at)"
        " WHERE publish_outcome IS NULL AND publish_failed_at IS NULL"
        " AND content_purged_at IS NULL",
        "CREATE INDEX IF NOT EXISTS runs_unpurged ON runs (repo, pr_number)"
        " WHERE content_purged_at IS NULL",
    ),
    # 28: each trigger's check run, as it should show on GitHub and as GitHub was last
    # told (service.storage.checks): one row per trigger and head, written in the
    # transaction of the event that changes it, pushed to GitHub by the check-run loop.
    # version counts what should show; shown_version what was pushed; a create attempted
    # but not recorded (create_started_at without check_run_id) is looked up by its
    # external_id before another is made. checks_owed serves the push scan.
    (
        "CREATE TABLE IF NOT EXISTS checks ("
        "dedupe_key TEXT NOT NULL, head_sha TEXT NOT NULL, repo TEXT NOT NULL,"
        " pr_number INTEGER NOT NULL, name TEXT NOT NULL, status TEXT NOT NULL,"
        " conclusion TEXT, title TEXT NOT NULL, summary TEXT NOT NULL, details_url TEXT,"
        " version INTEGER NOT NULL, shown_version INTEGER NOT NULL DEFAULT 0,"
        " check_run_id INTEGER, create_started_at TEXT, lease_until TEXT,"
        " updated_at TEXT NOT NULL, PRIMARY KEY (dedupe_key, head_sha))",
        "CREATE INDEX IF NOT EXISTS checks_owed ON checks (updated_at)"
        " WHERE version > shown_version",
    ),
    # 29: which installation each ledger row is charged to (budget.per_installation_pct),
    # taken from the repositories table when the reservation is written; earlier rows
    # get their repository's installation as it is now. NULL: the repository was not
    # known to be installed.
    (
        "ALTER TABLE ledger ADD COLUMN installation_id INTEGER",
        "UPDATE ledger SET installation_id ="
        " (SELECT installation_id FROM repositories WHERE repositories.repo = ledger.repo)",
        "CREATE INDEX IF NOT EXISTS ledger_installation_window"
        " ON ledger (installation_id, reserved_at)",
    ),
    # 30: the repository config files as last read from GitHub (service.config.repository):
    # one row per file URL, with the validators the text came with, so a revalidation
    # answered 304 is served from here.
    (
        "CREATE TABLE IF NOT EXISTS repository_files ("
        "url TEXT PRIMARY KEY, repo TEXT NOT NULL, found INTEGER NOT NULL, etag TEXT,"
        " content BLOB, problem TEXT, read_at TEXT NOT NULL)",
    ),
    # 31: every finding posted on a pull request, by fingerprint (service.model.fingerprint): a
    # later review does not post it again. No review text: the retention purge keeps it.
    (
        "CREATE TABLE IF NOT EXISTS posted_findings ("
        "repo TEXT NOT NULL, pr_number INTEGER NOT NULL, fingerprint TEXT NOT NULL,"
        " path TEXT NOT NULL, line INTEGER NOT NULL, severity TEXT NOT NULL,"
        " category TEXT NOT NULL, head_sha TEXT NOT NULL, comment_id INTEGER,"
        " posted_at TEXT NOT NULL, state TEXT NOT NULL,"
        " PRIMARY KEY (repo, pr_number, fingerprint))",
    ),
    # 32: the one summary comment of the App's on each pull request (service.storage.summaries):
    # its id, a create stamped before it is sent, the versions asked for and written, a lease;
    # the maintenance loop's every-10-s look for summaries still behind reads the partial index.
    (
        "CREATE TABLE IF NOT EXISTS pr_summaries ("
        "repo TEXT NOT NULL, pr_number INTEGER NOT NULL, comment_id INTEGER,"
        " create_started_at TEXT, version INTEGER NOT NULL, shown_version INTEGER NOT NULL,"
        " lease_until TEXT, updated_at TEXT NOT NULL, PRIMARY KEY (repo, pr_number))",
        "CREATE INDEX IF NOT EXISTS pr_summaries_behind ON pr_summaries (updated_at)"
        " WHERE version > shown_version",
    ),
    # 33: the earlier findings a run's engine said no longer hold (their threads resolved
    # by the publisher): a JSON list of fingerprints and thread ids, no review text.
    ("ALTER TABLE runs ADD COLUMN fixed TEXT",),
    # 34: each repository's last poll (service.storage.repository_polls): when, and whether
    # it succeeded, for the status page's freshness per repository.
    (
        "CREATE TABLE IF NOT EXISTS repository_polls ("
        "repo TEXT PRIMARY KEY, polled_at TEXT NOT NULL, succeeded_at TEXT, error TEXT)",
    ),
    # 35: the deliveries' arrival order, so the maintenance loop prunes the ids GitHub can no
    # longer redeliver oldest first, a batch at a time (service.storage.deliveries.prune).
    ("CREATE INDEX IF NOT EXISTS deliveries_received ON deliveries (received_at)",),
    # 36: what a run read of its pull request (service.publish.run_content.Coverage), and
    # what the worker estimated it would cost before it started (estimate vs actual).
    (
        "ALTER TABLE runs ADD COLUMN coverage TEXT",
        "ALTER TABLE ledger ADD COLUMN estimated_tokens INTEGER",
    ),
    # 37: the deliveries the delivery log's reader asked GitHub to send again
    # (service.storage.redeliveries): by guid, the log entry asked for and when, so that
    # one GitHub does not send after all is fetched instead, by whichever process leads.
    (
        "CREATE TABLE IF NOT EXISTS hook_redeliveries ("
        "guid TEXT PRIMARY KEY, delivery_id INTEGER NOT NULL, requested_at TEXT NOT NULL)",
    ),
    # 38: the answer to a question (@claude ask): its text, the question it answers and
    # the thread it goes to (service.publish.run_content); NULL for a review or description.
    ("ALTER TABLE runs ADD COLUMN answer TEXT",),
)
