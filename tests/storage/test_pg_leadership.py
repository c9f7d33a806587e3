"""Electing the poller's leader on PostgreSQL (pg_leadership.py): one leader at a time, a
dead one replaced at once, and the leader named on the server by host and role."""

from __future__ import annotations

import os

import psycopg

from service.config.connections import StoreConfig
from service.storage.open import open_store
from service.storage.pg_leadership import application_name, leader_lock_key
from service.storage.postgres import (
    PostgresStore,
)
from tests.databases import as_url
from tests.kit.waiting import wait_for

#: docs/SCALING.md's query: which host leads the poller.
WHO_LEADS = """
SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
 WHERE l.locktype = 'advisory' AND l.granted AND l.objid = %s AND l.classid = %s
   AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
"""


def test_one_leader_at_a_time_and_a_dead_one_is_replaced(pg: PostgresStore,
                                                         conninfo: str) -> None:
    first, second = pg.leadership("poller"), pg.leadership("poller")
    other_role = pg.leadership("janitor")
    try:
        assert first.lead() and first.lead()  # and it stays the leader
        assert not second.lead()
        assert other_role.lead()  # another role is another election
        # The leader's host dies: the server ends its session, and the lock with it.
        with psycopg.connect(conninfo, autocommit=True) as admin:
            pids = [pid for (pid,) in admin.execute(
                "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = %s"
                # Advisory locks are per database; other tests' pollers hold theirs.
                " AND database = (SELECT oid FROM pg_database"
                "                  WHERE datname = current_database())",
                (pg_lock_objid("poller"),))]
            assert len(pids) == 1
            admin.execute("SELECT pg_terminate_backend(%s)", (pids[0],))
        # The backend ends asynchronously, its lock with it: the standby leads at its next
        # ask once the lock is gone (however long a loaded machine takes to end it).
        wait_for("the standby to lead", second.lead, interval=0.05)
        assert not first.lead()  # back, and standing by
        second.close()
        assert first.lead()
    finally:
        for leadership in (first, second, other_role):
            leadership.close()


def pg_lock_objid(role: str) -> int:
    """The low 32 bits of the role's lock key, as pg_locks shows it (``objid``)."""
    return leader_lock_key(role) & 0xFFFFFFFF


def test_the_pollers_leader_is_named_on_the_server_by_host_and_role(conninfo: str) -> None:
    """An operator can see which host holds the poller's lock: every connection carries
    ``application_name`` with the role, the host and the process."""
    url, _ = as_url(conninfo)
    with open_store(StoreConfig(url=url), role="poller") as store:
        leadership = store.leadership("poller")  # type: ignore[attr-defined]
        try:
            assert leadership.lead()
            key = leader_lock_key("poller")
            with psycopg.connect(conninfo, autocommit=True) as admin:
                (name,), = admin.execute(WHO_LEADS, (key & 0xFFFFFFFF, key >> 32)).fetchall()
                names = {n for (n,) in admin.execute(
                    "SELECT application_name FROM pg_stat_activity"
                    " WHERE datname = current_database() AND pid != pg_backend_pid()")}
        finally:
            leadership.close()
    assert name == application_name("poller")
    assert name.startswith("pr-review-agent poller@") and name.endswith(f":{os.getpid()}")
    assert names == {name}  # the pool's connections too
