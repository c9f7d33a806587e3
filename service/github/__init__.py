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

from service.github.actors import APP, Actor
from service.github.auth import (
    AppJWT,
    AppKeyError,
    InstallationToken,
    InstallationTokens,
    make_app_jwt,
)
from service.github.client import DIFF_MEDIA, JSON_MEDIA, GitHubClient, TokenSource
from service.github.conditional import ConditionalResult, ConditionalStats
from service.github.errors import (
    Forbidden,
    GitHubError,
    NotAcceptable,
    NotFound,
    RateLimited,
    ServerError,
    Unauthorized,
    Unprocessable,
)
from service.github.installations import (
    Installation,
    Repository,
    find_repository_installation,
    list_installation_repositories,
    list_installations,
    mint_installation_token,
)
from service.github.payload import PayloadError
from service.github.ratelimit import RateLimit, RetryPolicy
from service.github.webhooks import (
    SignatureError,
    check_signature,
    parse_body,
    sign,
    verify_signature,
)

__all__ = [
    "APP",
    "DIFF_MEDIA",
    "JSON_MEDIA",
    "Actor",
    "AppJWT",
    "AppKeyError",
    "ConditionalResult",
    "ConditionalStats",
    "Forbidden",
    "GitHubClient",
    "GitHubError",
    "Installation",
    "InstallationToken",
    "InstallationTokens",
    "NotAcceptable",
    "NotFound",
    "PayloadError",
    "RateLimit",
    "RateLimited",
    "Repository",
    "RetryPolicy",
    "ServerError",
    "SignatureError",
    "TokenSource",
    "Unauthorized",
    "Unprocessable",
    "check_signature",
    "find_repository_installation",
    "list_installation_repositories",
    "list_installations",
    "make_app_jwt",
    "mint_installation_token",
    "parse_body",
    "sign",
    "verify_signature",
]
