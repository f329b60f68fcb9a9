"""Recall with a slow embedding endpoint: how long the agent waits, measured in the same run.

A real OpenAI-compatible endpoint on 127.0.0.1 holds every request for ``--sleep`` seconds
(default 30) before it answers. ``Recall`` embeds through the real cloud adapter (httpx, its
defaults: 30 s timeout, 4 retries with backoff), behind a ``Host`` as ``oh serve`` builds it.
Figures, each a distribution of ``--calls`` tool calls (wall clock, ``time.perf_counter``):

1. ``on`` mode with the deadline (``--deadline``, default 2 s): sequential calls, then
   ``--parallel`` callers at once. Every call should answer ``storage_unavailable`` within
   deadline + a few ms (in parallel, calls beyond the pool's backlog are refused at once).
2. Shadow mode (the default): the agent's call, which should not wait for the endpoint at all.
3. Baseline, the same run: one call of the adapter alone, as a recall made it before the
   deadline existed (``--sleep`` seconds, or a timeout and its retries if the sleep is longer
   than the adapter's timeout). Skipped with ``--no-baseline``.

No figure is asserted on; this is a measurement, not a test.

    python bench/bench_recall_deadline.py              # about a minute
    python bench/bench_recall_deadline.py --quick      # a few seconds
    python bench/bench_recall_deadline.py --json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from oh.host import Host, HostSettings
from oh.recall import HashingEmbedder, OpenAIEmbedder, Recall
from oh.storage.sqlite.host import SqliteHostRegistry
from oh.storage.sqlite.knowledge import SqliteKnowledgeStore
from oh.storage.sqlite.notebooks import SqliteMemoryStore
from oh.storage.sqlite.vectors import SqliteVectorStore
from oh.testing.lifecycle import FakeClock

DIMENSIONS = 64


class SlowEndpoint(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, sleep: float) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.sleep = sleep
        self.stop = threading.Event()
        self.vectors = HashingEmbedder(DIMENSIONS)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: SlowEndpoint

    def log_message(self, *_args: Any) -> None:
        pass

    def do_POST(self) -> None:
        texts = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["input"]
        self.server.stop.wait(self.server.sleep)
        data = [
            {"index": i, "embedding": [float(x) for x in vector]}
            for i, vector in enumerate(self.server.vectors.embed(texts))
        ]
        raw = json.dumps({"object": "list", "data": data}).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)
        except OSError:
            pass  # the client gave up on it


def summary(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    return {
        "calls": len(ordered),
        "p50_ms": round(1000 * statistics.median(ordered), 2),
        "p95_ms": round(1000 * ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 2),
        "max_ms": round(1000 * ordered[-1], 2),
    }


class Setup:
    def __init__(self, directory: Path, endpoint: SlowEndpoint, **settings: Any) -> None:
        clock = FakeClock()
        self.memory = SqliteMemoryStore(directory / "memory.db")
        self.knowledge = SqliteKnowledgeStore(directory / "knowledge.db")
        self.registry = SqliteHostRegistry(directory / "knowledge.db")
        self.vectors = SqliteVectorStore(directory / "memory.db")
        self.embedder = OpenAIEmbedder(endpoint.url, "slow", DIMENSIONS)
        recall = Recall(self.memory, self.vectors, self.embedder, self.knowledge, clock=clock)
        self.host = Host(
            self.memory,
            self.knowledge,
            self.registry,
            clock=clock,
            settings=HostSettings(**settings),
            recall=recall,
        )
        self.host.register_document("ann", "doc")
        notebook, _ = self.host.open_notebook("ann", "doc", directory.name)
        self.token = self.host.agent_token(notebook.id)

    def call(self) -> tuple[float, dict[str, Any]]:
        started = time.perf_counter()
        answer = self.host.call_tool(self.token, "recall", {"text": "coral reef recovery"})
        return time.perf_counter() - started, answer

    def close(self) -> None:
        self.host.stop()
        for store in (self.vectors, self.memory, self.knowledge, self.registry):
            store.close()


def bench(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    endpoint = SlowEndpoint(args.sleep)
    threading.Thread(target=endpoint.serve_forever, args=(0.01,), daemon=True).start()
    results: dict[str, Any] = {"endpoint_sleep_s": args.sleep, "deadline_s": args.deadline}
    try:
        (workdir / "on").mkdir()
        on = Setup(
            workdir / "on",
            endpoint,
            recall_shadow=False,
            recall_deadline=timedelta(seconds=args.deadline),
        )
        timings, codes = [], set()
        for _ in range(args.calls):
            seconds, answer = on.call()
            timings.append(seconds)
            codes.add(answer.get("error", {}).get("code", "ok"))
        results["on_sequential"] = {**summary(timings), "answers": sorted(codes)}
        results["on_sequential"]["overshoot_max_ms"] = round(
            results["on_sequential"]["max_ms"] - 1000 * args.deadline, 2
        )
        parallel: list[float] = []
        lock = threading.Lock()

        def caller() -> None:
            seconds, _ = on.call()
            with lock:
                parallel.append(seconds)

        threads = [threading.Thread(target=caller) for _ in range(args.parallel)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        results["on_parallel"] = {**summary(parallel), "callers": args.parallel}
        on.close()

        (workdir / "shadow").mkdir()
        shadow = Setup(
            workdir / "shadow", endpoint, recall_deadline=timedelta(seconds=args.deadline)
        )
        timings = [shadow.call()[0] for _ in range(args.calls)]
        results["shadow"] = summary(timings)
        shadow.close()

        if args.baseline:
            adapter = OpenAIEmbedder(endpoint.url, "slow", DIMENSIONS)
            started = time.perf_counter()
            try:
                adapter.embed(["coral reef recovery"])
                outcome = "answered"
            except Exception as exc:  # the adapter's own timeout and retries ran out
                outcome = type(exc).__name__
            results["baseline_adapter_alone"] = {
                "seconds": round(time.perf_counter() - started, 2),
                "outcome": outcome,
            }
            adapter.close()
            results["ratio_on_p50_vs_baseline"] = round(
                results["on_sequential"]["p50_ms"]
                / 1000
                / results["baseline_adapter_alone"]["seconds"],
                4,
            )
    finally:
        endpoint.stop.set()
        endpoint.shutdown()
        endpoint.server_close()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls, a 3 s endpoint")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--sleep", type=float, default=None, help="endpoint delay (30 s)")
    parser.add_argument("--deadline", type=float, default=2.0, help="recall deadline (2 s)")
    parser.add_argument("--calls", type=int, default=None, help="calls per figure (20)")
    parser.add_argument("--parallel", type=int, default=16, help="parallel callers (16)")
    parser.add_argument("--no-baseline", dest="baseline", action="store_false")
    parser.add_argument("--dir", help="parent directory for the temporary databases")
    args = parser.parse_args()
    if args.sleep is None:
        args.sleep = 3.0 if args.quick else 30.0
    if args.calls is None:
        args.calls = 3 if args.quick else 20
    if args.quick:
        args.deadline = min(args.deadline, 0.5)
    with tempfile.TemporaryDirectory(dir=args.dir) as workdir:
        results = {
            "python": platform.python_version(),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            **bench(args, Path(workdir)),
        }
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"python {results['python']} on {results['machine']}")
    print(
        f"endpoint holds each request {results['endpoint_sleep_s']:g} s;"
        f" recall deadline {results['deadline_s']:g} s"
    )
    on = results["on_sequential"]
    print(
        f"on, sequential: p50 {on['p50_ms']:.1f} ms, p95 {on['p95_ms']:.1f} ms, max"
        f" {on['max_ms']:.1f} ms (max {on['overshoot_max_ms']:+.1f} ms past the deadline);"
        f" answers {', '.join(on['answers'])}"
    )
    par = results["on_parallel"]
    print(
        f"on, {par['callers']} callers at once: p50 {par['p50_ms']:.1f} ms, max"
        f" {par['max_ms']:.1f} ms"
    )
    sh = results["shadow"]
    print(
        f"shadow: p50 {sh['p50_ms']:.2f} ms, p95 {sh['p95_ms']:.2f} ms, max {sh['max_ms']:.2f} ms"
    )
    if "baseline_adapter_alone" in results:
        base = results["baseline_adapter_alone"]
        print(
            f"baseline, the adapter alone: {base['seconds']:.1f} s ({base['outcome']});"
            f" on p50 = {results['ratio_on_p50_vs_baseline']:.4f}x baseline"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
