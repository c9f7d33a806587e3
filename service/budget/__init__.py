"""The budget: rolling windows over the ledger, the ladder, reserve-then-settle, and the
feedback from reality (the circuit breaker and its calibration).

A claim that can spend goes through ``Governor.admit``; a run ends with
``Governor.settle``. The modules, one job each:

- ``windows``: the three token windows, their limits and their charge;
- ``ladder``: the rungs (FULL, REDUCED, MENTION_ONLY, EXHAUSTED) from utilisation;
- ``breaker``: the circuit breaker and the calibration it learns from usage limits;
- ``policy``: the one shared policy row every process on a store obeys;
- ``dollars``: reported costs and the optional monthly dollar window;
- ``limits``: the pacer and the per-person cap (refusals that depend on the candidate);
- ``view``: everything a decision reads, read once per claim;
- ``usage``: what a run cost and why it ended;
- ``governor``: admit, settle, trip, and the snapshot ``GET /budget`` shows;
- ``report``: the snapshot as the text table ``pr-review-agent budget`` prints.

docs/BUDGET.md is the reference.
"""
