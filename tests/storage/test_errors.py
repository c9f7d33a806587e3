"""Which store errors are contention (skip and try again), which say the server is out of
reach for now, and which are faults — read through explicit causes, on both backends'
exception types."""

from __future__ import annotations

import sqlite3

import psycopg
import psycopg_pool
import pytest
from psycopg import errors as pg

from service.storage.errors import (
    STORE_ERRORS,
    MigrationError,
    StoreClosedError,
    is_contention,
    is_unavailable,
)


def _sqlite(message: str, code: int | None) -> sqlite3.OperationalError:
    error = sqlite3.OperationalError(message)
    if code is not None:
        error.sqlite_errorcode = code  # type: ignore[attr-defined]
    return error


@pytest.mark.parametrize("error", [
    pg.LockNotAvailable(), pg.DeadlockDetected(), pg.SerializationFailure(),
    _sqlite("database is locked", 5), _sqlite("busy snapshot", 5 | (2 << 8)),
    _sqlite("database table is locked", 6), _sqlite("Database is locked", None),
    _sqlite("database schema is locked: main", None),
])
def test_a_lock_wait_that_gave_up_is_contention(error: BaseException) -> None:
    assert is_contention(error)


@pytest.mark.parametrize("error", [
    pg.UniqueViolation(), pg.UndefinedTable(), psycopg.OperationalError("gone"),
    _sqlite("disk I/O error", 10), _sqlite("no such table: queue", 1),
    _sqlite("the database is locked, they said", None), ValueError("database is locked"),
])
def test_a_genuine_fault_is_not(error: BaseException) -> None:
    assert not is_contention(error)


def test_an_explicit_cause_is_followed_and_a_loop_of_causes_ends() -> None:
    wrapped = MigrationError("migration 12 failed")
    wrapped.__cause__ = pg.LockNotAvailable()
    assert is_contention(wrapped)
    a, b = RuntimeError("a"), RuntimeError("b")
    a.__cause__, b.__cause__ = b, a
    assert not is_contention(a) and not is_unavailable(a)


@pytest.mark.parametrize(("error", "unavailable"), [
    (psycopg.OperationalError("connection refused"), True),   # no sqlstate: no server
    (pg.AdminShutdown(), True),                               # 57P01
    (pg.CannotConnectNow(), True),                            # 57P03
    (pg.ConnectionFailure(), True),                           # 08006
    (psycopg_pool.PoolTimeout("no connection in 30 s"), True),
    (pg.LockNotAvailable(), False),                           # contention, not absence
    (pg.UniqueViolation(), False),
    (sqlite3.OperationalError("unable to open database file"), False),  # the file's own
])
def test_a_server_out_of_reach_is_told_from_every_other_error(error: BaseException,
                                                              unavailable: bool) -> None:
    assert is_unavailable(error) is unavailable
    outer = RuntimeError("store call failed")
    outer.__cause__ = error
    assert is_unavailable(outer) is unavailable


def test_what_a_caller_catches_as_the_store_failing() -> None:
    for error in (sqlite3.DatabaseError("x"), psycopg.OperationalError("x"),
                  StoreClosedError("closed")):
        assert isinstance(error, STORE_ERRORS)
    assert not isinstance(ValueError("x"), STORE_ERRORS)
