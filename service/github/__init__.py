"""The GitHub edge: App authentication, the REST client, and webhook verification.

- ``auth``: the App JWT and cached single-flight installation tokens; ``actors``: who a
  call is made as; ``installations``: the App's own REST calls and their shapes.
- ``client``: ``GitHubClient``, the one way the service talks to GitHub's REST API.
- ``webhooks``: signature checks and body parsing for deliveries (pure).
- ``errors``: the typed failures a caller acts on.
- ``ratelimit``, ``urls``, ``conditional``: the pure rules the client applies.
- ``github_clock``: GitHub's time from ``Date`` headers, for its reset instants.

See docs/GITHUB.md.
"""
