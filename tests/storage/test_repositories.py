"""``repositories``: which repositories are installed, under which installation."""

from __future__ import annotations

from service.storage import repositories
from service.storage.database import Database
from tests.queue_helpers import T0


def test_add_drop_and_move_between_installations(database: Database) -> None:
    with database.transaction() as tx:
        repositories.add(tx, "o/a", 1, T0)
        repositories.add(tx, "o/b", 1, T0)
        repositories.add(tx, "o/c", 2, T0)
    with database.read() as tx:
        assert repositories.live(tx) == {"o/a": 1, "o/b": 1, "o/c": 2}
    with database.transaction() as tx:
        repositories.add(tx, "o/a", 2, T0)   # moved to installation 2
        repositories.drop(tx, "o/a", 1, T0)  # a late "removed" from 1 changes nothing
        repositories.drop(tx, "o/b", 1, T0)
    with database.read() as tx:
        assert repositories.live(tx) == {"o/a": 2, "o/c": 2}
        assert repositories.installation_of(tx, "o/a") == 2
        assert repositories.installation_of(tx, "o/b") is None


def test_an_installation_removed_takes_its_repositories_with_it(database: Database) -> None:
    with database.transaction() as tx:
        repositories.add(tx, "o/a", 1, T0)
        repositories.add(tx, "o/b", 1, T0)
        repositories.add(tx, "o/c", 2, T0)
        assert sorted(repositories.drop_installation(tx, 1, T0)) == ["o/a", "o/b"]
        repositories.remove(tx, "o/c", T0)
    with database.read() as tx:
        assert repositories.live(tx) == {}
