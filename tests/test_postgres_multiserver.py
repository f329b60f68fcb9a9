"""Several stateless `oh serve` processes in front of one PostgreSQL (SPEC §10): version checks
and idempotency hold across servers because the database enforces them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from oh.testing.postgres_cluster import Schema, fresh_schema, shared_cluster

CLIENTS = 8
WRITES_PER_CLIENT = 25


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def schema() -> Iterator[Schema]:
    with fresh_schema(shared_cluster()) as schema:
        yield schema


@pytest.fixture
def env(schema: Schema, tmp_path: Path) -> dict[str, str]:
    """Both databases on PostgreSQL, and one keys directory for every process (docs/keys.md):
    the servers start together, and one of them creates the master key."""
    return {
        **os.environ,
        "OH_MEMORY_URL": schema.url(),
        "OH_KNOWLEDGE_URL": schema.url(),
        "OH_KEYS": str(tmp_path / "keys"),
    }


@pytest.fixture
def servers(env: dict[str, str]) -> Iterator[list[str]]:
    urls, processes = [], []
    for _ in range(2):
        port = _free_port()
        processes.append(
            subprocess.Popen(
                [sys.executable, "-m", "oh.cli", "serve", "--port", str(port)],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
        urls.append(f"http://127.0.0.1:{port}")
    try:
        for url, process in zip(urls, processes, strict=True):
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"oh serve did not start: {process.stderr.read()}")  # type: ignore[union-attr]
                time.sleep(0.2)
        yield urls
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=20)


def test_many_servers_one_database_no_lost_update(
    schema: Schema, servers: list[str], env: dict[str, str]
) -> None:
    token = (
        subprocess.run(
            [sys.executable, "-m", "oh.cli", "token", "create", "--owner", "ann"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    owner = {"Authorization": f"Bearer {token}"}
    assert httpx.put(f"{servers[0]}/v1/documents/doc", headers=owner).status_code == 201
    notebooks = []
    for run in ("run-a", "run-b"):
        opened = httpx.post(
            f"{servers[1]}/v1/documents/doc/notebooks", headers=owner, json={"run": run}
        ).json()
        notebooks.append((opened["notebook"]["id"], opened["agent_token"]))
    # The same run through the other server is the same notebook (the database decides).
    again = httpx.post(
        f"{servers[0]}/v1/documents/doc/notebooks", headers=owner, json={"run": "run-a"}
    ).json()
    assert again["notebook"]["id"] == notebooks[0][0]

    applied: list[tuple[str, int, str, dict[str, Any], dict[str, Any]]] = []
    refusals: list[tuple[int, int]] = []
    lock = threading.Lock()

    def client(index: int) -> None:
        notebook_id, agent = notebooks[index % 2]
        headers = {"Authorization": f"Bearer {agent}"}
        done = 0
        with httpx.Client(headers=headers, timeout=30) as http:
            while done < WRITES_PER_CLIENT:
                server = servers[(index + done) % 2]
                tools = f"{server}/v1/notebooks/{notebook_id}/tools"
                read = http.post(
                    f"{tools}/query", json={"question": "changes_since", "since": 0}
                ).json()
                based_on = read["version"]
                request = {
                    "based_on": based_on,
                    "request_id": f"c{index}-{done}",
                    "changes": [
                        {"op": "add", "record": {"name": f"note:c{index}-{done}", "text": "x"}}
                    ],
                }
                answer = http.post(f"{tools}/remember", json=request).json()
                with lock:
                    if answer["status"] == "applied":
                        applied.append((notebook_id, answer["version"], server, request, answer))
                        done += 1
                    else:
                        refusals.append((based_on, answer["current_version"]))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    for notebook_id, agent in notebooks:
        versions = sorted(v for n, v, *_ in applied if n == notebook_id)
        assert versions == list(range(1, len(versions) + 1))  # contiguous: no lost update
        headers = {"Authorization": f"Bearer {agent}"}
        current = httpx.post(
            f"{servers[0]}/v1/notebooks/{notebook_id}/tools/query",
            headers=headers,
            json={"question": "current_notes", "limit": 200},
        ).json()
        assert len(current["rows"]) == len(versions) == CLIENTS // 2 * WRITES_PER_CLIENT
    assert all(current_version > based_on for based_on, current_version in refusals)
    # An identical retry through the other server returns the original result, writes nothing.
    for notebook_id, _version, server, request, answer in applied[:10]:
        other = servers[1] if server == servers[0] else servers[0]
        agent = dict(notebooks)[notebook_id]
        retry = httpx.post(
            f"{other}/v1/notebooks/{notebook_id}/tools/remember",
            headers={"Authorization": f"Bearer {agent}"},
            json=request,
        ).json()
        assert retry == answer
