"""The durable ETag cache (``StoredETags``), on both backends beside the in-memory one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from service.model.etags import ETagCache, ETagStore, Validators
from service.storage.database import Database
from service.storage.etags import StoredETags
from tests.kit.stores import BACKENDS, new_sqlite_store, open_database


@pytest.fixture(params=["memory", *BACKENDS])
def cache(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ETagCache]:
    if request.param == "memory":
        yield ETagStore()
    else:
        with open_database(request.param, tmp_path) as store:
            yield StoredETags(store)


def test_etag_cache_round_trip(cache: ETagCache) -> None:
    key = "GET https://api.github.com/repos/o/r/pulls?state=open token:ab12"
    assert cache.get_validators(key) is None
    cache.put_validators(key, Validators(etag='W/"1"', last_modified="Mon, 02 Nov 2026"))
    assert cache.get_validators(key) == Validators('W/"1"', "Mon, 02 Nov 2026")
    cache.put_validators(key, Validators(etag='"2"'))
    assert cache.get_validators(key) == Validators('"2"', None)
    assert cache.get_validators(key + " ") is None


def test_etags_survive_a_restart(tmp_path: Path) -> None:
    from service.storage.sqlite import SqliteStore
    with new_sqlite_store(tmp_path / "s.db") as store:
        StoredETags(store).put_validators("k", Validators('"e"', "Tue"))
    with SqliteStore(tmp_path / "s.db") as store:
        assert StoredETags(store).get_validators("k") == Validators('"e"', "Tue")


def test_storing_a_variant_replaces_the_other_variants_of_its_resource(
        database: Database) -> None:
    for cache in (StoredETags(database), ETagStore()):
        cache.put_validators("gh:v1:i1:json /repos/o/r/pulls#told", Validators('W/"1"'))
        cache.put_validators("gh:v1:i1:json /repos/o/r/pulls?page=2#told", Validators("p2"))
        cache.put_validators("gh:v1:i1:json /repos/o/r/pulls#tnew", Validators('W/"2"'))
        assert cache.get_validators("gh:v1:i1:json /repos/o/r/pulls#told") is None
        fresh = cache.get_validators("gh:v1:i1:json /repos/o/r/pulls#tnew")
        assert fresh == Validators('W/"2"')
        # Another resource that merely shares a prefix is untouched.
        assert cache.get_validators("gh:v1:i1:json /repos/o/r/pulls?page=2#told") == (
            Validators("p2"))
    with database.read() as conn:
        assert conn.execute("SELECT COUNT(*) FROM etags").fetchone()[0] == 2
