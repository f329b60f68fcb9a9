"""``oh serve --workers N``: N processes on one port over one data directory, as a user runs it.

Which process answers a connection is the kernel's choice; the tests find out from ``/proc``
(the process holding the server end of the connection), so a retry is sent to another process
than the original on purpose, not by luck.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from oh.testing.postgres_cluster import fresh_schema, shared_cluster
from oh.testing.served import Served, oh_command

OWNER = "ann"
DOCUMENT = "reef-survey"

linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="finds the serving process in /proc"
)


@pytest.fixture(scope="module", params=["libsql", "postgres"])
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """``oh serve --workers 2`` over a data directory (one libSQL file per database, in WAL
    mode) or over one PostgreSQL schema."""
    data = tmp_path_factory.mktemp("workers") / "data"
    with contextlib.ExitStack() as stack:
        env: dict[str, str] = {}
        if request.param == "postgres":
            schema = stack.enter_context(fresh_schema(shared_cluster()))
            env = {"OH_MEMORY_URL": schema.url(), "OH_KNOWLEDGE_URL": schema.url()}
        yield stack.enter_context(Served(data, args=["--workers", "2"], env=env))


def _workers(served: Served) -> set[int]:
    """The pids of the serving processes: the children of ``oh serve`` that multiprocessing
    spawned (not its resource tracker)."""
    children: set[int] = set()
    for task in Path(f"/proc/{served.process.pid}/task").iterdir():
        for pid in (task / "children").read_text().split():
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes()
            except (FileNotFoundError, ProcessLookupError):
                continue  # it ended (and was reaped) between the two reads: not serving
            if b"spawn_main" in command:
                children.add(int(pid))
    return children


def _serving_pid(served: Served, connection: http.client.HTTPConnection) -> int:
    """The worker holding the server end of ``connection`` (connected already)."""
    assert connection.sock is not None
    client_port = connection.sock.getsockname()[1]
    inode = None
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = fields[1], fields[2]
        if int(local.split(":")[1], 16) == served.port and int(remote.split(":")[1], 16) == (
            client_port
        ):
            inode = fields[9]
    assert inode is not None
    for pid in _workers(served):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                if fd.readlink().name == f"socket:[{inode}]":
                    return pid
            except OSError:
                continue
    raise AssertionError("no worker holds the connection")


def _post(
    connection: http.client.HTTPConnection, path: str, token: str, body: dict[str, Any]
) -> tuple[int, dict[str, Any]]:
    connection.request(
        "POST",
        path,
        body=json.dumps(body),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    answer = connection.getresponse()
    return answer.status, json.loads(answer.read())


def _connection_to_each_worker(served: Served) -> dict[int, http.client.HTTPConnection]:
    """A kept-alive connection answered by each worker (connect until every one has one)."""
    wanted = _workers(served)
    assert len(wanted) == 2
    found: dict[int, http.client.HTTPConnection] = {}
    for _ in range(400):
        connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
        connection.request("GET", "/healthz")
        connection.getresponse().read()
        pid = _serving_pid(served, connection)
        if pid in found:
            connection.close()
        else:
            found[pid] = connection
        if set(found) == wanted:
            return found
    raise AssertionError(f"only workers {sorted(found)} of {sorted(wanted)} answered")


def _remember(based_on: int, request_id: str, name: str) -> dict[str, Any]:
    change = {"op": "add", "record": {"name": name, "text": f"{name} seen on the reef"}}
    return {"based_on": based_on, "request_id": request_id, "changes": [change]}


@linux_only
def test_two_workers_serve_the_port_and_a_retry_on_the_other_answers_the_original(
    served: Served,
) -> None:
    opened = served.open_notebook(OWNER, DOCUMENT, "retry")
    notebook, token = opened["notebook"]["id"], opened["agent_token"]
    path = f"/v1/notebooks/{notebook}/tools/remember"
    first, second = _connection_to_each_worker(served).values()
    body = _remember(0, "retry-1", "note:crab")
    status, original = _post(first, path, token, body)
    assert status == 200 and original["status"] == "applied"
    assert _post(second, path, token, body) == (200, original)
    assert _post(first, path, token, body) == (200, original)
    # The same request id with another payload is refused on either worker, and nothing moved.
    other = _remember(0, "retry-1", "note:eel")
    for connection in (first, second):
        status, refused = _post(connection, path, token, other)
        assert refused["error"]["code"] == "request_id_reused"
    status, read = _post(
        second, f"/v1/notebooks/{notebook}/tools/read", token, {"name": "note:eel"}
    )
    assert read["error"]["code"] == "not_found"
    assert _post(first, path, token, _remember(1, "retry-2", "note:eel"))[1]["version"] == 2


def test_concurrent_writers_on_several_notebooks_and_readers_then_verify_is_clean(
    served: Served,
) -> None:
    notebooks = [served.open_notebook(OWNER, DOCUMENT, f"busy-{index}") for index in range(4)]
    writes = 25

    def writer(opened: dict[str, Any]) -> list[int]:
        notebook, token = opened["notebook"]["id"], opened["agent_token"]
        versions: list[int] = []
        version = 0
        while len(versions) < writes:
            # A fresh connection now and then: the kernel spreads them over the workers.
            connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=60)
            for _ in range(5):
                index = len(versions)
                body = _remember(version, f"w-{index}", f"note:n{index}")
                status, answer = _post(
                    connection, f"/v1/notebooks/{notebook}/tools/remember", token, body
                )
                assert status == 200 and answer["status"] == "applied", answer
                version = answer["version"]
                versions.append(version)
            connection.close()
        return versions

    def reader(opened: dict[str, Any]) -> int:
        notebook, token = opened["notebook"]["id"], opened["agent_token"]
        seen = 0
        for _ in range(10):
            connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=60)
            status, answer = _post(
                connection,
                f"/v1/notebooks/{notebook}/tools/query",
                token,
                {"question": "current_notes", "limit": 100},
            )
            connection.close()
            assert status == 200, answer
            assert len(answer["rows"]) >= seen  # a reader never sees a write undone
            seen = len(answer["rows"])
        return seen

    with ThreadPoolExecutor(max_workers=8) as pool:
        written = [pool.submit(writer, opened) for opened in notebooks]
        read = [pool.submit(reader, opened) for opened in notebooks]
        versions = [future.result() for future in written]
        assert all(0 <= future.result() <= writes for future in read)
    assert versions == [list(range(1, writes + 1))] * len(notebooks)
    for opened in notebooks:
        connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=60)
        _, answer = _post(
            connection,
            f"/v1/notebooks/{opened['notebook']['id']}/tools/query",
            opened["agent_token"],
            {"question": "current_notes", "limit": 100},
        )
        connection.close()
        assert sorted(row["name"] for row in answer["rows"]) == sorted(
            f"note:n{index}" for index in range(writes)
        )
    done = served.oh("verify", check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_stopping_the_server_stops_every_worker(tmp_path: Path) -> None:
    with Served(tmp_path / "data", args=["--workers", "2"]) as running:
        workers = _workers(running) if sys.platform.startswith("linux") else set()
        running.stop()
        assert running.process.returncode == 0, running.output()
    for pid in workers:
        assert not Path(f"/proc/{pid}").exists()


@linux_only
def test_a_worker_that_dies_is_started_again_and_the_port_keeps_answering(
    tmp_path: Path,
) -> None:
    with Served(tmp_path / "data", args=["--workers", "2"]) as running:
        before = _workers(running)
        victim = min(before)
        os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while True:
            now = _workers(running)
            if len(now) == 2 and victim not in now:
                break
            assert time.monotonic() < deadline, running.output()
            time.sleep(0.1)
        for _ in range(10):  # fresh connections, whichever worker takes them
            connection = http.client.HTTPConnection("127.0.0.1", running.port, timeout=30)
            connection.request("GET", "/healthz")
            assert connection.getresponse().status == 200
            connection.close()
        assert "ended (exit status -9); starting it again" in running.output()


@pytest.mark.parametrize("workers", ["0", "-1", "two", "1.5", "", "257", "9" * 40])
def test_workers_must_be_a_positive_whole_number(tmp_path: Path, workers: str) -> None:
    done = subprocess.run(
        [*oh_command(), "serve", "--data", str(tmp_path / "data"), "--workers", workers],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "argument --workers" in done.stderr
    assert not (tmp_path / "data").exists()
