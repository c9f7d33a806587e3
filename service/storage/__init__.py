"""The storage layer: the only package that talks to a database.

- ``database.py``: the ``Database`` protocol everything else is written against.
- ``sqlite.py``: its implementation on one SQLite file; ``migrate.py`` and
  ``migrations.py``: the schema and how it is applied; ``times.py``: the stored form of
  an instant; ``errors.py``: the store's errors, whatever the backend.
- One module per table (``queue``, ``ledger``, ``runs``, ``deliveries``, ...): each is the
  only place that table's SQL is written, and takes a ``Transaction``.

docs/ARCHITECTURE.md has the table of which module owns which table.
"""
