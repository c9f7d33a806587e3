"""Every command of ``pr-review-agent``: ``main`` parses and dispatches; the operator's
commands (``queue``, ``budget``, ``doctor``, a local ``review``) each have a module."""
