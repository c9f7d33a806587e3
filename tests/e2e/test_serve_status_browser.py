"""``GET /status`` in a real browser: headless Chromium (Debian's ``chromium``, driven by
Playwright with ``executable_path``; ``.ci/run`` installs it) against a running ``serve``
after one review. The page is read as a person sees it — on a phone's viewport, behind the
admin token the browser sends as Basic credentials — its numbers are checked against
``/budget``, the strict CSP must not block anything the page needs, and a screenshot is
saved (``PR_REVIEW_AGENT_SCREENSHOTS`` names a directory to keep it in: docs/images/)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import E2E
from tests.e2e.harness import PR, REPO
from tests.kit.waiting import wait_for

CHROMIUM = os.environ.get("PR_REVIEW_AGENT_CHROMIUM") or shutil.which("chromium") or ""
ADMIN_TOKEN = "status-page-admin-7c41"  # a test value
# What the probe found Chromium needs here: no sandbox as root, and no background traffic
# to hosts this closed network refuses.
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

pytestmark = pytest.mark.skipif(
    not CHROMIUM and os.environ.get("CI") != "true",
    reason="no Chromium: apt-get install chromium (.ci/run installs it)")


def test_the_status_page_shows_what_budget_says_on_a_phone(e2e: E2E, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    e2e.service_dir.mkdir()
    (e2e.service_dir / "admin-token").write_text(ADMIN_TOKEN)
    e2e.configure(server={"admin_token_file": "admin-token"})
    serve = e2e.serve()
    serve.wait_ready()
    key = f"pr_opened:{REPO}:{PR}:{e2e.sim.seeded.head_sha}"
    serve.post_webhook("pull_request", e2e.sim.pull_request_payload("opened"),
                       delivery_id="status-1")
    wait_for("the publication to be recorded", lambda: e2e.db(
        "SELECT publish_outcome FROM runs WHERE dedupe_key = ?", key) == [("published",)],
        alive=serve.alive, on_timeout=serve.text)
    budget = serve.budget(ADMIN_TOKEN)
    shots = Path(os.environ.get("PR_REVIEW_AGENT_SCREENSHOTS") or tmp_path)
    refused = serve.client.get("/status")  # a browser without the token is asked for it
    assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith(
        "Basic ")

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            context = browser.new_context(
                viewport={"width": 390, "height": 844}, device_scale_factor=2,
                http_credentials={"username": "operator", "password": ADMIN_TOKEN})
            page = context.new_page()
            problems: list[str] = []
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            response = page.goto(f"{serve.url}/status")
            assert response is not None and response.status == 200
            shown = _read(page, [w["name"] for w in budget["windows"]])
            # The stylesheet applied (the CSP's hash let it in) and nothing was blocked.
            fill = page.eval_on_selector("#window-session svg .spent",
                                         "e => getComputedStyle(e).fill")
            assert fill == "rgb(37, 99, 235)", fill
            assert problems == [], problems
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= 390, f"the page is {width} px wide on a 390 px phone"
            shots.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shots / "status-phone.png"), full_page=True)
            wide = browser.new_context(
                viewport={"width": 1100, "height": 900},
                http_credentials={"username": "operator", "password": ADMIN_TOKEN}).new_page()
            wide.goto(f"{serve.url}/status")
            wide.screenshot(path=str(shots / "status.png"), full_page=True)
        finally:
            browser.close()

    for window in budget["windows"]:
        assert shown["windows"][window["name"]] == {
            "spent": window["spent"], "reserved": window["reserved"], "limit": window["limit"]}
    assert shown["rung"] == budget["mode"]
    assert shown["runs"][0][1] == f"{REPO}#{PR}" and shown["runs"][0][2] == "pr_opened"
    assert shown["runs"][0][3] == "completed" and shown["runs"][0][6] == "published"
    assert shown["done"] == 1
    assert (shots / "status.png").stat().st_size > 10_000


def _read(page: Any, windows: list[str]) -> dict[str, Any]:
    """What the page shows: each window's figures, the rung, the runs table, the queue."""
    figures = {}
    for name in windows:
        figures[name] = {part: int(page.get_attribute(
            f"#window-{name} .legend .{part} data", "value")) for part in
            ("spent", "reserved", "limit")}
        visible = page.inner_text(f"#window-{name} .legend .spent")
        assert visible.replace("\u202f", "").split()[0] == str(figures[name]["spent"])
    rows = page.locator("#runs tbody tr")
    runs = [[c.strip() for c in rows.nth(i).locator("td").all_inner_texts()]
            for i in range(rows.count())]
    done = page.get_attribute("#queue-done data", "value")
    return {"windows": figures, "rung": page.inner_text("#rung"), "runs": runs,
            "done": int(done) if done is not None else 0}
