"""The suite's own PostgreSQL databases (``tests.databases``): a pooled one is handed out
again only as the template left it, so no test can leave a trap for the next."""

from __future__ import annotations

import psycopg

from tests.databases import migrated_database


def _name(conninfo: str) -> str:
    with psycopg.connect(conninfo) as conn:
        return str(conn.execute("SELECT current_database()").fetchone()[0])  # type: ignore[index]


def test_a_pooled_database_is_reused_emptied_and_never_with_a_test_trigger() -> None:
    with migrated_database() as conninfo:
        first = _name(conninfo)
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute("INSERT INTO watermarks (name, at) VALUES ('x', 'y')")
    with migrated_database() as conninfo:
        assert _name(conninfo) == first  # reused, and empty again
        with psycopg.connect(conninfo, autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM watermarks").fetchone() == (0,)
            # A test leaves a failing trigger behind (as a fault test does on purpose).
            conn.execute("CREATE FUNCTION trap() RETURNS trigger LANGUAGE plpgsql AS $$"
                         " BEGIN RAISE EXCEPTION 'injected failure'; END $$")
            conn.execute("CREATE TRIGGER trap AFTER INSERT ON deliveries FOR EACH ROW"
                         " EXECUTE FUNCTION trap()")
    with migrated_database() as conninfo:
        assert _name(conninfo) != first  # that one was dropped, not handed out
        with psycopg.connect(conninfo, autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM pg_trigger WHERE tgname = 'trap'"
                                ).fetchone() == (0,)
