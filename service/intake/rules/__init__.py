"""Trigger rules: which GitHub events and REST objects become queue work.

Pure functions only (no I/O, no clock), shared by the webhook receiver and the poller
so that both produce the same ``Job`` and dedupe key for the same event. See
docs/TRIGGERS.md for the rules with examples.
"""
