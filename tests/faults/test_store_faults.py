"""The store misbehaving under the whole daemon (in-process ``run(config, "all")``):
another process holding its write lock, a full disk, a read-only disk.

Each ends with nothing lost — the ``@claude review`` made during the fault is reviewed
exactly once afterwards — a clear log line, and a store that passes ``integrity_check``.

The disk tests put the store on a tmpfs of its own (``mount -t tmpfs -o size=…``), which
needs root (or CAP_SYS_ADMIN); where mounting is not allowed they are skipped, saying so.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.app import daemon, runners, serving
from tests.faults.rig import FaultRig
from tests.simulator import SimulatorTransport

REPO = "org1/repo1"



@pytest.fixture(autouse=True)
def quick_maintenance(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runners, "REOFFER_INTERVAL", 1.0)
    monkeypatch.setattr(runners, "MAINTENANCE_INTERVAL", 1.0)


def integrity(path: str) -> str:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return str(db.execute("PRAGMA integrity_check").fetchone()[0])


async def reviewed_once(rig: FaultRig, key: str) -> None:
    await rig.wait_for(lambda: rig.status(key) == "done" and rig.published(key),
                       f"{key} to be reviewed and published")
    assert rig.posts_of(key) == 1


async def seeded(rig: FaultRig) -> None:
    await rig.wait_for(lambda: len(rig.rows(
        "SELECT name FROM watermarks WHERE name LIKE 'comments:%'"
        " OR name LIKE 'pull_requests:%'")) >= 2,
                       "the poller to seed the repository")


# -- another process holds the write lock --------------------------------------------------

# Holds the file's write lock until told to let go (a line on its stdin), so the test
# decides when the lock goes, not a sleep that a loaded machine may outlast.
LOCKER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
db.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.readline()
db.execute("COMMIT")
"""


@pytest.mark.anyio
async def test_a_store_locked_by_another_process(tmp_path: Path) -> None:
    rig = FaultRig.create(tmp_path)
    async with rig.running() as task:
        await seeded(rig)
        locker = subprocess.Popen([sys.executable, "-c", LOCKER, rig.config.store.path],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            assert locker.stdout is not None
            assert locker.stdout.readline().strip() == b"locked"
            key = rig.mention(REPO)
            event = rig.world.events[-1]
            # Webhooks wait out the busy timeout (5 s), then: nothing recorded, 503.
            assert await rig.deliver() == [503]
            [refused] = rig.logged("webhook not recorded: store failure")
            assert refused.error == "OperationalError"
            await rig.wait_for(
                lambda: rig.logged("store busy; skipping the rest of this poll cycle"),
                "the poller to skip a cycle")
        finally:
            assert locker.stdin is not None
            locker.stdin.write(b"go\n")
            locker.stdin.close()
            await rig.wait_for(lambda: locker.poll() is not None, "the lock to go")
            if locker.stdout is not None:
                locker.stdout.close()
        assert locker.returncode == 0
        await reviewed_once(rig, key)  # the poller found it once the lock was gone
        rig.world.events.insert(0, event)  # GitHub's redelivery of the refused delivery
        assert set(await rig.deliver()) == {202}  # (with the App's own review's events)
        assert not task.done()
    assert task.result() == 0
    [delivery] = rig.rows("SELECT outcome FROM deliveries WHERE delivery_id = ?",
                          (event.delivery_id,))
    assert delivery["outcome"] == "already_queued"
    assert rig.posts_of(key) == 1
    assert integrity(rig.config.store.path) == "ok"


# -- a disk of its own: full, read-only ------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs mounted under ``tmp_path``; skipped where mounting is not allowed."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,mode=0755", "tmpfs",
                           str(mount)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> Path:
    """Write a file until the disk is full; the file (delete it to free the space)."""
    filler = disk / "filler"
    with filler.open("wb") as out:
        with contextlib.suppress(OSError):
            while True:
                out.write(b"\0" * 65536)
                out.flush()
        with contextlib.suppress(OSError):
            out.close()
    return filler


@pytest.mark.anyio
async def test_a_full_disk(tmp_path: Path, small_disk: Path) -> None:
    rig = FaultRig.create(tmp_path, store_dir=small_disk)
    async with rig.running() as task:
        await seeded(rig)
        filler = fill(small_disk)
        key = rig.mention(REPO)
        event = rig.world.events[-1]
        assert await rig.deliver() == [503]
        [refused] = rig.logged("webhook not recorded: store failure")
        assert refused.error == "OperationalError"
        # The poller's next write fails the same way: a store fault (not contention) stops
        # the process loudly rather than polling past what it cannot record.
        await rig.wait_for(task.done, "the daemon to stop on the store fault")
    assert task.result() == 1
    [failed] = rig.logged("poll cycle failed; stopping the poller")
    assert failed.exc_info is not None
    assert isinstance(failed.exc_info[1], sqlite3.OperationalError)
    assert str(failed.exc_info[1]) == "database or disk is full"
    assert rig.logged("component failed; stopping the process", component="poller")
    assert integrity(rig.config.store.path) == "ok"

    filler.unlink()  # the operator frees space and restarts
    rig.capture.records.clear()
    async with rig.running() as task:
        await reviewed_once(rig, key)
        rig.world.events.insert(0, event)
        assert set(await rig.deliver()) == {202}  # a redelivery is now a duplicate
    assert task.result() == 0
    assert rig.status(key) == "done" and rig.posts_of(key) == 1
    assert integrity(rig.config.store.path) == "ok"


@pytest.mark.anyio
async def test_a_read_only_disk(tmp_path: Path, small_disk: Path) -> None:
    rig = FaultRig.create(tmp_path, store_dir=small_disk)
    async with rig.running():
        await seeded(rig)
    remount = ["mount", "-o", "remount,ro", str(small_disk)]
    subprocess.run(remount, check=True, capture_output=True)
    try:
        key = rig.mention(REPO)  # made while the agent cannot start: only the poller will see it
        rig.world.events.clear()
        rig.capture.records.clear()
        with rig.capturing(), contextlib.closing(serving.listen("127.0.0.1", 0)) as sock:
            assert await daemon.run(rig.config, "all", asyncio.Event(), sockets=[sock],
                                    transport=SimulatorTransport(rig.world)) == 1
        [refused] = rig.logged("cannot open the store")
        assert refused.path == rig.config.store.path
        assert "readonly" in refused.error or "read-only" in refused.error or (
            "unable to open" in refused.error), refused.error
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(small_disk)], check=True,
                       capture_output=True)
    assert integrity(rig.config.store.path) == "ok"
    async with rig.running() as task:
        await reviewed_once(rig, key)
    assert task.result() == 0
