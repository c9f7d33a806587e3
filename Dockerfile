# pr-review-agent: one process serving webhooks, polling, reviewing and publishing.
#
#   docker build -t pr-review-agent .                                   # no engine CLI
#   docker build --build-arg CLAUDE_CODE_VERSION=2.1.197 -t pr-review-agent .
#
# The base image is pinned by version; Python dependencies are pinned by hash
# (requirements.lock, compiled from pyproject.toml with pip-compile --generate-hashes).
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm
FROM ${PYTHON_IMAGE}

# Empty: no Claude Code CLI (use engine.kind anthropic or openai_compatible). Set it to a
# version of @anthropic-ai/claude-code to install that CLI for engine.kind claude_code.
ARG CLAUDE_CODE_VERSION=""

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# git: checkouts of the pull requests under review. Node.js only when the CLI is wanted.
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates \
 && if [ -n "$CLAUDE_CODE_VERSION" ]; then \
        apt-get install -y --no-install-recommends nodejs npm \
     && npm install -g "@anthropic-ai/claude-code@${CLAUDE_CODE_VERSION}" \
     && npm cache clean --force; \
    fi \
 && rm -rf /var/lib/apt/lists/*

# A dedicated, unprivileged user; the store and the checkout cache live on the volume.
RUN groupadd --system --gid 10001 agent \
 && useradd --system --uid 10001 --gid agent --home-dir /var/lib/pr-review-agent \
        --create-home --shell /usr/sbin/nologin agent

WORKDIR /opt/pr-review-agent
COPY requirements.lock pyproject.toml README.md ./
RUN pip install --require-hashes --no-deps -r requirements.lock
COPY service ./service
RUN pip install --no-deps .

USER agent
WORKDIR /var/lib/pr-review-agent
VOLUME ["/var/lib/pr-review-agent"]
EXPOSE 8080

# "failing" (the store unreachable) is a 503, which urlopen raises on: exit 1.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4)"]

ENTRYPOINT ["pr-review-agent"]
CMD ["serve", "--config", "/etc/pr-review-agent/config.yaml"]
