"""Play the browser through the service's registration page, for a terminal without one:

    python -m tests.simulator.browser 'http://127.0.0.1:8080/?key=KEY' [--org acme]

It does what a person does: opens the link ``serve`` printed, chooses the owner (a user,
or ``--org``), submits the page's self-submitting form to GitHub — here the simulator,
which creates the App as if *Create GitHub App* were clicked and redirects back — and
follows the redirect to the service's callback, which saves the App's credentials. It
prints where each step went and the App's install link. Nothing here is the service's:
it is the person's side of the flow.
"""

from __future__ import annotations

import argparse
import re
import sys
from html import unescape
from urllib.parse import urlsplit

import httpx


def register(link: str, *, org: str | None, timeout: float = 15.0) -> str:
    """Register through the page at ``link``; the final page's install link."""
    parts = urlsplit(link)
    base = f"{parts.scheme}://{parts.netloc}"
    key = dict(p.split("=", 1) for p in parts.query.split("&") if "=" in p).get("key", "")
    with httpx.Client(timeout=timeout, follow_redirects=False) as client:
        page = client.get(link)
        page.raise_for_status()
        print(f"opened {link}: {page.status_code}")
        form = client.post(f"{base}/setup/register", data={
            "key": key, "owner": "org" if org else "user", **({"org": org} if org else {})})
        form.raise_for_status()
        action = _field(form.text, r"action='([^']+)'")
        manifest = _field(form.text, r"name=manifest value='([^']+)'")
        print(f"submitting the manifest to {action.split('?')[0]}")
        created = client.post(action, data={"manifest": manifest})
        if created.status_code != 302:
            raise SystemExit(f"GitHub answered {created.status_code}: {created.text[:300]}")
        callback = created.headers["location"]
        print(f"GitHub redirected to {callback.split('?')[0]}")
        done = client.get(callback)
        if done.status_code != 200:
            raise SystemExit(f"the callback answered {done.status_code}: {done.text[:300]}")
        install = _field(done.text, r"href='([^']*/installations/new)'")
        print(f"registered; install it at {install}")
        return install


def _field(html: str, pattern: str) -> str:
    found = re.search(pattern, html)
    if found is None:
        raise SystemExit(f"the page does not have {pattern!r}:\n{html[:500]}")
    return unescape(found[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.simulator.browser",
                                     description="Register the App through serve's page.")
    parser.add_argument("link", help="the registration link serve printed (with ?key=)")
    parser.add_argument("--org", help="register the App for this organisation")
    args = parser.parse_args(argv)
    register(args.link, org=args.org)
    return 0


if __name__ == "__main__":
    sys.exit(main())
