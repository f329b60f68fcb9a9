"""The Memory panel of a 1,000-note notebook: server time and, in Chromium, time to load and
paint, against a bare page of the same bytes served by the same stack in the same run.

    python bench/bench_panel.py            # full run (~30 s)
    python bench/bench_panel.py --quick
    python bench/bench_panel.py --json

The reference host's app (``create_app``, what ``oh serve`` runs) serves under uvicorn on
127.0.0.1 over a fresh data directory, on an injected clock. One notebook holds 1,000 notes
(four kinds, each note supporting the next, written at store level); the panel shows them 100
a page. Measured for page 1, the last page, a kind filter and a name search:

- **render**: ``notebook_view`` + ``render_notebook`` in process (the panel's own work);
- **server**: a GET through HTTP with the session cookie, to the last byte (one keep-alive
  client);
- **Chromium**: a navigation in headless Debian Chromium, from its start to the first
  contentful paint and to the load event (Navigation and Paint Timing).

The baseline is the same page's HTML, captured once, served as constant bytes by a route of
the same app: what the stack and the browser cost for a page of that size without the panel.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from fastapi import Response

from oh.config import Locations, open_host
from oh.core.changes import MAX_CHANGES, parse_changes
from oh.http import create_app
from oh.panel.layout import Chrome
from oh.panel.memory import PanelQuery, notebook_view, render_notebook
from oh.storage.libsql import LibsqlMemoryStore
from oh.testing.browser import CHROMIUM, CHROMIUM_ARGS
from oh.testing.lifecycle import FakeClock
from oh.testing.served import in_thread

KINDS = ("lead", "finding", "dataset", "figure")
NOTES = 1000
TIMING = """async () => {
  const seen = (resolve) => {
    const nav = performance.getEntriesByType("navigation")[0];
    const paint = performance.getEntriesByName("first-contentful-paint")[0];
    if (nav && nav.loadEventEnd > 0 && paint) resolve({nav, paint});
  };
  const {nav, paint} = await new Promise((resolve) => {
    seen(resolve);
    new PerformanceObserver(() => seen(resolve)).observe({type: "paint", buffered: true});
    const poll = setInterval(() => seen(resolve), 10);
    setTimeout(() => { clearInterval(poll); resolve({nav: null, paint: null}); }, 5000);
  });
  if (!nav) return {response: null, paint: null, load: null};
  return {
    response: nav.responseEnd - nav.startTime,
    paint: paint.startTime,
    load: nav.loadEventEnd - nav.startTime,
  };
}"""


def name(i: int) -> str:
    return f"{KINDS[i % len(KINDS)]}:note-{i:04d}"


def build(data: Path, clock: FakeClock) -> tuple[Any, str]:
    """A host over ``data`` with alice's notebook of 1,000 notes; the host and its id."""
    host = open_host(Locations(data), clock=clock)
    host.register_document("alice", "big.pdf")
    notebook, _ = host.open_notebook("alice", "big.pdf", "bench")
    store = LibsqlMemoryStore(data / "memory.db")
    changes = [
        {
            "op": "add",
            "record": {
                "name": name(i),
                "text": f"observation {i} of the reef survey, with a sentence or two of detail",
                "supports": [name((i + 1) % NOTES)],
            },
        }
        for i in range(NOTES)
    ]
    version = notebook.version
    for start in range(0, NOTES, MAX_CHANGES):
        version = store.remember(
            notebook.id,
            based_on=version,
            request_id=f"bench-{start}",
            changes=parse_changes(changes[start : start + MAX_CHANGES]),
            author="agent:bench",
            now=clock(),
        ).version
    store.close()
    return host, notebook.id


def median_ms(fn: Callable[[], Any], runs: int) -> float:
    fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def sign_in(url: str, token: str) -> httpx.Client:
    client = httpx.Client(base_url=url, timeout=30)
    form = client.get("/panel/login").text
    csrf = form.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    answer = client.post(
        "/panel/login",
        data={"csrf": csrf, "token": token, "next": "/panel/review"},
        follow_redirects=False,
    )
    if answer.status_code != 303:
        raise RuntimeError(f"sign-in failed: {answer.status_code}")
    return client


def chromium(url: str, cookie: str, paths: dict[str, str], runs: int) -> dict[str, Any]:
    """Median Navigation/Paint Timing per path, each a fresh navigation (no cache)."""
    from playwright.sync_api import sync_playwright

    found: dict[str, Any] = {}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context()
        context.add_cookies([{"name": "oh_panel", "value": cookie, "url": url}])
        page = context.new_page()
        for label, path in paths.items():
            samples = []
            for _ in range(runs + 1):
                page.goto(url + path, wait_until="load")
                samples.append(page.evaluate(TIMING))
            samples = samples[1:]  # the first warms the connection and the assets
            found[label] = {
                key: statistics.median(s[key] for s in samples if s[key] is not None)
                for key in ("response", "paint", "load")
            }
        browser.close()
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    runs, browser_runs = (10, 3) if args.quick else (40, 10)

    clock = FakeClock()
    with tempfile.TemporaryDirectory() as folder:
        host, notebook_id = build(Path(folder) / "data", clock)
        token = host.create_owner_token("alice")
        app = create_app(host)
        panel = f"/panel/notebooks/{notebook_id}"
        queries = {
            "page 1 of 10": {},
            "page 10 of 10": {"page": "10"},
            "kind filter (250 notes)": {"kind": "finding"},
            "name search (10 notes)": {"q": "note-012"},
        }
        bare: dict[str, bytes] = {}

        @app.get("/bench/bare/{label}", include_in_schema=False)
        async def bare_page(label: str) -> Response:
            return Response(bare[label], media_type="text/html; charset=utf-8")

        with in_thread(app) as url:
            client = sign_in(url, token)
            chrome = Chrome("", "bench", "alice", "csrf")
            rows = []
            for index, (label, params) in enumerate(queries.items()):
                answer = client.get(panel, params=params)
                answer.raise_for_status()
                bare[str(index)] = answer.content
                query = PanelQuery.parse(params)
                render = median_ms(
                    lambda q=query: render_notebook(
                        chrome, notebook_view(host, "alice", notebook_id, q)
                    ),
                    runs,
                )
                server_ms = median_ms(
                    lambda p=params: client.get(panel, params=p).raise_for_status(), runs
                )
                bare_ms = median_ms(
                    lambda i=index: client.get(f"/bench/bare/{i}").raise_for_status(), runs
                )
                rows.append(
                    {
                        "page": label,
                        "bytes": len(answer.content),
                        "render_ms": render,
                        "server_ms": server_ms,
                        "bare_server_ms": bare_ms,
                    }
                )
            browser: dict[str, Any] = {}
            if Path(CHROMIUM).exists():
                paths = {}
                for index, (label, params) in enumerate(queries.items()):
                    query = httpx.QueryParams(params)
                    paths[label] = panel + (f"?{query}" if params else "")
                    paths[f"bare {index}"] = f"/bench/bare/{index}"
                browser = chromium(url, client.cookies["oh_panel"], paths, browser_runs)
                for index, row in enumerate(rows):
                    row["chromium"] = browser[row["page"]]
                    row["bare_chromium"] = browser[f"bare {index}"]
        host.close()

    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"Memory panel of a {NOTES:,}-note notebook, 100 notes a page (median ms)")
    print(
        f"{'page':26} {'bytes':>8} {'render':>8} {'server':>8} {'bare':>8} {'ratio':>6}"
        f" {'paint':>8} {'bare':>8} {'load':>8} {'bare':>8}"
    )
    for row in rows:
        line = (
            f"{row['page']:26} {row['bytes']:>8,} {row['render_ms']:>8.1f}"
            f" {row['server_ms']:>8.1f} {row['bare_server_ms']:>8.1f}"
            f" {row['server_ms'] / row['bare_server_ms']:>5.1f}×"
        )
        if "chromium" in row:
            got, base = row["chromium"], row["bare_chromium"]
            line += (
                f" {got['paint']:>8.1f} {base['paint']:>8.1f}"
                f" {got['load']:>8.1f} {base['load']:>8.1f}"
            )
        print(line)
    if not any("chromium" in row for row in rows):
        print(f"({CHROMIUM} is missing: no browser figures)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
