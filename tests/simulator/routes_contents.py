"""Repository contents: ``GET /repos/{o}/{r}/contents/{path}``, as GitHub serves it.

A file is answered with its metadata and its bytes in base64 (wrapped at 60 characters,
as GitHub wraps them), a directory with a listing of its entries, a path the ref does not
have with 404 ``Not Found`` and a ref that names no commit with 404 ``No commit found for
the ref …``. Without ``ref`` the default branch is read. The token needs ``contents:
read`` and must see the repository. The generic GET handling adds a token-specific ETag
and answers ``If-None-Match`` with 304, so a client that revalidates an unchanged file is
not charged against its rate limit.

A repository backed by a real git repository (``git_dir``) is read from git at any ref;
one without has the default branch's files in ``Repository.files`` (``World.put_file``).
"""

from __future__ import annotations

import base64
import hashlib
import subprocess
from typing import Any, Final

from .git import run_git
from .models import Repository
from .rest import ApiError, not_found
from .routing import Ctx, Reply, RouteTable

routes = RouteTable()

CONTENTS_READ: Final = ("contents", "read")
DOCS: Final = "https://docs.github.com/rest/repos/contents#get-repository-content"
_WRAP: Final = 60


def blob_sha(data: bytes) -> str:
    """Git's object id for ``data`` as a blob (what GitHub reports as the file's sha)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _base64(data: bytes) -> str:
    flat = base64.b64encode(data).decode()
    return "".join(flat[i:i + _WRAP] + "\n" for i in range(0, len(flat), _WRAP))


def _entry(ctx: Ctx, repo: Repository, ref: str, path: str, kind: str, sha: str,
           size: int) -> dict[str, Any]:
    api = f"{ctx.base_url}/repos/{repo.full_name}"
    url = f"{api}/contents/{path}?ref={ref}"
    view = "blob" if kind == "file" else "tree"
    html = f"{ctx.world.web_url}/{repo.full_name}/{view}/{ref}/{path}"
    git_url = f"{api}/git/{'blobs' if kind == 'file' else 'trees'}/{sha}"
    return {
        "type": kind, "size": size, "name": path.rsplit("/", 1)[-1], "path": path, "sha": sha,
        "url": url, "git_url": git_url, "html_url": html,
        "download_url": (f"{ctx.world.web_url}/raw/{repo.full_name}/{ref}/{path}"
                         if kind == "file" else None),
        "_links": {"self": url, "git": git_url, "html": html},
    }


def _file(ctx: Ctx, repo: Repository, ref: str, path: str, data: bytes) -> Reply:
    body = _entry(ctx, repo, ref, path, "file", blob_sha(data), len(data))
    body.update(encoding="base64", content=_base64(data))
    return Reply(body=body)


def _from_git(ctx: Ctx, repo: Repository, ref: str, path: str) -> Reply:
    assert repo.git_dir is not None
    try:
        commit = run_git(repo.git_dir, "rev-parse", "--verify", "--quiet",
                         f"{ref}^{{commit}}").strip()
    except RuntimeError:
        commit = ""
    if not commit:
        raise ApiError(404, f"No commit found for the ref {ref}", documentation_url=DOCS)
    try:
        kind = run_git(repo.git_dir, "cat-file", "-t", f"{commit}:{path}").strip()
    except RuntimeError as exc:
        raise not_found() from exc
    if kind == "blob":
        data = subprocess.run(["git", f"--git-dir={repo.git_dir}", "cat-file", "blob",
                               f"{commit}:{path}"], capture_output=True, check=True).stdout
        return _file(ctx, repo, ref, path, data)
    listing = []
    for line in run_git(repo.git_dir, "ls-tree", "-l", f"{commit}:{path}").splitlines():
        meta, name = line.split("\t", 1)
        _mode, obj_kind, sha, size = meta.split()
        kind_name = "file" if obj_kind == "blob" else "dir"
        listing.append(_entry(ctx, repo, ref, f"{path}/{name}", kind_name, sha,
                              int(size) if size.isdigit() else 0))
    return Reply(body=listing)


def _from_memory(ctx: Ctx, repo: Repository, ref: str, path: str) -> Reply:
    if ref != repo.default_branch:
        raise ApiError(404, f"No commit found for the ref {ref}", documentation_url=DOCS)
    data = repo.files.get(path)
    if data is not None:
        return _file(ctx, repo, ref, path, data)
    prefix = f"{path}/"
    names = sorted({name[len(prefix):].split("/", 1)[0] for name in repo.files
                    if name.startswith(prefix)})
    if not names:
        raise not_found()
    listing = []
    for name in names:
        full = f"{prefix}{name}"
        inner = repo.files.get(full)
        listing.append(_entry(ctx, repo, ref, full, "file" if inner is not None else "dir",
                              blob_sha(inner) if inner is not None else blob_sha(full.encode()),
                              len(inner) if inner is not None else 0))
    return Reply(body=listing)


@routes.add("GET", "/repos/{owner}/{repo}/contents/{path+}", auth="token")
async def get_content(ctx: Ctx) -> Reply:
    repo = ctx.repository(CONTENTS_READ)
    path = ctx.params["path"].strip("/")
    ref = ctx.query.get("ref") or repo.default_branch
    if repo.git_dir is not None:
        return _from_git(ctx, repo, ref, path)
    return _from_memory(ctx, repo, ref, path)
