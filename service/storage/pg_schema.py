"""The schema on PostgreSQL: the same tables, columns and indexes as the SQLite file's.

One ordered list of migrations, as ``migrations.py`` is for SQLite, applied by
``postgres.py`` and counted in the ``schema_version`` table. Entry 1 is the whole schema as
SQLite's migrations leave it; later entries follow SQLite's one for one, so that the two
backends stay the same shape. The differences are the types PostgreSQL has (ids are
``BIGINT``: GitHub's exceed 32 bits; ``BIGSERIAL`` for the ledger's id; ``DOUBLE
PRECISION`` for dollars), text compared byte by byte (``COLLATE "C"``, so that stored
times sort as instants and keys sort as on SQLite), and the hourly ledger totals kept by
PL/pgSQL triggers where SQLite has its own.
"""

from __future__ import annotations

from typing import Final

__all__ = ["PG_MIGRATIONS"]

_T = 'TEXT COLLATE "C"'

# The hourly totals of migrations 24 and 26, as one PL/pgSQL trigger function: what a row
# adds to its hour on insert, takes from its old hour on update or delete. The sums are the
# plain sums over the ledger's rows (the property test runs on both backends).
_HOURS_FUNCTION = """
CREATE OR REPLACE FUNCTION ledger_hours_keep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP IN ('UPDATE', 'DELETE') THEN
    UPDATE ledger_hours SET charged = charged - COALESCE(OLD.used_tokens, OLD.reserved_tokens)
     WHERE hour = substr(OLD.reserved_at, 1, 13);
    IF OLD.cost_usd IS NOT NULL THEN
      UPDATE ledger_cost_hours
         SET micro_usd = micro_usd - CAST(round(OLD.cost_usd * 1000000) AS BIGINT),
             tokens = tokens - COALESCE(OLD.used_tokens, OLD.reserved_tokens), runs = runs - 1
       WHERE hour = substr(OLD.reserved_at, 1, 13);
    END IF;
  END IF;
  IF TG_OP IN ('INSERT', 'UPDATE') THEN
    INSERT INTO ledger_hours (hour, charged)
    VALUES (substr(NEW.reserved_at, 1, 13), COALESCE(NEW.used_tokens, NEW.reserved_tokens))
    ON CONFLICT (hour) DO UPDATE SET charged = ledger_hours.charged + excluded.charged;
    IF NEW.cost_usd IS NOT NULL THEN
      INSERT INTO ledger_cost_hours (hour, micro_usd, tokens, runs)
      VALUES (substr(NEW.reserved_at, 1, 13), CAST(round(NEW.cost_usd * 1000000) AS BIGINT),
              COALESCE(NEW.used_tokens, NEW.reserved_tokens), 1)
      ON CONFLICT (hour) DO UPDATE SET
        micro_usd = ledger_cost_hours.micro_usd + excluded.micro_usd,
        tokens = ledger_cost_hours.tokens + excluded.tokens,
        runs = ledger_cost_hours.runs + excluded.runs;
    END IF;
    RETURN NEW;
  END IF;
  RETURN OLD;
END $$
"""

PG_MIGRATIONS: Final[tuple[tuple[str, ...], ...]] = (
    # 1: the schema as SQLite's migrations 1-27 leave it.
    (
        f"CREATE TABLE etags (path {_T} PRIMARY KEY, etag {_T} NOT NULL, last_modified {_T})",
        f"CREATE TABLE watermarks (name {_T} PRIMARY KEY, at {_T} NOT NULL)",
        f"CREATE TABLE queue (dedupe_key {_T} PRIMARY KEY, kind {_T} NOT NULL,"
        f" repo {_T} NOT NULL, pr_number BIGINT NOT NULL, head_sha {_T},"
        f" actor_id BIGINT NOT NULL, status {_T} NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,"
        f" enqueued_at {_T} NOT NULL, leased_until {_T}, owner {_T}, comment_id BIGINT,"
        f" comment_source {_T}, command {_T} NOT NULL DEFAULT 'review')",
        "CREATE INDEX queue_live ON queue (enqueued_at, dedupe_key)"
        " WHERE status IN ('pending', 'claimed')",
        "CREATE INDEX queue_leases ON queue (repo, pr_number, status, leased_until)",
        f"CREATE TABLE ledger (id BIGSERIAL PRIMARY KEY, dedupe_key {_T} NOT NULL,"
        f" owner {_T} NOT NULL, actor_id BIGINT NOT NULL, mode {_T} NOT NULL,"
        f" reserved_tokens BIGINT NOT NULL, used_tokens BIGINT, usage_confidence {_T},"
        f" engine {_T}, model {_T}, reserved_at {_T} NOT NULL, settled_at {_T},"
        f" reviewed_lines BIGINT, stop_reason {_T}, repo {_T}, pr_number BIGINT,"
        f" reviewed_since {_T}, cost_usd DOUBLE PRECISION)",
        "CREATE INDEX ledger_window ON ledger (reserved_at)",
        "CREATE INDEX ledger_actor_window ON ledger (actor_id, reserved_at)",
        "CREATE INDEX ledger_pull_request ON ledger (repo, pr_number, reserved_at)",
        "CREATE UNIQUE INDEX ledger_open ON ledger (dedupe_key) WHERE settled_at IS NULL",
        "CREATE INDEX ledger_open_window ON ledger (reserved_at) WHERE settled_at IS NULL",
        f"CREATE TABLE ledger_hours (hour {_T} PRIMARY KEY, charged BIGINT NOT NULL)",
        f"CREATE TABLE ledger_cost_hours (hour {_T} PRIMARY KEY, micro_usd BIGINT NOT NULL,"
        " tokens BIGINT NOT NULL, runs BIGINT NOT NULL)",
        _HOURS_FUNCTION,
        "CREATE TRIGGER ledger_hours_keep AFTER INSERT OR DELETE"
        " OR UPDATE OF used_tokens, reserved_tokens, reserved_at, cost_usd ON ledger"
        " FOR EACH ROW EXECUTE FUNCTION ledger_hours_keep()",
        f"CREATE TABLE runs (dedupe_key {_T} PRIMARY KEY, repo {_T} NOT NULL,"
        f" pr_number BIGINT NOT NULL, head_sha {_T} NOT NULL, outcome {_T} NOT NULL,"
        f" findings {_T} NOT NULL, comment_id BIGINT, recorded_at {_T} NOT NULL,"
        f" published_at {_T}, content_purged_at {_T}, publish_outcome {_T},"
        f" publish_attempts INTEGER NOT NULL DEFAULT 0, publish_failed_at {_T},"
        f" omitted {_T} NOT NULL DEFAULT '[]', assessment {_T}, description {_T},"
        f" publish_lease_until {_T})",
        "CREATE INDEX runs_unpublished ON runs (recorded_at) WHERE publish_outcome IS NULL"
        " AND publish_failed_at IS NULL AND content_purged_at IS NULL",
        "CREATE INDEX runs_unpurged ON runs (repo, pr_number) WHERE content_purged_at IS NULL",
        f"CREATE TABLE budget_state (key {_T} PRIMARY KEY, value {_T} NOT NULL)",
        f"CREATE TABLE budget_policy (id INTEGER PRIMARY KEY CHECK (id = 1),"
        f" authority_repo {_T} NOT NULL, policy {_T} NOT NULL, written_at {_T} NOT NULL)",
        f"CREATE TABLE agent_comments (repo {_T} NOT NULL, comment_id BIGINT NOT NULL,"
        f" posted_at {_T} NOT NULL, PRIMARY KEY (repo, comment_id))",
        "CREATE INDEX agent_comments_id ON agent_comments (comment_id)",
        f"CREATE TABLE deliveries (delivery_id {_T} PRIMARY KEY, event {_T} NOT NULL,"
        f" action {_T}, installation_id BIGINT, received_at {_T} NOT NULL,"
        f" outcome {_T} NOT NULL)",
        f"CREATE TABLE repositories (repo {_T} PRIMARY KEY, installation_id BIGINT NOT NULL,"
        f" added_at {_T} NOT NULL, removed_at {_T})",
        f"CREATE TABLE closed_pull_requests (repo {_T} NOT NULL, pr_number BIGINT NOT NULL,"
        f" merged INTEGER NOT NULL, closed_at {_T} NOT NULL, purged_at {_T},"
        " PRIMARY KEY (repo, pr_number))",
        f"CREATE TABLE notices (dedupe_key {_T} PRIMARY KEY, kind {_T} NOT NULL,"
        f" comment_id BIGINT, posted_at {_T} NOT NULL)",
    ),
    # 2: SQLite's 28, each trigger's check run.
    (
        f"CREATE TABLE checks (dedupe_key {_T} NOT NULL, head_sha {_T} NOT NULL,"
        f" repo {_T} NOT NULL, pr_number BIGINT NOT NULL, name {_T} NOT NULL,"
        f" status {_T} NOT NULL, conclusion {_T}, title {_T} NOT NULL, summary {_T} NOT NULL,"
        f" details_url {_T}, version BIGINT NOT NULL, shown_version BIGINT NOT NULL DEFAULT 0,"
        f" check_run_id BIGINT, create_started_at {_T}, lease_until {_T},"
        f" updated_at {_T} NOT NULL, PRIMARY KEY (dedupe_key, head_sha))",
        "CREATE INDEX checks_owed ON checks (updated_at) WHERE version > shown_version",
    ),
    # 3: SQLite's 29, the installation each ledger row is charged to.
    (
        "ALTER TABLE ledger ADD COLUMN installation_id BIGINT",
        "UPDATE ledger SET installation_id ="
        " (SELECT installation_id FROM repositories WHERE repositories.repo = ledger.repo)",
        "CREATE INDEX ledger_installation_window ON ledger (installation_id, reserved_at)",
    ),
    # 4: SQLite's 30, the repository config files as last read.
    (
        f"CREATE TABLE repository_files (url {_T} PRIMARY KEY, repo {_T} NOT NULL,"
        f" found BIGINT NOT NULL, etag {_T}, content BYTEA, problem {_T},"
        f" read_at {_T} NOT NULL)",
    ),
    # 5: SQLite's 31, every finding posted on a pull request, by fingerprint.
    (
        f"CREATE TABLE posted_findings (repo {_T} NOT NULL, pr_number BIGINT NOT NULL,"
        f" fingerprint {_T} NOT NULL, path {_T} NOT NULL, line BIGINT NOT NULL,"
        f" severity {_T} NOT NULL, category {_T} NOT NULL, head_sha {_T} NOT NULL,"
        f" comment_id BIGINT, posted_at {_T} NOT NULL, state {_T} NOT NULL,"
        f" PRIMARY KEY (repo, pr_number, fingerprint))",
    ),
    # 6: SQLite's 32, the one summary comment on each pull request.
    (
        f"CREATE TABLE pr_summaries (repo {_T} NOT NULL, pr_number BIGINT NOT NULL,"
        f" comment_id BIGINT, create_started_at {_T}, version BIGINT NOT NULL,"
        f" shown_version BIGINT NOT NULL, lease_until {_T}, updated_at {_T} NOT NULL,"
        f" PRIMARY KEY (repo, pr_number))",
        "CREATE INDEX pr_summaries_behind ON pr_summaries (updated_at)"
        " WHERE version > shown_version",
    ),
    # 7: SQLite's 33, the earlier findings a run said no longer hold.
    (f"ALTER TABLE runs ADD COLUMN fixed {_T}",),
    # 8: SQLite's 34, each repository's last poll.
    (
        f"CREATE TABLE repository_polls (repo {_T} PRIMARY KEY, polled_at {_T} NOT NULL,"
        f" succeeded_at {_T}, error {_T})",
    ),
    # 9: SQLite's 35, the deliveries' arrival order (pruning).
    ("CREATE INDEX deliveries_received ON deliveries (received_at)",),
    # 10: SQLite's 36, a run's coverage and its pre-flight estimate.
    (
        f"ALTER TABLE runs ADD COLUMN coverage {_T}",
        "ALTER TABLE ledger ADD COLUMN estimated_tokens BIGINT",
    ),
    # 11: SQLite's 37, the redeliveries the delivery log's reader asked for.
    (
        f"CREATE TABLE hook_redeliveries (guid {_T} PRIMARY KEY, delivery_id BIGINT NOT NULL,"
        f" requested_at {_T} NOT NULL)",
    ),
    # 12: SQLite's 38, the answer to a question.
    (f"ALTER TABLE runs ADD COLUMN answer {_T}",),
)
