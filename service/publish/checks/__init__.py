"""Check runs: every trigger shown on the pull request's checks, whatever became of it.

- ``text.py``: what a check run says in each situation (pure);
- ``marks.py``: writing what a trigger's check run should show, in the transaction of the
  event that decides it (the worker, the publisher);
- ``loop.py``: the loop that opens check runs for new triggers, words the waits, and
  pushes every change to GitHub.

The table is ``service.storage.checks``; docs/PUBLISHER.md says what a person sees.
"""
