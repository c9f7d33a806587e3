"""The poller: the source of truth for ingest, and the only code that advances watermarks.

Per repository it lists pull requests and comments with conditional GETs, classifies what
changed with the trigger rules the webhook receiver uses, applies the decisions through
the same seam (``service.intake.ingest.apply_decisions``), and only then moves the watermark to
the newest timestamp it saw. See docs/POLLER.md.

- ``streams``: endpoints and the pure rules (what is new, which action it stands for);
- ``pages``: one page, conditional or not, and its cost;
- ``cycle``: one poll of one repository (``RepositoryPoller``);
- ``pacing``: how often an installation may be polled given its rate limit;
- ``targets``: installations, their repositories, and the ``repositories`` table;
- ``loop``: ``Poller`` — cycles, failures, refreshes and the wait between cycles.
"""
