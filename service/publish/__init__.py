"""The publisher: where the agent speaks on GitHub as the App.

- ``github``: ``GitHubPublisher`` — the worker's ``Publisher``: the 👀 acknowledgement,
  reviews (inline where the diff allows, the 422 fallback), descriptions, superseded and
  failed runs, dry run, recording every outcome;
- ``notices``: the one notice a trigger may get when the budget or the pre-flight refuses it;
- ``retry``: re-offering recorded runs that were never published (after a restart too);
- ``compose``: the bodies, pure; ``safety``: cleaning, neutralising and size limits;
- ``markers``: the hidden markers that make "never twice" hold across crashes;
- ``publication``/``records``/``lookup``: the stored run, the store, the GitHub reads.

docs/PUBLISHER.md is the reference.
"""
