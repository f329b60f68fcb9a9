"""The Memory panel of a 1,000- and a 10,000-note notebook: page bytes (raw and as sent,
gzip), server time and, in Chromium, time to load and paint, against a bare page of the same
bytes served by the same stack in the same run.

    .venv/bin/python bench/bench_panel.py            # full run (~1 min)
    .venv/bin/python bench/bench_panel.py --quick
    .venv/bin/python bench/bench_panel.py --notes 1000 --json

The reference host's app (``create_app``, what ``oh serve`` runs) serves under uvicorn on
127.0.0.1 over a fresh data directory, on an injected clock. One notebook holds the notes
(four kinds, each note supporting the next, written at store level); the panel shows them
``PAGE_SIZE`` a page, one compact line each. Measured for page 1, the last page, a kind filter
and a name search:

- **bytes**: the page's HTML, and what went over the wire with ``Accept-Encoding: gzip``;
- **render**: ``notebook_view`` + ``render_notebook`` in process (the panel's own work);
- **server**: a GET through HTTP with the session cookie, to the last byte (one keep-alive
  client, gzip accepted as a browser does);
- **Chromium**: a navigation in headless Debian Chromium, from its start to the first
  contentful paint and to the load event (Navigation and Paint Timing).

The baseline is the same page's HTML, captured once, served as constant bytes by a route of
the same app under ``/panel`` (so compressed the same way): what the stack and the browser cost
for a page of that size without the panel.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from fastapi import Response

from oh.config import Locations, open_host, open_memory_store
from oh.core.changes import MAX_CHANGES, parse_changes
from oh.testing.browser import CHROMIUM, CHROMIUM_ARGS
from oh.testing.lifecycle import FakeClock
from oh.testing.served import in_thread
from oh.transports.http import create_app
from oh.transports.panel.layout import Chrome
from oh.transports.panel.memory import PAGE_SIZE, PanelQuery, notebook_view, render_notebook

KINDS = ("lead", "finding", "dataset", "figure")
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
    return f"{KINDS[i % len(KINDS)]}:note-{i:05d}"


def build(data: Path, clock: FakeClock, notes: int) -> tuple[Any, str]:
    """A host over ``data`` with alice's notebook of ``notes`` notes; the host and its id."""
    host = open_host(Locations(data), clock=clock)
    host.register_document("alice", "big.pdf")
    notebook, _ = host.open_notebook("alice", "big.pdf", "bench")
    store = open_memory_store(Locations(data))  # sealed, as the host opened it
    changes = [
        {
            "op": "add",
            "record": {
                "name": name(i),
                "text": f"observation {i} of the reef survey, with a sentence or two of detail",
                "supports": [name((i + 1) % notes)],
            },
        }
        for i in range(notes)
    ]
    version = notebook.version
    for start in range(0, notes, MAX_CHANGES):
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


def measure(notes: int, runs: int, browser_runs: int) -> list[dict[str, Any]]:
    """Every figure for one notebook of ``notes`` notes."""
    clock = FakeClock()
    with tempfile.TemporaryDirectory() as folder:
        host, notebook_id = build(Path(folder) / "data", clock, notes)
        token = host.create_owner_token("alice")
        app = create_app(host)
        panel = f"/panel/notebooks/{notebook_id}"
        pages = -(-notes // PAGE_SIZE)
        queries = {
            f"page 1 of {pages}": {},
            f"page {pages} of {pages}": {"page": str(pages)},
            f"kind filter ({notes // 4:,} notes)": {"kind": "finding"},
            "name search (10 notes)": {"q": "note-0012"},
        }
        bare: dict[str, bytes] = {}

        async def bare_page(label: str) -> Response:
            return Response(bare[label], media_type="text/html; charset=utf-8")

        # Under /panel, ahead of the panel's own routes, so compressed as the panel is.
        app.add_api_route("/panel/bench-bare/{label}", bare_page, include_in_schema=False)
        app.router.routes.insert(0, app.router.routes.pop())

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
                    lambda i=index: client.get(f"/panel/bench-bare/{i}").raise_for_status(),
                    runs,
                )
                rows.append(
                    {
                        "notes": notes,
                        "page": label,
                        "bytes": len(answer.content),
                        "gzip_bytes": answer.num_bytes_downloaded,
                        "gzip_ratio": len(gzip.compress(answer.content)) / len(answer.content),
                        "render_ms": render,
                        "server_ms": server_ms,
                        "bare_server_ms": bare_ms,
                    }
                )
            if Path(CHROMIUM).exists():
                paths = {}
                for index, (label, params) in enumerate(queries.items()):
                    query = httpx.QueryParams(params)
                    paths[label] = panel + (f"?{query}" if params else "")
                    paths[f"bare {index}"] = f"/panel/bench-bare/{index}"
                browser = chromium(url, client.cookies["oh_panel"], paths, browser_runs)
                for index, row in enumerate(rows):
                    row["chromium"] = browser[row["page"]]
                    row["bare_chromium"] = browser[f"bare {index}"]
        host.close()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--notes", type=int, nargs="+", default=[1000, 10000], help="notebook sizes to measure"
    )
    args = parser.parse_args()
    runs, browser_runs = (10, 3) if args.quick else (40, 10)
    rows = [row for notes in args.notes for row in measure(notes, runs, browser_runs)]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"Memory panel, {PAGE_SIZE} notes a page (median ms; bytes of HTML, and as sent)")
    print(
        f"{'notes':>6} {'page':26} {'bytes':>8} {'gzip':>7} {'render':>7} {'server':>7}"
        f" {'bare':>6} {'ratio':>6} {'paint':>6} {'bare':>6} {'load':>6} {'bare':>6}"
    )
    for row in rows:
        line = (
            f"{row['notes']:>6,} {row['page']:26} {row['bytes']:>8,} {row['gzip_bytes']:>7,}"
            f" {row['render_ms']:>7.1f} {row['server_ms']:>7.1f} {row['bare_server_ms']:>6.1f}"
            f" {row['server_ms'] / row['bare_server_ms']:>5.1f}×"
        )
        if "chromium" in row:
            got, base = row["chromium"], row["bare_chromium"]
            line += (
                f" {got['paint']:>6.1f} {base['paint']:>6.1f}"
                f" {got['load']:>6.1f} {base['load']:>6.1f}"
            )
        print(line)
    if not any("chromium" in row for row in rows):
        print(f"({CHROMIUM} is missing: no browser figures)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
