"""A repository's own review rules: ``.github/pr-review-agent.yml`` (docs/REPOSITORY-CONFIG.md).

- ``keys.py``: every key, once, declared like the operator's (``service.config.declare``);
- ``parse.py``: reading one file strictly, every problem with its key path and line;
- ``json_schema.py``: the file's JSON Schema, for editors, from the same declarations.
"""
