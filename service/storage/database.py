"""What the rest of the service may assume about a database: the ``Database`` protocol.

Only ``service.storage`` talks to a database driver. The table modules beside this one
(one per table, each the only holder of its table's SQL) take a ``Transaction`` — the
object a ``Database`` hands out inside ``transaction()`` or ``read()`` — and everything
else calls the table modules. ``SqliteStore`` (``sqlite.py``) is the implementation
and ``PostgresStore`` (``postgres.py``) the one for several hosts:

- SQL in the table modules is the common subset of SQLite and PostgreSQL, with ``?`` or
  ``:name`` placeholders; a backend whose driver wants another style rewrites them in its
  ``Transaction.execute``, so the table modules never choose.
- Nothing here names a SQLite mechanism (``rowid``, ``PRAGMA``, ``BEGIN IMMEDIATE``):
  "a transaction" means one that holds the write lock for its whole block, so a
  read-then-write inside it is atomic against every other writer (SQLite takes the file
  lock at BEGIN; PostgreSQL takes an advisory lock at the first statement).
- A transaction may be ``concurrent``: it declares that row locks, ``skip_locked`` and
  the named locks it takes keep it correct beside others like it, so PostgreSQL runs
  the claims of several hosts at once; on SQLite it is the one writer like any other.
- ``try_begin`` is the no-wait transaction the webhook route uses on the event loop:
  begun at once or not at all, used on one thread, committed from any (the file only; a
  server's every statement is a round trip, so there it is never begun).
- ``run`` runs a blocking block on a worker thread, so async code never waits on the
  database on the event loop, and ``read_async``/``write_async`` are the one way async
  code calls a table module (``OffLoop``, which both stores inherit); ``change_marker``
  says whether anything was written since a value was read, so that a read can be reused
  while it is still true.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar

import anyio

__all__ = ["Database", "Leadership", "OffLoop", "OpenTransaction", "Rows", "Transaction"]

T = TypeVar("T")


class Rows(Protocol):
    """The result of one statement: its rows, and how many rows a write changed."""

    @property
    def rowcount(self) -> int: ...

    @property
    def description(self) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Transaction(Protocol):
    """One open transaction (or read): statements run through it see one snapshot."""

    def execute(self, sql: str, parameters: Any = (), /) -> Rows: ...

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Rows: ...


class OpenTransaction(Protocol):
    """A write transaction begun by ``Database.try_begin``: one block, then one end."""

    def using(self) -> AbstractContextManager[Transaction]: ...

    def commit(self) -> None: ...

    def rollback(self) -> None: ...


class Leadership(Protocol):
    """One role that one process at a time may play among all sharing the database."""

    def lead(self) -> bool:
        """Become or stay the leader if no one else is; whether this process leads now."""
        ...

    def close(self) -> None:
        """Step down (another process may lead from its next ``lead``). Idempotent."""
        ...


class Database(Protocol):
    """The store as the service uses it: transactions, reads, and a worker thread."""

    def transaction(self, *, concurrent: bool = False
                    ) -> AbstractContextManager[Transaction]:
        """A write transaction: COMMIT when the block returns, ROLLBACK when it raises.

        By default it is the only writer for its whole block. ``concurrent=True`` says its
        statements keep their invariants by themselves — single-row writes guarded by
        their ``WHERE``, rows taken with ``skip_locked``, named ``lock``s for whatever
        they read and then write — so a backend may run it beside other concurrent ones
        (PostgreSQL does; an ordinary transaction still excludes them all).
        """
        ...

    @property
    def in_process(self) -> bool:
        """True when a statement runs inside this process (the file), so that a short
        write made on the event loop costs microseconds; False for a server, where every
        statement is a round trip the loop would be held for (``try_begin``'s callers then
        write on a worker thread instead)."""
        ...

    @property
    def skip_locked(self) -> str:
        """The clause that ends a ``SELECT`` whose rows this transaction takes: it locks
        them, and skips rows another transaction holds (``FOR UPDATE SKIP LOCKED``, or
        nothing where there is one writer at a time)."""
        ...

    def lock(self, tx: Transaction, name: str) -> None:
        """Wait for the lock called ``name``, held until ``tx`` ends: what serialises a
        read-then-write among concurrent transactions (the budget's admission)."""
        ...

    def try_lock(self, tx: Transaction, name: str) -> bool:
        """Take the lock called ``name`` until ``tx`` ends if no one holds it."""
        ...

    def read(self) -> AbstractContextManager[Transaction]:
        """A short read of one snapshot; inside ``transaction()`` it shares that one."""
        ...

    def try_begin(self) -> OpenTransaction | None:
        """A write transaction begun at once, or None when it would have to wait (and
        always on a backend whose statements are round trips to a server)."""
        ...

    async def run(self, func: Callable[..., T], /, *args: Any) -> T:
        """``func(*args)`` on a worker thread; the event loop is not held meanwhile."""
        ...

    async def read_async(self, fn: Callable[..., T], /, *args: Any) -> T:
        """``fn(tx, *args)`` in one ``read()``, on a worker thread."""
        ...

    async def write_async(self, fn: Callable[..., T], /, *args: Any,
                          shield: bool = False, concurrent: bool = False) -> T:
        """``fn(tx, *args)`` in one ``transaction(concurrent=)``, on a worker thread; with
        ``shield`` it finishes even when the caller is cancelled meanwhile."""
        ...

    def leadership(self, role: str) -> Leadership:
        """The election for ``role`` (``"poller"``): who plays it among the processes and
        hosts that share this database."""
        ...

    def change_marker(self, tx: Transaction) -> Hashable:
        """A value equal between two calls on ``tx`` exactly when nothing was written in
        between, through ``tx`` or by anyone else: what lets a caller keep a value it
        read (the budget's view of the ledger) for as long as it stays true."""
        ...

    @property
    def version(self) -> int:
        """The schema version the database is at."""
        ...

    @property
    def head_version(self) -> int:
        """The schema version this code writes on this backend."""
        ...

    def close(self) -> None:
        """Release every connection. Idempotent."""
        ...


class OffLoop:
    """The off-loop calls, written once for every store: ``read_async`` and
    ``write_async`` over the store's own ``read``, ``transaction`` and ``run``."""

    async def read_async(self: Database, fn: Callable[..., T], /, *args: Any) -> T:
        """``fn(tx, *args)`` in one ``read()``, on a worker thread."""
        def work() -> T:
            with self.read() as tx:
                return fn(tx, *args)
        return await self.run(work)

    async def write_async(self: Database, fn: Callable[..., T], /, *args: Any,
                          shield: bool = False, concurrent: bool = False) -> T:
        """``fn(tx, *args)`` in one ``transaction(concurrent=)``, on a worker thread; with
        ``shield`` finished even when the caller is cancelled meanwhile (a lease taken is
        then always recorded or handed back)."""
        def work() -> T:
            with self.transaction(concurrent=concurrent) as tx:
                return fn(tx, *args)
        with anyio.CancelScope(shield=shield):
            done = await self.run(work)
        return done  # noqa: RET504 - a cancel scope may swallow; mypy wants the return here
