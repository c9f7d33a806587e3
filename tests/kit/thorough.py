"""How thorough a run is: a developer's (quick) or CI's (every example).

Hypothesis explores fewer examples on a developer's machine and the full number under CI
(``.ci/run`` sets ``PR_REVIEW_AGENT_THOROUGH=1``; ``CI=true`` does too). What is asserted
is the same either way: only how many generated cases are tried changes.
"""

from __future__ import annotations

import os

THOROUGH_ENV = "PR_REVIEW_AGENT_THOROUGH"

#: True under CI: every property runs its full number of examples.
THOROUGH = os.environ.get(THOROUGH_ENV) == "1" or bool(os.environ.get("CI"))


def examples(full: int) -> int:
    """``full`` examples under CI, a quarter of them (at least 10) otherwise."""
    return full if THOROUGH else max(10, full // 4)
