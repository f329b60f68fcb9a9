"""A real ``oh serve`` for end-to-end tests: a child process on 127.0.0.1 over a data directory.

The tests of the client, the integrations and the installed wheel all drive Oh as a user runs
it: the ``oh`` command starts the server, ``oh token create`` gives an owner token and
``oh notebook open`` gives an agent its notebook. ``Served`` does exactly that and nothing more,
so what these tests exercise is what a user types. ``command`` is how ``oh`` is run: the script
beside this interpreter by default, or another installation's (the wheel smoke passes its own).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["Served", "free_port", "in_thread", "oh_command"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def in_thread(app: Any, port: int | None = None, *, startup_seconds: float = 30.0) -> Iterator[str]:
    """``app`` (ASGI) served by uvicorn on 127.0.0.1 in a thread of this process, for tests that
    keep the host's objects at hand; yields its URL and stops the server afterwards. ``port``
    is a free one unless given (a caller that must know the URL before it builds the app)."""
    import uvicorn

    port = free_port() if port is None else port
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_seconds
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)


def oh_command() -> list[str]:
    """The ``oh`` script beside this interpreter (what the set-up command installs), else
    ``python -m oh.cli``."""
    script = Path(sys.executable).parent / "oh"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "oh.cli"]


class Served:
    """``oh serve --data DATA --port P`` as a child process, ready once ``/healthz`` answers."""

    def __init__(
        self,
        data: Path,
        *,
        command: Sequence[str] | None = None,
        args: Sequence[str] = (),
        env: dict[str, str] | None = None,
        startup_seconds: float = 60.0,
    ) -> None:
        self.data = Path(data)
        self.command = list(command) if command is not None else oh_command()
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.mcp_url = f"{self.url}/mcp"
        self.log = self.data.parent / f"{self.data.name}.serve.log"
        self.data.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(  # noqa: S603 (the oh command, by the test)
                [*self.command, "serve", "--data", str(self.data), "--port", str(self.port), *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                # Its own process group: the purge worker and any workers it starts are in it,
                # so ``stop`` can wait until every one of them is gone.
                start_new_session=True,
            )
        self._wait_until_ready(startup_seconds)

    def _wait_until_ready(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/healthz", timeout=1) as answer:  # noqa: S310
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"oh serve did not start:\n{self.output()}")
            time.sleep(0.05)

    def output(self) -> str:
        """What the server printed so far (stdout and stderr)."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def oh(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``oh ARGS --data DATA`` (another process over the same data directory)."""
        done = subprocess.run(  # noqa: S603 (the oh command, by the test)
            [*self.command, *args, "--data", str(self.data)],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=120,
            check=False,
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"oh {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
        return done

    def owner_token(self, owner: str) -> str:
        """``oh token create --owner OWNER``: the token is alone on the last line."""
        return self.oh("token", "create", "--owner", owner).stdout.strip().splitlines()[-1]

    def open_notebook(self, owner: str, document: str, run: str) -> dict[str, Any]:
        """``oh document put`` then ``oh notebook open --json``: the notebook, its agent token,
        the MCP URL and the client configurations, as an agent developer gets them."""
        self.oh("document", "put", "--owner", owner, document)
        done = self.oh(
            "notebook", "open", "--owner", owner, "--document", document, "--run", run,
            "--url", self.url, "--json",
        )  # fmt: skip
        return dict(json.loads(done.stdout))

    def stop(self) -> None:
        """Stop the server and wait until every process it started has exited too: its purge
        worker stops after the server (on a signal when the server died first), and a caller
        that copies or checks the data directory next must not race its last writes."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        for wait, then in ((20.0, signal.SIGKILL), (10.0, None)):
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                try:
                    os.killpg(self.process.pid, 0)
                except (ProcessLookupError, PermissionError):
                    return  # the group is empty
                time.sleep(0.02)
            if then is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.process.pid, then)
        # Only zombies nobody reaps can be left (a container whose first process reaps none).

    def __enter__(self) -> Served:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def remember_over_http(url: str, agent_token: str, notebook_id: str, name: str, text: str) -> None:
    """One note written as an agent writes it, first in its notebook (``based_on`` 0)."""
    body = {
        "based_on": 0,
        "request_id": "r-1",
        "changes": [{"op": "add", "record": {"name": name, "text": text}}],
    }
    request = urllib.request.Request(  # noqa: S310 (a local test server)
        f"{url}/v1/notebooks/{notebook_id}/tools/remember",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {agent_token}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310
        result = json.loads(answer.read())
    if result.get("status") != "applied":
        raise RuntimeError(f"remember was not applied: {result}")
