"""Electing one process of several for a role on PostgreSQL (the poller's leader), and
naming each process's connections on the server so an operator can see who leads.

A session advisory lock (``leader_lock_key``) on a connection of its own: held for as long
as that connection lives, so a dead leader is replaced at the standby's next ``lead``,
with no lease to wait out.
"""

from __future__ import annotations

import contextlib
import os
import socket
import zlib
from typing import Any, Final

import psycopg

LEADER_LOCK: Final = 0x7072610000000000  # plus the role's crc32


def application_name(role: str | None = None) -> str:
    """What this process's connections are called on the server (``pg_stat_activity``):
    ``pr-review-agent[ ROLE]@HOST:PID``, within PostgreSQL's 63 bytes. It tells an
    operator which host holds a lock, the poller's leadership among them."""
    who = f"@{socket.gethostname()}:{os.getpid()}"
    name = "pr-review-agent" + (f" {role}" if role else "")
    return (name + who).encode()[:63].decode(errors="ignore")


def leader_lock_key(role: str) -> int:
    """The session advisory lock that elects ``role``'s leader (``pg_locks.objid`` and
    ``classid`` hold its low and high 32 bits)."""
    return LEADER_LOCK + zlib.crc32(role.encode())


class SessionLeadership:
    """A session advisory lock on a connection of its own: held for as long as that
    connection lives, so a leader whose host dies (or whose connection drops) is replaced
    at the standby's next ``lead``, with no lease to wait out."""

    def __init__(self, url: str, kwargs: dict[str, Any], key: int) -> None:
        self._url = url
        self._kwargs = kwargs
        self._key = key
        self._conn: psycopg.Connection[Any] | None = None
        self._leading = False

    def lead(self) -> bool:
        try:
            if self._conn is None or self._conn.closed:
                self._conn = psycopg.connect(self._url, **self._kwargs, connect_timeout=10)
                self._leading = False
            if self._leading:
                self._conn.execute("SELECT 1")  # still connected, so still holding it
            else:
                row = self._conn.execute("SELECT pg_try_advisory_lock(%s)",
                                         (self._key,)).fetchone()
                self._leading = bool(row and row[0])
        except psycopg.Error:
            self.close()
        return self._leading

    def close(self) -> None:
        conn, leading = self._conn, self._leading
        self._conn, self._leading = None, False
        if conn is not None:
            with contextlib.suppress(psycopg.Error):
                if leading and not conn.closed:
                    # Released before the connection goes: the server ends a closed
                    # session in its own time, and a standby asking meanwhile would
                    # still find the lock held.
                    conn.execute("SELECT pg_advisory_unlock(%s)", (self._key,))
                conn.close()
