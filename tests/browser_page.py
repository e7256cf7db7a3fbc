"""A headless Debian Chromium page for the view's browser tests (Playwright, pointed at
/usr/bin/chromium: its own browser download cannot work on these machines). The page's
console errors and any request that leaves the machine are collected for the test to
assert on."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"


@dataclass
class WatchedPage:
    page: Any
    errors: list[str] = field(default_factory=list)  # console errors and uncaught ones
    off_machine: list[str] = field(default_factory=list)  # requests not to `base_url`


def require_chromium() -> None:
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} missing: apt-get install chromium (the test set-up does)")


@contextmanager
def chromium_page(base_url: str, width: int = 1280, height: int = 960
                  ) -> Iterator[WatchedPage]:
    from playwright.sync_api import sync_playwright

    require_chromium()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=["--no-sandbox"])
        try:
            w = WatchedPage(browser.new_page(viewport={"width": width, "height": height}))
            w.page.on("console",
                      lambda m: w.errors.append(m.text) if m.type == "error" else None)
            w.page.on("pageerror", lambda e: w.errors.append(str(e)))
            w.page.on("request", lambda r: w.off_machine.append(r.url)
                      if not r.url.startswith((base_url, "data:")) else None)
            yield w
        finally:
            browser.close()


@contextmanager
def replay_page(folder: Any) -> Iterator[tuple[WatchedPage, str]]:
    """scripts/view.py's page over a run folder, loaded: (the page, the server's url)."""
    from fogsdn.view.replay import ReplaySource
    from fogsdn.view.server import ViewServer

    server = ViewServer(ReplaySource.of(folder), 0)
    server.start()
    try:
        with chromium_page(server.url) as watched:
            watched.page.goto(server.url)
            yield watched, server.url
    finally:
        server.stop()


def slide_to(page: Any, t: int | str, timeout_ms: int = 10_000) -> None:
    """Move the replay's slider (fill fires `input`) and wait for the clock to show it."""
    page.fill("#slider", str(t))
    page.wait_for_function(f"document.getElementById('clock').textContent === '{t}'",
                           timeout=timeout_ms)
