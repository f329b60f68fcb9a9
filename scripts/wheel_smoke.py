"""The installed wheel works: what a user who installed ``oh-memory[server]`` gets, end to end.

``scripts/wheel-smoke`` builds the sdist and the wheel, installs the wheel (not editable) into
a fresh virtual environment and runs this file with that environment's Python, from a
directory outside the checkout, so nothing is imported from ``src/``:

    VENV/bin/python wheel_smoke.py --checkout ROOT --sdist SDIST --wheel WHEEL --work DIR

It checks that Oh is imported from that environment, that both archives carry the package data,
that a new data directory is migrated to every shipped migration, and then drives that
environment's ``oh``: ``oh serve``, an owner token, a document, a notebook, a tool call over
HTTP and over MCP (the official client), the Memory panel, the purge worker beside the server
and notes sealed at rest (the library host too), a shipped pack, ``oh verify``. Each
check prints one line; the first failure ends the run with status 1.
"""

from __future__ import annotations

import argparse
import http.cookiejar
import json
import re
import sqlite3
import subprocess
import sys
import sysconfig
import tarfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

PACKAGE_DATA = (  # pyproject.toml's [tool.setuptools.package-data], as files under src/oh
    "py.typed",
    "storage/migrations/*/*.sql",
    "profiles/shipped/*.json",
    "transports/panel/static/*",
)


class SmokeFailed(Exception):
    pass


def check(condition: bool, what: str) -> None:
    if not condition:
        raise SmokeFailed(what)


class Smoke:
    def __init__(self, args: argparse.Namespace) -> None:
        self.checkout = Path(args.checkout).resolve()
        self.sdist = Path(args.sdist)
        self.wheel = Path(args.wheel)
        self.work = Path(args.work)
        self.data = self.work / "data"
        self.oh_script = Path(sys.prefix) / "bin" / "oh"
        self.passed: list[str] = []
        self.owner_token = self.notebook_id = self.agent_token = ""  # set as the steps go

    def oh(self, *args: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(  # noqa: S603 - this environment's oh
            [str(self.oh_script), *args],
            cwd=self.work,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        check(
            done.returncode in ok,
            f"oh {' '.join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}",
        )
        return done

    def step(self, name: str, run: Callable[[], str]) -> None:
        started = time.monotonic()
        detail = run()
        self.passed.append(name)
        print(f"ok   {name} ({time.monotonic() - started:.1f} s): {detail}", flush=True)

    # -- the install -------------------------------------------------------------------------

    def installed_from_the_wheel(self) -> str:
        import oh

        where = Path(oh.__file__).resolve()
        site = Path(sysconfig.get_paths()["purelib"]).resolve()
        check(where.is_relative_to(site), f"oh is imported from {where}, not from {site}")
        check(not where.is_relative_to(self.checkout), f"oh is imported from the checkout: {where}")
        check(Path.cwd().resolve() != self.checkout, "the smoke runs inside the checkout")
        version = self.oh("--version").stdout.strip()
        check(version == f"oh {oh.__version__}", f"oh --version said {version!r}")
        return f"{where.parent} ({version})"

    def package_data(self) -> list[str]:
        source = self.checkout / "src" / "oh"
        files = sorted(
            {
                str(path.relative_to(source))
                for pattern in PACKAGE_DATA
                for path in source.glob(pattern)
            }
        )
        check(len(files) > 10, f"only {len(files)} package data files under {source}")
        return files

    def archives_carry_the_package_data(self) -> str:
        expected = self.package_data()
        with tarfile.open(self.sdist) as sdist:
            root = sdist.getnames()[0].split("/")[0]
            in_sdist = {name.removeprefix(f"{root}/src/oh/") for name in sdist.getnames()}
        with zipfile.ZipFile(self.wheel) as wheel:
            in_wheel = {name.removeprefix("oh/") for name in wheel.namelist()}
        installed = resources.files("oh")
        for name in expected:
            check(name in in_sdist, f"the sdist lacks src/oh/{name}")
            check(name in in_wheel, f"the wheel lacks oh/{name}")
            check(installed.joinpath(name).is_file(), f"the installed package lacks oh/{name}")
        return f"{len(expected)} files in the sdist, the wheel and the installed package"

    def migrations_reach_the_last_shipped_step(self) -> str:
        # `oh token create` starts a data directory: both databases, migrated on opening.
        created = self.oh("token", "create", "--owner", "ann", "--data", str(self.data))
        self.owner_token = created.stdout.strip().splitlines()[-1]
        found = []
        for database, package in (("memory.db", "libsql"), ("knowledge.db", "libsql_knowledge")):
            shipped = sorted(
                int(entry.name.split("_", 1)[0])
                for entry in resources.files(f"oh.storage.migrations.{package}").iterdir()
                if entry.name.endswith(".sql")
            )
            in_checkout = sorted(
                int(path.name.split("_", 1)[0])
                for path in (self.checkout / "src/oh/storage/migrations" / package).glob("*.sql")
            )
            check(shipped == in_checkout, f"{package}: shipped {shipped}, checkout {in_checkout}")
            with sqlite3.connect(f"file:{self.data / database}?mode=ro", uri=True) as conn:
                rows = conn.execute("SELECT version FROM schema_migrations ORDER BY version")
                applied = [row[0] for row in rows]
            check(applied == shipped, f"{database} applied {applied}, shipped {shipped}")
            found.append(f"{database} at step {applied[-1]}")
        return ", ".join(found)

    # -- a served data directory --------------------------------------------------------------

    def serve(self) -> Any:
        from oh.testing.served import Served

        return Served(self.data, command=[str(self.oh_script)])

    def notebook_opens(self, served: Any) -> str:
        opened = served.open_notebook("ann", "report-42", "run-1")
        self.notebook_id = opened["notebook"]["id"]
        self.agent_token = opened["agent_token"]
        check(opened["mcp_url"] == served.mcp_url, f"mcp_url is {opened['mcp_url']}")
        check(self.agent_token.startswith("oha_"), "no agent token")
        return f"{self.notebook_id} on report-42"

    def tool_call_over_http(self, served: Any) -> str:
        tools = f"{served.url}/v1/notebooks/{self.notebook_id}/tools"
        change = {"op": "add", "record": {"name": "lead:over-http", "text": "Written over HTTP."}}
        wrote = post_json(
            f"{tools}/remember",
            {"based_on": 0, "request_id": "r-1", "changes": [change]},
            self.agent_token,
        )
        check(wrote.get("status") == "applied" and wrote["version"] == 1, f"remember: {wrote}")
        read = post_json(f"{tools}/read", {"name": "lead:over-http"}, self.agent_token)
        check(read.get("text") == "Written over HTTP.", f"read: {read}")
        check(read.get("author") == "agent:run-1", f"read: {read}")
        return "remember applied version 1; read it back, stamped agent:run-1"

    def tool_call_over_mcp(self, served: Any) -> str:
        import anyio

        names, wrote, read = anyio.run(over_mcp, served.mcp_url, self.agent_token)
        check({"remember", "query", "read", "explain"} <= set(names), f"MCP tools: {names}")
        check(wrote.get("status") == "applied" and wrote["version"] == 2, f"remember: {wrote}")
        check(read.get("text") == "Written over MCP.", f"read: {read}")
        return f"tools {', '.join(names)}; remember applied version 2; read it back"

    def memory_panel(self, served: Any) -> str:
        cookies = http.cookiejar.CookieJar()
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(cookies))
        with browser.open(f"{served.url}/panel/login", timeout=30) as form:
            page = form.read().decode()
        csrf = re.search(r'name="csrf" value="([^"]+)"', page)
        check(csrf is not None, "the sign-in form has no csrf field")
        assert csrf is not None
        panel = f"/panel/notebooks/{self.notebook_id}"
        fields = {"csrf": csrf.group(1), "token": self.owner_token, "next": panel}
        body = urllib.parse.urlencode(fields).encode()
        with browser.open(f"{served.url}/panel/login", data=body, timeout=30) as signed_in:
            check(signed_in.status == 200, f"signing in answered {signed_in.status}")
            landed = signed_in.geturl()
        check(landed.endswith(panel), f"signing in led to {landed}")
        with browser.open(f"{served.url}{panel}", timeout=30) as answer:
            status, html = answer.status, answer.read().decode()
        check(status == 200, f"the Memory panel answered {status}")
        for name in ("lead:over-http", "lead:over-mcp", "Working notes"):
            check(name in html, f"the Memory panel does not show {name}")
        check("panel.css" in html, "the panel page links no stylesheet")
        with browser.open(f"{served.url}/panel/static/panel.css", timeout=30) as style:
            check(style.status == 200 and len(style.read()) > 100, "panel.css is not served")
        return "signed in with the owner token; both notes on the page; its stylesheet served"

    def forgets_and_seals_by_default(self, served: Any) -> str:
        """The default path keeps its promises: the purge worker runs beside the server (its
        first pass in /healthz), the notes are sealed at rest, and a library host made from
        this install seals too, making its master key beside its data."""
        deadline = time.monotonic() + 60
        while True:
            with urllib.request.urlopen(f"{served.url}/healthz", timeout=30) as answer:  # noqa: S310
                purge = json.loads(answer.read()).get("purge") or {}
            if purge.get("last_pass") is not None or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        check(purge.get("every") == 60, f"/healthz purge: {purge}")
        check((purge.get("last_pass") or {}).get("event") == "purge_pass", f"purge: {purge}")
        plain = [
            f"{path.name}: {secret!r}"
            for path in self.data.iterdir()
            if path.is_file()
            for secret in (b"Written over HTTP.", b"lead:over-http", b"lead:over-mcp")
            if secret in path.read_bytes()
            and (secret.startswith(b"Written") or path.name.startswith("memory.db"))
        ]
        check(plain == [], f"a note's text or name in plain text: {plain}")
        library = self.work / "library-data"
        done = subprocess.run(  # noqa: S603 (this interpreter, a fixed program)
            [
                sys.executable,
                "-c",
                "import sys; from pathlib import Path; from oh.config import Locations,"
                " close_host, open_host; close_host(open_host(Locations(Path(sys.argv[1]))))",
                str(library),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        check(done.returncode == 0, f"open_host: {done.stderr}")
        key = self.work / "library-data-keys" / "master.key"
        check(key.is_file() and "created the master key" in done.stderr, f"library: {done.stderr}")
        return (
            "purge every 60 s, first pass in /healthz; no note text or name at rest; library seals"
        )

    def shipped_pack(self) -> str:
        shipped = sorted(
            entry.name.removesuffix(".json")
            for entry in resources.files("oh.profiles").joinpath("shipped").iterdir()
            if entry.name.endswith(".json")
        )
        check("research" in shipped, f"shipped packs: {shipped}")
        for name in shipped:
            preview = json.loads(self.oh("profile", "preview", name, "--json").stdout)
            check(preview["action"] == "install", f"preview {name}: {preview['action']}")
        data = ("--owner", "ann", "--data", str(self.data))
        installed = json.loads(self.oh("profile", "install", "research", *data, "--json").stdout)
        check(installed["status"] == "installed", f"install research: {installed['status']}")
        listed = json.loads(self.oh("profile", "list", *data, "--json").stdout)
        check([p["name"] for p in listed["packs"]] == ["research"], f"profile list: {listed}")
        revision = installed["revision"]
        return f"previewed {', '.join(shipped)}; installed research at revision {revision}"

    def verify_passes(self) -> str:
        report = json.loads(self.oh("verify", "--data", str(self.data), "--json").stdout)
        check(report["ok"], f"oh verify: {report}")
        memory = report["memory"]
        check(memory["notebooks"] == 1 and memory["entries"] == 2, f"oh verify: {memory}")
        return f"{memory['notebooks']} notebook, {memory['entries']} log entries, OK"

    def run(self) -> None:
        self.step("installed from the wheel", self.installed_from_the_wheel)
        self.step("package data in sdist and wheel", self.archives_carry_the_package_data)
        self.step("migrations", self.migrations_reach_the_last_shipped_step)
        served = self.serve()
        try:
            self.step("oh serve, document, notebook", lambda: self.notebook_opens(served))
            self.step("a tool call over HTTP", lambda: self.tool_call_over_http(served))
            self.step("a tool call over MCP", lambda: self.tool_call_over_mcp(served))
            self.step("the Memory panel", lambda: self.memory_panel(served))
            self.step(
                "forgets and seals by default", lambda: self.forgets_and_seals_by_default(served)
            )
            self.step("a shipped pack", self.shipped_pack)
        except BaseException:
            print(f"--- oh serve's output:\n{served.output()}", file=sys.stderr)
            raise
        finally:
            served.stop()
        self.step("oh verify", self.verify_passes)


def post_json(url: str, body: dict[str, Any], token: str) -> dict[str, Any]:
    request = urllib.request.Request(  # noqa: S310 - the served 127.0.0.1 URL
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310
            return dict(json.loads(answer.read()))
    except urllib.error.HTTPError as error:
        raise SmokeFailed(f"POST {url} answered {error.code}: {error.read().decode()}") from None


async def over_mcp(url: str, token: str) -> tuple[list[str], dict[str, Any], dict[str, Any]]:
    """The official MCP client over streamable HTTP, with the agent token as its bearer."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    change = {"op": "add", "record": {"name": "lead:over-mcp", "text": "Written over MCP."}}
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers) as http_client,
        Client(streamable_http_client(url, http_client=http_client)) as client,
    ):
        names = [tool.name for tool in (await client.list_tools()).tools]
        remember = {"based_on": 1, "request_id": "r-2", "changes": [change]}
        wrote = await client.call_tool("remember", remember)
        read = await client.call_tool("read", {"name": "lead:over-mcp"})
    return names, dict(wrote.structured_content or {}), dict(read.structured_content or {})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag in ("--checkout", "--sdist", "--wheel", "--work"):
        parser.add_argument(flag, required=True)
    smoke = Smoke(parser.parse_args())
    started = time.monotonic()
    try:
        smoke.run()
    except (SmokeFailed, RuntimeError, OSError, subprocess.SubprocessError) as failure:
        print(f"FAIL {failure}", file=sys.stderr)
        print(f"wheel smoke: FAILED after {len(smoke.passed)} checks", file=sys.stderr)
        return 1
    seconds = time.monotonic() - started
    print(f"wheel smoke: {len(smoke.passed)} checks passed in {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
