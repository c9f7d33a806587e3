"""Fitting a pull request to the window and the run (``packing``): whole when it fits,
then shed, trimmed and split, never a call over the window or parts over the run."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from service.engine.sizing import MIN_ANSWER_TOKENS
from service.review.diff import FileDiff
from service.review.packing import Limits, answer_room, pack
from service.review.pruning import read_attributes
from tests.kit.thorough import examples


def file(path: str, lines: int, *, context: int = 0, status: str = "M") -> FileDiff:
    body = "".join(f" ctx {i}\n" for i in range(context))
    body += "".join(f"+line {i} of {path}\n" for i in range(lines))
    body += "".join(f" ctx {i}\n" for i in range(context))
    total = 2 * context
    header = (f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"
              f"@@ -{1 if total else 0},{total} +1,{total + lines} @@\n")
    return FileDiff(path, None, status, header + body)


def limits(window: int | None, *, reservation: int = 1_000_000, fixed: int = 1_000,
           answer: int = 1_000) -> Limits:
    return Limits(window=window, reservation=reservation, fixed=fixed, answer=answer)


def test_a_pull_request_that_fits_goes_whole_and_untouched() -> None:
    files = [file("a.py", 10, context=3), file("yarn.lock", 10)]
    packed = pack(files, limits(100_000))
    assert packed.parts == (tuple(files),) and packed.omitted == () and packed.pruned == ()
    assert packed.coverage(withheld=2).files == 4
    assert packed.coverage(withheld=2).reviewed == 2


def test_what_says_least_is_shed_first_and_context_trimmed_only_if_still_needed() -> None:
    code = file("src/app.py", 40, context=3)
    lock = file("package-lock.json", 3_000)
    capacity = limits(None).tokens(code) + 100
    packed = pack([code, lock], limits(capacity + 2_000))
    assert packed.parts == ((code,),)  # the lock file went, and then it fitted
    assert [(o.path, o.reason) for o in packed.omitted] == [("package-lock.json",
                                                            "lock_file")]
    assert packed.pruned == ()
    tight = limits(limits(None).tokens(code) - 10 + 2_000)
    trimmed = pack([code, lock], tight)
    [[sent]] = trimmed.parts
    assert sent.text.count(" ctx ") == 2  # one line of context each side
    assert trimmed.pruned == ("context beyond 1 line each side of a change",)


def test_what_does_not_fit_one_call_is_split_in_diff_order() -> None:
    files = [file(f"pkg{i // 3}/f{i}.py", 200) for i in range(9)]
    each = limits(None).tokens(files[0])
    packed = pack(files, limits(3 * each + 2_000 + 10))
    assert [len(p) for p in packed.parts] == [3, 3, 3]
    assert [f.path for f in packed.files] == [f.path for f in files]
    assert packed.coverage(withheld=0).parts == 3


def test_a_file_too_large_for_any_call_is_named_not_sent() -> None:
    small, huge = file("a.py", 10), file("big.py", 5_000)
    packed = pack([small, huge], limits(limits(None).tokens(small) * 3 + 2_000))
    assert packed.parts == ((small,),)
    assert [(o.path, o.reason, o.lines) for o in packed.omitted] == [
        ("big.py", "over_window", huge.lines)]
    # When the run's tokens, not the window, are what binds, it says so.
    by_run = pack([small, huge], limits(None, reservation=limits(None).tokens(small) * 3
                                        + 2_000))
    assert [o.reason for o in by_run.omitted] == ["max_run_tokens"]


def test_parts_past_the_runs_tokens_are_not_sent() -> None:
    files = [file(f"f{i}.py", 200) for i in range(4)]
    each = limits(None).tokens(files[0])
    per_call = each + 2_000
    packed = pack(files, limits(per_call + 10, reservation=2 * per_call + 10))
    assert len(packed.parts) == 2
    assert [(o.path, o.reason) for o in packed.omitted] == [("f2.py", "max_run_tokens"),
                                                            ("f3.py", "max_run_tokens")]


def test_deletion_only_hunks_and_generated_files_go_when_needed() -> None:
    gone = FileDiff("old.py", None, "D", "diff --git a/old.py b/old.py\ndeleted file mode "
                    "100644\n--- a/old.py\n+++ /dev/null\n@@ -1,500 +0,0 @@\n"
                    + "".join(f"-x{i}\n" for i in range(500)))
    generated = file("api/service.pb.go", 900)
    code = file("main.py", 20)
    attributes = read_attributes("*.pb.go linguist-generated\n")
    packed = pack([gone, generated, code],
                  limits(limits(None).tokens(code) * 2 + 2_500), attributes)
    assert [(o.path, o.reason) for o in packed.omitted] == [("api/service.pb.go",
                                                            "generated")]
    assert packed.pruned[0] == "1 hunk that only deletes lines"
    assert [f.path for f in packed.files] == ["old.py", "main.py"]
    assert "@@" not in packed.files[0].text  # the header says it was deleted; no lines


def test_a_small_window_is_not_asked_for_a_large_answer() -> None:
    assert answer_room(8_192, 16_000) == 4_000
    assert answer_room(8_192, 200_000) == 8_192
    assert answer_room(8_192, 2_000) == MIN_ANSWER_TOKENS
    assert answer_room(8_192, None) == 8_192


@settings(max_examples=examples(200), deadline=None)
@given(sizes=st.lists(st.integers(1, 3_000), min_size=1, max_size=30),
       window=st.integers(4_000, 60_000), reservation=st.integers(4_000, 200_000),
       fixed=st.integers(100, 3_000), answer=st.integers(1_024, 8_192))
def test_no_call_is_over_the_window_and_no_run_over_its_tokens(
        sizes: list[int], window: int, reservation: int, fixed: int, answer: int) -> None:
    files = [file(f"d{i % 4}/f{i}.py", n) for i, n in enumerate(sizes)]
    bound = Limits(window=window, reservation=reservation, fixed=fixed, answer=answer)
    packed = pack(files, bound)
    total = 0
    for part in packed.parts:
        call = fixed + sum(bound.tokens(f) for f in part) + answer
        assert call <= window
        total += call
    assert total <= reservation
    # Every file is either sent once or named with its reason.
    sent = [f.path for f in packed.files]
    named = [o.path for o in packed.omitted]
    assert sorted(sent + named) == sorted(f.path for f in files)
    assert len(set(sent)) == len(sent)
