"""The documentation as a user meets it: a site that `mkdocs build --strict` builds with every
page in its navigation, and pages whose every shell and Python block runs as written.

Each page with blocks to run (the README and every page of docs/) runs in a fresh directory that
stands for a fresh clone: this test's virtual environment is its `.venv` (a link to it), and
`examples/`, `scripts/`, `src/` and `pyproject.toml` are the checkout's. Its blocks run in
order in one shell, as a user types them into one terminal, a Python block with the venv's
python; then all of them once more, as a user who follows the page again does. The shell has
no `OH_*` variable (but `OH_URL` beside a server) and no venv on `PATH`.

* An install line (`python3 -m venv .venv`, `.venv/bin/pip install -e '.[EXTRAS]'`) is checked,
  not run: the extras exist and this venv has every one of them installed.
* `.venv/bin/oh serve` is started by the test on a free port (`--port`, the pages' own way to
  choose one, with `OH_URL` set to match) and keeps running through both runs.
* A worker that runs until stopped (`oh purge --every`) runs in the background until the page
  ends; if it stopped by itself before then, the page fails.
* A block marked `<!-- excerpt: PATH -->` must be found, line for line, in PATH, which a block
  of the same page runs; `<!-- run by: TEST -->` names the test that runs it; `<!-- not run:
  REASON -->` is one of the few blocks nobody can run here (`NOT_RUN`).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import re
import shlex
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
QUICKSTART = DOCS / "quickstart.md"
VENV = Path(sys.prefix)
FENCE = re.compile(
    r"^(?P<indent>[ ]*)```(?P<language>[A-Za-z]*)\n(?P<body>.*?)^(?P=indent)```[ ]*$", re.S | re.M
)
MARK = re.compile(r"<!-- (excerpt|run by|not run): (.+?) -->")
RUNNABLE = {"sh", "python"}
SHOWN = {"text", "json"}  # what a page shows and nobody types: output, messages, bodies


def _readme_set_up() -> str:
    readme = (ROOT / "README.md").read_text()
    first = re.search(r"```(?:sh|bash|console)\n(.*?)```", readme, re.S)
    assert first, "the README has no set-up command"
    return first.group(1).strip()


def _nav_pages(nav: Any) -> Iterator[str]:
    if isinstance(nav, str):
        yield nav
    elif isinstance(nav, list):
        for item in nav:
            yield from _nav_pages(item)
    elif isinstance(nav, dict):
        for value in nav.values():
            yield from _nav_pages(value)


# -- the site ----------------------------------------------------------------------------------


def test_the_site_builds_with_strict_checks_of_every_link_and_anchor(tmp_path: Path) -> None:
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (site / "index.html").is_file()
    assert (site / "quickstart" / "index.html").is_file()
    assert (site / "panel.png").is_file()


def test_the_strict_build_fails_on_broken_anchors_and_pages_left_out_of_the_nav() -> None:
    """Strict mode fails only on warnings: every check the site relies on is one."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["docs_dir"] == "docs" and config["theme"]["name"] == "material"
    assert config["validation"] == {
        "omitted_files": "warn",
        "absolute_links": "warn",
        "unrecognized_links": "warn",
        "anchors": "warn",
    }
    assert config["theme"]["font"] is False  # no web fonts fetched from another host


def test_every_page_in_docs_is_in_the_nav() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    listed = list(_nav_pages(config["nav"]))
    pages = sorted(path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.md"))
    assert [page for page in pages if page not in listed] == []
    assert len(listed) == len(set(listed)), "a page is in the nav twice"
    assert listed[:2] == ["index.md", "quickstart.md"]


def test_no_page_links_outside_the_site() -> None:
    """A link to a file outside docs/ (the README, bench/, src/) is broken in the site: such
    files are named as repository paths in code spans instead."""
    for page in DOCS.rglob("*.md"):
        targets = re.findall(r"\]\(([^)#\s]+)", page.read_text())
        local = [target for target in targets if "://" not in target]
        outside = [t for t in local if not (page.parent / t).resolve().is_relative_to(DOCS)]
        assert outside == [], (page.name, outside)


# -- running a page ---------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _fresh_env(url: str | None) -> dict[str, str]:
    """This run's environment without `OH_*` or a venv on PATH, plus `OH_URL` if a server runs."""
    bin_dir = VENV / "bin"
    path = [
        entry
        for entry in os.environ.get("PATH", "").split(os.pathsep)
        if entry and not (Path(entry).is_dir() and os.path.samefile(entry, bin_dir))
    ]
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("OH_") and name not in ("VIRTUAL_ENV", "PYTHONPATH")
    }
    env = {**env, "PATH": os.pathsep.join(path), "PYTHONUNBUFFERED": "1"}
    return {**env, "OH_URL": url} if url else env


@contextmanager
def _serving(command: str, clone: Path, env: dict[str, str], url: str) -> Iterator[Path]:
    log = clone.parent / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["/bin/sh", "-c", f"exec {command}"], cwd=clone, env=env, stdout=out, stderr=out
        )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{command} did not start:\n{log.read_text()}")
            time.sleep(0.1)
        yield log
    finally:
        process.terminate()
        process.wait(timeout=20)


# -- every block of every page -----------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    """A fenced block of a page: ``number`` counts every fence of the page from 1."""

    page: Path
    number: int
    language: str
    body: str
    mark: tuple[str, str] | None  # ("excerpt" | "run by" | "not run", what it says)

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT).as_posix()} block {self.number}"

    @property
    def runs_here(self) -> bool:
        return self.language in RUNNABLE and self.mark is None


def _page_blocks(page: Path) -> list[Block]:
    text = page.read_text()
    blocks = []
    for number, found in enumerate(FENCE.finditer(text), start=1):
        indent = len(found["indent"])
        body = "".join(line[indent:] for line in found["body"].splitlines(keepends=True))
        above = text[: found.start()].rstrip().rpartition("\n")[2].strip()
        mark = MARK.fullmatch(above)
        blocks.append(
            Block(page, number, found["language"], body, mark.group(1, 2) if mark else None)
        )
    return blocks


PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
BLOCKS = [block for page in PAGES for block in _page_blocks(page)]
# The blocks nobody can run here, each with its reason, by page and the start of its first
# line: adding one is a choice made in review.
_SUITE = "it is this test suite; scripts/test runs it"
_PAID = "a real model needs a paid key"
_POSTGRES = "it needs a PostgreSQL server of your own"
NOT_RUN = {
    ("README.md", "scripts/test"): "it is this test suite; .ci/run runs it",
    ("docs/testing.md", "OH_CLOCK_SHIFT_DAYS=400 .venv/bin/python -m py"): _SUITE,
    ("docs/postgres.md", 'scripts/test -k "postgres or transfer"'): _SUITE,
    ("docs/panel.md", "OH_PANEL_SCREENSHOT=docs/panel.png .venv/bin/py"): (
        "it is this test suite; it rewrites a file of the checkout"
    ),
    ("docs/integrations/langgraph.md", "OPENAI_API_KEY=sk-… .venv-langgraph/bin/python"): _PAID,
    ("docs/integrations/openai-agents.md", "OPENAI_API_KEY=sk-… .venv/bin/python examples/"): _PAID,
    ("docs/integrations/pydantic-ai.md", "OPENAI_API_KEY=sk-… .venv/bin/python examples/"): _PAID,
    ("docs/postgres.md", ".venv/bin/oh serve --memory-url postgresql://o"): _POSTGRES,
    ("docs/postgres.md", ".venv/bin/oh postgres roles | psql -h db.inter"): _POSTGRES,
    ("docs/postgres.md", "OH_MEMORY_URL=postgresql://oh_purge@db.interna"): _POSTGRES,
    ("docs/postgres.md", ".venv/bin/oh export --data ./oh-data --noteboo"): _POSTGRES,
}
# What each run of a page prints, checked on both runs (beside each block's exit status).
PRINTS = {
    "README.md": [],
    "docs/client.md": [
        r"applied at version 1\nlead:survey methods section missing\nnot_found\n",
        r"'status': 'applied', 'version': 1",
    ],
    "docs/design.md": [r"^True 0 \[\]$"],
    "docs/embedding.md": [r"Oh's verify: .*: OK"],
    "docs/keys.md": [
        r"^master key rotated: \w+ -> \w+$",
        r"^master key: \w+ \(file .*/oh-data-keys/",
    ],
    "docs/mcp.md": [r"^The bootstrap", r"'question': 'current_notes', 'version': 0"],
    "docs/recall.md": [r"'name': 'figure:bleaching-threshold'", r"'pending': 0"],
    "docs/integrations/index.md": [r'"reason": "stale"', r"^answer: finding:reef-recovery"],
    **{
        f"docs/integrations/{page}": [r'"reason": "stale"', r"^answer: finding:reef-recovery"]
        for page in ("langgraph.md", "openai-agents.md", "pydantic-ai.md")
    },
}
INSTALL = re.compile(r"python3 -m venv \.venv|\.venv/bin/pip install -e '\.\[([a-z,-]+)\]'")
SERVE = re.compile(r"\.venv/bin/oh serve\b.*")
WORKER = re.compile(r"\.venv/bin/oh purge\b.*--every\b.*")
TYPED = re.compile(r"python3 -m venv|\.venv/bin/pip install|\.venv/bin/oh (serve|purge)\b")
COMMENT = re.compile(r"""^((?:[^'"#]|'[^']*'|"[^"]*")*?)(\s+#.*)?$""")


def test_every_block_is_a_shell_or_python_block_or_shown_output() -> None:
    """Nothing a user types hides in a fence this test does not run (`bash`, `console`, a fence
    with no language, …): output and bodies are `text` or `json`."""
    assert [b.where for b in BLOCKS if b.language not in RUNNABLE | SHOWN] == []
    assert [b.where for b in BLOCKS if b.mark and b.language not in RUNNABLE] == []


def test_every_block_not_run_here_says_why_and_is_one_of_the_few_known() -> None:
    marked = [
        (b.page.relative_to(ROOT).as_posix(), b.body.splitlines()[0], b.mark[1])
        for b in BLOCKS
        if b.mark and b.mark[0] == "not run"
    ]
    known = {
        (page, start): reason
        for page, first, reason in marked
        for (where, start) in NOT_RUN
        if where == page and first.startswith(start)
    }
    assert known == NOT_RUN and len(marked) == len(NOT_RUN), marked


def _code_lines(text: str) -> list[str]:
    """The lines of ``text`` as code: stripped of indentation and comments, blank ones left out."""
    lines = []
    for line in text.splitlines():
        found = COMMENT.fullmatch(line)
        code = (found.group(1) if found else line).strip()
        if code:
            lines.append(code)
    return lines


def _is_subsequence(part: list[str], whole: list[str]) -> bool:
    rest = iter(whole)
    return all(line in rest for line in part)


def test_every_excerpt_is_taken_from_code_that_its_page_runs() -> None:
    """An excerpt's lines are its source's, in order (lines may be left out between them), and
    a block of the same page runs that source."""
    excerpts = [b for b in BLOCKS if b.mark and b.mark[0] == "excerpt"]
    assert excerpts
    for block in excerpts:
        assert block.mark is not None
        source = ROOT / block.mark[1]
        files = sorted(source.rglob("*.py")) if source.is_dir() else [source]
        assert files, block.where
        lines = _code_lines(block.body)
        assert any(_is_subsequence(lines, _code_lines(f.read_text())) for f in files), (
            f"{block.where} is not in {block.mark[1]} as written"
        )
        runs = [b.body for b in BLOCKS if b.page == block.page and b.runs_here]
        assert any(block.mark[1].rstrip("/") in body for body in runs), block.where


def test_every_block_run_by_another_test_is_named_there() -> None:
    for block in [b for b in BLOCKS if b.mark and b.mark[0] == "run by"]:
        test = ROOT / block.mark[1]  # type: ignore[index]
        assert test.is_file(), block.where
        assert block.page.name in test.read_text(), block.where


def _extras_installed(extras: str, where: str) -> None:
    """An install line's extras exist and this virtual environment has every one of them."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    optional = declared["optional-dependencies"]
    for extra in extras.split(","):
        assert extra in optional, f"{where}: no extra {extra!r}"
        for wanted in map(Requirement, optional[extra]):
            if wanted.name == declared["name"]:
                continue
            installed = importlib.metadata.version(wanted.name)
            assert wanted.specifier.contains(installed, prereleases=True), (where, wanted)


def _as_typed(block: Block) -> tuple[str, str | None]:
    """A shell block as the test runs it, and the `oh serve` command it starts, if any.

    An install line is checked, not run (this venv is the one it makes); `oh serve` is started
    by the test, on a free port with `OH_URL` set to it, and runs through both runs of the page;
    a worker that runs until stopped (`oh purge --every`) runs in the background until the page
    ends. Every other line runs as written."""
    serve = None
    lines = []
    for line in block.body.splitlines():
        found = COMMENT.fullmatch(line)
        if not (found and TYPED.match(line)):  # not ours to rewrite: it runs as it is
            lines.append(line)
            continue
        code, comment = found.group(1), found.group(2) or ""
        kept = []
        for part in code.split(" && "):
            command = part.strip()
            if install := INSTALL.fullmatch(command):
                if install.group(1):
                    _extras_installed(install.group(1), block.where)
            elif SERVE.fullmatch(command):
                assert serve is None, f"{block.where} starts two servers"
                serve = command
            elif WORKER.fullmatch(command):
                kept.append(f'{command} >>"$DOC_JOBS" 2>&1 & oh_jobs+=("$!")')
            else:
                kept.append(part)
        lines.append(" && ".join(kept) + comment if kept else ":" + comment)
    return "\n".join(lines) + "\n", serve


def _driver(blocks: list[Block], scripts: Path, left: tuple[str, ...]) -> tuple[str, str | None]:
    """One shell session that runs a page's blocks in order, as typed into one terminal, then
    prints the shell variables named in ``left``."""
    driver = [
        "set -euo pipefail",
        "oh_jobs=()",
        # A worker that stopped by itself before the page ended failed: the session fails.
        'trap \'for job in "${oh_jobs[@]}"; do kill "$job" 2>/dev/null || exit 9; done\' EXIT',
    ]
    serve = None
    for block in [b for b in blocks if b.runs_here]:
        driver.append(f"printf '\\n::block {block.number}\\n'")
        if block.language == "sh":
            body, started = _as_typed(block)
            assert not (serve and started), f"{block.where}: a second server"
            serve = serve or started
            (scripts / f"{block.number}.sh").write_text(body)
            driver.append(f". {shlex.quote(str(scripts / f'{block.number}.sh'))}")
        else:
            (scripts / f"{block.number}.py").write_text(block.body)
            driver.append(f".venv/bin/python {shlex.quote(str(scripts / f'{block.number}.py'))}")
    driver.append('if [ "${#oh_jobs[@]}" -gt 0 ]; then sleep 2; fi')
    driver.extend(f'printf "\\n::left {name}=%s\\n" "${name}"' for name in left)
    return "\n".join(driver) + "\n", serve


@dataclass
class PageRun:
    clone: Path
    url: str | None
    runs: list[subprocess.CompletedProcess[str]]

    def left(self, run: int) -> dict[str, str]:
        """The shell variables the page left, as ``_run_page`` was asked to print them."""
        return dict(re.findall(r"^::left (\w+)=(\S*)$", self.runs[run].stdout, re.M))

    def output(self, run: int) -> dict[int, str]:
        found = re.findall(r"^::block (\d+)\n(.*?)(?=^::|\Z)", self.runs[run].stdout, re.S | re.M)
        return {int(number): text for number, text in found}


@contextmanager
def _run_page(page: Path, tmp_path: Path, left: tuple[str, ...] = ()) -> Iterator[PageRun]:
    """Run every block of ``page`` in order in a directory that stands for a fresh clone, then
    all of them once more, as a user who follows the page again does; the server a page starts
    keeps running across both runs, and is still up while the caller checks what they did."""
    if sys.prefix == sys.base_prefix or not (VENV / "bin" / "oh").is_file():
        pytest.fail("the pages run in a virtual environment with oh installed")
    clone = tmp_path / "clone"
    clone.mkdir()
    (clone / ".venv").symlink_to(VENV, target_is_directory=True)
    for name in ("examples", "scripts", "src", "pyproject.toml"):
        (clone / name).symlink_to(ROOT / name)
    scripts = tmp_path / "blocks"
    scripts.mkdir()
    blocks = _page_blocks(page)
    driver, serve = _driver(blocks, scripts, left)
    if "scripts/langgraph-venv" in driver:
        subprocess.run([ROOT / "scripts" / "langgraph-venv"], check=True, timeout=900)
        (clone / ".venv-langgraph").symlink_to(ROOT / ".venv-langgraph")
    port = _free_port()
    url = f"http://127.0.0.1:{port}" if serve else None
    env = {**_fresh_env(url), "DOC_JOBS": str(tmp_path / "jobs.log")}
    with contextlib.ExitStack() as stack:
        if serve and url:
            stack.enter_context(_serving(f"{serve} --port {port}", clone, env, url))
        runs = [
            subprocess.run(
                ["/bin/bash", "-c", driver],
                cwd=clone,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            for _ in range(2)
        ]
        logs = "".join(
            path.read_text()
            for path in (tmp_path / "serve.log", tmp_path / "jobs.log")
            if path.exists()
        )
        for number, done in enumerate(runs, start=1):
            assert done.returncode == 0, f"run {number}:\n{done.stdout}\n{done.stderr}\n{logs}"
        yield PageRun(clone, url, runs)


def _pages_run_here() -> list[str]:
    return [
        page.relative_to(ROOT).as_posix()
        for page in PAGES
        if page != QUICKSTART and any(b.runs_here for b in _page_blocks(page))
    ]


def test_every_page_with_blocks_to_run_says_what_they_print() -> None:
    assert sorted(_pages_run_here()) == sorted(PRINTS)


@pytest.mark.parametrize("page", _pages_run_here())
def test_every_block_of_the_page_runs_as_written_twice(page: str, tmp_path: Path) -> None:
    with _run_page(ROOT / page, tmp_path) as done:
        for run in done.runs:
            for printed in PRINTS[page]:
                assert re.search(printed, run.stdout, re.M), f"{page}: no {printed!r}\n{run.stdout}"


# -- the quickstart ----------------------------------------------------------------------------


def test_every_block_of_the_quickstart_is_one_this_test_runs() -> None:
    blocks = _page_blocks(QUICKSTART)
    assert blocks and all(block.runs_here for block in blocks), [b.where for b in blocks]
    assert "python" in [block.language for block in blocks]


def test_the_quickstart_starts_with_the_readme_set_up_command() -> None:
    first = _page_blocks(QUICKSTART)[0]
    assert first.language == "sh"
    assert first.body.strip() == _readme_set_up()
    assert first.body.strip().split(" && ")[-1] == ".venv/bin/oh serve"


def _sign_in(url: str, token: str) -> httpx.Client:
    """The panel's sign-in form, filled in as a browser would."""
    browser = httpx.Client(base_url=url, timeout=30, follow_redirects=True)
    form = browser.get("/panel/login")
    [csrf] = re.findall(r'name="csrf" value="([^"]+)"', form.text)
    signed_in = browser.post("/panel/login", data={"csrf": csrf, "token": token, "next": "/"})
    assert signed_in.status_code == 200, signed_in.text
    return browser


def test_the_quickstart_runs_as_written_twice(tmp_path: Path) -> None:
    with _run_page(QUICKSTART, tmp_path, left=("TOKEN", "NOTEBOOK", "AGENT")) as page:
        clone, url = page.clone, str(page.url)
        output, left = page.output(0), page.left(0)
        # What the page says happened, checked against the running server.
        assert (clone / "oh-data" / "memory.db").is_file()
        assert left["TOKEN"].startswith("oho_") and left["AGENT"].startswith("oha_")
        owner = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {left['TOKEN']}"}, timeout=30
        )
        listed = owner.get("/v1/notebooks", params={"document": "report-42"}).json()
        assert [n["id"] for n in listed["notebooks"]] == [left["NOTEBOOK"]]
        notes = owner.get(f"/v1/notebooks/{left['NOTEBOOK']}/records").json()["notes"]
        assert [n["name"] for n in notes] == ["lead:reef-survey-2016", "todo:check-figure-3"]
        remembered = next(text for text in output.values() if '"status":"applied"' in text)
        assert '"version":1' in remembered
        assert any('"name":"lead:reef-survey-2016"' in text and '"depends_on"' in text
                   for text in output.values())  # fmt: skip
        panel_url = f"{url}/panel/notebooks/{left['NOTEBOOK']}"
        assert any(text.strip() == panel_url for text in output.values())
        panel = _sign_in(url, left["TOKEN"]).get(panel_url)
        assert panel.status_code == 200
        assert "lead:reef-survey-2016" in panel.text and "todo:check-figure-3" in panel.text
        reference = httpx.get(f"{url}/docs", timeout=30)
        assert reference.status_code == 200
    python = next(b.number for b in _page_blocks(QUICKSTART) if b.language == "python")
    assert output[python].split() == ["applied", "1", "['lead:tide-gauge']", "not_found"]
    again = page.output(1)
    assert again[python].split() == output[python].split()  # a run of its own, again
    assert again.keys() == output.keys()
    assert (clone / "my-app-data" / "memory.db").is_file()
