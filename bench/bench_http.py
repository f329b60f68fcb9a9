"""HTTP overhead of the reference host (issue 6), against in-process tool calls measured in the
same run on the same data directory.

    python bench/bench_http.py            # full run (~1 minute)
    python bench/bench_http.py --quick

Starts ``oh serve`` as a real process on 127.0.0.1 and measures:
- p50 of ``read`` and ``query`` through HTTP (one keep-alive client) minus the same call made
  in process through ``Tools.call`` — target ≤ 1 ms extra at p50;
- requests/s for ``remember`` (each client its own notebook, durable writes) and ``read``
  from 8 concurrent clients (threads with their own keep-alive connections).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from oh.config import Locations, open_host


def p50(fn: Callable[[], Any], runs: int) -> float:
    for _ in range(min(50, runs)):
        fn()
    samples = []
    for _ in range(runs):
        start = time.perf_counter_ns()
        fn()
        samples.append(time.perf_counter_ns() - start)
    return statistics.median(samples) / 1000


def mcp_p50(url: str, token: str, arguments: dict[str, Any], runs: int) -> float:
    """p50 of one MCP tool call through the official client over streamable HTTP."""
    import asyncio

    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def measure() -> float:
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            samples = []
            for index in range(runs + 20):
                start = time.perf_counter_ns()
                await client.call_tool("read", arguments)
                if index >= 20:
                    samples.append(time.perf_counter_ns() - start)
            return statistics.median(samples) / 1000

    return asyncio.run(measure())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    runs, seconds = (200, 2.0) if args.quick else (2000, 8.0)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="oh-bench-http-") as tmp:
        data = Path(tmp)
        host = open_host(Locations.resolve(str(data)))
        host.register_document("bench", "doc")
        notebooks = []
        for client in range(9):
            notebook, _ = host.open_notebook("bench", "doc", f"run-{client}")
            notebooks.append((notebook.id, host.agent_token(notebook.id)))
        first_id, first_token = notebooks[0]
        changes = [
            {"op": "add", "record": {"name": f"note:n{i:04d}", "text": "reef " * 20}}
            for i in range(64)
        ]
        for start in range(0, 1000, 64):
            batch = [
                dict(c, record={**c["record"], "name": f"note:n{start + i:04d}"})
                for i, c in enumerate(changes)
            ]
            version = host._memory.notebook(first_id).version
            host.call_tool(
                first_token,
                "remember",
                {"based_on": version, "request_id": f"seed-{start}", "changes": batch},
            )
        read_args = {"name": "note:n0500"}
        query_args = {"question": "current_notes", "limit": 50}
        in_read = p50(lambda: host.call_tool(first_token, "read", read_args), runs)
        in_query = p50(lambda: host.call_tool(first_token, "query", query_args), runs)
        host.close()

        port = free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "oh.cli", "serve", "--data", str(data), "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        base = f"http://127.0.0.1:{port}"
        try:
            for _ in range(300):
                try:
                    httpx.get(f"{base}/healthz", timeout=0.5)
                    break
                except httpx.HTTPError:
                    time.sleep(0.1)
            tools = f"{base}/v1/notebooks/{first_id}/tools"
            with httpx.Client(headers={"Authorization": f"Bearer {first_token}"}) as client:
                http_read = p50(lambda: client.post(f"{tools}/read", json=read_args), runs)
                http_query = p50(lambda: client.post(f"{tools}/query", json=query_args), runs)
            mcp_read = mcp_p50(f"{base}/mcp", first_token, read_args, runs // 4)
            results += [
                {
                    "metric": "read: MCP (streamable HTTP) tool call p50",
                    "oh": mcp_read,
                    "baseline": in_read,
                    "unit": "us",
                    "target": "-",
                },
                {
                    "metric": "read: HTTP p50 minus in-process p50",
                    "oh": http_read - in_read,
                    "baseline": in_read,
                    "unit": "us extra",
                    "target": "<= 1000 us",
                },
                {
                    "metric": "query: HTTP p50 minus in-process p50",
                    "oh": http_query - in_query,
                    "baseline": in_query,
                    "unit": "us extra",
                    "target": "<= 1000 us",
                },
            ]

            def load(tool: str) -> float:
                done = [0] * 8
                stop = time.monotonic() + seconds

                def worker(index: int) -> None:
                    notebook_id, token = notebooks[index + 1]
                    url = f"{base}/v1/notebooks/{notebook_id}/tools/{tool}"
                    with httpx.Client(headers={"Authorization": f"Bearer {token}"}) as http:
                        version = 0
                        while time.monotonic() < stop:
                            if tool == "remember":
                                body = {
                                    "based_on": version,
                                    "request_id": f"{tool}-{version}",
                                    "changes": [
                                        {
                                            "op": "add",
                                            "record": {"name": f"note:w{version}", "text": "reef"},
                                        }
                                    ],
                                }
                                answer = http.post(url, json=body).json()
                                version = answer.get("version", version)
                            else:
                                http.post(url, json={"name": "note:w1"})
                            done[index] += 1

                threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
                return sum(done) / seconds

            results.append(
                {
                    "metric": "remember requests/s, 8 clients (durable)",
                    "oh": load("remember"),
                    "baseline": None,
                    "unit": "req/s",
                    "target": "-",
                }
            )
            results.append(
                {
                    "metric": "read requests/s, 8 clients",
                    "oh": load("read"),
                    "baseline": None,
                    "unit": "req/s",
                    "target": "-",
                }
            )
        finally:
            server.terminate()
            server.wait(timeout=10)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"{'metric':44} {'figure':>12} {'in-process':>12}  target")
    for row in results:
        baseline = "-" if row["baseline"] is None else f"{row['baseline']:.1f} us"
        print(
            f"{row['metric']:44} {row['oh']:>9.1f} {row['unit'][:2]:2} {baseline:>12}"
            f"  {row['target']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
