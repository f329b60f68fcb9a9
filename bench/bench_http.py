"""HTTP overhead of the reference host (issue 6), against in-process tool calls measured in the
same run on the same data directory.

    python bench/bench_http.py            # full run (~1 minute)
    python bench/bench_http.py --quick

Starts ``oh serve`` as a real process on 127.0.0.1 and measures:
- p50 of ``read`` and ``query`` through HTTP (one keep-alive client) minus the same call made
  in process through ``Tools.call`` — target ≤ 1 ms extra at p50;
- p50 of the same ``read`` as an MCP tool call (official client, streamable HTTP), as a ratio
  to the HTTP route — target ≤ 2×;
- requests/s for ``remember`` (each client its own notebook, durable writes) and ``read`` from 8
  concurrent keep-alive clients, as a ratio to a bare endpoint of the same server stack
  (``/healthz``: the same uvicorn and app, a fixed small JSON body) driven by the same load
  generator in the same run — targets ≥ 0.5× (remember) and ≥ 0.7× (read).

The load generator is ``GENERATOR_PROCESSES`` processes of asyncio raw-socket clients (one
keep-alive connection each, one request in flight per connection, no pipelining), not Python
HTTP client threads, which on a small machine are the limit themselves. Its own ceiling is
printed too: the same clients against a raw asyncio server answering fixed bytes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
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


GENERATOR_PROCESSES = 2
CLIENTS = 8


def _request(method: str, path: str, token: str | None, body: bytes | None) -> bytes:
    head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    if token is not None:
        head.append(f"Authorization: Bearer {token}")
    if body is not None:
        head += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + (body or b"")


async def _client(port: int, job: dict[str, Any], stop: float) -> tuple[int, int]:
    """One keep-alive connection sending ``job`` until ``stop``: (answered, not 200)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    done = failed = 0
    version = 0
    try:
        while time.monotonic() < stop:
            if job["tool"] == "remember":
                body = json.dumps(
                    {
                        "based_on": version,
                        "request_id": f"{job['run']}-{version}",
                        "changes": [
                            {"op": "add", "record": {"name": f"note:w{version}", "text": "reef"}}
                        ],
                    }
                ).encode()
                request = _request("POST", job["path"], job["token"], body)
            else:
                request = job["request"]
            writer.write(request)
            status_line = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in status_line.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            payload = await reader.readexactly(length)
            done += 1
            if not status_line.startswith(b"HTTP/1.1 200"):
                failed += 1
            elif job["tool"] == "remember":
                version = json.loads(payload).get("version", version)
    finally:
        writer.close()
    return done, failed


def _generator(
    port: int, jobs: list[dict[str, Any]], start: float, seconds: float, out: Any
) -> None:
    async def run() -> list[tuple[int, int]]:
        await asyncio.sleep(max(0.0, start - time.time()))
        stop = time.monotonic() + seconds
        return await asyncio.gather(*(_client(port, job, stop) for job in jobs))

    counts = asyncio.run(run())
    out.put((sum(c[0] for c in counts), sum(c[1] for c in counts)))


def load(port: int, jobs: list[dict[str, Any]], seconds: float) -> float:
    """Requests/s answered for ``jobs`` (one connection each), spread over the generator's
    processes; every answer must be 200."""
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    start = time.time() + 1.0  # every process connected and waiting before the clock starts
    share = [jobs[i::GENERATOR_PROCESSES] for i in range(GENERATOR_PROCESSES)]
    processes = [
        context.Process(target=_generator, args=(port, part, start, seconds, out))
        for part in share
        if part
    ]
    for process in processes:
        process.start()
    results = [out.get(timeout=seconds + 60) for _ in processes]
    for process in processes:
        process.join()
    failed = sum(r[1] for r in results)
    if failed:
        raise SystemExit(f"{failed} requests were not answered 200")
    return sum(r[0] for r in results) / seconds


def in_process_remember(host: Any, notebooks: list[tuple[str, str]], seconds: float) -> float:
    """Durable remember calls/s made straight on ``Host`` by one thread per notebook: what the
    storage allows without any transport."""
    done = [0] * len(notebooks)
    stop = time.monotonic() + seconds

    def writer(index: int) -> None:
        _, token = notebooks[index]
        version = 0
        while time.monotonic() < stop:
            body = {
                "based_on": version,
                "request_id": f"in-{version}",
                "changes": [{"op": "add", "record": {"name": f"note:w{version}", "text": "reef"}}],
            }
            version = host.call_tool(token, "remember", body).get("version", version)
            done[index] += 1

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(len(notebooks))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(done) / seconds


def _raw_server(port: int, ready: Any) -> None:
    """The generator's ceiling: a raw asyncio server answering every request with fixed bytes."""
    reply = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 15\r\n\r\n"
    reply += b'{"status":"ok"}'

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                for line in head.split(b"\r\n"):
                    if line[:15].lower() == b"content-length:":
                        await reader.readexactly(int(line[15:]))
                writer.write(reply)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def serve() -> None:
        server = await asyncio.start_server(answer, "127.0.0.1", port)
        ready.set()
        async with server:
            await server.serve_forever()

    asyncio.run(serve())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--workers", type=int, default=1, help="oh serve --workers (1)")
    args = parser.parse_args()
    runs, seconds = (200, 2.0) if args.quick else (2000, 8.0)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="oh-bench-http-") as tmp:
        data = Path(tmp)
        host = open_host(Locations.resolve(str(data)))
        host.register_document("bench", "doc")
        notebooks = []
        for client in range(2 * CLIENTS + 1):
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
        in_remember = in_process_remember(host, notebooks[CLIENTS + 1 :], seconds)
        host.close()

        context = multiprocessing.get_context("spawn")
        raw_port = free_port()
        ready = context.Event()
        raw = context.Process(target=_raw_server, args=(raw_port, ready), daemon=True)
        raw.start()
        ready.wait(30)
        bare_jobs = [
            {"tool": "bare", "request": _request("GET", "/healthz", None, None)}
            for _ in range(CLIENTS)
        ]
        try:
            ceiling = load(raw_port, bare_jobs, seconds)
        finally:
            raw.terminate()
            raw.join()

        port = free_port()
        command = [
            sys.executable,
            "-m",
            "oh.cli",
            "serve",
            "--data",
            str(data),
            "--port",
            str(port),
        ]
        if args.workers != 1:
            command += ["--workers", str(args.workers)]
        server = subprocess.Popen(
            command,
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
                {
                    "metric": "read: MCP tool call p50 (streamable HTTP)",
                    "oh": mcp_read,
                    "baseline": http_read,
                    "unit": "us",
                    "target": "-",
                    "ratio": mcp_read / http_read,
                    "ratio_target": "<= 2.0 (MCP / HTTP route)",
                },
            ]
            bare = load(port, bare_jobs, seconds)
            remember = load(
                port,
                [
                    {
                        "tool": "remember",
                        "run": "remember",
                        "path": f"/v1/notebooks/{notebook_id}/tools/remember",
                        "token": token,
                    }
                    for notebook_id, token in notebooks[1 : CLIENTS + 1]
                ],
                seconds,
            )
            read_body = json.dumps({"name": "note:n0500"}).encode()
            read = load(
                port,
                [
                    {
                        "tool": "read",
                        "request": _request(
                            "POST", f"/v1/notebooks/{first_id}/tools/read", first_token, read_body
                        ),
                    }
                    for _ in range(CLIENTS)
                ],
                seconds,
            )
            results += [
                {
                    "metric": "generator ceiling: raw asyncio server, 8 clients",
                    "oh": ceiling,
                    "baseline": None,
                    "unit": "req/s",
                    "target": "-",
                },
                {
                    "metric": "bare endpoint (/healthz, same stack), 8 clients",
                    "oh": bare,
                    "baseline": None,
                    "unit": "req/s",
                    "target": "-",
                    "ratio": bare / ceiling,
                    "ratio_target": "- (of the generator ceiling)",
                },
                {
                    "metric": "remember calls/s in process, 8 threads (durable)",
                    "oh": in_remember,
                    "baseline": None,
                    "unit": "req/s",
                    "target": "-",
                },
                {
                    "metric": "remember requests/s, 8 clients (durable)",
                    "oh": remember,
                    "baseline": bare,
                    "unit": "req/s",
                    "target": "-",
                    "ratio": remember / bare,
                    "ratio_target": ">= 0.5 (of the bare endpoint)",
                },
                {
                    "metric": "read requests/s, 8 clients",
                    "oh": read,
                    "baseline": bare,
                    "unit": "req/s",
                    "target": "-",
                    "ratio": read / bare,
                    "ratio_target": ">= 0.7 (of the bare endpoint)",
                },
            ]
        finally:
            server.terminate()
            server.wait(timeout=30)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"oh serve --workers {args.workers}; load generator: {GENERATOR_PROCESSES} processes")
    print(f"{'metric':50} {'figure':>12} {'baseline':>12}  {'ratio':>6}  target")
    for row in results:
        unit = "us" if row["unit"].startswith("us") else "/s"
        baseline = "-" if row["baseline"] is None else f"{row['baseline']:.1f} {unit}"
        ratio = f"{row['ratio']:.2f}" if "ratio" in row else "-"
        target = row.get("ratio_target", row["target"])
        print(f"{row['metric']:50} {row['oh']:>9.1f} {unit:2} {baseline:>12}  {ratio:>6}  {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
