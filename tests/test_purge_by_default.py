"""Forgetting on schedule with nothing but the README: ``oh serve`` runs the purge worker.

The default path, as a user gets it: ``oh serve`` started exactly as the README's first command
starts it (no flag but the port, in a fresh directory, so the data goes to ``./oh-data`` and
the keys to ``./oh-data-keys``), a notebook opened and written to with the commands the docs
give, then the server's clock moved past the notebook's forget time by libfaketime with a
timestamp file (the running server and its purge process read the moved clock). Nobody runs
``oh purge``: the notebook must be ``purged`` within two purge periods of the default 60 s,
and its note's text must be in no file of the data or keys directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from oh.testing.served import free_port, remember_over_http

OH = Path(sys.executable).parent / "oh"  # the console script this venv installed
FAKETIME = next(Path("/usr/lib").glob("*/faketime/libfaketime.so.1"), Path("/nonexistent"))
MARK = "zpurgedefault7c41"  # the note's text: searched for in every file afterwards
PERIOD = 60.0  # the default --purge-every

pytestmark = pytest.mark.skipif(
    not FAKETIME.is_file(), reason="libfaketime is not installed (scripts/test installs it)"
)


def _env(clock_file: Path) -> dict[str, str]:
    """A user's environment (no OH_* variable, no test clock shift), the clock from the file."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("OH_") and name not in ("PYTHONPATH", "VIRTUAL_ENV")
    }
    return {
        **env,
        "LD_PRELOAD": str(FAKETIME),
        "FAKETIME_TIMESTAMP_FILE": str(clock_file),
        "FAKETIME_NO_CACHE": "1",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "PYTHONUNBUFFERED": "1",
    }


def _oh(cwd: Path, env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [str(OH), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _serving(argv: list[str], env: dict[str, str], cwd: Path | None = None) -> Any:
    """``oh serve`` as a child whose banner (6 lines) has been read: ``(process, banner)``."""
    server = subprocess.Popen(
        [str(OH), "serve", *argv],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    return server, [server.stdout.readline() for _ in range(6)]


def _users_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("OH_")}


def _every_file_holds(root: Path, text: str) -> list[str]:
    needle = text.encode()
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def _state(url: str, owner: str, notebook_id: str) -> dict[str, Any]:
    answer = httpx.get(
        f"{url}/v1/notebooks/{notebook_id}",
        headers={"Authorization": f"Bearer {owner}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


@pytest.mark.parametrize("ahead", ["+25h", "+400d"], ids=["a-day-ahead", "a-year-ahead"])
def test_a_default_oh_serve_forgets_an_expired_notebook_within_two_purge_periods(
    tmp_path: Path, ahead: str
) -> None:
    home = tmp_path / "fresh"
    home.mkdir()
    clock = tmp_path / "clock"
    clock.write_text("+0\n")
    env = _env(clock)
    port = free_port()
    server, banner = _serving(["--port", str(port)], env, cwd=home)
    try:
        assert "serving memory from" in banner[0], banner
        assert any("Purge      every 60 s" in line for line in banner), banner
        url = f"http://127.0.0.1:{port}"
        health = httpx.get(f"{url}/healthz", timeout=30).json()
        assert health["purge"]["every"] == PERIOD

        owner = _oh(home, env, "token", "create", "--owner", "you").strip().splitlines()[-1]
        _oh(home, env, "document", "put", "--owner", "you", "trial-protocol")
        opening = ["--owner", "you", "--document", "trial-protocol", "--run", "run-1"]
        opened = json.loads(_oh(home, env, "notebook", "open", *opening, "--url", url, "--json"))
        notebook_id, agent = opened["notebook"]["id"], opened["agent_token"]
        remember_over_http(url, agent, notebook_id, "finding:status", MARK)
        assert _state(url, owner, notebook_id)["state"] == "open"

        clock.write_text(f"{ahead}\n")  # the server's clock, and its purge process's, jump
        moved = time.monotonic()
        while True:
            state = _state(url, owner, notebook_id)["state"]
            if state == "purged":
                break
            assert state == "expired", state
            assert time.monotonic() - moved < 2 * PERIOD + 15, "not purged in two periods"
            time.sleep(1)
        last = httpx.get(f"{url}/healthz", timeout=30).json()["purge"]["last_pass"]
        assert last["event"] == "purge_pass" and last["purged"] >= 1, last
        server.terminate()
        _, log = server.communicate(timeout=30)
        assert re.search(r"purge pass at \S+: 1 expired notebooks forgotten", log), log
        found = _every_file_holds(home, MARK)
        assert found == [], found
        assert sorted(p.name for p in home.iterdir()) == ["oh-data", "oh-data-keys"]
    except BaseException:
        # What the server logged goes into the failure's report (a 503 here once, in CI).
        if server.poll() is None:
            server.kill()
        with contextlib.suppress(Exception):  # (already read, when a check of it failed)
            print("oh serve's log:", server.communicate(timeout=30)[1], sep="\n")
        raise
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=30)


def test_no_purge_runs_no_worker_and_the_banner_says_so(tmp_path: Path) -> None:
    port = free_port()
    argv = ["--data", str(tmp_path / "d"), "--port", str(port), "--no-purge"]
    server, banner = _serving(argv, _users_env())
    try:
        assert any("Purge      off (--no-purge)" in line for line in banner), banner
        health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=30).json()
        assert "purge" not in health
        children = subprocess.run(
            ["pgrep", "-P", str(server.pid)], capture_output=True, text=True, check=False
        ).stdout.split()
        assert children == []
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_the_purge_worker_stops_with_the_server(tmp_path: Path) -> None:
    port = free_port()
    server, _ = _serving(["--data", str(tmp_path / "d"), "--port", str(port)], _users_env())
    try:
        deadline = time.monotonic() + 60
        while True:  # the worker's first pass lands in /healthz
            last = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=30).json()["purge"]
            if last["last_pass"] is not None:
                break
            assert time.monotonic() < deadline, last
            time.sleep(0.2)
        assert last["last_pass"]["event"] == "purge_pass"
        children = subprocess.run(
            ["pgrep", "-P", str(server.pid)], capture_output=True, text=True, check=False
        ).stdout.split()
        assert len(children) == 1
        server.terminate()
        server.wait(timeout=30)
        time.sleep(0.5)
        assert not Path(f"/proc/{children[0]}").exists() or _zombie(children[0])
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=30)


def _zombie(pid: str) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


def test_on_postgres_the_purge_worker_runs_with_the_purge_role(tmp_path: Path) -> None:
    """Both databases on PostgreSQL, the purge worker given the purge role's URL (a credential
    that can delete expired notebooks and nothing else, tests/test_postgres_purge_role.py):
    its passes run, and /healthz shows them. (The clock cannot be moved here: the purge role
    takes "now" from the worker but never more than a minute ahead of the database's own
    clock, which libfaketime does not reach, by design.)"""
    from oh.testing.postgres_cluster import find_binaries, fresh_schema, shared_cluster

    if find_binaries() is None:
        pytest.skip("PostgreSQL server binaries are not installed")
    with fresh_schema(shared_cluster()) as schema:
        env = _users_env() | {
            "OH_MEMORY_URL": schema.url(),
            "OH_KNOWLEDGE_URL": schema.url(),
            "OH_KEYS": str(tmp_path / "keys"),
            "OH_PURGE_URL": schema.purge_url,
        }
        port = free_port()
        server, banner = _serving(["--port", str(port)], env, cwd=tmp_path)
        try:
            assert any("Purge      every 60 s" in line for line in banner), banner
            deadline = time.monotonic() + 60
            while True:
                health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=30).json()
                last = health["purge"]["last_pass"]
                if last is not None or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert last is not None and last["event"] == "purge_pass", health
        finally:
            server.terminate()
            _, log = server.communicate(timeout=30)
        assert "purge pass failed" not in log and "purge worker ended" not in log, log
