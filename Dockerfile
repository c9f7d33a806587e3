# pr-review-agent: one process serving webhooks, polling, reviewing and publishing.
#
#   docker build -t pr-review-agent .                                    # with Claude Code 2.1.197
#   docker build --build-arg CLAUDE_CODE_VERSION= -t pr-review-agent .   # no CLI (HTTP engines)
#
# Reproducible: the base image is pinned by version, the Python dependencies by hash
# (requirements.lock, compiled from pyproject.toml with pip-compile --generate-hashes), the
# Claude Code CLI by version (npm checks each package against the registry's integrity
# hash). What the image holds and weighs: docs/ONBOARDING.md, "What the image contains".
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

# The Claude Code CLI the default engine.kind claude_code runs, pinned: the version .ci/run
# tests the engine against. Empty: no CLI (engine.kind anthropic or openai_compatible).
ARG CLAUDE_CODE_VERSION=2.1.197

# The CLI is fetched with npm, but what npm installs is a self-contained native binary:
# only that binary is copied into the image, and Node.js stays in this stage.
FROM ${PYTHON_IMAGE} AS claude-code
ARG CLAUDE_CODE_VERSION
RUN mkdir /out \
 && if [ -n "$CLAUDE_CODE_VERSION" ]; then \
        apt-get update \
     && apt-get install -y --no-install-recommends nodejs npm ca-certificates \
     && npm install --global "@anthropic-ai/claude-code@${CLAUDE_CODE_VERSION}" \
     && cp "$(npm root --global)/@anthropic-ai/claude-code/bin/claude.exe" /out/claude \
     && /out/claude --version | grep -F "$CLAUDE_CODE_VERSION"; \
    fi

FROM ${PYTHON_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONPATH=/opt/pr-review-agent

# git: the checkouts of the pull requests under review.
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates \
 && rm -rf /var/lib/apt/lists/*

# A dedicated, unprivileged user whose home is the volume: the config, the App's secrets
# (written 0600 by registration), the store and the checkout cache all live there.
RUN groupadd --system --gid 10001 agent \
 && useradd --system --uid 10001 --gid agent --home-dir /var/lib/pr-review-agent \
        --create-home --shell /usr/sbin/nologin agent \
 && chmod 0700 /var/lib/pr-review-agent

WORKDIR /opt/pr-review-agent
COPY requirements.lock ./
RUN pip install --require-hashes --no-deps -r requirements.lock
# The package runs from source (PYTHONPATH): no build step, so nothing unpinned is fetched.
COPY service ./service
RUN printf '#!/bin/sh\nexec python -m service "$@"\n' > /usr/local/bin/pr-review-agent \
 && chmod 0755 /usr/local/bin/pr-review-agent
COPY --from=claude-code /out/ /usr/local/bin/

USER agent
WORKDIR /var/lib/pr-review-agent
VOLUME ["/var/lib/pr-review-agent"]
EXPOSE 8080

# Asks /healthz on the port the config says (server.port, or serve's --port: give the same
# to the check). "failing" (the store unreachable) is a 503: exit 1. So is the registration
# page's /healthz: the container is unhealthy until the App is registered.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["pr-review-agent", "healthcheck", "--config", "/var/lib/pr-review-agent/config.yaml"]

ENTRYPOINT ["pr-review-agent"]
# On a new volume this creates config.yaml and serves the registration page (the link is
# in the container's log); add --public-url with the URL GitHub reaches the container at.
CMD ["serve", "--config", "/var/lib/pr-review-agent/config.yaml"]
