"""The repository's own words for its reviewer, read from the BASE commit (never the head,
which the pull request's author controls): the repository's guidelines file, and the
guideline files of the directories the change touches.

A monorepo's ``web/AGENTS.md`` says how ``web/`` is written; its ``api/REVIEW.md`` how the
API is; the repository file's ``path_instructions`` say the same of any glob
(``instructions_for``). A directory's file applies to the files under it, the nearest
directory's winning over those above it and over the repository's own
(docs/WORKER.md#guidelines). What is
read is bounded (``DIRECTORY_MAX_CHARS`` each, ``DIRECTORIES_MAX_CHARS`` together, the
nearest first), and it is part of the prompt, so it is counted in the run's price.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from service.config.repository.keys import PathInstruction
from service.review.checkout import BareRepo
from service.review.diff import glob_regex

#: The names a directory's guidelines go by, in the order one is chosen when a directory
#: has several (a file written for reviews first).
DIRECTORY_NAMES: Final = ("REVIEW.md", "AGENTS.md", "CLAUDE.md")
DIRECTORY_MAX_CHARS: Final = 4_000
DIRECTORIES_MAX_CHARS: Final = 16_000
#: Directories looked at, at most: the change's own and their parents, deepest first.
MAX_DIRECTORIES: Final = 200


async def repository_guidelines(bare: BareRepo, base_sha: str,
                                paths: tuple[str, ...]) -> str | None:
    """The first of ``paths`` that holds text at the base commit."""
    for path in paths:
        text = await bare.show(base_sha, path)
        if text is not None and text.strip():
            return text
    return None


def directories(changed: Iterable[str]) -> list[str]:
    """Every directory above a changed file (not the root), deepest first, as
    ``dir/sub/``."""
    found: set[str] = set()
    for path in changed:
        parts = path.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            found.add("/".join(parts[:depth]) + "/")
    return sorted(found, key=lambda d: (-d.count("/"), d))[:MAX_DIRECTORIES]


async def directory_guidelines(bare: BareRepo, base_sha: str, changed: Sequence[str]
                               ) -> tuple[tuple[str, str], ...]:
    """``(directory, text)`` of the guideline files above the changed files, the nearest
    first, within the bounds (see the module doc). One ``git ls-tree`` finds which exist."""
    above = directories(changed)
    wanted = [d + name for d in above for name in DIRECTORY_NAMES]
    if not wanted:
        return ()
    listed = await bare.run("ls-tree", "--name-only", "-z", base_sha, "--", *wanted)
    present = set(listed.decode("utf-8", "replace").split("\0")) - {""}
    out: list[tuple[str, str]] = []
    room = DIRECTORIES_MAX_CHARS
    for directory in above:
        name = next((n for n in DIRECTORY_NAMES if directory + n in present), None)
        if name is None:
            continue
        text = await bare.show(base_sha, directory + name)
        if text is None or not text.strip():
            continue
        text = text.strip()[:min(DIRECTORY_MAX_CHARS, room)]
        out.append((directory, text))
        room -= len(text)
        if room <= 0:
            break
    return tuple(out)


def applying_to(found: Sequence[tuple[str, str]], paths: Iterable[str]
                ) -> tuple[tuple[str, str], ...]:
    """The directory guidelines that apply to some of ``paths`` (one call's files)."""
    paths = list(paths)
    return tuple((d, t) for d, t in found if any(p.startswith(d) for p in paths))


def instructions_for(rules: Sequence[PathInstruction], paths: Iterable[str]
                     ) -> tuple[tuple[str, str], ...]:
    """``(glob, instructions)`` of the repository's ``path_instructions`` that match some
    of ``paths`` (one call's files), in the file's order."""
    paths = list(paths)
    return tuple((r.path, r.instructions) for r in rules
                 if any(glob_regex(r.path).fullmatch(p) for p in paths))
