"""Debian's Chromium, driven by Playwright, for the panel's and the reference page's browser tests.

``scripts/install-chromium`` installs ``/usr/bin/chromium``; Playwright never downloads a
browser build here. The flags keep Chromium from reaching for the network at start (a closed
network refuses those connections, many at a time) and let it run as root in a container.
Under CI a missing Playwright or Chromium is an error; elsewhere the browser tests skip.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "chromium"]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextmanager
def chromium() -> Iterator[Any]:
    """A launched headless Chromium (a Playwright ``Browser``), closed afterwards."""
    import pytest

    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip("playwright is not installed (pip install playwright)")
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            raise RuntimeError(f"{CHROMIUM} is missing: run scripts/install-chromium")
        pytest.skip(f"{CHROMIUM} is missing: run scripts/install-chromium")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()
