"""The first minute: `oh serve` as a real process, and every command the README and the
banner tell a user to type, run as written from a fresh shell in the repository root.

A fresh shell here is `sh -c` with the environment of this run minus every `OH_*` variable,
minus `VIRTUAL_ENV`, and with this venv's `bin` taken off PATH: after the README's set-up
command, `oh` is not on PATH, so what the user is told to type must work without it.
"""

from __future__ import annotations

import os
import queue
import re
import shlex
import socket
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

import oh
from oh.cli import build_parser
from oh.config import Locations

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
OH = VENV_BIN / "oh"  # the console script this venv installed, as users run it
BANNER_LINES = 6


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _fresh_env(*, oh_on_path: bool = False, **extra: str) -> dict[str, str]:
    def ours(entry: str) -> bool:
        return Path(entry).is_dir() and os.path.samefile(entry, VENV_BIN)

    path = [entry for entry in os.environ.get("PATH", "").split(os.pathsep) if entry]
    path = [entry for entry in path if not ours(entry)]
    if oh_on_path:
        path.insert(0, str(VENV_BIN))
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("OH_") and name != "VIRTUAL_ENV"
    }
    return {**env, "PATH": os.pathsep.join(path), **extra}


def _shell(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/sh", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


class Serving:
    """A started `oh serve` and what it printed."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def line(self) -> str:
        line = self.lines.get(timeout=180)  # a loaded machine starts slowly
        if line is None:
            assert self.process.stderr is not None
            raise AssertionError(f"oh serve ended: {self.process.stderr.read()}")
        return line

    def banner(self) -> list[str]:
        return [self.line() for _ in range(BANNER_LINES)]


@contextmanager
def _serving(argv: list[str], env: dict[str, str]) -> Iterator[Serving]:
    process = subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        yield Serving(process)
    finally:
        process.terminate()
        process.wait(timeout=20)


def _url_of(banner: list[str]) -> str:
    found = re.search(r"HTTP API +(http://\S+)/v1", "\n".join(banner))
    assert found, banner
    return found.group(1)


def _owner_token_command(banner: list[str]) -> str:
    [line] = [line for line in banner if "Owner token:" in line]
    return line.split("Owner token:", 1)[1].strip()


def _token_works(url: str, token: str) -> bool:
    """The owner token is one the running server accepts (so it went to the same data)."""
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.get(f"{url}/v1/knowledge", headers=headers, timeout=30).status_code == 200


# -- oh serve ----------------------------------------------------------------------------------


def test_the_banner_is_printed_only_once_the_port_accepts_connections(tmp_path: Path) -> None:
    port = _free_port()
    argv = [str(OH), "serve", "--data", str(tmp_path / "data"), "--port", str(port)]
    with _serving(argv, _fresh_env()) as serving:
        first = serving.line()
        assert "serving memory from" in first
        # At once, no retry: the banner never precedes the bind.
        with socket.create_connection(("127.0.0.1", port), timeout=10):
            pass
        assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200


def test_the_panel_and_the_api_say_how_to_get_a_token_and_the_banner_how_exactly(
    tmp_path: Path,
) -> None:
    """The sign-in page and an unauthenticated answer tell the user how to get a token without
    showing a caller who has not signed in any path of the server; the banner, on the server's
    own console, prints the exact command, which works as written (not a bare `oh` off PATH)."""
    data = tmp_path / "data"
    argv = [str(OH), "serve", "--data", str(data), "--port", "0"]
    with _serving(argv, _fresh_env()) as serving:
        banner = serving.banner()
        url, command = _url_of(banner), _owner_token_command(banner)
        assert str(data) in command
        sign_in = httpx.get(f"{url}/panel/login", timeout=30).text
        refused = httpx.get(f"{url}/v1/knowledge", timeout=30).json()["error"]["message"]
        for shown in (sign_in, refused):
            assert "oh token create --owner NAME" in shown and "banner" in shown
            assert str(tmp_path) not in shown and str(OH) not in shown
        created = _shell(command, _fresh_env())
        assert created.returncode == 0, created.stderr
        assert _token_works(url, created.stdout.strip().splitlines()[-1])


def test_a_port_already_in_use_is_one_clear_line_and_a_nonzero_exit(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        data = tmp_path / "data"
        done = subprocess.run(
            [str(OH), "serve", "--data", str(data), "--port", str(port)],
            env=_fresh_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1
    assert done.stderr == (
        f"oh serve: port {port} on 127.0.0.1 is already in use; pass --port to choose another\n"
    )
    assert done.stdout == ""
    assert not data.exists()  # refused before anything was opened


def test_an_address_that_cannot_be_bound_is_one_clear_line(tmp_path: Path) -> None:
    # 192.0.2.1 (TEST-NET-1) is on no interface of this machine.
    done = subprocess.run(
        [str(OH), "serve", "--data", str(tmp_path), "--host", "192.0.2.1", "--port", "8765"],
        env=_fresh_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.startswith("oh serve: cannot listen on 192.0.2.1 port 8765: ")
    assert len(done.stderr.splitlines()) == 1 and done.stdout == ""


def test_port_0_serves_on_a_free_port_that_the_banner_names(tmp_path: Path) -> None:
    argv = [str(OH), "serve", "--data", str(tmp_path), "--port", "0"]
    with _serving(argv, _fresh_env()) as serving:
        url = _url_of(serving.banner())
        assert not url.endswith(":0")
        assert httpx.get(f"{url}/healthz", timeout=10).status_code == 200


def test_the_banner_says_oh_when_oh_on_path_is_the_running_one(tmp_path: Path) -> None:
    env = _fresh_env(oh_on_path=True)
    argv = [str(OH), "serve", "--data", str(tmp_path / "data"), "--port", "0"]
    with _serving(argv, env) as serving:
        banner = serving.banner()
        command = _owner_token_command(banner)
        assert command == shlex.join(
            ["oh", "token", "create", "--owner", "you", "--data", str(tmp_path / "data")]
        )
        done = _shell(command, env)
        assert done.returncode == 0, done.stderr
        assert _token_works(_url_of(banner), done.stdout.strip().splitlines()[-1])


def test_the_banner_masks_a_postgresql_password() -> None:
    from oh.cli.serve import _banner  # the banner's text, without a PostgreSQL server behind it

    url = "postgresql://oh_app:s3cret@db.internal/oh"
    banner = _banner(Locations(Path("unused"), memory_url=url, knowledge_url=url), "http://h:1")
    assert "s3cret" not in "\n".join(banner)
    assert "serving memory from postgresql://oh_app:***@db.internal/oh" in banner[0]
    assert _owner_token_command(banner).endswith(
        "--memory-url 'postgresql://oh_app:***@db.internal/oh'"
        " --knowledge-url 'postgresql://oh_app:***@db.internal/oh'"
    )


# -- every command the README and the banner tell a user to type -------------------------------

_BLOCK = re.compile(r"```(?:sh|bash|console)\n(.*?)```", re.S)
_INLINE = re.compile(r"`((?:\.venv/bin/|scripts/|make |oh |python3? )[^`]*)`")


def readme_commands() -> list[str]:
    """Every line of the README's shell blocks, split at `&&`, then every inline span that
    is a command (`oh ...`, `.venv/bin/...`, `scripts/...`, `make ...`, `python ...`)."""
    readme = (ROOT / "README.md").read_text()
    commands = [
        step.strip()
        for block in _BLOCK.findall(readme)
        for line in block.splitlines()
        if line.strip()
        for step in line.split("&&")
    ]
    return commands + _INLINE.findall(_BLOCK.sub("", readme))


def test_every_command_the_readme_and_the_banner_tell_a_user_to_type_works_as_written(
    tmp_path: Path,
) -> None:
    if not (ROOT / ".venv").is_dir() or not os.path.samefile(ROOT / ".venv" / "bin", VENV_BIN):
        pytest.skip("the README's commands run in ROOT/.venv, and this run uses another venv")
    data = tmp_path / "oh-data"  # not there yet: `oh serve` starts it
    env = _fresh_env(OH_DATA=str(data))
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    commands = readme_commands()
    [serve] = [command for command in commands if command.startswith(".venv/bin/oh serve")]
    checked: list[str] = []
    # The one change to what is written: port 0, so that parallel runs never collide.
    with _serving(["/bin/sh", "-c", f"exec {serve} --port 0"], env) as serving:
        banner = serving.banner()
        url = _url_of(banner)
        assert data.is_dir()
        # The banner's command, in a shell that has neither OH_DATA nor oh on PATH.
        shown = _owner_token_command(banner)
        done = _shell(shown, _fresh_env())
        assert done.returncode == 0, (shown, done.stderr)
        assert _token_works(url, done.stdout.strip().splitlines()[-1])
        for command in commands:
            if command == serve:
                pass  # running above
            elif command == "python3 -m venv .venv":
                pass  # the venv this test runs in (checked above)
            elif found := re.fullmatch(r"\.venv/bin/pip install -e '\.\[([a-z,]+)\]'", command):
                assert set(found.group(1).split(",")) <= set(extras), command
                assert Path(oh.__file__).is_relative_to(ROOT / "src"), "not installed with -e"
            elif command == "scripts/test":
                # What CI runs (test_package checks it); running the suite from inside the
                # suite would never end.
                assert os.access(ROOT / "scripts" / "test", os.X_OK)
            elif command == ".venv/bin/mkdocs serve":
                _the_site_is_served(command, env)
            elif command.startswith("make "):
                done = _shell(command.replace("make ", "make -n ", 1), env)
                assert done.returncode == 0, (command, done.stderr)
            elif command.startswith(".venv/bin/oh "):
                done = _shell(command, env)
                assert done.returncode == 0, (command, done.stderr)
                if " token create " in f"{command} ":
                    assert _token_works(url, done.stdout.strip().splitlines()[-1])
            elif command.startswith("oh "):
                pytest.fail(f"the README says {command!r}: after its set-up, oh is not on PATH")
            else:
                pytest.fail(f"the README says {command!r}, and this test has no way to run it")
            checked.append(command)
    assert checked == commands
    assert any(" token create " in command for command in commands)


def _the_site_is_served(command: str, env: dict[str, str]) -> None:
    """``mkdocs serve`` as written (on a free port, so parallel runs never collide) serves the
    docs site's home page."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    argv = ["/bin/sh", "-c", f"exec {command} --dev-addr 127.0.0.1:{port}"]
    with _serving(argv, env) as serving:
        deadline = time.monotonic() + 90
        while True:
            try:
                page = httpx.get(f"http://127.0.0.1:{port}/", timeout=2)
                if page.status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert serving.process.poll() is None, "mkdocs serve stopped"
            assert time.monotonic() < deadline, "mkdocs serve did not answer"
            time.sleep(0.2)
        assert "<title>" in page.text and "Oh" in page.text


def test_the_readme_test_finds_what_a_user_is_told_to_type() -> None:
    commands = readme_commands()
    assert commands[:3] == [
        "python3 -m venv .venv",
        ".venv/bin/pip install -e '.[server]'",
        ".venv/bin/oh serve",
    ]
    assert "scripts/test" in commands


def test_the_synopses_in_docs_cli_parse_as_written() -> None:
    """Every `oh ...` synopsis in docs/cli.md, placeholders filled in and optional parts
    taken, is accepted by the parser (a renamed flag or command fails here)."""
    fill = {"NAME": "ann", "PACK": "research", "FILE": "x.jsonl", "ID": "nb_x", "DIR": "d"}
    fill |= {"SECONDS": "5", "URL": "x.db", "H": "127.0.0.1", "P": "8765", "MODE": "shadow"}
    fill |= {"LEVEL": "warning", "N": "2"}
    parser = build_parser()
    synopses = re.findall(r"`(oh [^`]+)`", (ROOT / "docs" / "cli.md").read_text())
    parsed = 0
    for synopsis in synopses:
        words = synopsis.replace("[", " ").replace("]", " ").split()[1:]
        if ":" in synopsis or not any(word[0] == "-" or word.isupper() for word in words):
            continue  # an error format (`oh COMMAND: CODE: message`) or a command's name
        argv = [fill.get(word, word) for word in words]
        if argv == ["--version"]:
            with pytest.raises(SystemExit, match=r"^0$"):
                parser.parse_args(argv)
        else:
            parser.parse_args(argv)  # a synopsis it refuses exits 2 here
        parsed += 1
    assert parsed >= 8
