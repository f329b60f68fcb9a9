"""The documentation as a user meets it: a site that `mkdocs build --strict` builds with every
page in its navigation, and a quickstart whose every block runs as written.

The quickstart runs in a fresh directory that stands for a fresh clone, with this test's
virtual environment as its `.venv` (a link to it): the set-up command is the README's (checked,
not run: the venv exists), its `oh serve` runs in the background on a free port (the page's own
way to choose one, `--port`, with `OH_URL` set to match, as the page says), and every other
block runs in order in one shell, as a user types them into one terminal, or with the venv's
python for a Python block; then all of them once more, as a user who follows the page again does.
The shell has no `OH_*` variable but `OH_URL` and no venv on `PATH`.
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
QUICKSTART = DOCS / "quickstart.md"
VENV = Path(sys.prefix)
FENCE = re.compile(r"^```([A-Za-z]*)\n(.*?)^```$", re.S | re.M)
RUNNABLE = {"sh", "python"}


def _blocks(page: Path) -> list[tuple[str, str]]:
    return [(language, body) for language, body in FENCE.findall(page.read_text())]


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


# -- the quickstart ----------------------------------------------------------------------------


def test_every_block_of_the_quickstart_is_one_this_test_runs() -> None:
    languages = [language for language, _ in _blocks(QUICKSTART)]
    assert languages and set(languages) <= RUNNABLE, languages
    assert "python" in languages


def test_the_quickstart_starts_with_the_readme_set_up_command() -> None:
    language, body = _blocks(QUICKSTART)[0]
    assert language == "sh"
    assert body.strip() == _readme_set_up()
    assert body.strip().split(" && ")[-1] == ".venv/bin/oh serve"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _fresh_env(url: str) -> dict[str, str]:
    """This run's environment without `OH_*` or a venv on PATH, plus `OH_URL`."""
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
    return {**env, "PATH": os.pathsep.join(path), "OH_URL": url, "PYTHONUNBUFFERED": "1"}


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


def _sign_in(url: str, token: str) -> httpx.Client:
    """The panel's sign-in form, filled in as a browser would."""
    browser = httpx.Client(base_url=url, timeout=30, follow_redirects=True)
    form = browser.get("/panel/login")
    [csrf] = re.findall(r'name="csrf" value="([^"]+)"', form.text)
    signed_in = browser.post("/panel/login", data={"csrf": csrf, "token": token, "next": "/"})
    assert signed_in.status_code == 200, signed_in.text
    return browser


def test_the_quickstart_runs_as_written(tmp_path: Path) -> None:
    if sys.prefix == sys.base_prefix or not (VENV / "bin" / "oh").is_file():
        pytest.fail("the quickstart runs in a virtual environment with oh installed")
    clone = tmp_path / "clone"
    clone.mkdir()
    (clone / ".venv").symlink_to(VENV, target_is_directory=True)
    blocks = _blocks(QUICKSTART)
    serve = blocks[0][1].strip().split(" && ")[-1]  # the set-up's last step (checked above)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = _fresh_env(url)
    scripts = tmp_path / "blocks"
    scripts.mkdir()
    driver = ["set -euo pipefail"]
    for number, (language, body) in enumerate(blocks[1:], start=2):
        driver.append(f"printf '\\n::block {number}\\n'")
        if language == "sh":
            (scripts / f"{number}.sh").write_text(body)
            driver.append(f". {shlex.quote(str(scripts / f'{number}.sh'))}")
        else:
            (scripts / f"{number}.py").write_text(body)
            driver.append(f".venv/bin/python {shlex.quote(str(scripts / f'{number}.py'))}")
    # After the page: what its blocks left in the shell, for the checks below.
    driver.append(
        'printf "\\n::left TOKEN=%s NOTEBOOK=%s AGENT=%s\\n" "$TOKEN" "$NOTEBOOK" "$AGENT"'
    )
    with _serving(f"{serve} --port {port}", clone, env, url) as log:
        # Twice, as a user who follows the page again: every block runs as written again.
        runs = [
            subprocess.run(
                ["/bin/bash", "-c", "\n".join(driver)],
                cwd=clone,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            for _ in range(2)
        ]
        for done in runs:
            assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n{log.read_text()}"
        again, done = runs[1], runs[0]
        output = {
            int(number): text
            for number, text in re.findall(
                r"^::block (\d+)\n(.*?)(?=^::)", done.stdout, re.S | re.M
            )
        }
        left = dict(re.findall(r"(\w+)=(\S+)", done.stdout.rpartition("::left ")[2]))
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
    python = next(number for number, (language, _) in enumerate(blocks, 1) if language == "python")
    assert output[python].split() == ["applied", "1", "['lead:tide-gauge']", "not_found"]
    blocks_again = re.findall(r"^::block (\d+)\n(.*?)(?=^::)", again.stdout, re.S | re.M)
    output_again = {int(number): text for number, text in blocks_again}
    assert output_again[python].split() == output[python].split()  # a run of its own, again
    assert output_again.keys() == output.keys()
    assert (clone / "my-app-data" / "memory.db").is_file()
