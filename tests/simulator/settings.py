"""Tunable limits of the simulated GitHub; defaults are github.com's published values."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass
class Settings:
    # Primary rate limit, per installation (all its tokens share one bucket), per hour.
    rate_limit: int = 5000
    rate_window_seconds: int = 3600
    primary_limit_status: int = 403  # GitHub sends 403 or 429
    # An installation with more than 20 repositories gets 50 more an hour for each, up to
    # this (15,000 on GitHub Enterprise Cloud).
    installation_rate_limit_max: int = 12_500
    # The search API's own limit, per minute; and how long an update takes to be found.
    search_rate_limit: int = 30
    search_lag_seconds: int = 0
    # Secondary limits: content-creating requests per installation.
    secondary_per_minute: int = 80
    secondary_per_hour: int = 500
    secondary_limit_status: int = 403  # GitHub sends 403 or 429
    max_concurrent: int = 100
    # The .diff media type's limits (406 too_large above them) and the files list cap.
    max_diff_files: int = 300
    max_diff_lines: int = 20000
    max_files_listed: int = 3000
    max_patch_bytes: int = 500_000  # a file's `patch` is omitted above this size
    # Authentication.
    token_lifetime_seconds: int = 3600
    jwt_max_lifetime_seconds: int = 600
    jwt_iat_leeway_seconds: int = 0  # how far in the future an `iat` may be
    stateless_tokens: bool = True  # the ~520-char `ghs_APPID_JWT` format
    manifest_code_ttl_seconds: int = 3600

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Settings:
        known = {f.name: f.type for f in fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ValueError(f"unknown settings: {', '.join(unknown)}")
        values: dict[str, Any] = {}
        for name, value in data.items():
            if isinstance(value, bool) != (known[name] == "bool") or not isinstance(
                value, int
            ):
                raise ValueError(f"setting {name!r} must be {known[name]}, got {value!r}")
            values[name] = value
        return cls(**values)
