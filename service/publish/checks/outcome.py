"""How a run's check run ends, from its publication's outcome (pure).

The publisher records how publication ended (``records.record_outcome``) and, in the same
transaction, what the trigger's check run shows: this module picks the wording
(``service.publish.checks.text``) and the link to what was posted.
"""

from __future__ import annotations

from service.github.urls import pull_url
from service.publish import coverage
from service.publish.checks import text
from service.publish.publication import Publication
from service.storage.checks import CheckState

__all__ = ["concluded", "link"]


def link(pub: Publication, web_url: str, comment_id: int | None, *, review: bool) -> str:
    """Where the post is on the pull request's page: the review, the comment, or the page
    itself (a description written into the body)."""
    if comment_id is None:
        return pull_url(web_url, pub.repo, pub.pr_number)
    anchor = f"pullrequestreview-{comment_id}" if review else f"issuecomment-{comment_id}"
    return pull_url(web_url, pub.repo, pub.pr_number, anchor)


def concluded(pub: Publication, status: str, *, comment_id: int | None, web_url: str,
              fail_on: str | None, new_head: str | None = None,
              partial_conclusion: str = "neutral") -> CheckState:
    """The completed check run of ``pub`` whose publication ended ``status`` (a
    ``GitHubPublisher`` status: published, superseded, dry_run, refused, failed);
    ``new_head`` is the pull request's head when it had moved on from the run's.

    Every text states what the trigger cost as the ledger charged it: the run's settled
    tokens and what earlier attempts that did not finish were charged."""
    account = pub.account
    tokens, cost_usd, earlier = account.tokens, account.cost_usd, account.earlier_tokens
    if status == "dry_run":
        return text.dry_run(tokens=tokens, cost_usd=cost_usd, earlier=earlier)
    if status == "failed":
        return text.not_posted()
    # A review is the only post GitHub anchors as a review; the rest are comments.
    is_review = status == "published" and not pub.is_describe and pub.outcome != "failed"
    url = (None if comment_id is None and status != "published"
           else link(pub, web_url, comment_id, review=is_review))
    if pub.coverage is not None and pub.coverage.reviewed == 0 and pub.omitted:
        # Nothing was read (nothing fitted the model's window): never a review.
        return text.nothing_to_review(pub.omitted, url, charged=account.earlier_tokens)
    if status == "refused" or pub.outcome == "failed":
        return text.engine_failed(account.stop_reason, None, url, tokens=tokens,
                                  cost_usd=cost_usd, earlier=earlier)
    if pub.is_describe:
        return text.described(url, tokens=tokens, cost_usd=cost_usd, earlier=earlier)
    if account.engine is None:  # settled without an engine: every change was withheld
        return text.nothing_to_review(pub.omitted, url, charged=account.earlier_tokens)
    if status == "superseded" and not pub.is_mention:
        # The run happened and was paid for; only its post was withheld.
        return text.reviewed_superseded(new_head, tokens=tokens, cost_usd=cost_usd,
                                        earlier=earlier)
    heading = coverage.title(pub.coverage, pub.omitted)
    said = coverage.sentence(pub.coverage, pub.omitted)
    return text.reviewed((f.severity for f in pub.findings), url=url, fail_on=fail_on,
                         coverage=None if heading is None else (heading, said or heading),
                         partial_conclusion=partial_conclusion, reduced=account.reduced,
                         tokens=tokens, cost_usd=cost_usd, earlier=earlier)
